"""The connection the memory's SQL is written for, on SQLite and PostgreSQL alike: ``?``
placeholders, statements both read (``INSERT ... ON CONFLICT``, no ``INSERT OR ...``), rows by
column name (``row["status"]``). An ``aiosqlite`` connection with ``Row`` rows is one
(``memory.db``); ``memory.postgres_db.PostgresConnection`` adapts a psycopg one. Types only: no
driver is imported here.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Protocol


class SqlCursor(Protocol):
    """What a statement returns: rows by column name (``row["status"]``)."""

    @property
    def rowcount(self) -> int: ...

    async def fetchone(self) -> Any: ...

    async def fetchall(self) -> Iterable[Any]: ...


class SqlConnection(Protocol):
    """A connection as the memory's SQL sees it: an ``aiosqlite`` connection with ``Row`` rows,
    or ``memory.postgres_db.PostgresConnection``."""

    async def execute(self, sql: str, parameters: Iterable[Any] = ..., /) -> SqlCursor: ...

    async def executemany(self, sql: str, parameters: Iterable[Iterable[Any]], /) -> Any: ...
