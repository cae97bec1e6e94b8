"""Rule-based semantic fact extraction (seed §4.3), used when no capable model is configured:
format, answer-length and language preferences, likes and dislikes, and relations ("I report to
X", "X leads the Y team") read from the user's own sentences; the predicates with one value at a
time and the opposite pairs that make a later statement supersede an earlier one.

Everything here is pure and rule-based: no I/O, no model call.
"""

from __future__ import annotations

import re

from memory.triggers import ADVERBS, ONE_OFF, POLITE_REQUEST, QUESTION_END, detect_preferences, split_sentences

#: Predicates with one value at a time: a different value is a conflict (seed §4.3).
FUNCTIONAL_PREDICATES: frozenset[str] = frozenset(
    {
        "prefers_format",
        "prefers_answer_length",
        "prefers_language",
        "reports_to",
        "works_at",
        "lives_in",
        "manager_of_user",
    }
)

_FORMATS = {
    "pdf": "pdf",
    "markdown": "markdown",
    "md": "markdown",
    "html": "html",
    "csv": "csv",
    "excel": "excel",
    "xlsx": "excel",
    "spreadsheet": "excel",
    "word": "word",
    "docx": "word",
    "json": "json",
    "plain text": "plain text",
    "txt": "plain text",
    "ppt": "slides",
    "slides": "slides",
}
_FORMAT_RE = re.compile(
    r"\b(" + "|".join(sorted(map(re.escape, _FORMATS), key=len, reverse=True)) + r")\b", re.IGNORECASE
)
_FORMAT_CONTEXT = re.compile(r"\b(?:report|reports|format|output|file|export|as|in|use)\b|格式|报告", re.IGNORECASE)
_SHORT = re.compile(r"\b(?:short|concise|brief|terse|succinct)\b|简短|简洁|简要", re.IGNORECASE)
_LONG = re.compile(r"\b(?:detailed|long|thorough|in[- ]depth|verbose)\b|详细", re.IGNORECASE)
_LENGTH_CONTEXT = re.compile(
    r"\b(?:answers?|replies|reply|responses?|respond|explanations?)\b|回答|回复", re.IGNORECASE
)
_LANGUAGES = {
    "english": "english",
    "chinese": "chinese",
    "中文": "chinese",
    "英文": "english",
    "french": "french",
    "german": "german",
    "spanish": "spanish",
    "japanese": "japanese",
    "日语": "japanese",
}
_LANGUAGE_RE = re.compile(
    r"(?:\b(?:in|reply in|respond in|answer in|write in)\s+(english|chinese|french|german|"
    r"spanish|japanese)\b)|用(中文|英文|日语)",
    re.IGNORECASE,
)
_NAME = r"([A-Z][\w'-]*(?:\s+[A-Z][\w'-]*){0,3})"
_GROUP = r"(?:the\s+)?([A-Za-z][\w-]*(?:\s+[A-Za-z][\w-]*){0,3}?)"
_RELATION_PATTERNS: tuple[tuple[re.Pattern[str], str, str], ...] = (
    (re.compile(r"\bI\s+(?:now\s+)?report\s+(?:directly\s+)?to\s+" + _NAME), "user", "reports_to"),
    (re.compile(r"\b[Mm]y\s+(?:new\s+)?(?:manager|boss|lead)\s+is\s+" + _NAME), "user", "reports_to"),
    (re.compile(r"\bI\s+(?:now\s+)?work\s+(?:at|for)\s+" + _NAME), "user", "works_at"),
    (re.compile(r"\bI\s+(?:now\s+)?live\s+in\s+" + _NAME), "user", "lives_in"),
    (re.compile(r"我(?:现在)?向(\S{1,8}?)汇报"), "user", "reports_to"),
)
_MEMBER = re.compile(
    _NAME + r"\s+(?:is|are)\s+(?:a\s+member\s+of|in|on|part\s+of)\s+" + _GROUP + r"\s+(group|team|department|squad)\b",
    re.IGNORECASE,
)
_MEMBER_ZH = re.compile(r"(\S{1,8}?)(?:在|属于)(\S{1,8}?)(组|团队|部门)")
_LEADS = re.compile(
    _NAME + r"\s+(?:leads|runs|manages|heads)\s+" + _GROUP + r"\s+(group|team|department)\b", re.IGNORECASE
)


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


