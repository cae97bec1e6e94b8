"""Episodic memory: the record, the store protocol, and the ranking every backend shares.

Episodic memory holds concrete events ("on 2026-10-01 the user ran the monthly sales report
with a database query tool"). Three backends implement :class:`EpisodicStore` and pass one
contract suite (``tests/unit/test_memory_contract.py``):

* ``memory.episodic.lance.LanceEpisodicStore`` — embedded default (LanceDB on disk);
* ``memory.episodic.postgres.PostgresEpisodicStore`` — PostgreSQL + pgvector (``HERMES_POSTGRES_URL``);
* ``memory.episodic.weaviate.WeaviateEpisodicStore`` — a Weaviate server (v4 client).

Their ``search`` is one template method (``memory.episodic.hybrid.HybridSearch``): each backend
fetches the two halves (Weaviate fuses on its server), the ranking below is done once.

Ranking (the same for all, so switching backend does not change what is recalled):

    keyword   BM25 over ``memory.text.keyword_tokens`` (words, CJK unigrams+bigrams, emoji)
    vector    cosine similarity of the embedder's vectors; a hit that matched no keyword must
              reach the embedder's ``min_similarity``
    fusion    relative-score fusion (Weaviate's ``relativeScoreFusion``): each half min-max
              normalised to [0, 1] over its candidates, ``relevance = alpha·vector + (1-alpha)·keyword``;
              a query of symbols only (emoji, pictographs: ``memory.text.symbols_only``) is
              fused with ``alpha = 0`` (:func:`fusion_alpha`): the exact-token match decides, not
              a 0.5/0.5 tie with the vector half broken by recency
    decay     ``weight = DECAY_FLOOR + (1 - DECAY_FLOOR) · 0.5 ** (age_days / half_life_days)``
    score     ``relevance × weight``

Filters: user (always; every query is scoped to one user), kinds, ``since``/``until``
(created_at range), validity (``ttl_days``). A query with nothing searchable (no word, CJK
character or emoji) returns ``[]``, never "everything"; listing is :meth:`EpisodicStore.list`.
"""

from __future__ import annotations

import builtins
import math
from collections.abc import Collection, Sequence
from datetime import UTC, datetime
from typing import Any, Literal, Protocol, runtime_checkable
from uuid import uuid4

from pydantic import BaseModel, Field, field_validator

from memory.policy import EPISODIC_TTL_DAYS
from memory.text import content_hash, normalise_text, symbols_only  # noqa: F401 - re-exported

#: What the event is (seed §4.2 write triggers; "conversation" = a turn of a transcript).
EventKind = Literal["task", "preference", "tool_recovery", "cross_session", "conversation", "note"]
EVENT_KINDS: tuple[str, ...] = ("task", "preference", "tool_recovery", "cross_session", "conversation", "note")
#: "direct": the user's words or an observed event; "inferred": derived (e.g. by consolidation).
Evidence = Literal["direct", "inferred"]
SearchMode = Literal["hybrid", "keyword", "vector"]

#: Default half-life of the time decay, days.
DEFAULT_HALF_LIFE_DAYS: float = 14.0
#: Share of the weight that never decays: an old but exact memory still beats a vague new one.
DECAY_FLOOR: float = 0.5
#: Default hybrid weight of the vector half (0 = keyword only, 1 = vector only).
DEFAULT_ALPHA: float = 0.5
#: Candidates fetched from each half before fusion and decay.
DEFAULT_CANDIDATES: int = 50
#: Default validity of an episodic event, days (seed §6.4: 30).
DEFAULT_TTL_DAYS: int = EPISODIC_TTL_DAYS


def utcnow() -> datetime:
    """Current time as an aware UTC datetime."""
    return datetime.now(UTC)


