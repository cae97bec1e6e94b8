"""Episodic store on PostgreSQL + pgvector (``HERMES_POSTGRES_URL``; issue 22, DESIGN §4).

The same :class:`~memory.episodic.base.EpisodicStore` contract and ranking as LanceDB and
Weaviate (``tests/unit/test_memory_contract.py``, run on this store by
``tests/integration/test_memory_postgres_contract.py``), on one table shared by every process
and machine that names the database. Own tables, not LangGraph's ``PostgresStore``: DESIGN §4
says why (its search is vector-only; the contract needs the keyword half, the fusion, K11
dedupe before embedding, validity and per-user scoping in SQL).

Table ``<table>`` (default ``hermes_episodic``; one row per event):

    id, user_id, kind, text, confidence, evidence, metadata (jsonb), created_at (timestamptz)
    expired_at   NULL while live, else when it was retired
    hash         ``memory.text.content_hash`` of the text: K11 key, unique per user among live
                 rows (partial unique index), so ``INSERT ... ON CONFLICT DO NOTHING`` is an
                 atomic insert-if-absent between concurrent writers on any host
    kw           tsvector of the observation's keyword tokens (``memory.text.keyword_tokens``:
                 words, CJK unigrams+bigrams, emoji), each stemmed with PostgreSQL's
                 ``english_stem`` dictionary (kept as is where it has no stem: stop words,
                 CJK, symbols), GIN-indexed. Tokens are made in Python, not by PostgreSQL's
                 parser, so CJK and emoji are tokens exactly as in the other backends.
    vector       ``vector(dim)`` of the embedder (pgvector; cosine ``<=>``)

Ranking: keyword half ``ts_rank(kw, q, 1)`` (frequency, normalised by document length; the
query is an OR of its stemmed tokens), vector half ``1 - (vector <=> q)``; both fused by
``base.fuse`` exactly as the other backends (symbol-only queries with ``alpha = 0``:
``base.fusion_alpha``). The vector half is an exact scan of the user's live rows (B-tree on
``user_id``): pgvector 0.6's HNSW filters *after* the index scan, so a user's memories in a
shared table could be missed; exact search is right first, and cheap at per-user sizes.

Durability: every statement autocommits; ``add_many`` is one ``INSERT`` and returns after its
commit. Tables are created on first use under a transaction advisory lock
(:data:`SCHEMA_LOCK_KEY`; concurrent ``CREATE ... IF NOT EXISTS`` can fail on ``pg_type``).
"""

from __future__ import annotations

import asyncio
import builtins
import json
import logging
import re
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any

import psycopg
import tenacity
from psycopg import sql
from psycopg.rows import dict_row

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
from memory.episodic.lance_errors import EmbedderMismatch
from memory.text import content_hash, keyword_text

log = logging.getLogger(__name__)

#: Default table (prefixed: the database also holds the checkpoint, ledger and reminder tables).
TABLE = "hermes_episodic"
#: Key of the transaction advisory lock that serialises creating the tables ("HERMESEP").
SCHEMA_LOCK_KEY = 0x4845524D45534550
#: Seconds to wait for a connection.
CONNECT_TIMEOUT_S = 10
_NAME = re.compile(r"^[a-z_][a-z0-9_]{0,62}$")

#: A statement that is safe to repeat (reads; ``add_many``, whose insert-if-absent makes a
#: repeat of a committed insert a no-op) runs once more on a new connection when its session
#: was lost (the server restarted, the backend was terminated): one failed recall or write is
#: not needed for the store to find the server again. ``forget``/``expire`` are not repeated
#: (their counts would be wrong); their next call reconnects.
_once_more = tenacity.retry(
    retry=tenacity.retry_if_exception_type(psycopg.OperationalError),
    stop=tenacity.stop_after_attempt(2),
    reraise=True,
)

