"""The memory database file (``data_dir/memory.db``): async connections through aiosqlite.

Every connection runs in aiosqlite's worker thread, so nothing blocks the event loop
(``langgraph dev`` raises BlockingError on blocking I/O). A connection is opened per operation:
no connection outlives the event loop that opened it. The schema is created lazily, once per
``SqliteDb`` instance, with ``CREATE ... IF NOT EXISTS`` (safe when several instances share a file).
The tool ledger (``tools/idempotency.py``) keeps one sqlite3 connection on a thread of its own
instead: synchronous callers queue writes on it (its docstring says why).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import aiosqlite

#: File name of the memory database inside the service's ``data_dir``.
DB_FILENAME = "memory.db"
#: Seconds a connection waits for another writer's lock before "database is locked" (several
#: ``hermes`` processes and a server share one data directory).
BUSY_TIMEOUT_S = 30.0


class SqliteDb:
    """A SQLite file plus the schema one component needs in it.

    ``path``: the database file (its directory is created on first use);
    ``schema``: an SQL script of idempotent ``CREATE ... IF NOT EXISTS`` statements.
    """

    def __init__(self, path: Path, schema: str) -> None:
        self.path = Path(path)
        self._schema = schema
        self._ready = False

    @asynccontextmanager
    async def connect(self) -> AsyncIterator[aiosqlite.Connection]:
        """An autocommit connection (``isolation_level=None``; use ``BEGIN IMMEDIATE`` for
        transactions) with ``Row`` rows. Raises ``sqlite3.Error`` on an unusable file."""
        if not self._ready:
            await asyncio.to_thread(self.path.parent.mkdir, parents=True, exist_ok=True)
        async with aiosqlite.connect(self.path, isolation_level=None, timeout=BUSY_TIMEOUT_S) as db:
            db.row_factory = aiosqlite.Row
            await db.execute(f"PRAGMA busy_timeout={int(BUSY_TIMEOUT_S * 1000)}")
            if not self._ready:
                await db.execute("PRAGMA journal_mode=WAL")
                await db.executescript(self._schema)
                self._ready = True
            yield db
