"""Refusals that suggest another value (DESIGN §5.6): what ``evaluate_progress`` does when a tool
refused a value and named the one to send instead — a period without data, say, with the latest
period that has data.

A refusal's structured fields travel with its result (``ToolMessage.additional_kwargs
["suggestion"]``: ``{"args", "reason", "question", "allowed_by"}``, from
:meth:`tools.errors.InvalidValueError.details` through the executor, the registry and
``compress_results``). Nothing here knows a tool or an argument by name: the rules key on those
fields and on the tools' ``side_effect`` metadata.

* **A side-effect task** (a step of the goal is a side-effect tool) goes on with the suggestion
  only with the user's consent: the graph asks ``question`` (a LangGraph ``interrupt()``) unless
  the request already accepts it (a pattern of ``allowed_by`` matches the goal: "the latest
  month") or the user answered it earlier in this goal. Yes → the model is told to call the tool
  again with the suggested values; no → the run stops and says why.
* **A question** (no side-effect step): no question to the user; the answer is the refusal's
  ``reason`` (no data for the period asked, and the latest period that has data).

The user's answer is recorded on the refused result itself (``additional_kwargs["user_answer"]``,
the message replaced by id), so it is asked once per goal and survives a restart.

Pure functions; no I/O.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from langchain_core.messages import AnyMessage, ToolMessage

from graph.goal_results import error_text

#: ``additional_kwargs`` key of the suggestion a refused result carries.
SUGGESTION = "suggestion"
#: ``additional_kwargs`` key of the user's answer to its question.
USER_ANSWER = "user_answer"
_YES = {"yes", "y", "ok", "okay", "sure", "yep", "yeah", "please", "go", "do", "proceed", "oui", "si", "sí", "ja"}
_YES_CJK = ("是", "好", "可以", "行", "はい", "ええ")
_NO = {"no", "n", "nope", "don't", "dont", "not", "cancel", "stop", "non", "nein", "nah"}
_NO_CJK = ("不", "否", "别", "いいえ", "いや")


@dataclass(frozen=True)
class Suggestion:
    """A refused call's suggestion: ``tool`` refused, ``args`` to send instead, ``reason`` (one
    sentence for the user), ``question`` (yes/no, before a side effect goes on with it),
    ``allowed_by`` (request patterns that already accept it), ``error`` (the refusal's text) and
    ``message`` (the refused result)."""

    tool: str
    args: dict[str, Any]
    reason: str
    question: str
    allowed_by: tuple[str, ...]
    error: str
    message: ToolMessage

    @property
    def key(self) -> str:
        """Equal for the same suggestion of the same tool."""
        return f"{self.tool}({json.dumps(self.args, sort_keys=True, default=str)})"


def suggestion_of(message: AnyMessage) -> Suggestion | None:
    """The suggestion a refused tool result carries; None for any other message."""
    if not isinstance(message, ToolMessage) or message.status != "error":
        return None
    found = message.additional_kwargs.get(SUGGESTION)
    if not isinstance(found, dict) or not isinstance(found.get("args"), dict) or not found["args"]:
        return None
    return Suggestion(
        tool=message.name or "?",
        args=dict(found["args"]),
        reason=str(found.get("reason") or ""),
        question=str(found.get("question") or ""),
        allowed_by=tuple(str(p) for p in found.get("allowed_by") or ()),
        error=error_text(message),
        message=message,
    )


def round_suggestions(work: list[AnyMessage], call_ids: set[str | None]) -> list[Suggestion]:
    """The suggestions of this round's refused results (``call_ids``: the round's call ids)."""
    found = (suggestion_of(m) for m in work if isinstance(m, ToolMessage) and m.tool_call_id in call_ids)
    return [s for s in found if s is not None]


def earlier_answer(work: list[AnyMessage], suggestion: Suggestion) -> str | None:
    """The user's answer to the same suggestion earlier in this goal (None: never asked)."""
    for message in work:
        earlier = suggestion_of(message)
        if earlier is not None and earlier.key == suggestion.key and USER_ANSWER in message.additional_kwargs:
            return str(message.additional_kwargs[USER_ANSWER])
    return None


def allowed(request: str, suggestion: Suggestion) -> bool:
    """The request's own words already accept the suggestion (a pattern of ``allowed_by``
    matches, case-insensitively; a pattern that does not compile matches nothing)."""
    for pattern in suggestion.allowed_by:
        try:
            if re.search(pattern, request or "", re.IGNORECASE):
                return True
        except re.error:
            continue
    return False


def is_yes(answer: Any) -> bool:
    """A resume value that consents: True, or text starting with yes/ok/sure/go ahead/是/はい/oui/ja
    … (any case, punctuation ignored); a no, or anything else, is not consent."""
    if isinstance(answer, bool):
        return answer
    text = str(answer or "").strip().lower()
    if not text or text.startswith(_NO_CJK):
        return False
    if text.startswith(_YES_CJK):
        return True
    words = re.findall(r"[\w'’]+", text)
    return bool(words) and words[0] not in _NO and words[0] in _YES


def question_payload(suggestion: Suggestion) -> dict[str, Any]:
    """The ``interrupt()`` value: ``{"type": "confirm_suggestion", "tool", "suggestion",
    "question"}`` (``question`` is what ``hermes run`` prints; answer with ``hermes resume``)."""
    question = suggestion.question or (
        f"{suggestion.reason or suggestion.error[:300]} Shall I go on with "
        f"{json.dumps(suggestion.args, ensure_ascii=False)} instead? (yes/no)"
    )
    return {"type": "confirm_suggestion", "tool": suggestion.tool, "suggestion": suggestion.args, "question": question}


def with_answer(suggestion: Suggestion, answer: Any) -> ToolMessage:
    """The refused result again (same id: it replaces the message) with the user's answer."""
    kwargs = {**suggestion.message.additional_kwargs, USER_ANSWER: str(answer)[:200]}
    return suggestion.message.model_copy(update={"additional_kwargs": kwargs})


def retry_note(suggestion: Suggestion, why: str, missing: list[str]) -> str:
    """The progress note telling the model to call the refused tool again with the suggestion."""
    rest = [m for m in missing if m != suggestion.tool]
    return (
        f"{why}: call {suggestion.tool} again now with "
        f"{json.dumps(suggestion.args, ensure_ascii=False)} and change the rest of the call as its error says "
        f"({suggestion.error[:600]})" + (f"; then do the missing steps: {', '.join(rest)}." if rest else ".")
    )


def declined_reason(suggestion: Suggestion, answer: Any) -> str:
    """The stop reason after the user declined (or could not be asked: ``answer`` None)."""
    said = suggestion.reason or suggestion.error[:300]
    if answer is None:
        return (
            f"{said.rstrip('.')} — nobody could be asked whether to use "
            f"{json.dumps(suggestion.args, ensure_ascii=False)} instead, so {suggestion.tool} was not run with it"
        )
    return (
        f"{said.rstrip('.')} — asked whether to use {json.dumps(suggestion.args, ensure_ascii=False)} instead, "
        f"the user answered {str(answer)[:60]!r}, so nothing was done with it"
    )


__all__ = [
    "SUGGESTION",
    "USER_ANSWER",
    "Suggestion",
    "allowed",
    "declined_reason",
    "earlier_answer",
    "is_yes",
    "question_payload",
    "retry_note",
    "round_suggestions",
    "suggestion_of",
    "with_answer",
]
