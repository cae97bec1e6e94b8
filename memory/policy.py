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

# A goal is a piece of work when it is phrased as a request, told apart by grammar words alone:
# no workload's nouns ("sales", "invoices") and no tool's verbs ("post", "remind"), which are
# the tools' own metadata (``ToolSpec.requested_by``) — so a request about tickets or invoices is
# recognised as one about reports is.

#: A polite request or a stated need: "please ...", "could you ...", "I need ...", "I'd like the
#: ...", "help me ...";
#: 请 / 帮我 / 麻烦 / 把 ... (the Chinese request forms).
_REQUEST_FORM = re.compile(
    r"^(?:please|pls|kindly)\b|\b(?:can|could|would|will)\s+you\s+(?:please\s+)?(?!tell|remind|remember|recall)\w"
    r"|\bi\s+(?:need|want)\b|\bi(?:'d|\s+would)\s+like\s+(?:to|you|a|an|the|this|that|these|those|my|our|some)\b"
    r"|\bhelp\s+me\b|^let'?s\b"
    r"|^(?:请|帮我|帮忙|麻烦|给我|把|替我)",
    re.IGNORECASE,
)
#: What a statement, a question or small talk starts with (closed word classes: question words,
#: auxiliaries, pronouns, determiners, greetings). A sentence starting with anything else, not
#: asked as a question, is an imperative ("Archive the old tickets", "Export the invoices").
_NOT_IMPERATIVE = frozenset(
    """what who whom whose which when where why how whats whos did do does is are was were am be been
    has have had can could would should will shall may might must i im ive id ill you youre we
    they he she it its that thats this these those there theres here the a an my your our their his
    her hi hello hey thanks thank thx ok okay yes no yeah yep nope sure cool great nice good well oh
    so and but or if because as just also maybe perhaps""".split()
)
#: Chinese openings of a statement, a question or small talk (pronouns, question words, greetings).
_NOT_IMPERATIVE_ZH = re.compile(r"^(?:我|你|他|她|它|这|那|谁|什么|哪|为什么|怎么|是|有|在|好|谢|嗨|哈|嗯|哦|对|没)")
#: A question ("...?", 吗 / 呢 at the end) or a request to be told what was said ("tell me what
#: she said"): a recall of the conversation, not work.
_QUESTION = re.compile(
    r"[?？]\s*$|[吗呢]\s*$|^(?:tell|remind)\s+me\s+(?:what|who|when|where|why|how|which|about)\b", re.IGNORECASE
)
_FIRST_WORD = re.compile(r"[a-z']+", re.IGNORECASE)


def is_task_request(goal: str) -> bool:
    """True when ``goal`` (a user message) asks for a piece of work: a request form or an
    imperative (see the patterns above); False for a question, a statement or small talk."""
    text = " ".join((goal or "").split())
    text = re.sub(r"^(?:ok(?:ay)?|so|now|and|then|hi|hey)[,!.]?\s+", "", text, flags=re.IGNORECASE)
    if not text:
        return False
    if _REQUEST_FORM.search(text):
        return True
    if _QUESTION.search(text):
        return False
    first = _FIRST_WORD.match(text)
    if first is None:  # not a Latin-script word: the Chinese openings decide
        return bool(re.match(r"[\u4e00-\u9fff]", text)) and not _NOT_IMPERATIVE_ZH.match(text)
    return first.group(0).lower().replace("'", "") not in _NOT_IMPERATIVE


def kinds_for_task(goal: str) -> list[str] | None:
    """Episodic kinds worth recalling for ``goal``: a piece of work (:func:`is_task_request`:
    "Summarise ...", "could you archive ...", 把 ...) gets past tasks, tool recoveries,
    cross-session records, preferences and notes — not conversation turns; anything else (a
    question, a statement, small talk) gets every kind (``None``)."""
    if is_task_request(goal):
        return ["task", "tool_recovery", "cross_session", "preference", "note"]
    return None
