"""Semantic memory on PostgreSQL (``HERMES_POSTGRES_URL``; issue 22): the same knowledge graph —
the same parts and SQL (``memory.semantic``), the same tests (``tests/unit/test_memory_semantic.py``
run on both by ``tests/integration/test_memory_semantic_postgres.py``) — on tables shared by every
process and machine that names the database.

Own tables, not LangGraph's ``PostgresStore``: the knowledge graph is relational (conflicts,
supersession, tombstones, recursive multi-hop queries), not documents under a namespace. They
are ``memory.semantic_sqlite.SCHEMA``'s (``semantic_entities``, ``semantic_facts``,
``semantic_forgotten``) in the memory's schema (``memory.postgres_db``); timestamps are ISO text
in the ``C`` collation, so they compare as in SQLite.

Writers: SQLite's ``BEGIN IMMEDIATE`` (one writer at a time, a check and the write it decides
as one step) is a transaction holding the advisory lock :data:`WRITE_LOCK_KEY` here, so two
workers stating conflicting values at once still leave one confirmed and one pending.
"""

from __future__ import annotations

from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import Any

from memory.policy import MIN_CONFIDENCE, SEMANTIC_TTL_DAYS
from memory.postgres_db import SCHEMA_LOCK_KEY, SCHEMA_NAME, PostgresDb
from memory.semantic import SemanticMemory
from memory.sql import SqlConnection

__all__ = ["SCHEMA_LOCK_KEY", "SCHEMA_NAME", "TABLES", "WRITE_LOCK_KEY", "PostgresSemanticMemory"]

#: Key of the transaction advisory lock every write transaction holds ("HERMESSW").
WRITE_LOCK_KEY = 0x4845524D45535357

#: The tables, schema-qualified (so ``hermes migrate`` can create them on a plain connection).
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


class PostgresSemanticMemory(SemanticMemory):
    """:class:`~memory.semantic.SemanticMemory` on PostgreSQL (module docstring).

    Args:
        url: a libpq URL (``HERMES_POSTGRES_URL``); the role may create a schema once.
        ttl_days, min_confidence: as :class:`~memory.semantic.SemanticMemory`.

    Raises ``psycopg.Error`` (or ``psycopg_pool.PoolTimeout`` after
    ``memory.postgres_db.CONNECT_TIMEOUT_S``) when the database cannot be reached: the memory
    service queues writes and recalls no fact.
    """

    def __init__(self, url: str, *, ttl_days: int = SEMANTIC_TTL_DAYS, min_confidence: float = MIN_CONFIDENCE) -> None:
        self.url = url
        self.ttl_days = ttl_days
        self.min_confidence = min_confidence
        self.tables = PostgresDb(url, TABLES)

    @property
    def memory_db_path(self) -> Path | None:
        return None

    def _connect(self) -> AbstractAsyncContextManager[SqlConnection]:
        return self.tables.connect()

    async def _begin(self, db: SqlConnection) -> None:
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
        await self.tables.close()
