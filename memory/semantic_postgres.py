"""Semantic memory on PostgreSQL (``HERMES_POSTGRES_URL``; issue 22): the same knowledge graph —
the same parts and SQL (``memory.semantic``), the same tests (``tests/unit/test_memory_semantic.py``
run on both by ``tests/integration/test_memory_semantic_postgres.py``) — on tables shared by every
process and machine that names the database.

Own tables, not LangGraph's ``PostgresStore``: the knowledge graph is relational (conflicts,
supersession, tombstones, recursive multi-hop queries), not documents under a namespace. They
live in the schema :data:`SCHEMA_NAME` (``semantic_entities``, ``semantic_facts``,
``semantic_forgotten``: the layout of ``memory.semantic_sqlite.SCHEMA``; timestamps are ISO text
in the ``C`` collation, so they compare as in SQLite). Created on first use under a transaction
advisory lock (concurrent ``CREATE ... IF NOT EXISTS`` can fail on ``pg_type``).

Writers: SQLite's ``BEGIN IMMEDIATE`` (one writer at a time, a check and the write it decides
as one step) is a transaction holding the advisory lock :data:`WRITE_LOCK_KEY` here, so two
workers stating conflicting values at once still leave one confirmed and one pending. Connections
come from a small pool per event loop (psycopg connections are bound to the loop that opened
them); :meth:`PostgresSemanticMemory.close` closes them.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Iterable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path
from typing import Any

import psycopg
from psycopg.rows import dict_row
from psycopg_pool import AsyncConnectionPool

from memory.policy import MIN_CONFIDENCE, SEMANTIC_TTL_DAYS
from memory.semantic import SemanticMemory
from memory.semantic_sqlite import FactConnection, FactCursor

log = logging.getLogger(__name__)

#: The PostgreSQL schema of the knowledge graph's tables.
SCHEMA_NAME = "hermes_semantic"
#: Key of the transaction advisory lock that serialises creating the tables ("HERMESSC").
SCHEMA_LOCK_KEY = 0x4845524D45535343
#: Key of the transaction advisory lock every write transaction holds ("HERMESSW").
WRITE_LOCK_KEY = 0x4845524D45535357
#: Seconds to wait for a connection.
CONNECT_TIMEOUT_S = 10.0
#: Connections per event loop.
POOL_MAX_SIZE = 4

TABLES = f"""
CREATE SCHEMA IF NOT EXISTS {SCHEMA_NAME};
CREATE TABLE IF NOT EXISTS {SCHEMA_NAME}.semantic_entities (
    user_id    text COLLATE "C" NOT NULL,
    key        text COLLATE "C" NOT NULL,
    name       text NOT NULL,
    type       text NOT NULL DEFAULT 'thing',
    created_at text COLLATE "C" NOT NULL,
    PRIMARY KEY (user_id, key)
);
CREATE TABLE IF NOT EXISTS {SCHEMA_NAME}.semantic_facts (
    id               text PRIMARY KEY,
    user_id          text COLLATE "C" NOT NULL,
    subject          text COLLATE "C" NOT NULL,
    predicate        text COLLATE "C" NOT NULL,
    object           text COLLATE "C" NOT NULL,
    object_name      text NOT NULL,
    object_is_entity integer NOT NULL,
    confidence       double precision NOT NULL,
    evidence         text NOT NULL,
    sources          text NOT NULL DEFAULT '[]',
    status           text NOT NULL,
    valid_from       text COLLATE "C" NOT NULL,
    valid_to         text COLLATE "C",
    created_at       text COLLATE "C" NOT NULL,
    updated_at       text COLLATE "C" NOT NULL,
    last_used_at     text COLLATE "C",
    use_count        integer NOT NULL DEFAULT 0,
    conflict_with    text,
    superseded_by    text,
    origin           text
);
CREATE TABLE IF NOT EXISTS {SCHEMA_NAME}.semantic_forgotten (
    user_id      text COLLATE "C" NOT NULL,
    subject      text COLLATE "C" NOT NULL,
    predicate    text COLLATE "C" NOT NULL,
    object       text COLLATE "C" NOT NULL,
    sources      text NOT NULL DEFAULT '[]',
    forgotten_at text COLLATE "C" NOT NULL,
    PRIMARY KEY (user_id, subject, predicate, object)
);
CREATE INDEX IF NOT EXISTS semantic_out ON {SCHEMA_NAME}.semantic_facts (user_id, subject, predicate, status);
CREATE INDEX IF NOT EXISTS semantic_in ON {SCHEMA_NAME}.semantic_facts (user_id, object, predicate, status);
"""


class _Connection:
    """A psycopg connection as a :class:`~memory.semantic_sqlite.FactConnection`: the parts'
    ``?`` placeholders become psycopg's ``%s`` (their SQL holds no other ``?`` nor ``%``)."""

    def __init__(self, conn: psycopg.AsyncConnection[dict[str, Any]]) -> None:
        self.conn = conn

    async def execute(self, sql: str, parameters: Iterable[Any] = (), /) -> FactCursor:
        return await self.conn.execute(sql.replace("?", "%s"), tuple(parameters))

    async def executemany(self, sql: str, parameters: Iterable[Iterable[Any]], /) -> None:
        async with self.conn.cursor() as cur:
            await cur.executemany(sql.replace("?", "%s"), [tuple(p) for p in parameters])


