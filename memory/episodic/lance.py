"""Embedded episodic store on LanceDB: vectors + BM25 + metadata pre-filters in one on-disk table.

Chosen by ``evals/bench_memory_stores.py`` (figures and the reasons in ``evals/README.md``): the
one embedded candidate with vector search, BM25 keyword search, metadata pre-filters and
multi-process writers in one store. Data lives in ``<data_dir>/episodic.lance/``.

Table ``episodic`` (one row per event):

    id, user_id, kind, text, confidence, evidence, metadata (JSON)
    kw           keyword tokens (``memory.text.keyword_text``), FTS-indexed (whitespace tokenizer,
                 English stemming; CJK unigrams+bigrams and emoji are tokens of their own)
    vector       float32[dim] of the embedder (cosine)
    created_us   created_at, microseconds since the epoch (UTC)
    expired_us   0 while live, else when it was retired
    dedupe       ``user_id NUL content_hash`` while live, ``expired:<id>`` after: the K11 key of
                 ``merge_insert(...).when_not_matched_insert_all()`` (atomic insert-if-absent,
                 retried by Lance on a concurrent commit), so two writers cannot both insert it

Writes: one ``merge_insert`` commit per ``add_many`` (a turn's events are one batch). Every
commit adds a small fragment and single-row commits slow search down (measured: hybrid
20 → 49 ms after 100 writes), so every ``optimize_every`` commits the store compacts and folds
new rows into the indexes (``optimize``); the consolidate graph does the same.

Reads: ``read_consistency_interval=0`` — every query sees other processes' commits. Rows not
yet in an index are still searched (flat), so a new memory is recalled at once. The vector
index (IVF-HNSW-SQ, cosine) is built by ``optimize`` once the table has
``vector_index_min_rows`` rows; below that, search is exact. Queries use ``nprobes=100``,
``ef=400`` and ``refine_factor=3`` (re-rank with full vectors): measured at 100k rows with
50 candidates, recall@10 vs exact 0.96 without a filter — the case of a single-user install,
where the user filter keeps every row (LanceDB's defaults: 0.36; 50/200 without refine: 0.85;
refine 10: 0.97 at twice the cost) — and 1.0 with a selective filter (``evals/bench_memory_stores.py``).

Durability: a commit is a new manifest written after its data files; ``add_many`` returns only
after the commit, so a kill -9 afterwards loses nothing (``tests/integration/test_memory_kill.py``).
"""

from __future__ import annotations

import asyncio
import builtins
import contextlib
import functools
import json
import logging
from collections.abc import Callable, Coroutine, Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any, Concatenate, ParamSpec, TypeVar

from memory.embeddings import Embedder
from memory.episodic.base import (
    DEFAULT_ALPHA,
    DEFAULT_CANDIDATES,
    DEFAULT_HALF_LIFE_DAYS,
    DEFAULT_TTL_DAYS,
    EpisodicEvent,
    ScoredEvent,
    index_text,
    utcnow,
)
from memory.episodic.hybrid import Candidates, HybridSearch, SearchQuery, candidates
from memory.episodic.lance_errors import EmbedderMismatch, EpisodicStoreDamaged, from_lance
from memory.episodic.lance_table import (
    COLUMNS,
    dedupe_key,
    open_table,
    row_to_event,
    sql_str,
    to_us,
)
from memory.episodic.lance_table import TABLE as TABLE  # re-exported: callers name the table through this module
from memory.migrations import MemoryStoreError
from memory.text import keyword_text

if TYPE_CHECKING:  # LanceDB loads where memory is used
    from lancedb import AsyncTable

log = logging.getLogger(__name__)

#: Directory of the LanceDB database inside the data directory.
LANCE_DIRNAME = "episodic.lance"


_P = ParamSpec("_P")
_R = TypeVar("_R")


def _guarded(
    method: Callable[Concatenate[LanceEpisodicStore, _P], Coroutine[Any, Any, _R]],
) -> Callable[Concatenate[LanceEpisodicStore, _P], Coroutine[Any, Any, _R]]:
    """A store operation whose LanceDB errors become :class:`EpisodicStoreDamaged`."""

    @functools.wraps(method)
    async def wrapper(self: LanceEpisodicStore, /, *args: _P.args, **kwargs: _P.kwargs) -> _R:
        with self._guard():
            return await method(self, *args, **kwargs)

    return wrapper