class EpisodicEvent(BaseModel):
    """One episodic memory.

    Fields:
        id          str       store-independent id (uuid4 hex by default)
        user_id     str       owner; every query is scoped to one user
        kind        EventKind see ``EVENT_KINDS``
        text        str       the memory as injected into the prompt (non-empty)
        created_at  datetime  when it happened, aware UTC (naive input is taken as UTC)
        confidence  float     in [0, 1]; written only if >= the policy's threshold
        evidence    Evidence  "direct" | "inferred"
        metadata    dict      JSON-serialisable extras (thread_id, tools, session, dia_id ...)
    """

    id: str = Field(default_factory=lambda: uuid4().hex)
    user_id: str = Field(min_length=1)
    kind: EventKind
    text: str = Field(min_length=1)
    created_at: datetime = Field(default_factory=utcnow)
    confidence: float = Field(ge=0.0, le=1.0)
    evidence: Evidence = "direct"
    metadata: dict[str, Any] = Field(default_factory=dict)

    @field_validator("created_at")
    @classmethod
    def _as_utc(cls, value: datetime) -> datetime:
        if value.tzinfo is None:
            return value.replace(tzinfo=UTC)
        return value.astimezone(UTC)

    @field_validator("text")
    @classmethod
    def _not_blank(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("text must not be blank")
        return value

    @property
    def content_hash(self) -> str:
        """K11 dedupe key of ``text``."""
        return content_hash(self.text)


class ScoredEvent(BaseModel):
    """A search hit. ``keyword``/``vector``: each half's normalised score (``None`` = not found
    by that half); ``relevance``: their fusion; ``decay``: the time weight; ``score``: their product × ``speaker_weight``."""

    event: EpisodicEvent
    relevance: float
    decay: float
    score: float
    keyword: float | None = None
    vector: float | None = None


#: Score factor of a conversation turn spoken by someone the query names: "what does Melanie
#: paint?" is first about what Melanie said (measured on LoCoMo: evidence recall@10 +0.02;
#: ×3 adds little more). The speaker is the event's first entity link (``memory.observations``).
SPEAKER_BOOST: float = 2.0


def speaker_weight(event: EpisodicEvent, names: Collection[str]) -> float:
    """:data:`SPEAKER_BOOST` if ``event``'s speaker (``metadata["entities"][0]``, case-folded)
    is among ``names`` (case-folded names the query mentions), else 1.0."""
    if not names:
        return 1.0
    links = (event.metadata or {}).get("entities")
    speaker = links[0] if isinstance(links, list) and links and isinstance(links[0], str) else ""
    return SPEAKER_BOOST if speaker and speaker.casefold() in names else 1.0


def index_text(event: EpisodicEvent) -> str:
    """What the store's indexes (keyword and vector) see for ``event``: its observation
    (``metadata["index_text"]``, written by ``memory.observations.annotate``) when it has one,
    else its text. The prompt always shows ``text``."""
    value = (event.metadata or {}).get("index_text")
    return value if isinstance(value, str) and value.strip() else event.text


def time_decay(created_at: datetime, now: datetime, half_life_days: float = DEFAULT_HALF_LIFE_DAYS) -> float:
    """``DECAY_FLOOR + (1 - DECAY_FLOOR) · 0.5 ** (age_days / half_life_days)``, in (DECAY_FLOOR, 1].
    Future timestamps count as age 0. Raises ``ValueError`` if ``half_life_days <= 0``."""
    if half_life_days <= 0:
        raise ValueError("half_life_days must be > 0")
    age_days = max(0.0, (now - created_at).total_seconds() / 86400.0)
    return DECAY_FLOOR + (1.0 - DECAY_FLOOR) * math.pow(0.5, age_days / half_life_days)


def fusion_alpha(query: str, alpha: float) -> float:
    """The hybrid weight of the vector half for ``query``: ``alpha``, or 0.0 for a query of
    symbols only (module docstring: embeddings of emoji are close to each other, so a memory
    with another emoji can out-rank the exact one in the vector half)."""
    return 0.0 if symbols_only(query) else alpha


def _minmax(scores: dict[str, float]) -> dict[str, float]:
    if not scores:
        return {}
    lo, hi = min(scores.values()), max(scores.values())
    if hi - lo < 1e-12:
        return dict.fromkeys(scores, 1.0)
    return {key: (value - lo) / (hi - lo) for key, value in scores.items()}


def fuse(
    keyword: dict[str, tuple[EpisodicEvent, float]],
    vector: dict[str, tuple[EpisodicEvent, float]],
    *,
    alpha: float,
    now: datetime,
    half_life_days: float,
    k: int,
    min_similarity: float | None = None,
    names: Collection[str] = (),
) -> list[ScoredEvent]:
    """Relative-score fusion × time decay (module docstring). ``keyword``/``vector``: id →
    (event, raw score: BM25 / cosine similarity). Vector-only hits under ``min_similarity``
    are dropped. ``names``: case-folded names the query mentions (:func:`speaker_weight`).
    Returns the best ``k``, score descending (ties: newer first)."""
    if min_similarity is not None:
        vector = {i: v for i, v in vector.items() if i in keyword or v[1] >= min_similarity}
    kw = _minmax({i: s for i, (_, s) in keyword.items()})
    vec = _minmax({i: s for i, (_, s) in vector.items()})
    events = {i: e for i, (e, _) in {**vector, **keyword}.items()}
    hits: list[ScoredEvent] = []
    for i, event in events.items():
        if i in kw and i in vec:
            relevance = alpha * vec[i] + (1 - alpha) * kw[i]
        elif i in kw:
            relevance = (1 - alpha) * kw[i] if vector else kw[i]
        else:
            relevance = alpha * vec[i] if keyword else vec[i]
        # A min-max floor of 0 would make the weakest candidate worthless: keep it tiny but > 0.
        relevance = max(relevance, 1e-3)
        weight = time_decay(event.created_at, now, half_life_days)
        hits.append(
            ScoredEvent(
                event=event,
                relevance=relevance,
                decay=weight,
                score=relevance * weight * speaker_weight(event, names),
                keyword=kw.get(i),
                vector=vec.get(i),
            )
        )
    hits.sort(key=lambda h: (h.score, h.event.created_at), reverse=True)
    return hits[:k]


@runtime_checkable
class EpisodicStore(Protocol):
    """What every episodic store provides. All methods are async and event-loop safe.

    Raising is allowed (storage down): the memory service turns failures into queued writes
    and empty recalls; a store never returns partial garbage.
    """

    async def add(self, event: EpisodicEvent) -> str:
        """``add_many([event])[0]``."""
        ...

    async def add_many(self, events: Sequence[EpisodicEvent]) -> list[str]:
        """Store ``events`` in one write; return, per event, the id now stored for it.
        K11: the same normalised text for the same user is a no-op returning the id of the
        live record already stored (found before any embedding call); nothing is deleted.
        Once this returns, the events are durable (a kill -9 of the process loses none)."""
        ...

    async def search(
        self,
        user_id: str,
        query: str,
        k: int = 5,
        *,
        kinds: Sequence[str] | None = None,
        since: datetime | None = None,
        until: datetime | None = None,
        now: datetime | None = None,
        mode: SearchMode = "hybrid",
    ) -> list[ScoredEvent]:
        """Up to ``k`` live events of ``user_id`` ranked as in the module docstring. ``kinds``:
        only these (``[]`` = none); ``since``/``until``: created_at range (inclusive);
        ``now``: reference time of decay and validity. Nothing searchable → ``[]``."""
        ...

    async def get(self, user_id: str, event_id: str) -> EpisodicEvent | None:
        """The event ``event_id`` of ``user_id`` (live or expired), or ``None``."""
        ...

    async def list(
        self,
        user_id: str,
        *,
        kinds: Sequence[str] | None = None,
        since: datetime | None = None,
        until: datetime | None = None,
        limit: int = 50,
        include_expired: bool = False,
    ) -> list[EpisodicEvent]:
        """Events of ``user_id``, newest first (for inspection, consolidation and the CLI)."""
        ...

    async def recent(self, since: datetime, limit: int = 1000) -> builtins.list[EpisodicEvent]:
        """Live events of every user created at or after ``since``, newest first (the
        consolidate graph's scan; it then works per user)."""
        ...

    async def forget(self, user_id: str, event_id: str) -> bool:
        """Delete ``event_id`` of ``user_id`` for good (the user asked); True if it existed."""
        ...

    async def expire(self, older_than_days: int = DEFAULT_TTL_DAYS, now: datetime | None = None) -> int:
        """Retire live events created more than ``older_than_days`` before ``now``; return how
        many. Retired events are never returned by ``search``; their text may be written again."""
        ...

    async def count(self, user_id: str | None = None, *, include_expired: bool = False) -> int:
        """Number of stored events (of ``user_id``, or of everyone)."""
        ...

    async def close(self) -> None:
        """Release connections (idempotent)."""
        ...
