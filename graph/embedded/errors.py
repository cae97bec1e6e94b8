"""Errors of the model layer, shared by the factory (``graph/model.py``) and the embedded server."""

from __future__ import annotations


class ModelUnavailableError(RuntimeError):
    """The configured model endpoint cannot be reached or started; the message says what to do."""


class ModelIntegrityError(ModelUnavailableError):
    """An embedded model's files do not match the catalog (size or SHA-256): never loaded.

    The message names the package to reinstall."""
