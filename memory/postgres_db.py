"""The memory's relational tables on PostgreSQL (``HERMES_POSTGRES_URL``; issue 22): the
connection the memory's SQL is written for (``memory.sql.SqlConnection``) on a psycopg
connection (:class:`PostgresConnection`), and :class:`PostgresDb`: the tables in the schema :data:`SCHEMA_NAME`, created
on first use under a transaction advisory lock (concurrent ``CREATE ... IF NOT EXISTS`` can fail
on ``pg_type``), connections from a small pool per event loop (psycopg connections are bound to
the loop that opened them), each checked before use (a restarted server costs no call).

Used by the knowledge graph (``memory.semantic_postgres``) and the branch origins
(``memory.branch_origins``); the episodic table has its own store (``memory.episodic.postgres``).
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import AsyncIterator, Callable, Iterable, Sequence
from contextlib import asynccontextmanager
from typing import Any

import psycopg
from psycopg_pool import AsyncConnectionPool

from memory.sql import SqlConnection, SqlCursor

log = logging.getLogger(__name__)

#: The PostgreSQL schema of the memory's relational tables.
SCHEMA_NAME = "hermes_memory"
#: Key of the transaction advisory lock that serialises creating tables ("HERMESMS").
SCHEMA_LOCK_KEY = 0x4845524D45534D53
#: Seconds to wait for a connection.
CONNECT_TIMEOUT_S = 10.0
#: Connections per event loop.
POOL_MAX_SIZE = 4


_ESCAPED = re.compile(r"\\([\\0])")


def to_text(value: Any) -> Any:
    """``value`` as stored: a string with NUL (PostgreSQL text cannot hold it; a fact's origin
    is "thread NUL message") or a backslash escaped (``\\0``, ``\\\\``); anything else as is."""
    if isinstance(value, str) and ("\x00" in value or "\\" in value):
        return value.replace("\\", "\\\\").replace("\x00", "\\0")
    return value


def from_text(value: Any) -> Any:
    """The inverse of :func:`to_text`."""
    if isinstance(value, str) and "\\" in value:
        return _ESCAPED.sub(lambda m: "\x00" if m.group(1) == "0" else "\\", value)
    return value


def _rows(cursor: psycopg.AsyncCursor[Any]) -> Callable[[Sequence[Any]], dict[str, Any]]:
    """Rows as dicts of column name → value, strings unescaped (:func:`from_text`)."""
    names = [c.name for c in cursor.description or ()]

    def row(values: Sequence[Any]) -> dict[str, Any]:
        return {name: from_text(value) for name, value in zip(names, values, strict=True)}

    return row


class PostgresConnection:
    """A psycopg connection as a :class:`~memory.sql.SqlConnection`: ``?`` placeholders become
    psycopg's ``%s`` (the memory's SQL holds no other ``?`` nor ``%``); string parameters and
    values are stored escaped (:func:`to_text`) and read back as they were."""

    def __init__(self, conn: psycopg.AsyncConnection[dict[str, Any]]) -> None:
        self.conn = conn

    async def execute(self, sql: str, parameters: Iterable[Any] = (), /) -> SqlCursor:
        return await self.conn.execute(sql.replace("?", "%s"), tuple(to_text(v) for v in parameters))

    async def executemany(self, sql: str, parameters: Iterable[Iterable[Any]], /) -> None:
        async with self.conn.cursor() as cur:
            await cur.executemany(sql.replace("?", "%s"), [tuple(to_text(v) for v in p) for p in parameters])


class PostgresDb:
    """Tables on the PostgreSQL at ``url`` (module docstring). ``tables``: their
    ``CREATE ... IF NOT EXISTS`` statements, unqualified (they land in :data:`SCHEMA_NAME`).
    :meth:`connect` raises ``psycopg.Error`` (``psycopg_pool.PoolTimeout`` after
    :data:`CONNECT_TIMEOUT_S`) when the server cannot be reached."""

    def __init__(self, url: str, tables: str) -> None:
        self.url = url
        self.tables = tables
        self._pools: dict[int, AsyncConnectionPool[psycopg.AsyncConnection[dict[str, Any]]]] = {}
        self._ready = False

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
            kwargs={"autocommit": True, "row_factory": _rows},
            configure=configure,
            # a connection the server dropped (restarted, terminated) is replaced before use
            check=AsyncConnectionPool.check_connection,
            name="hermes-memory",
        )
        await pool.open(wait=True, timeout=CONNECT_TIMEOUT_S)
        if not self._ready:
            async with pool.connection() as conn, conn.transaction():
                await conn.execute("SELECT pg_advisory_xact_lock(%s)", (SCHEMA_LOCK_KEY,))
                await conn.execute(f"CREATE SCHEMA IF NOT EXISTS {SCHEMA_NAME}")
                await conn.execute(self.tables)
            self._ready = True
        self._pools[id(loop)] = pool
        return pool

    @asynccontextmanager
    async def connect(self) -> AsyncIterator[SqlConnection]:
        """``async with db.connect() as conn:`` an autocommit connection of the pool (a
        transaction: ``BEGIN`` ... ``COMMIT``, as with SQLite)."""
        pool = await self._pool()
        async with pool.connection() as conn:
            yield PostgresConnection(conn)

    async def close(self) -> None:
        """Close the pools (idempotent)."""
        pools, self._pools = list(self._pools.values()), {}
        for pool in pools:
            try:
                await pool.close()
            except Exception:  # a pool of an event loop that is gone
                log.debug("memory tables: closing a pool failed", exc_info=True)
