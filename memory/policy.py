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


# --- working memory: one-off instructions (seed §4.1) ----------------------------------------

def detect_one_off(text: str) -> list[str]:
    """Sentences of ``text`` that are instructions for this session only ("short answers this
    time", "just this once use a table", 这次简短回答): they go to working memory, reach this
    session's prompts and are cleared at session end; never written to long-term memory."""
    return [s for s in split_sentences(text) if _ONE_OFF.search(s)]


# --- cross-session references (seed §4.2 trigger) -------------------------------------------

_MONTHS = ("january|february|march|april|may|june|july|august|september|october|november|december|"
           "jan|feb|mar|apr|jun|jul|aug|sep|sept|oct|nov|dec")
_CROSS_SESSION = re.compile(
    r"\b(?:like|as|same\s+as)\s+(?:last\s+time|before|usual|previously)\b"
    r"|\blast\s+(?:time|week|month|session|report)\b"
    r"|\b(?:the|that|my)\s+\w+\s+(?:from|of)\s+(?:last\s+\w+|yesterday|(?:" + _MONTHS + r")\b)"
    r"|\b(?:you|we)\s+(?:did|made|wrote|sent|generated)\s+(?:it\s+)?(?:before|earlier|last)\b"
    r"|\bagain\b.*\b(?:like|as)\s+before\b"
    r"|上次|像上次|和上次|跟上次|之前的|以前的|上个月的|上周的",
    re.IGNORECASE,
)


def detect_cross_session(text: str) -> str | None:
    """The phrase by which ``text`` refers to an earlier session ("like last time", "the report
    from March", 上次), or ``None``. Such a request is answered with memories of the earlier
    work and recorded as a ``cross_session`` event (seed §4.2)."""
    m = _CROSS_SESSION.search(text or "")
    return m.group(0) if m else None


CROSS_SESSION_CONFIDENCE: float = 0.8

# --- semantic facts: rule-based extraction (used when no capable model is configured) ---------

#: Predicates with one value at a time: a different value is a conflict (seed §4.3).
FUNCTIONAL_PREDICATES: frozenset[str] = frozenset({
    "prefers_format", "prefers_answer_length", "prefers_language", "reports_to", "works_at", "lives_in",
    "manager_of_user",
})

_FORMATS = {
    "pdf": "pdf", "markdown": "markdown", "md": "markdown", "html": "html", "csv": "csv", "excel": "excel",
    "xlsx": "excel", "spreadsheet": "excel", "word": "word", "docx": "word", "json": "json",
    "plain text": "plain text", "txt": "plain text", "ppt": "slides", "slides": "slides",
}
_FORMAT_RE = re.compile(r"\b(" + "|".join(sorted(map(re.escape, _FORMATS), key=len, reverse=True)) + r")\b", re.I)
_FORMAT_CONTEXT = re.compile(r"\b(?:report|reports|format|output|file|export|as|in|use)\b|格式|报告", re.I)
_SHORT = re.compile(r"\b(?:short|concise|brief|terse|succinct)\b|简短|简洁|简要", re.I)
_LONG = re.compile(r"\b(?:detailed|long|thorough|in[- ]depth|verbose)\b|详细", re.I)
_LENGTH_CONTEXT = re.compile(r"\b(?:answers?|replies|reply|responses?|respond|explanations?)\b|回答|回复", re.I)
_LANGUAGES = {"english": "english", "chinese": "chinese", "中文": "chinese", "英文": "english", "french": "french",
              "german": "german", "spanish": "spanish", "japanese": "japanese", "日语": "japanese"}
_LANGUAGE_RE = re.compile(r"(?:\b(?:in|reply in|respond in|answer in|write in)\s+(english|chinese|french|german|"
                          r"spanish|japanese)\b)|用(中文|英文|日语)", re.I)
_NAME = r"([A-Z][\w'-]*(?:\s+[A-Z][\w'-]*){0,3})"
_GROUP = r"(?:the\s+)?([A-Za-z][\w-]*(?:\s+[A-Za-z][\w-]*){0,3}?)"
_RELATION_PATTERNS: tuple[tuple[re.Pattern[str], str, str], ...] = (
    (re.compile(r"\bI\s+(?:now\s+)?report\s+(?:directly\s+)?to\s+" + _NAME), "user", "reports_to"),
    (re.compile(r"\b[Mm]y\s+(?:new\s+)?(?:manager|boss|lead)\s+is\s+" + _NAME), "user", "reports_to"),
    (re.compile(r"\bI\s+(?:now\s+)?work\s+(?:at|for)\s+" + _NAME), "user", "works_at"),
    (re.compile(r"\bI\s+(?:now\s+)?live\s+in\s+" + _NAME), "user", "lives_in"),
    (re.compile(r"我(?:现在)?向(\S{1,8}?)汇报"), "user", "reports_to"),
)
_MEMBER = re.compile(_NAME + r"\s+(?:is|are)\s+(?:a\s+member\s+of|in|on|part\s+of)\s+" + _GROUP
                     + r"\s+(group|team|department|squad)\b", re.I)
_MEMBER_ZH = re.compile(r"(\S{1,8}?)(?:在|属于)(\S{1,8}?)(组|团队|部门)")
_LEADS = re.compile(_NAME + r"\s+(?:leads|runs|manages|heads)\s+" + _GROUP + r"\s+(group|team|department)\b", re.I)


