"""Exceptions of the tools package (DESIGN §2, §3; failure kinds K4, K5, K8).

Runners (executors, MCP sessions) raise these; :meth:`tools.registry.ToolRegistry.call`
turns them into an error :class:`~tools.registry.ToolOutcome` and never lets them escape.
"""

from __future__ import annotations

from typing import Any


class ToolError(Exception):
    """Base class of every tool-layer error."""


class ToolDefinitionError(ToolError):
    """A tool definition failed lint (bad name, short description, schema problems)."""


class DuplicateToolError(ToolDefinitionError):
    """Two sources registered the same tool name (K5): refused, never silently shadowed."""


class ToolTimeout(ToolError):
    """The run went over its time limit and was interrupted (whole process group killed)."""


class ToolFailed(ToolError):
    """The tool itself failed: it raised, exited abnormally or reported an error (K4, K7).

    ``kind``: "tool_error"; "configuration" when the tool raised a :class:`ConfigurationError`
    in its worker, "invalid_value" when it raised an :class:`InvalidValueError` (the error class
    travels as a name; this keeps the distinction)."""

    def __init__(self, message: str, kind: str = "tool_error", suggestion: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.kind = kind
        #: an "invalid_value" refusal's structured fields (:meth:`InvalidValueError.details`)
        self.suggestion = suggestion


class ConfigurationError(ValueError):
    """A tool cannot run because of a setting, not because of its arguments (e.g. no database
    is configured). Raised by tool code; the registry reports it as error kind "configuration"
    and the graph stops with the message, which names the setting — regenerating the call
    cannot help."""


class InvalidValueError(ValueError):
    """The arguments match the tool's schema, but the tool refused a value and its message says
    what to send instead (e.g. a period relative to today: "write 2026-11 for last month").
    Raised by tool code before any effect; the registry reports it as error kind
    "invalid_value": the model fixes the call from the message itself, with no look-up first
    (a look-up between the refusal and the retry pushed the fix out of the small models' view:
    measured, Qwen2.5-Coder-1.5B sent the refused value again).

    Structured fields (optional; the graph keys on them, never on the message or the tool):
    ``suggestion`` the argument values to send instead (``{"period": "latest"}``); ``reason``
    one sentence a user can read saying why ("Your data ends in 2011-12; there is none for
    2026-11."); ``question`` the yes/no question to ask the user before a side effect goes on
    with the suggestion ("… Shall I report 2011-12 instead? (yes/no)"); ``allowed_by`` regular
    expressions (case-insensitive) of request words that already accept the suggestion ("the
    latest month"), so nobody need be asked (DESIGN §5.6)."""

    def __init__(
        self,
        message: str,
        *,
        suggestion: dict[str, Any] | None = None,
        reason: str = "",
        question: str = "",
        allowed_by: tuple[str, ...] = (),
    ) -> None:
        super().__init__(message)
        self.suggestion, self.reason, self.question, self.allowed_by = suggestion, reason, question, allowed_by

    def details(self) -> dict[str, Any] | None:
        """The structured fields as JSON, ``{"args", "reason", "question", "allowed_by"}``; None
        without a ``suggestion``. What the executors carry to the registry
        (:attr:`ToolFailed.suggestion`, ``ToolOutcome.suggestion``)."""
        if not isinstance(getattr(self, "suggestion", None), dict):
            return None
        return {
            "args": dict(self.suggestion or {}),
            "reason": str(getattr(self, "reason", "") or ""),
            "question": str(getattr(self, "question", "") or ""),
            "allowed_by": [str(p) for p in getattr(self, "allowed_by", ()) or ()],
        }


class ToolTransportError(ToolError):
    """The channel to an MCP server failed: it died, never answered, or the pipe broke (K8).

    ``server`` names the MCP server from the ``mcpServers`` config.
    ``sent``: False only when it is known that the request never reached the server (the
    session could not be opened or reconnected, the server was known dead before the call, the
    write failed before the request left the client), so repeating the call cannot repeat an
    effect. True (the default) means it may have reached the server and run.
    """

    def __init__(self, server: str, message: str, *, sent: bool = True) -> None:
        super().__init__(f"MCP server '{server}': {message}")
        self.server = server
        self.sent = sent