class LanceEpisodicStore(HybridSearch):
    """:class:`~memory.episodic.base.EpisodicStore` on LanceDB (see the module docstring).

    Args:
        path: the database directory (e.g. ``<data_dir>/episodic.lance``; created on first use).
        embedder: vectors for the vector half (its ``dim`` fixes the table's vector size).
        alpha: hybrid weight of the vector half. half_life_days: decay half-life.
        ttl_days: validity; older events are not searched (``expire`` retires them).
        candidates: hits fetched per half before fusion.
        nprobes, ef, refine_factor: vector index search breadth and full-precision re-ranking
            (used once an index exists; measured at 100k rows: recall@10 0.96 unfiltered).
        optimize_every: commits of this process between automatic ``optimize`` calls (0 = never).
        vector_index_min_rows: rows from which ``optimize`` builds the vector index.
        vector_on_index_text: embed an event's observation (``base.index_text``) instead of its
            text (default; False: its text); the keyword half always indexes the observation.
    """

    def __init__(
        self,
        path: Path,
        embedder: Embedder,
        *,
        alpha: float = DEFAULT_ALPHA,
        half_life_days: float = DEFAULT_HALF_LIFE_DAYS,
        ttl_days: int = DEFAULT_TTL_DAYS,
        candidates: int = DEFAULT_CANDIDATES,
        nprobes: int = 100,
        ef: int = 400,
        refine_factor: int = 3,
        optimize_every: int = 20,
        vector_index_min_rows: int = 20_000,
        vector_on_index_text: bool = True,
    ) -> None:
        if not 0.0 <= alpha <= 1.0:
            raise ValueError("alpha must be in [0, 1]")
        if half_life_days <= 0:
            raise ValueError("half_life_days must be > 0")
        self.path = Path(path)
        self.embedder = embedder
        self.alpha = alpha
        self.half_life_days = half_life_days
        self.ttl_days = ttl_days
        self.candidates = candidates
        self.nprobes = nprobes
        self.ef = ef
        self.refine_factor = refine_factor
        self.optimize_every = optimize_every
        self.vector_index_min_rows = vector_index_min_rows
        self.vector_on_index_text = vector_on_index_text
        self._tables: dict[int, AsyncTable] = {}  # per event loop: LanceDB handles are loop-bound
        self._commits = 0
        self._open_locks: dict[int, asyncio.Lock] = {}  # per event loop, like the handles

    @classmethod
    def in_dir(cls, data_dir: Path, embedder: Embedder, **kwargs: Any) -> LanceEpisodicStore:
        return cls(Path(data_dir) / LANCE_DIRNAME, embedder, **kwargs)

    @contextmanager
    def _guard(self) -> Iterator[None]:
        """Turn an error LanceDB raises on this folder (a damaged file, a panic in its Rust
        core, a file where the folder should be) into :class:`EpisodicStoreDamaged`."""
        try:
            yield
        except (EmbedderMismatch, EpisodicStoreDamaged, MemoryStoreError):
            raise
        except Exception as exc:
            ours = isinstance(exc, OSError) and str(getattr(exc, "filename", "") or "").startswith(str(self.path))
            if ours or from_lance(exc):
                raise EpisodicStoreDamaged(self.path, exc) from exc
            raise

    # --- connection -------------------------------------------------------------------------

    async def _table(self) -> AsyncTable:
        with self._guard():
            return await self._open_table()

    async def _open_table(self) -> AsyncTable:
        loop = asyncio.get_running_loop()
        table = self._tables.get(id(loop))
        if table is None:
            # one opener per loop: a recall's two halves ask at once on first use, and two
            # concurrent openings of a new folder raced creating its indexes (LanceDB: "CreateIndex
            # transaction is incompatible with concurrent transaction"), failing that recall
            async with self._open_locks.setdefault(id(loop), asyncio.Lock()):
                table = self._tables.get(id(loop))
                if table is None:
                    table = self._tables[id(loop)] = await open_table(self.path, self.embedder)
        return table

    async def close(self) -> None:
        for table in self._tables.values():
            with contextlib.suppress(Exception):
                table.close()  # type: ignore[no-untyped-call]  # lancedb's AsyncTable.close is unannotated
        self._tables.clear()
        self._open_locks.clear()

    # --- writes -----------------------------------------------------------------------------

    async def add(self, event: EpisodicEvent) -> str:
        return (await self.add_many([event]))[0]

    async def _ids_for(self, table: AsyncTable, keys: Sequence[str]) -> dict[str, str]:
        if not keys:
            return {}
        where = f"dedupe IN ({', '.join(sql_str(k) for k in keys)})"
        rows = await table.query().where(where).select(["id", "dedupe"]).limit(len(keys) * 2).to_list()
        return {r["dedupe"]: r["id"] for r in rows}

    @_guarded
    async def add_many(self, events: Sequence[EpisodicEvent]) -> list[str]:
        if not events:
            return []
        table = await self._table()
        keys = [dedupe_key(e.user_id, e.text) for e in events]
        existing = await self._ids_for(table, list(dict.fromkeys(keys)))
        fresh: dict[str, EpisodicEvent] = {}
        for key, event in zip(keys, events):
            if key not in existing and key not in fresh:
                fresh[key] = event
        if fresh:
            vectors = await self.embedder.embed_passages([self._vector_text(e) for e in fresh.values()])
            rows = [
                {
                    "id": e.id,
                    "user_id": e.user_id,
                    "kind": e.kind,
                    "text": e.text,
                    "kw": keyword_text(index_text(e)),
                    "dedupe": key,
                    "created_us": to_us(e.created_at),
                    "expired_us": 0,
                    "confidence": e.confidence,
                    "evidence": e.evidence,
                    "metadata": json.dumps(e.metadata, ensure_ascii=False, default=str),
                    "vector": vector,
                }
                for (key, e), vector in zip(fresh.items(), vectors)
            ]
            result = await table.merge_insert("dedupe").when_not_matched_insert_all().execute(rows)
            self._commits += 1
            if result.num_inserted_rows != len(rows):  # another writer stored some of them first
                existing.update(await self._ids_for(table, list(fresh)))
            for key, event in fresh.items():
                existing.setdefault(key, event.id)
            if self.optimize_every and self._commits % self.optimize_every == 0:
                await self._optimize_quietly()
        return [existing[key] for key in keys]

    def _vector_text(self, event: EpisodicEvent) -> str:
        # measured on LoCoMo (evals/README.md, Memory): the observation helps both halves
        # (evidence recall@10 +0.05 from the vector half alone)
        return index_text(event) if self.vector_on_index_text else event.text

    async def _optimize_quietly(self) -> None:
        try:
            # no vector index build here (minutes at 100k rows): the consolidate graph builds it
            await self.optimize(build_vector_index=False)
        except Exception:  # an optimisation; a concurrent optimize may conflict
            log.warning("episodic store: optimize failed (will retry later)", exc_info=True)

    @_guarded
    async def optimize(
        self, *, cleanup_older_than: timedelta | None = None, build_vector_index: bool = True
    ) -> dict[str, Any]:
        """Compact fragments, fold new rows into the indexes, and (``build_vector_index``)
        build the vector index once the table has ``vector_index_min_rows`` rows.
        ``cleanup_older_than``: also delete old table versions (data of forgotten rows leaves
        the disk then). Returns what was done."""
        table = await self._table()
        done: dict[str, Any] = {}
        rows = await table.count_rows()
        indices = {i.name for i in await table.list_indices()}
        if build_vector_index and rows >= self.vector_index_min_rows and "vector_idx" not in indices:
            from lancedb.index import HnswSq

            await table.create_index("vector", config=HnswSq(distance_type="cosine"))
            done["vector_index"] = rows
        stats = await table.optimize(cleanup_older_than=cleanup_older_than)
        done["compaction"] = str(stats.compaction)
        return done

    @_guarded
    async def expire(self, older_than_days: int = DEFAULT_TTL_DAYS, now: datetime | None = None) -> int:
        now = now or utcnow()
        table = await self._table()
        where = f"expired_us = 0 AND created_us < {to_us(now - timedelta(days=older_than_days))}"
        n = await table.count_rows(where)
        if n:
            # the dedupe key is freed: the same text may be remembered again later
            await table.update(
                where=where, updates_sql={"expired_us": str(to_us(now)), "dedupe": "concat('expired:', id)"}
            )
            self._commits += 1
        return n

    @_guarded
    async def forget(self, user_id: str, event_id: str) -> bool:
        table = await self._table()
        where = f"user_id = {sql_str(user_id)} AND id = {sql_str(event_id)}"
        if not await table.count_rows(where):
            return False
        await table.delete(where)
        self._commits += 1
        return True

    # --- reads ------------------------------------------------------------------------------

    def _filter(
        self,
        user_id: str,
        kinds: Sequence[str] | None,
        since: datetime | None,
        until: datetime | None,
        now: datetime,
        live: bool = True,
    ) -> str:
        parts = [f"user_id = {sql_str(user_id)}"]
        if live:
            parts.append("expired_us = 0")
            parts.append(f"created_us >= {to_us(now - timedelta(days=self.ttl_days))}")
        if kinds:
            parts.append(f"kind IN ({', '.join(sql_str(k) for k in kinds)})")
        if since is not None:
            parts.append(f"created_us >= {to_us(since)}")
        if until is not None:
            parts.append(f"created_us <= {to_us(until)}")
        return " AND ".join(parts)

    @_guarded
    async def _ranked(self, q: SearchQuery) -> builtins.list[ScoredEvent]:
        # the whole search, embedding included, under the guard: LanceDB's errors name the folder
        return await super()._ranked(q)

    async def _keyword_half(self, q: SearchQuery) -> Candidates:
        from lancedb.query import MatchQuery

        table = await self._table()
        where = self._filter(q.user_id, q.kinds, q.since, q.until, q.now)
        # MatchQuery is a pydantic model whose defaults mypy does not see (lancedb typing gap)
        match = MatchQuery(" ".join(q.terms), "kw")  # type: ignore[call-arg]
        rows = (
            await table.query()
            .nearest_to_text(match)
            .where(where)
            .select([*COLUMNS, "_score"])
            .limit(q.limit)
            .to_list()
        )
        return candidates(rows, row_to_event, lambda r: float(r["_score"]))

    async def _vector_half(self, q: SearchQuery, vector: Sequence[float]) -> Candidates:
        table = await self._table()
        where = self._filter(q.user_id, q.kinds, q.since, q.until, q.now)
        query = (
            table.query()
            .nearest_to(vector)
            .distance_type("cosine")
            .nprobes(self.nprobes)
            .ef(max(self.ef, q.limit * self.refine_factor))
            .refine_factor(self.refine_factor)
            .where(where)
            .select([*COLUMNS, "_distance"])
            .limit(q.limit)
        )
        return candidates(await query.to_list(), row_to_event, lambda r: 1.0 - float(r["_distance"]))

    @_guarded
    async def get(self, user_id: str, event_id: str) -> EpisodicEvent | None:
        table = await self._table()
        rows = await (
            table.query()
            .where(f"user_id = {sql_str(user_id)} AND id = {sql_str(event_id)}")
            .select(COLUMNS)
            .limit(1)
            .to_list()
        )
        return row_to_event(rows[0]) if rows else None

    @_guarded
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
        if limit <= 0 or (kinds is not None and not kinds):
            return []
        table = await self._table()
        where = self._filter(user_id, kinds, since, until, utcnow(), live=False)
        if not include_expired:
            where += " AND expired_us = 0"
        rows = await table.query().where(where).select(COLUMNS).to_list()
        rows.sort(key=lambda r: r["created_us"], reverse=True)
        return [event for event, _ in candidates(rows[:limit], row_to_event, lambda r: 0.0).values()]

    @_guarded
    async def recent(self, since: datetime, limit: int = 1000) -> builtins.list[EpisodicEvent]:
        table = await self._table()
        rows = await table.query().where(f"expired_us = 0 AND created_us >= {to_us(since)}").select(COLUMNS).to_list()
        rows.sort(key=lambda r: r["created_us"], reverse=True)
        return [event for event, _ in candidates(rows[:limit], row_to_event, lambda r: 0.0).values()]

    @_guarded
    async def count(self, user_id: str | None = None, *, include_expired: bool = False) -> int:
        table = await self._table()
        parts = [] if user_id is None else [f"user_id = {sql_str(user_id)}"]
        if not include_expired:
            parts.append("expired_us = 0")
        return await table.count_rows(" AND ".join(parts) or None)
