"""The memory database file (``data_dir/memory.db``): async connections through aiosqlite.

Every connection runs in aiosqlite's worker thread, so nothing blocks the event loop
(``langgraph dev`` raises BlockingError on blocking I/O). A connection is opened per operation:
no connection outlives the event loop that opened it. The schema is created lazily, once per
``SqliteDb`` instance, with ``CREATE ... IF NOT EXISTS`` (safe when several instances share a file).
The tool ledger (``tools/idempotency.py``) keeps one sqlite3 connection on a thread of its own
instead: synchronous callers queue writes on it (its docstring says why).

Every connection runs ``synchronous=NORMAL`` (WAL), as the checkpoints and the ledger do: a
committed write survives a crash of the process (what the held memory write needs, DESIGN §4.8),
the last commits may be lost on a power cut. SQLite's default (FULL) synced the WAL on every
commit: ~2 ms each on a quiet disk, three or more commits per turn (hold, branch origin,
release), and far more behind another process's disk traffic (bench_overhead, issue 19).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import aiosqlite

from base.sqlite_files import open_aiosqlite

#: File name of the memory database inside the service's ``data_dir``.
DB_FILENAME = "memory.db"


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
        # the WAL switch and the schema once per instance (opening retried while locked)
        db = await open_aiosqlite(
            self.path, schema="" if self._ready else self._schema, wal=not self._ready, synchronous="NORMAL"
        )
        self._ready = True
        try:
            db.row_factory = aiosqlite.Row
            yield db
        finally:
            await db.close()