#: Opposite predicates: a fact of one and a fact of the other about the same object cannot both
#: hold; the later statement supersedes the earlier (``memory.semantic``; issue 23 kind 2).
OPPOSITE_PREDICATES: dict[str, str] = {"likes": "dislikes", "dislikes": "likes"}

_NEG_EN = r"(?:do\s+not|don't|never|no\s+longer|can't|cannot)\s+(?:like|stand)"
# (pattern, which group holds the verb, which the object); the verb decides the polarity
_TASTES: tuple[re.Pattern[str], ...] = tuple(
    re.compile(p, re.IGNORECASE)
    for p in (
        r"\bI\s+"
        + ADVERBS
        + r"(?P<verb>"
        + _NEG_EN
        + r"|love|like|adore|enjoy|hate|dislike|detest|loathe)\s+(?P<obj>[^.,;!?]+)",
        r"\bI'?m\s+(?P<verb>not\s+a\s+(?:big\s+|huge\s+)?fan|a\s+(?:big\s+|huge\s+)?fan)\s+of\s+(?P<obj>[^.,;!?]+)",
        r"我(?:真的|非常|很|超|特别|最|一直|都|也|还是)?(?P<verb>不喜欢|不太喜欢|不爱|讨厌|厌恶|受不了|喜欢|爱)(?:吃|喝|看|听|用|玩)?(?P<obj>[^。！？，,.!?；;]{1,16})",
        r"(?P<obj>[^。！？、，,.!?\s]{1,16}?)(?:が|は)(?:大)?(?P<verb>好き|嫌い)",
        r"\b(?P<verb>no\s+me\s+gusta[n]?|me\s+encanta[n]?|me\s+gusta[n]?|odio|adoro)\s+(?P<obj>[^.,;!?]+)",
        r"(?P<verb>\bj'adore|\bj'aime|\bje\s+(?:\w+\s+)?(?:déteste|hais|n'aime\s+pas|aime|adore))\s+(?P<obj>[^.,;!?]+)",
        r"\bich\s+(?P<verb>liebe|hasse|mag\s+kein\w*|mag\s+\w+\s+nicht|mag)\s+(?P<obj>[^.,;!?]+)",
    )
)
_NEGATIVE_VERB = re.compile(
    r"hate|dislike|detest|loathe|n't|not|never|no\s+longer|cannot|不|讨厌|厌恶|受不了|嫌い|odio|déteste|hais|hasse|kein|nicht",
    re.IGNORECASE,
)
# what follows "I like" that is not a thing liked: an infinitive, a clause, a pronoun
_NOT_AN_OBJECT = re.compile(r"^(?:to|it|that|this|when|if|how|what|you|your|the\s+idea)\b", re.IGNORECASE)
_ARTICLE = re.compile(r"^(?:the|a|an|el|la|los|las|le|les|l'|das|die|der|den)\s*", re.IGNORECASE)
# time and degree words after the thing ("I don't like jazz anymore", "I love it again")
_TRAILING = re.compile(
    r"(?:\s+(?:anymore|any\s+more|again|now|either|too|a\s+lot|so\s+much|very\s+much|at\s+all|these\s+days|"
    r"nowadays|ya|más|plus|du\s+tout|nicht\s+mehr|mehr|sehr|auch))+$",
    re.IGNORECASE,
)


def extract_tastes(sentence: str) -> list[tuple[str, str]]:
    """``(predicate, object)`` pairs of the likes and dislikes a preference sentence states:
    "I love Chinese food" → ``("likes", "chinese food")``, "I really don't like Chinese food" /
    我讨厌中餐 / 寿司が嫌い / odio la comida china / je déteste ... / ich hasse ... →
    ``("dislikes", ...)``. The object is cut at punctuation, articles dropped, casefolded, at most
    six words. Nothing for "I like to ...", "I like it when ...". Never raises."""
    out: list[tuple[str, str]] = []
    for pattern in _TASTES:
        for m in pattern.finditer(sentence or ""):
            obj = " ".join(m.group("obj").split())
            obj = _TRAILING.sub("", _ARTICLE.sub("", obj)).strip(" '\"").casefold()
            if not obj or _NOT_AN_OBJECT.search(obj) or len(obj.split()) > 6:
                continue
            verb = m.group("verb")
            predicate = "dislikes" if _NEGATIVE_VERB.search(verb) or verb.lower().startswith("not") else "likes"
            if (predicate, obj) not in out:
                out.append((predicate, obj))
    return out


