"""The search every episodic store shares, as a template method (:class:`HybridSearch`).

:meth:`HybridSearch.search` is :meth:`~memory.episodic.base.EpisodicStore.search` for every
backend: the query's keyword tokens (nothing searchable, ``k <= 0`` or ``kinds == []`` → ``[]``),
the reference time, the candidates per half — then :meth:`HybridSearch._ranked`. By default
that runs the backend's two halves (:meth:`HybridSearch._keyword_half`,
:meth:`HybridSearch._vector_half`: raw BM25-like scores and cosine similarities of up to
``limit`` candidates, filtered by user, kinds, range and validity) and fuses them here
(``base.fuse``: relative-score fusion × time decay × speaker weight, ``base.fusion_alpha``, the
embedder's similarity floor), so LanceDB and PostgreSQL rank alike. A backend that fuses on its
server (Weaviate) overrides ``_ranked`` and keeps the rest.

Apart from ``memory.episodic.base`` because the speaker names of a query come from
``memory.observations``, which imports ``base``.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, ClassVar

from memory.embeddings import similarity_floor
from memory.episodic.base import EpisodicEvent, ScoredEvent, SearchMode, fuse, fusion_alpha, utcnow
from memory.observations import query_names
from memory.text import query_terms

log = logging.getLogger(__name__)

#: One half's candidates: event id → (event, raw score).
Candidates = dict[str, tuple[EpisodicEvent, float]]


@dataclass(frozen=True)
class SearchQuery:
    """One search as the backend's hooks see it. ``text``: the query as written (the vector
    half embeds it); ``terms``: its keyword tokens (``memory.text.query_terms``, never empty);
    ``now``: reference time of decay and validity; ``limit``: candidates per half
    (``max(candidates, k)``); the rest as :meth:`~memory.episodic.base.EpisodicStore.search`."""

    user_id: str
    text: str
    terms: list[str]
    k: int
    kinds: Sequence[str] | None
    since: datetime | None
    until: datetime | None
    now: datetime
    limit: int
    mode: SearchMode


class HybridSearch:
    """The shared ``search`` of the episodic stores (module docstring). A subclass sets
    ``embedder``, ``alpha``, ``half_life_days`` and ``candidates`` and implements the two halves
    (or overrides :meth:`_ranked`)."""

    embedder: Any
    alpha: float
    half_life_days: float
    candidates: int
    #: Run the two halves at once; False: one after the other (one connection, one statement
    #: at a time).
    concurrent_halves: ClassVar[bool] = True

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
        """Up to ``k`` live events of ``user_id`` (``EpisodicStore.search``). Raises what the
        backend raises (storage down, a damaged store)."""
        terms = query_terms(query)
        if k <= 0 or (kinds is not None and not kinds) or not terms:
            return []
        request = SearchQuery(
            user_id, query, terms, k, kinds, since, until, now or utcnow(), max(self.candidates, k), mode
        )
        return await self._ranked(request)

    async def _ranked(self, q: SearchQuery) -> list[ScoredEvent]:
        """The ``q.k`` best hits: the backend's halves (as ``q.mode`` asks) fused here."""

        async def vector_half() -> Candidates:
            [vector] = await self.embedder.embed_queries([q.text])
            return await self._vector_half(q, vector)

        keyword: Candidates = {}
        vector: Candidates = {}
        if q.mode == "hybrid" and self.concurrent_halves:
            keyword, vector = await asyncio.gather(self._keyword_half(q), vector_half())
        else:
            if q.mode in ("keyword", "hybrid"):
                keyword = await self._keyword_half(q)
            if q.mode in ("vector", "hybrid"):
                vector = await vector_half()
        return fuse(
            keyword,
            vector,
            alpha=fusion_alpha(q.text, self.alpha),
            now=q.now,
            half_life_days=self.half_life_days,
            k=q.k,
            min_similarity=similarity_floor(self.embedder, q.text) if q.mode == "hybrid" else None,
            names=query_names(q.text),
        )

    async def _keyword_half(self, q: SearchQuery) -> Candidates:
        """Up to ``q.limit`` events matching ``q.terms``, with their keyword score (higher is
        better; any scale: fusion normalises it)."""
        raise NotImplementedError

    async def _vector_half(self, q: SearchQuery, vector: Sequence[float]) -> Candidates:
        """Up to ``q.limit`` events nearest to ``vector`` (the embedded query), with their
        cosine similarity."""
        raise NotImplementedError


def candidates(
    rows: Iterable[Mapping[str, Any]],
    event: Callable[[Mapping[str, Any]], EpisodicEvent],
    score: Callable[[Mapping[str, Any]], float],
) -> Candidates:
    """``rows`` of a store as candidates (id → (``event(row)``, ``score(row)``)); a row that
    cannot be read is logged and skipped: one bad row must not break recall."""
    out: Candidates = {}
    for row in rows:
        try:
            out[row["id"]] = (event(row), score(row))
        except Exception as exc:  # noqa: BLE001 - one bad row must not break recall
            log.warning("skipping unreadable episodic row %r: %s", row.get("id"), exc)
    return out