class PostgresSemanticMemory(SemanticMemory):
    """:class:`~memory.semantic.SemanticMemory` on PostgreSQL (module docstring).

    Args:
        url: a libpq URL (``HERMES_POSTGRES_URL``); the role may create a schema once.
        ttl_days, min_confidence: as :class:`~memory.semantic.SemanticMemory`.

    Raises ``psycopg.Error`` (or ``psycopg_pool.PoolTimeout`` within :data:`CONNECT_TIMEOUT_S`)
    when the database cannot be reached: the memory service queues writes and recalls no fact.
    """

    def __init__(self, url: str, *, ttl_days: int = SEMANTIC_TTL_DAYS, min_confidence: float = MIN_CONFIDENCE) -> None:
        self.url = url
        self.ttl_days = ttl_days
        self.min_confidence = min_confidence
        self._pools: dict[int, AsyncConnectionPool[psycopg.AsyncConnection[dict[str, Any]]]] = {}
        self._ready = False

    @property
    def memory_db_path(self) -> Path | None:
        return None

    async def _pool(self) -> AsyncConnectionPool[psycopg.AsyncConnection[dict[str, Any]]]:
        loop = asyncio.get_running_loop()
        pool = self._pools.get(id(loop))
        if pool is not None:
            return pool

        async def configure(conn: psycopg.AsyncConnection[Any]) -> None:
            await conn.execute(f"SET search_path TO {SCHEMA_NAME}")

        pool = AsyncConnectionPool(
            self.url,
            min_size=1,
            max_size=POOL_MAX_SIZE,
            open=False,
            kwargs={"autocommit": True, "row_factory": dict_row},
            configure=configure,
            # a connection the server dropped (restarted, terminated) is replaced before use
            check=AsyncConnectionPool.check_connection,
            name="hermes-semantic",
        )
        await pool.open(wait=True, timeout=CONNECT_TIMEOUT_S)
        if not self._ready:
            async with pool.connection() as conn, conn.transaction():
                await conn.execute("SELECT pg_advisory_xact_lock(%s)", (SCHEMA_LOCK_KEY,))
                await conn.execute(TABLES)
            self._ready = True
        self._pools[id(loop)] = pool
        return pool

    def _connect(self) -> AbstractAsyncContextManager[FactConnection]:
        return self._connection()

    @asynccontextmanager
    async def _connection(self) -> AsyncIterator[FactConnection]:
        pool = await self._pool()
        async with pool.connection() as conn:
            yield _Connection(conn)

    async def _begin(self, db: FactConnection) -> None:
        await db.execute("BEGIN")
        await db.execute("SELECT pg_advisory_xact_lock(?)", (WRITE_LOCK_KEY,))

    def _walk(self, start: str, max_hops: int, live: str, live_params: list[Any]) -> tuple[str, list[Any]]:
        # PostgreSQL allows one reference to the recursive table: both directions in one join
        sql = f"""
        WITH RECURSIVE walk(node, hops) AS (
            SELECT CAST(? AS text) COLLATE "C", 0
            UNION
            SELECT CASE WHEN f.subject = walk.node THEN f.object ELSE f.subject END, walk.hops + 1
            FROM walk JOIN semantic_facts f ON (f.subject = walk.node OR f.object = walk.node)
            WHERE walk.hops < ? AND {live}
        )
        SELECT node, MIN(hops) AS hops FROM walk GROUP BY node
        """
        return sql, [start, max_hops, *live_params]

    async def close(self) -> None:
        pools, self._pools = list(self._pools.values()), {}
        for pool in pools:
            try:
                await pool.close()
            except Exception:  # a pool of an event loop that is gone
                log.debug("semantic store: closing a pool failed", exc_info=True)
