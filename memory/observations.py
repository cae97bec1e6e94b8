"""Observations: retrievable units written beside a conversation turn, with no model (DESIGN §4.4).

A raw turn is a poor retrieval unit: "I went there yesterday, it was so powerful!" names neither
who ("I"), nor what ("there": the previous turn said it), nor when ("yesterday" is relative to
a session date that the question will not repeat). :func:`observe` rewrites one turn into an
observation that carries all three, by rules only (no I/O, no model):

* **who** — first-person words become the speaker's name and second-person words the person
  addressed (English: ``I``/``me``/``my``/``mine``/``I'm`` ...; other languages are left as
  written): ``"I went"`` → ``"Caroline went"``;
* **when** — relative dates resolved against the time the turn was written
  (:func:`memory.dates.resolve_relative_dates`), and the turn's own date in front:
  ``"yesterday"`` → ``"yesterday (2023-05-07)"``;
* **what** — a short turn that answers or reacts to the previous one (a reply under
  :data:`CONTEXT_WORDS` content words, or one that leans on it: "that", "it", "there") carries the
  previous turn's words after it, so the topic it answers is searchable in it;
* **entities** — the speaker, the person addressed and the capitalised names of the text
  (:func:`named_entities`): the links the second retrieval hop follows
  (:mod:`memory.multihop`).

The observation's ``source`` is the turn it was made from: a hit on either unit is a hit on that
turn (the memory block shows the turn once).

What would need a model: coreference beyond pronouns of the speaker/addressee ("she" = which
friend), facts implied rather than said, and session summaries (an abstractive summary of a
long session); none of these is done here.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime

from memory.dates import resolve_relative_dates
from memory.episodic.base import EpisodicEvent

#: A reply with fewer content words than this carries the previous turn's words for context.
CONTEXT_WORDS: int = 12
#: Characters of the previous turn kept as context at most.
CONTEXT_CHARS: int = 160

# First person → the speaker; second person → the person addressed. Contractions first
# (longest match wins in the alternation below).
_FIRST = {
    "i'm": "{s} is",
    "i've": "{s} has",
    "i'll": "{s} will",
    "i'd": "{s} would",
    "i": "{s}",
    "me": "{s}",
    "my": "{s}'s",
    "mine": "{s}'s",
    "myself": "{s}",
}
_SECOND = {
    "you're": "{a} is",
    "you've": "{a} has",
    "you'll": "{a} will",
    "you'd": "{a} would",
    "your": "{a}'s",
    "yours": "{a}'s",
    "yourself": "{a}",
}
_PRONOUN = re.compile(
    r"(?<![\w'’])("
    + "|".join(re.escape(w).replace("'", "['’]") for w in sorted({**_FIRST, **_SECOND}, key=len, reverse=True))
    + r")(?![\w'’])",
    re.IGNORECASE,
)
_LEANING = re.compile(r"\b(?:that|this|it|there|those|these|them|same|too)\b", re.IGNORECASE)
_WORD = re.compile(r"[^\W_]+", re.UNICODE)
# Capitalised words, possibly several in a row ("Grand Canyon", "Harry Potter"); a lone word
# at a sentence start is not taken (every sentence starts with a capital).
_NAME = re.compile(r"\b[A-Z][\w'’-]*(?:\s+(?:of\s+|the\s+)?[A-Z][\w'’-]*)*")
_SENTENCE_START = re.compile(r"(?:^|[.!?]\s+|\n)$")
_COMMON = frozenset(
    "i i'm i've i'll i'd the a an and but or so yes no oh wow hey hi hello thanks thank ok okay "
    "well yeah sure it it's that this what when where why how who which my your we our they "
    "he she his her you're you do does did is are was were have has had can could would should "
    "will just also really great awesome cool nice congrats congratulations sounds love glad "
    "haha lol omg aww ah".split()
)
_STOP = _COMMON | frozenset(
    "to of in on at for with from by about as be been being am not if then than there here "
    "me him them us all any some more most very too much many one get got go going went".split()
)


@dataclass(frozen=True)
class Observation:
    """One retrievable unit made from a turn.

    Fields:
        text      str             the observation (who, when, what; see the module docstring)
        entities  tuple[str, ...] names it links (speaker first), as written
        source    str             the id of the turn it was made from (echoed from ``observe``)
    """

    text: str
    entities: tuple[str, ...] = field(default_factory=tuple)
    source: str = ""


def named_entities(text: str) -> list[str]:
    """Capitalised names in ``text`` (English-style capitalisation), in order, without
    duplicates; a single capitalised word that starts a sentence is kept only if it is not a
    common sentence opener (``_COMMON``)."""
    out: dict[str, None] = {}
    for m in _NAME.finditer(text):
        name = m.group(0).strip()
        at_start = bool(_SENTENCE_START.search(text[: m.start()]))
        if " " not in name and (name.lower() in _COMMON or (at_start and name.lower() in _STOP)):
            continue
        out.setdefault(name.rstrip("'’s") if name.endswith(("'s", "’s")) else name, None)
    return list(out)


def query_names(query: str) -> frozenset[str]:
    """The names ``query`` mentions (:func:`named_entities`), case-folded: matched against the
    speakers of conversation turns (``memory.episodic.base.speaker_weight``)."""
    return frozenset(n.casefold() for n in named_entities(query))


def content_words(text: str) -> list[str]:
    """Lower-cased words of ``text`` that are not function words (``_STOP``)."""
    return [w for w in (m.group(0).lower() for m in _WORD.finditer(text)) if w not in _STOP]


def third_person(text: str, speaker: str, addressee: str | None = None) -> str:
    """``text`` with first-person words replaced by ``speaker`` and, when ``addressee`` is
    known, second-person possessives/contractions by ``addressee`` (bare "you" is left: it is
    often generic)."""

    def swap(m: re.Match[str]) -> str:
        word = m.group(0).lower().replace("’", "'")
        if word in _FIRST:
            return _FIRST[word].format(s=speaker)
        if addressee:
            return _SECOND[word].format(a=addressee)
        return m.group(0)

    return _PRONOUN.sub(swap, text)


def observe(
    speaker: str,
    text: str,
    written_at: datetime,
    *,
    addressee: str | None = None,
    previous: tuple[str, str] | None = None,
    source: str = "",
) -> Observation:
    """The observation of one turn (module docstring).

    Args:
        speaker: who said it. text: what was said (non-empty).
        written_at: when (its date resolves relative dates and heads the observation).
        addressee: the person spoken to, if known. previous: ``(speaker, text)`` of the turn
            before in the same conversation, if any. source: the turn's id, echoed.
    Returns:
        An :class:`Observation`; ``text`` like ``"2023-05-08 · Caroline went to a support group
        yesterday (2023-05-07)"``."""
    said = third_person(resolve_relative_dates(" ".join(text.split()), written_at), speaker, addressee)
    who = "" if speaker.lower() in said.lower() else f"{speaker}: "
    parts = [f"{written_at.date().isoformat()} · {who}{said}"]
    if previous and previous[1].strip():
        words = content_words(text)
        if len(words) < CONTEXT_WORDS or _LEANING.search(text):
            before = " ".join(previous[1].split())
            before = before if len(before) <= CONTEXT_CHARS else before[: CONTEXT_CHARS - 1].rstrip() + "…"
            parts.append(f"(replying to {previous[0]}: {before})")
    entities = [speaker] + ([addressee] if addressee else []) + named_entities(text)
    return Observation(" ".join(parts), tuple(dict.fromkeys(e for e in entities if e)), source)