#: Stemmed lexemes of a space-separated token string (``memory.text.keyword_text``).
_LEXEMES_FN = """
CREATE OR REPLACE FUNCTION hermes_kw_lexemes(tokens text) RETURNS text[]
LANGUAGE sql STABLE PARALLEL SAFE AS $$
  SELECT coalesce(array_agg(coalesce((ts_lexize('english_stem', t))[1], t)), '{}')
  FROM unnest(string_to_array(tokens, ' ')) AS t WHERE t <> ''
$$;
CREATE OR REPLACE FUNCTION hermes_kw_query(tokens text) RETURNS tsquery
LANGUAGE sql STABLE PARALLEL SAFE AS $$
  SELECT string_agg('''' || replace(replace(l, '\\', '\\\\'), '''', '''''') || '''', ' | ')::tsquery
  FROM unnest(hermes_kw_lexemes(tokens)) AS l
$$;
"""

_COLUMNS = "id, user_id, kind, text, confidence, evidence, metadata, created_at"


def _vector_literal(vector: Sequence[float]) -> str:
    return "[" + ",".join(repr(float(v)) for v in vector) + "]"


class PostgresEpisodicStore(HybridSearch):
    """:class:`~memory.episodic.base.EpisodicStore` on PostgreSQL + pgvector (module docstring).

    Args:
        url: a libpq URL (``HERMES_POSTGRES_URL``). The role must be able to ``CREATE
            EXTENSION vector`` once, or an administrator creates it beforehand.
        embedder: vectors for the vector half (its ``dim`` fixes the column's size).
        table: table name (lower-case identifier); tests use one per store.
        alpha, half_life_days, ttl_days, candidates: as :class:`~memory.episodic.lance.LanceEpisodicStore`.
        vector_on_index_text: embed the observation (``base.index_text``; default) or the text.

    Raises ``ValueError`` for a bad ``alpha``/``half_life_days``/``table``; :class:`EmbedderMismatch`
    on first use when the table holds vectors of another size; ``psycopg.Error`` when the
    database cannot be reached (the memory service queues writes and recalls nothing then).
    """

    #: one connection per event loop: the two halves of a search run one after the other
    concurrent_halves = False

    def __init__(
        self,
        url: str,
        embedder: Embedder,
        *,
        table: str = TABLE,
        alpha: float = DEFAULT_ALPHA,
        half_life_days: float = DEFAULT_HALF_LIFE_DAYS,
        ttl_days: int = DEFAULT_TTL_DAYS,
        candidates: int = DEFAULT_CANDIDATES,
        vector_on_index_text: bool = True,
    ) -> None:
        if not 0.0 <= alpha <= 1.0:
            raise ValueError("alpha must be in [0, 1]")
        if half_life_days <= 0:
            raise ValueError("half_life_days must be > 0")
        if not _NAME.match(table):
            raise ValueError(f"table must be a lower-case SQL identifier, got {table!r}")
        self.url = url
        self.embedder = embedder
        self.table = table
        self.alpha = alpha
        self.half_life_days = half_life_days
        self.ttl_days = ttl_days
        self.candidates = candidates
        self.vector_on_index_text = vector_on_index_text
        self._t = sql.Identifier(table)
        # per event loop: an async connection is bound to the loop that opened it
        self._conns: dict[int, psycopg.AsyncConnection[dict[str, Any]]] = {}
        self._ready = False

    # --- connection -------------------------------------------------------------------------

    async def _conn(self) -> psycopg.AsyncConnection[dict[str, Any]]:
        loop = asyncio.get_running_loop()
        conn = self._conns.get(id(loop))
        if conn is not None and not conn.closed:
            return conn
        conn = await psycopg.AsyncConnection.connect(
            self.url, autocommit=True, row_factory=dict_row, connect_timeout=CONNECT_TIMEOUT_S
        )
        if not self._ready:
            await self._setup(conn)
            self._ready = True
        self._conns[id(loop)] = conn
        return conn

    async def _setup(self, conn: psycopg.AsyncConnection[dict[str, Any]]) -> None:
        t = self._t
        dim = int(self.embedder.dim)
        async with conn.transaction():
            await conn.execute("SELECT pg_advisory_xact_lock(%s)", (SCHEMA_LOCK_KEY,))
            await conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
            await conn.execute(_LEXEMES_FN)
            await conn.execute(
                sql.SQL(
                    """CREATE TABLE IF NOT EXISTS {t} (
                        id text PRIMARY KEY,
                        user_id text NOT NULL,
                        kind text NOT NULL,
                        text text NOT NULL,
                        confidence double precision NOT NULL,
                        evidence text NOT NULL,
                        metadata jsonb NOT NULL DEFAULT '{{}}',
                        created_at timestamptz NOT NULL,
                        expired_at timestamptz,
                        hash text NOT NULL,
                        kw tsvector NOT NULL,
                        vector vector({dim}) NOT NULL)"""
                ).format(t=t, dim=sql.Literal(dim))
            )
            await conn.execute(
                sql.SQL("CREATE UNIQUE INDEX IF NOT EXISTS {i} ON {t} (user_id, hash) WHERE expired_at IS NULL").format(
                    i=sql.Identifier(f"{self.table}_live_hash"), t=t
                )
            )
            await conn.execute(
                sql.SQL("CREATE INDEX IF NOT EXISTS {i} ON {t} (user_id, created_at)").format(
                    i=sql.Identifier(f"{self.table}_user_created"), t=t
                )
            )
            await conn.execute(
                sql.SQL("CREATE INDEX IF NOT EXISTS {i} ON {t} USING gin (kw)").format(
                    i=sql.Identifier(f"{self.table}_kw"), t=t
                )
            )
            cur = await conn.execute(
                "SELECT atttypmod FROM pg_attribute WHERE attrelid = %s::regclass AND attname = 'vector'",
                (self.table,),
            )
            row = await cur.fetchone()
        if row is not None and row["atttypmod"] != dim:
            raise EmbedderMismatch(
                f"episodic memory in table {self.table} holds {row['atttypmod']}-dimensional vectors; the "
                f"embedder {self.embedder.name!r} makes {dim}. Use the embedder it was written with, or "
                "name another table to start a new memory."
            )

    async def close(self) -> None:
        conns, self._conns = list(self._conns.values()), {}
        for conn in conns:
            try:
                await conn.close()
            except Exception:  # closing a connection of a loop that is gone
                log.debug("episodic store: closing a connection failed", exc_info=True)

    # --- writes -----------------------------------------------------------------------------

    async def add(self, event: EpisodicEvent) -> str:
        return (await self.add_many([event]))[0]

    async def _ids_for(
        self, conn: psycopg.AsyncConnection[dict[str, Any]], keys: Sequence[tuple[str, str]]
    ) -> dict[tuple[str, str], str]:
        if not keys:
            return {}
        cur = await conn.execute(
            sql.SQL(
                "SELECT id, user_id, hash FROM {t} WHERE expired_at IS NULL "
                "AND (user_id, hash) IN (SELECT * FROM unnest(%s::text[], %s::text[]))"
            ).format(t=self._t),
            ([u for u, _ in keys], [h for _, h in keys]),
        )
        return {(r["user_id"], r["hash"]): r["id"] for r in await cur.fetchall()}

    @_once_more
    async def add_many(self, events: Sequence[EpisodicEvent]) -> list[str]:
        if not events:
            return []
        conn = await self._conn()
        keys = [(e.user_id, content_hash(e.text)) for e in events]
        existing = await self._ids_for(conn, list(dict.fromkeys(keys)))
        fresh: dict[tuple[str, str], EpisodicEvent] = {}
        for key, event in zip(keys, events):
            if key not in existing and key not in fresh:
                fresh[key] = event
        if fresh:
            vectors = await self.embedder.embed_passages([self._vector_text(e) for e in fresh.values()])
            rows = [
                (
                    e.id,
                    e.user_id,
                    e.kind,
                    e.text,
                    e.confidence,
                    e.evidence,
                    json.dumps(e.metadata, ensure_ascii=False, default=str),
                    e.created_at,
                    key[1],
                    keyword_text(index_text(e)),
                    _vector_literal(vector),
                )
                for (key, e), vector in zip(fresh.items(), vectors)
            ]
            cols = [list(c) for c in zip(*rows)]
            # one statement, one commit; a row another writer stored first is skipped
            cur = await conn.execute(
                sql.SQL(
                    """INSERT INTO {t} (id, user_id, kind, text, confidence, evidence, metadata,
                                        created_at, hash, kw, vector)
                       SELECT id, user_id, kind, text, confidence, evidence, metadata::jsonb,
                              created_at, hash, array_to_tsvector(hermes_kw_lexemes(kw)), vector::vector
                       FROM unnest(%s::text[], %s::text[], %s::text[], %s::text[], %s::float8[], %s::text[],
                                   %s::text[], %s::timestamptz[], %s::text[], %s::text[], %s::text[])
                            AS r(id, user_id, kind, text, confidence, evidence, metadata,
                                 created_at, hash, kw, vector)
                       ON CONFLICT DO NOTHING
                       RETURNING id, user_id, hash"""
                ).format(t=self._t),
                cols,
            )
            inserted = {(r["user_id"], r["hash"]): r["id"] for r in await cur.fetchall()}
            existing.update(inserted)
            if len(inserted) != len(fresh):  # another writer stored some of them first
                existing.update(await self._ids_for(conn, [k for k in fresh if k not in inserted]))
            for key, event in fresh.items():
                existing.setdefault(key, event.id)
        return [existing[key] for key in keys]

    def _vector_text(self, event: EpisodicEvent) -> str:
        return index_text(event) if self.vector_on_index_text else event.text

    async def expire(self, older_than_days: int = DEFAULT_TTL_DAYS, now: datetime | None = None) -> int:
        now = now or utcnow()
        conn = await self._conn()
        # the live-hash index only covers live rows: the same text may be remembered again
        cur = await conn.execute(
            sql.SQL("UPDATE {t} SET expired_at = %s WHERE expired_at IS NULL AND created_at < %s").format(t=self._t),
            (now, now - timedelta(days=older_than_days)),
        )
        return max(cur.rowcount, 0)

    async def forget(self, user_id: str, event_id: str) -> bool:
        conn = await self._conn()
        cur = await conn.execute(
            sql.SQL("DELETE FROM {t} WHERE user_id = %s AND id = %s").format(t=self._t), (user_id, event_id)
        )
        return cur.rowcount > 0

    # --- reads ------------------------------------------------------------------------------

    def _filter(
        self,
        user_id: str,
        kinds: Sequence[str] | None,
        since: datetime | None,
        until: datetime | None,
        now: datetime,
        live: bool = True,
    ) -> tuple[sql.Composable, list[Any]]:
        parts: list[sql.Composable] = [sql.SQL("user_id = %s")]
        params: list[Any] = [user_id]
        if live:
            parts.append(sql.SQL("expired_at IS NULL AND created_at >= %s"))
            params.append(now - timedelta(days=self.ttl_days))
        if kinds is not None:
            parts.append(sql.SQL("kind = ANY(%s::text[])"))
            params.append(list(kinds))
        if since is not None:
            parts.append(sql.SQL("created_at >= %s"))
            params.append(since)
        if until is not None:
            parts.append(sql.SQL("created_at <= %s"))
            params.append(until)
        return sql.SQL(" AND ").join(parts), params

    @_once_more
    async def _ranked(self, q: SearchQuery) -> builtins.list[ScoredEvent]:
        # a read: repeated once on a new connection when the session was lost
        return await super()._ranked(q)

    async def _keyword_half(self, q: SearchQuery) -> Candidates:
        conn = await self._conn()
        where, params = self._filter(q.user_id, q.kinds, q.since, q.until, q.now)
        cur = await conn.execute(
            sql.SQL(
                "SELECT {cols}, ts_rank(kw, q, 1) AS score FROM {t}, hermes_kw_query(%s) AS q "
                "WHERE kw @@ q AND {where} ORDER BY score DESC LIMIT %s"
            ).format(cols=sql.SQL(_COLUMNS), t=self._t, where=where),
            [" ".join(q.terms), *params, q.limit],
        )
        return self._rows(await cur.fetchall())

    async def _vector_half(self, q: SearchQuery, vector: Sequence[float]) -> Candidates:
        conn = await self._conn()
        where, params = self._filter(q.user_id, q.kinds, q.since, q.until, q.now)
        cur = await conn.execute(
            sql.SQL(
                "SELECT {cols}, 1 - (vector <=> %s::vector) AS score FROM {t} "
                "WHERE {where} ORDER BY vector <=> %s::vector LIMIT %s"
            ).format(cols=sql.SQL(_COLUMNS), t=self._t, where=where),
            [_vector_literal(vector), *params, _vector_literal(vector), q.limit],
        )
        return self._rows(await cur.fetchall())

    @staticmethod
    def _event(row: Mapping[str, Any]) -> EpisodicEvent:
        return EpisodicEvent(
            id=row["id"],
            user_id=row["user_id"],
            kind=row["kind"],
            text=row["text"],
            created_at=row["created_at"],
            confidence=row["confidence"],
            evidence=row["evidence"],
            metadata=row["metadata"] or {},
        )

    @classmethod
    def _rows(cls, rows: Iterable[Mapping[str, Any]]) -> Candidates:
        return candidates(rows, cls._event, lambda row: float(row.get("score") or 0.0))

    @_once_more
    async def get(self, user_id: str, event_id: str) -> EpisodicEvent | None:
        conn = await self._conn()
        cur = await conn.execute(
            sql.SQL("SELECT {cols} FROM {t} WHERE user_id = %s AND id = %s").format(cols=sql.SQL(_COLUMNS), t=self._t),
            (user_id, event_id),
        )
        row = await cur.fetchone()
        return self._event(row) if row else None

    @_once_more
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
        conn = await self._conn()
        where, params = self._filter(user_id, kinds, since, until, utcnow(), live=False)
        if not include_expired:
            where = sql.SQL("{w} AND expired_at IS NULL").format(w=where)
        cur = await conn.execute(
            sql.SQL("SELECT {cols} FROM {t} WHERE {where} ORDER BY created_at DESC LIMIT %s").format(
                cols=sql.SQL(_COLUMNS), t=self._t, where=where
            ),
            [*params, limit],
        )
        return [event for event, _ in self._rows(await cur.fetchall()).values()]

    @_once_more
    async def recent(self, since: datetime, limit: int = 1000) -> builtins.list[EpisodicEvent]:
        conn = await self._conn()
        cur = await conn.execute(
            sql.SQL(
                "SELECT {cols} FROM {t} WHERE expired_at IS NULL AND created_at >= %s ORDER BY created_at DESC LIMIT %s"
            ).format(cols=sql.SQL(_COLUMNS), t=self._t),
            (since, limit),
        )
        return [event for event, _ in self._rows(await cur.fetchall()).values()]

    @_once_more
    async def count(self, user_id: str | None = None, *, include_expired: bool = False) -> int:
        conn = await self._conn()
        parts: list[sql.Composable] = [sql.SQL("TRUE")]
        params: list[Any] = []
        if user_id is not None:
            parts.append(sql.SQL("user_id = %s"))
            params.append(user_id)
        if not include_expired:
            parts.append(sql.SQL("expired_at IS NULL"))
        cur = await conn.execute(
            sql.SQL("SELECT count(*) AS n FROM {t} WHERE {w}").format(t=self._t, w=sql.SQL(" AND ").join(parts)),
            params,
        )
        row = await cur.fetchone()
        return int(row["n"]) if row else 0
