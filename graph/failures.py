"""Failure classes and what the graph does about each (seed §5.3; DESIGN §5).

Every tool problem reaches the graph as a :class:`tools.registry.ToolOutcome` whose
``error_kind`` is one of the registry's kinds; this table — not string matching scattered
across nodes — decides the recovery, and every recovery has a cap:

===================  ===========  ==============================================================
error_kind           recovery     cap
===================  ===========  ==============================================================
invalid_arguments    regenerate   the error goes back to the model; ``evaluate_progress`` stops
unknown_tool         regenerate   after ``MAX_STALLED_ROUNDS`` rounds without progress
invalid_value        regenerate   (same; the tool refused a value and said what to send: retried
                                  with no look-up first, ``tools.errors.InvalidValueError``)
not_offered          regenerate   (same; the error names the tools that were offered)
tool_error           regenerate   (same)
timeout              retry        ``MAX_RETRIES`` retries with exponential backoff, same
transport            retry        ``request_id``. The registry reports these two only where a
                                  retry cannot repeat an effect: read-only or idempotent tools,
                                  or a request known never to have been sent
outcome_unknown      tell_user    never retried: a side-effect call that timed out or lost its
                                  transport may have run; the model and the user are told
configuration        tell_user    a setting keeps the tool from running (e.g. no database): the
                                  loop stops with the tool's message, which names the setting
missing_arguments    ask_user     LangGraph ``interrupt()``; one question per missing field
===================  ===========  ==============================================================
"""

from __future__ import annotations

from enum import StrEnum


class Recovery(StrEnum):
    """What the graph does about a failed tool call."""

    REGENERATE = "regenerate"
    RETRY = "retry"
    ASK_USER = "ask_user"
    TELL_USER = "tell_user"


POLICY: dict[str, Recovery] = {
    "invalid_arguments": Recovery.REGENERATE,
    "invalid_value": Recovery.REGENERATE,
    "unknown_tool": Recovery.REGENERATE,
    "not_offered": Recovery.REGENERATE,
    "outcome_unknown": Recovery.TELL_USER,
    "configuration": Recovery.TELL_USER,
    "tool_error": Recovery.REGENERATE,
    "timeout": Recovery.RETRY,
    "transport": Recovery.RETRY,
    "missing_arguments": Recovery.ASK_USER,
}
MAX_RETRIES = 2
RETRY_BACKOFF_S = 0.5  # first wait; doubles per retry


def recovery_for(error_kind: str | None) -> Recovery:
    """The recovery for ``error_kind`` (unknown kinds regenerate: the model sees the error)."""
    return POLICY.get(error_kind or "", Recovery.REGENERATE)


# Start of the error of a tool call cut off at the output-token limit (``graph.embedded.chat.parse_step``,
# an ``invalid_arguments`` case): ``dispatch_tools`` does not quote its text back to the model,
# which would copy the cut-off arguments (measured: Qwen2.5-Coder-1.5B copied "... = ord.").
CUT_OFF = "the reply was cut off at the output-token limit before the call was complete"