def _clean_name(name: str) -> str:
    return re.sub(r"\s+", " ", name).strip(" .,;:!?'\"")


def extract_facts(text: str) -> list[FactCandidate]:
    """Rule-based candidate facts from a user's message (the extractor used when no capable
    model is configured — stated as such in the consolidate graph's state):

    * lasting preferences (``detect_preferences`` sentences): report/output format
      (``prefers_format``: pdf, markdown, excel ...), answer length (``prefers_answer_length``:
      short | detailed), reply language (``prefers_language``); else likes and dislikes
      (``likes`` / ``dislikes`` <thing>, :func:`extract_tastes`: opposite predicates, so "I
      love X" then "I hate X" is a contradiction the later statement wins);
    * relations: "I report to X" / "my manager is X" / 我向X汇报 (``user reports_to X``),
      "I work at X", "I live in X", "X is in the Y group" / X在Y组 (``X member_of Y group``),
      "X leads the Y team" (``X leads Y team``).

    One-off instructions ("this time") yield nothing. Never raises."""
    out: list[FactCandidate] = []
    conf = RULE_FACT_CONFIDENCE
    for sentence in detect_preferences(text):
        before = len(out)
        formats = {_FORMATS[m.group(1).lower()] for m in _FORMAT_RE.finditer(sentence)}
        if len(formats) == 1 and _FORMAT_CONTEXT.search(sentence):
            out.append(FactCandidate("user", "prefers_format", formats.pop(), object_is_entity=False, confidence=conf))
        short, long_ = bool(_SHORT.search(sentence)), bool(_LONG.search(sentence))
        if short != long_ and _LENGTH_CONTEXT.search(sentence):
            out.append(
                FactCandidate(
                    "user",
                    "prefers_answer_length",
                    "short" if short else "detailed",
                    object_is_entity=False,
                    confidence=conf,
                )
            )
        m = _LANGUAGE_RE.search(sentence)
        if m:
            lang = _LANGUAGES[(m.group(1) or m.group(2)).lower()]
            out.append(FactCandidate("user", "prefers_language", lang, object_is_entity=False, confidence=conf))
        if len(out) == before:  # a format, length or language preference says it all
            out.extend(
                FactCandidate("user", predicate, obj, object_is_entity=False, confidence=conf)
                for predicate, obj in extract_tastes(sentence)
            )
    for sentence in split_sentences(text):
        if ONE_OFF.search(sentence) or (QUESTION_END.search(sentence) and not POLITE_REQUEST.search(sentence)):
            continue
        out.extend(
            FactCandidate(subject, predicate, _clean_name(m.group(1)), object_is_entity=True, confidence=conf)
            for pattern, subject, predicate in _RELATION_PATTERNS
            for m in pattern.finditer(sentence)
        )
        for m in _MEMBER.finditer(sentence):
            group = f"{_clean_name(m.group(2))} {m.group(3).lower()}"
            out.append(
                FactCandidate(_clean_name(m.group(1)), "member_of", group, object_is_entity=True, confidence=conf)
            )
        out.extend(
            FactCandidate(
                _clean_name(m.group(1)), "member_of", m.group(2) + m.group(3), object_is_entity=True, confidence=conf
            )
            for m in _MEMBER_ZH.finditer(sentence)
        )
        for m in _LEADS.finditer(sentence):
            group = f"{_clean_name(m.group(2))} {m.group(3).lower()}"
            out.append(FactCandidate(_clean_name(m.group(1)), "leads", group, object_is_entity=True, confidence=conf))
    return list(dict.fromkeys(out))


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
