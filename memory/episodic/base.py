"""Episodic memory: the record type and the store protocol (DESIGN.md §4 / seed §4.1–4.2).

Episodic memory holds concrete events ("on 2026-10-01 the user ran the monthly sales report
with a database query tool"). Retrieval is keyword/hybrid relevance × time decay, filtered by kind.
Two implementations: ``memory.episodic.sqlite.SqliteEpisodicStore`` (embedded default) and
``memory.episodic.weaviate.WeaviateEpisodicStore`` (seed §4.1's vector database).
"""

from __future__ import annotations

import hashlib
import math
from datetime import datetime, timezone
from typing import Any, Literal, Protocol, Sequence, runtime_checkable
from uuid import uuid4

from pydantic import BaseModel, Field, field_validator

from memory.policy import EPISODIC_TTL_DAYS

#: What triggered the event (seed §4.2 write triggers).
EventKind = Literal["task", "preference", "tool_recovery", "cross_session"]
#: "direct": the user's words or an observed event; "inferred": derived (e.g. by consolidation).
Evidence = Literal["direct", "inferred"]

#: Default half-life of the time decay, in days.
DEFAULT_HALF_LIFE_DAYS: float = 7.0


def utcnow() -> datetime:
    """Current time as an aware UTC datetime."""
    return datetime.now(timezone.utc)


class EpisodicEvent(BaseModel):
    """One episodic memory.

    Fields:
        id          str       store-independent id (uuid4 hex by default)
        user_id     str       owner; every query is scoped to one user
        kind        EventKind "task" | "preference" | "tool_recovery" | "cross_session"
        text        str       the memory as injected into the prompt (non-empty)
        created_at  datetime  when it happened, aware UTC (naive input is taken as UTC)
        confidence  float     in [0, 1]; written only if >= policy.MIN_CONFIDENCE
        evidence    Evidence  "direct" | "inferred" (DESIGN §4: tell evidence from inference)
        metadata    dict      JSON-serialisable extras (thread_id, tools, ...)
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
            return value.replace(tzinfo=timezone.utc)
        return value.astimezone(timezone.utc)

    @property
    def content_hash(self) -> str:
        """K11 dedupe key of ``text`` (see ``content_hash``)."""
        return content_hash(self.text)


class ScoredEvent(BaseModel):
    """A search hit: ``score = relevance × decay``.

    relevance: keyword/hybrid relevance, >= 0, larger is better (1.0 when the query is empty);
    decay: time decay in (0, 1]; score: their product, used for ranking.
    """

    event: EpisodicEvent
    relevance: float
    decay: float
    score: float


def normalise_text(text: str) -> str:
    """Whitespace collapsed, case folded: the form two texts must share to be the same memory."""
    return " ".join(text.split()).casefold()


def content_hash(text: str) -> str:
    """SHA-256 hex of ``normalise_text(text)`` — the K11 dedupe key, computed before any I/O."""
    return hashlib.sha256(normalise_text(text).encode("utf-8")).hexdigest()


def time_decay(created_at: datetime, now: datetime, half_life_days: float = DEFAULT_HALF_LIFE_DAYS) -> float:
    """Exponential decay ``0.5 ** (age_days / half_life_days)``, in (0, 1].

    An event one half-life old weighs 0.5, two half-lives 0.25. Future timestamps count as age 0.
    Raises ``ValueError`` if ``half_life_days <= 0``.
    """
    if half_life_days <= 0:
        raise ValueError("half_life_days must be > 0")
    age_days = max(0.0, (now - created_at).total_seconds() / 86400.0)
    return math.pow(0.5, age_days / half_life_days)


def scored(event: EpisodicEvent, relevance: float, now: datetime, half_life_days: float) -> ScoredEvent:
    """``event`` with ``score = relevance × time_decay(created_at, now, half_life_days)``."""
    decay = time_decay(event.created_at, now, half_life_days)
    return ScoredEvent(event=event, relevance=relevance, decay=decay, score=relevance * decay)


@runtime_checkable
class EpisodicStore(Protocol):
    """What every episodic store provides (DESIGN §4). All methods are async and event-loop safe."""

    async def add(self, event: EpisodicEvent) -> str:
        """Store ``event``; return its id. K11: the same normalised text for the same user is a
        no-op returning the existing live record's id (found by content hash before anything
        else); nothing is deleted."""
        ...

    async def search(
        self,
        user_id: str,
        query: str,
        k: int = 3,
        kinds: Sequence[str] | None = None,
        now: datetime | None = None,
    ) -> list[ScoredEvent]:
        """Up to ``k`` live events of ``user_id`` ranked by relevance × time decay, best first,
        restricted to ``kinds`` if given. ``now`` (aware UTC) defaults to the current time.
        Unreadable records are skipped, not raised."""
        ...

    async def expire(self, older_than_days: int = EPISODIC_TTL_DAYS, now: datetime | None = None) -> int:
        """Retire events created more than ``older_than_days`` days before ``now``; return how
        many. Retired events are never returned by ``search``."""
        ...