class FactCandidate:
    """A candidate semantic fact: ``subject predicate object`` (``object_is_entity``: the
    object is an entity of the graph, else a literal value) with a confidence."""

    __slots__ = ("confidence", "object", "object_is_entity", "predicate", "subject")

    def __init__(self, subject: str, predicate: str, obj: str, *, object_is_entity: bool, confidence: float) -> None:
        self.subject = subject
        self.predicate = predicate
        self.object = obj
        self.object_is_entity = object_is_entity
        self.confidence = confidence

    def key(self) -> tuple[str, str, str]:
        return (self.subject.casefold(), self.predicate, self.object.casefold())

    def __repr__(self) -> str:
        return f"FactCandidate({self.subject!r}, {self.predicate!r}, {self.object!r}, {self.confidence})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, FactCandidate) and self.key() == other.key()

    def __hash__(self) -> int:
        return hash(self.key())


#: Confidence of a fact the rule-based extractor reads from the user's own sentence.
RULE_FACT_CONFIDENCE: float = 0.85


def _clean_name(name: str) -> str:
    return re.sub(r"\s+", " ", name).strip(" .,;:!?'\"")


def extract_facts(text: str) -> list[FactCandidate]:
    """Rule-based candidate facts from a user's message (the extractor used when no capable
    model is configured — stated as such in the consolidate graph's state):

    * lasting preferences (``detect_preferences`` sentences): report/output format
      (``prefers_format``: pdf, markdown, excel ...), answer length (``prefers_answer_length``:
      short | detailed), reply language (``prefers_language``);
    * relations: "I report to X" / "my manager is X" / 我向X汇报 (``user reports_to X``),
      "I work at X", "I live in X", "X is in the Y group" / X在Y组 (``X member_of Y group``),
      "X leads the Y team" (``X leads Y team``).

    One-off instructions ("this time") yield nothing. Never raises."""
    out: list[FactCandidate] = []
    conf = RULE_FACT_CONFIDENCE
    for sentence in detect_preferences(text):
        formats = {_FORMATS[m.group(1).lower()] for m in _FORMAT_RE.finditer(sentence)}
        if len(formats) == 1 and _FORMAT_CONTEXT.search(sentence):
            out.append(FactCandidate("user", "prefers_format", formats.pop(), object_is_entity=False, confidence=conf))
        short, long_ = bool(_SHORT.search(sentence)), bool(_LONG.search(sentence))
        if short != long_ and _LENGTH_CONTEXT.search(sentence):
            out.append(FactCandidate("user", "prefers_answer_length", "short" if short else "detailed",
                                     object_is_entity=False, confidence=conf))
        m = _LANGUAGE_RE.search(sentence)
        if m:
            lang = _LANGUAGES[(m.group(1) or m.group(2)).lower()]
            out.append(FactCandidate("user", "prefers_language", lang, object_is_entity=False, confidence=conf))
    for sentence in split_sentences(text):
        if _ONE_OFF.search(sentence) or (_QUESTION_END.search(sentence) and not _POLITE_REQUEST.search(sentence)):
            continue
        for pattern, subject, predicate in _RELATION_PATTERNS:
            for m in pattern.finditer(sentence):
                out.append(FactCandidate(subject, predicate, _clean_name(m.group(1)), object_is_entity=True,
                                         confidence=conf))
        for m in _MEMBER.finditer(sentence):
            group = f"{_clean_name(m.group(2))} {m.group(3).lower()}"
            out.append(FactCandidate(_clean_name(m.group(1)), "member_of", group, object_is_entity=True, confidence=conf))
        for m in _MEMBER_ZH.finditer(sentence):
            out.append(FactCandidate(_clean_name(m.group(1)), "member_of", m.group(2) + m.group(3),
                                     object_is_entity=True, confidence=conf))
        for m in _LEADS.finditer(sentence):
            group = f"{_clean_name(m.group(2))} {m.group(3).lower()}"
            out.append(FactCandidate(_clean_name(m.group(1)), "leads", group, object_is_entity=True, confidence=conf))
    return list(dict.fromkeys(out))


# --- retrieval: memory types matched to the task (seed §4.2 "type filter") --------------------

_TASK_WORDS = re.compile(r"\b(?:report|summar|analy|query|data|sales|post|send|remind|schedule|generate|export|"
                         r"run|create|file)\w*|报告|汇总|分析|数据|提醒|发送", re.I)


def kinds_for_task(goal: str) -> list[str] | None:
    """Episodic kinds worth recalling for ``goal``: a piece of work (report, query, reminder
    ...) gets past tasks, tool recoveries, cross-session records and preferences — not
    conversation turns; anything else gets every kind (``None``)."""
    if _TASK_WORDS.search(goal or ""):
        return ["task", "tool_recovery", "cross_session", "preference", "note"]
    return None


def behaviour_values(text: str) -> list[tuple[str, str]]:
    """Values of single-valued preferences that a request *uses* ("send it as a PDF", "keep it
    short", "in Chinese") without stating a lasting preference: the user's next behaviour
    that decides a pending conflict (seed §4.3). Only used to resolve an existing conflict,
    never to create a fact. Returns (predicate, value) pairs."""
    out: list[tuple[str, str]] = []
    formats = {_FORMATS[m.group(1).lower()] for m in _FORMAT_RE.finditer(text or "")}
    if len(formats) == 1 and _FORMAT_CONTEXT.search(text):
        out.append(("prefers_format", formats.pop()))
    short, long_ = bool(_SHORT.search(text or "")), bool(_LONG.search(text or ""))
    if short != long_:
        out.append(("prefers_answer_length", "short" if short else "detailed"))
    m = _LANGUAGE_RE.search(text or "")
    if m:
        out.append(("prefers_language", _LANGUAGES[(m.group(1) or m.group(2)).lower()]))
    return out
