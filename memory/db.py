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

:func:`one_connection` lends one connection to a few components' short writes in one task — the
turn's memory write holds its plan, records its branch origin and releases the hold on one
connection instead of opening three (each opening is a worker thread and a few round trips to
it: bench_overhead, issue 19). Only the task that opened it uses it; any other task, and any
component not named, opens its own as before.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import aiosqlite

from base.sqlite_files import open_aiosqlite

log = logging.getLogger(__name__)

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
        #: connections lent by :func:`one_connection`, by the task they are lent to
        self._lent: dict[asyncio.Task[Any] | None, aiosqlite.Connection] = {}

    @asynccontextmanager
    async def connect(self) -> AsyncIterator[aiosqlite.Connection]:
        """An autocommit connection (``isolation_level=None``; use ``BEGIN IMMEDIATE`` for
        transactions) with ``Row`` rows — the one :func:`one_connection` lent this task, if
        any (left open). Raises ``sqlite3.Error`` on an unusable file."""
        lent = self._lent.get(asyncio.current_task()) if self._lent else None
        if lent is not None:
            if not self._ready:
                await lent.executescript(self._schema)
                self._ready = True
            yield lent
            return
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


@asynccontextmanager
async def one_connection(*dbs: object) -> AsyncIterator[None]:
    """``async with one_connection(a, b):`` ``a.connect()`` and ``b.connect()`` in this task
    yield one shared autocommit connection (each one's schema run on it once), closed at the
    end; other tasks open their own. ``dbs`` that are not :class:`SqliteDb` (a PostgreSQL
    store) or on another file than the first are left alone. For short statements in sequence
    (each commits at once): a statement never waits on the connection for another's
    transaction. Never raises for the sharing: a file that cannot be opened here leaves each
    call to open its own (and say what fails)."""
    files = [d for d in dbs if isinstance(d, SqliteDb)]
    shared = [d for d in files if d.path == files[0].path]
    task = asyncio.current_task()
    if not shared or any(task in d._lent for d in shared):  # nested: the outer one lends
        yield
        return
    opening = shared[0].connect()
    try:
        conn: aiosqlite.Connection | None = await opening.__aenter__()
    except Exception:  # each call opens its own then
        log.debug("no shared connection to %s", shared[0].path, exc_info=True)
        conn = None
    if conn is None:
        yield
        return
    for d in shared:
        d._lent[task] = conn
    try:
        yield
    finally:
        for d in shared:
            d._lent.pop(task, None)
        await opening.__aexit__(None, None, None)
