"""Memory write policy: when to write, with what confidence, and for how long (seed §4.2, §6.4).

Source: DESIGN.md §4 / seed §4.2 ("key points force a write: task completed, the user states a
preference explicitly, a tool failed and then succeeded on retry, a cross-session reference")
and seed §6.4 ("a confidence threshold before writing; a validity period after writing:
episodic 30 days, semantic 180 days by default").

Everything here is pure and rule-based: no I/O, no model call.
"""

from __future__ import annotations

import re

#: Records below this confidence are not written (seed §6.4 "confidence threshold before
#: writing"). The seed gives no number; 0.6 keeps every direct observation below and drops only
#: weak guesses. Unit: probability-like score in [0, 1].
MIN_CONFIDENCE: float = 0.6

#: Validity period of an episodic event, in days (seed §6.4: "episodic memory 30 days").
EPISODIC_TTL_DAYS: int = 30
#: Validity period of a semantic fact, in days (seed §6.4: "semantic memory 180 days").
SEMANTIC_TTL_DAYS: int = 180

#: Confidence given to each write trigger (seed §4.2). Direct observations of this turn.
TASK_COMPLETED_CONFIDENCE: float = 0.9
#: A task that used tools but stopped early (stop_reason set): it happened, its outcome is unsure.
TASK_STOPPED_CONFIDENCE: float = 0.7
#: The user's own words stating a preference.
PREFERENCE_CONFIDENCE: float = 0.9
#: A tool that failed and then succeeded on retry, observed by the runtime.
TOOL_RECOVERY_CONFIDENCE: float = 0.9

# --- preference detection ------------------------------------------------------------------

# A sentence ends at . ! ? ; followed by space, right after a CJK stop, or at a line break.
_SENTENCE_SPLIT = re.compile(r"(?<=[.!?;])\s+|(?<=[。！？；])|\n+")

_PREFERENCE_PATTERNS: tuple[re.Pattern[str], ...] = tuple(
    re.compile(p, re.IGNORECASE)
    for p in (
        # English: first-person statements of taste ("I'd like ..." is a request, not a taste).
        r"\bI(?:'d| would)?\s+(?:really\s+|much\s+|generally\s+)?prefer\b",
        r"\bmy\s+(?:preference|preferred\s+\w+)\s+is\b",
        r"\bI\s+(?:really\s+)?(?:like|love|hate|dislike)\b",
        r"\bI\s+(?:do\s+not|don't|never)\s+(?:like|want)\b",
        # English: standing instructions.
        r"^(?:please\s+|pls\s+)?(?:always|never)\s+\w",
        r"\b(?:please|pls|you\s+should|you\s+must)\s+(?:always|never)\b",
        r"\b(?:can|could|would|will)\s+you\s+(?:please\s+)?(?:always|never)\b",
        r"\bplease\s+(?:use|reply|respond|answer|write|format)\b",
        r"\b(?:from\s+now\s+on|going\s+forward|from\s+here\s+on|in\s+(?:the\s+)?future)\b",
        # Chinese (seed §4.2 trigger words 喜欢 / 不要 / 以后, narrowed to their preference forms).
        r"我(?:更|比较|最|很|不|不太)?喜欢",
        r"我(?:更)?偏好",
        r"以后(?:都|请|每次|一律|统一|不要|别|就用|改用|用)",
        r"从现在(?:开始|起)",
        r"请(?:总是|一直|始终|永远|每次)",
        r"请不要|不要再|别再",
    )
)

# One-off instructions belong to working memory (seed §4.1: "this time reply concisely" is
# cleared at session end), so they are not long-term preferences.
_ONE_OFF = re.compile(r"\b(?:this\s+time|just\s+this\s+once|for\s+now|this\s+once)\b|这次|这一次|本次", re.IGNORECASE)
# A question that is not a polite request ("Do you always ...?") states nothing.
_QUESTION_END = re.compile(r"[?？]\s*$")
_POLITE_REQUEST = re.compile(r"^(?:please\s+)?(?:can|could|would|will)\s+you\b|能不能|可不可以|可以|能否|能", re.IGNORECASE)


def split_sentences(text: str) -> list[str]:
    """Split ``text`` into trimmed, non-empty sentences (English and Chinese punctuation)."""
    return [s.strip() for s in _SENTENCE_SPLIT.split(text or "") if s and s.strip()]


def detect_preferences(text: str) -> list[str]:
    """Return the sentences of ``text`` in which the user states a lasting preference.

    Rule-based (seed §4.2 "the user states a preference explicitly"): English ("I prefer ...",
    "always ...", "please use ...", "from now on ...") and Chinese (我喜欢, 以后都, 请总是, 请不要
    ...). Skipped: one-off instructions ("this time", 这次 — working memory, seed §4.1) and
    questions that are not polite requests ("Do you always ...?"). Order kept, duplicates dropped.

    Shape: ``str -> list[str]``; never raises; ``[]`` when nothing is found.
    """
    found: list[str] = []
    for sentence in split_sentences(text):
        if _ONE_OFF.search(sentence):
            continue
        if _QUESTION_END.search(sentence) and not _POLITE_REQUEST.search(sentence):
            continue
        if any(p.search(sentence) for p in _PREFERENCE_PATTERNS) and sentence not in found:
            found.append(sentence)
    return found


def should_record_task(answer: str | None, stop_reason: str | None, tools_used: list[str] | None) -> bool:
    """The "task completed" trigger (seed §4.2): an answer with no early stop, or any tool used.

    Shape: ``(str | None, str | None, list[str] | None) -> bool``.
    """
    answered = bool(answer and answer.strip()) and stop_reason is None
    return answered or bool(tools_used)


def task_confidence(stop_reason: str | None) -> float:
    """Confidence of a task event: completed (no ``stop_reason``) or stopped early."""
    return TASK_COMPLETED_CONFIDENCE if stop_reason is None else TASK_STOPPED_CONFIDENCE


def passes_threshold(confidence: float) -> bool:
    """True when a record of this confidence may be written (seed §6.4, ``MIN_CONFIDENCE``)."""
    return confidence >= MIN_CONFIDENCE
