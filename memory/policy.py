"""Memory write policy: when to write, with what confidence, and for how long (seed §4.2, §6.4).

Source: DESIGN.md §4 / seed §4.2 ("key points force a write: task completed, the user states a
preference explicitly, a tool failed and then succeeded on retry, a cross-session reference")
and seed §6.4 ("a confidence threshold before writing; a validity period after writing:
episodic 30 days, semantic 180 days by default").

Here: the thresholds, validity periods and trigger confidences, and which memory kinds a task
recalls. The rules that fire the triggers live by concern: ``memory.triggers`` (the user's
words: preferences, notes, one-off instructions, cross-session references),
``memory.task_outcome`` (the "task completed" trigger: ``TurnEvidence``, ``assess_task``) and
``memory.fact_extraction`` (rule-based semantic facts).

Everything here is pure and rule-based: no I/O, no model call.
"""

from __future__ import annotations

import re

# re-exported: graph.verification imports these from here
from memory.task_outcome import effect_claims as effect_claims
from memory.triggers import split_sentences as split_sentences

#: Records below this confidence are not written (seed §6.4 "confidence threshold before
#: writing"). The seed gives no number; 0.6 keeps every direct observation below and drops only
#: weak guesses. Unit: probability-like score in [0, 1].
MIN_CONFIDENCE: float = 0.6

#: Validity period of an episodic event, in days (seed §6.4: "episodic memory 30 days").
EPISODIC_TTL_DAYS: int = 30
#: Validity period of a semantic fact, in days (seed §6.4: "semantic memory 180 days").
SEMANTIC_TTL_DAYS: int = 180

#: Confidence given to each write trigger (seed §4.2). A task's confidence is not a constant:
#: it is derived from the evidence of its outcome (``memory.task_outcome.assess_task``).
#: The user's own words stating a preference.
PREFERENCE_CONFIDENCE: float = 0.9
#: A tool that failed and then succeeded on retry, observed by the runtime.
TOOL_RECOVERY_CONFIDENCE: float = 0.9
#: The user's own words asking Hermes to remember a fact ("please remember: the code is X").
NOTE_CONFIDENCE: float = 0.9
#: A request that refers to an earlier conversation (``memory.triggers.detect_cross_session``).
CROSS_SESSION_CONFIDENCE: float = 0.8


def passes_threshold(confidence: float) -> bool:
    """True when a record of this confidence may be written (seed §6.4, ``MIN_CONFIDENCE``)."""
    return confidence >= MIN_CONFIDENCE


# --- retrieval: memory types matched to the task (seed §4.2 "type filter") --------------------

_TASK_WORDS = re.compile(
    r"\b(?:report|summar|analy|query|data|sales|post|send|remind|schedule|generate|export|"
    r"run|create|file)\w*|报告|汇总|分析|数据|提醒|发送",
    re.I,
)


def kinds_for_task(goal: str) -> list[str] | None:
    """Episodic kinds worth recalling for ``goal``: a piece of work (report, query, reminder
    ...) gets past tasks, tool recoveries, cross-session records and preferences — not
    conversation turns; anything else gets every kind (``None``)."""
    if _TASK_WORDS.search(goal or ""):
        return ["task", "tool_recovery", "cross_session", "preference", "note"]
    return None
