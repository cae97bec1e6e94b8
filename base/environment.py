"""The process environment (DESIGN §10): the one module of Hermes's packages that touches
``os.environ``.

Settings are ``graph/context.py`` (``Context``, ``MachineSettings``: pydantic-settings, each
field falling back to ``HERMES_<FIELD>``); they and the libraries below them use this module for
what is not a setting:

* :func:`variable` — one variable's value: a secret whose *name* a setting holds
  (``Context.secret``), or a variable a process without a ``Context`` was started with (a tool
  worker's schedule URL);
* :func:`inherited` — the environment a child process gets (propagation, not a settings read:
  the llama.cpp server, a tool worker);
* :func:`process_environment` — the environment itself, for a write that must reach this
  process's native libraries and its children (the OpenMP wait policy, read once by a library
  when it loads).
"""

from __future__ import annotations

import os
from collections.abc import MutableMapping


def variable(name: str) -> str:
    """The value of the environment variable ``name``; ``""`` when ``name`` is empty or the
    variable is unset."""
    return os.environ.get(name, "") if name else ""


def inherited(**defaults: str) -> dict[str, str]:
    """A copy of this process's environment for a child process, with ``defaults`` added for the
    variables that are not set."""
    return {**defaults, **os.environ}


def process_environment() -> MutableMapping[str, str]:
    """This process's environment itself (``os.environ``): what is written there reaches the
    process's native libraries and every child started afterwards."""
    return os.environ