#: Metadata keys an annotated conversation event carries (read by the stores and the second hop).
INDEX_TEXT_KEY = "index_text"
ENTITIES_KEY = "entities"
_SPEAKER_PREFIX = re.compile(r"^\s*([^\W\d_][\w .'’-]{0,40}?):\s+(.+)$", re.DOTALL)


def _speaker_and_words(event: EpisodicEvent) -> tuple[str, str] | None:
    meta = event.metadata or {}
    m = _SPEAKER_PREFIX.match(event.text)
    speaker = str(meta.get("speaker") or (m.group(1) if m else "")).strip()
    if not speaker:
        return None
    words = m.group(2) if m and m.group(1).strip() == speaker else event.text
    return speaker, words


def annotate(events: Sequence[EpisodicEvent]) -> int:
    """Give each ``conversation`` event of one batch (a session's turns, in order) its
    observation: ``metadata["index_text"]`` (what the stores index — keyword and vector — in
    place of the raw text, which stays what the prompt shows) and ``metadata["entities"]``.
    The speaker is ``metadata["speaker"]`` or the text's ``"Name: "`` prefix; the person
    addressed is ``metadata["addressee"]``, else the batch's other speaker when there are
    exactly two; the previous turn is the batch's previous conversation event of the same
    ``session``/``thread_id``. Events already annotated, or of other kinds, are left alone.
    Returns how many were annotated. Pure: no I/O, no model."""
    said = [(e, _speaker_and_words(e)) for e in events if e.kind == "conversation"]
    speakers = list(dict.fromkeys(sw[0] for _, sw in said if sw))
    done = 0
    previous: dict[object, tuple[str, str]] = {}
    for event, sw in said:
        meta = event.metadata if event.metadata is not None else {}
        scope = meta.get("session", meta.get("thread_id"))
        if sw is None:
            continue
        speaker, words = sw
        if INDEX_TEXT_KEY not in meta:
            others = [s for s in speakers if s != speaker]
            addressee = meta.get("addressee") or (others[0] if len(others) == 1 else None)
            obs = observe(speaker, words, event.created_at, addressee=addressee, previous=previous.get(scope))
            meta[INDEX_TEXT_KEY] = obs.text
            meta[ENTITIES_KEY] = list(obs.entities)
            event.metadata = meta
            done += 1
        previous[scope] = (speaker, words)
    return done
