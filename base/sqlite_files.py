"""Opening a SQLite file that several processes share — one data directory, many ``hermes``
processes and a server (DESIGN §7.1: the one opener every store uses).

A connection gets a busy timeout (:data:`BUSY_TIMEOUT_S`, ``sqlite3.connect(timeout=)``: a
writer waits for another's lock instead of failing) and, for a file, the WAL journal (readers never wait for the writer).
Switching a new file to WAL and creating its schema fail *at once* with "database is locked"
while another process does the same (SQLite's busy handler does not cover those), so that step
is retried with tenacity — a pause of :data:`RETRY_PAUSE_S` between attempts, for up to the busy
timeout — and then the last error is raised.

:func:`open_sqlite` (``sqlite3``, blocking) and :func:`open_aiosqlite` (``aiosqlite``: the
connection runs in its own thread) do the same. Callers: the tool ledger and the schema store
(``tools/sqlite_thread.py``), reminders (``tools/builtin/reminder_store.py``; read-only, the
registered tools in ``tools/builtin/reminders.py``), deferred-call bindings
(``tools/deferred_calls.py``), memory (``memory/db.py``, ``memory/migrations.py``), checkpoints
(``graph/checkpoints.py``; read-only, the damaged-file checks in ``graph/cli/common.py``), the
runner's deliveries (``graph/runner.py``), the team-chat server's messages
(``tools/mcp/servers/team_chat.py``) and the demo databases (``tools/builtin/demo_db.py``, built
in a temporary file without WAL). ``read_only=True`` opens an existing file with SQLite's
``mode=ro`` URI: nothing is created, switched or written.

The one file opened elsewhere is the user's own database (``tools/builtin/database/connection.py``):
it is not a Hermes file shared between Hermes processes but the user's data, opened read-only
behind an authorizer, ``PRAGMA query_only``, a statement deadline and — for a WAL file whose
``-shm`` cannot be created — ``immutable=1``; it must never be switched to WAL, given a schema or
retried the way a shared file is (DESIGN §7.1).
"""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import quote

import aiosqlite
import tenacity

#: Seconds a connection waits for another process's lock before "database is locked"; also how
#: long opening a file (WAL switch, schema) is retried while it is locked.
BUSY_TIMEOUT_S = 30.0
#: Seconds between two attempts at opening a locked file.
RETRY_PAUSE_S = 0.05
#: ``path`` for a private in-memory database (no WAL, no directory).
MEMORY = ":memory:"


def is_locked(exc: BaseException) -> bool:
    """True for SQLite's "database is locked" / "database table is locked" / "busy" errors,
    which another process's transaction causes and a later attempt can pass."""
    text = str(exc).lower()
    return isinstance(exc, sqlite3.OperationalError) and ("locked" in text or "busy" in text)


def _attempts(busy_timeout_s: float) -> dict[str, Any]:
    """tenacity's arguments for the opening step (module docstring)."""
    return {
        "retry": tenacity.retry_if_exception(is_locked),
        "stop": tenacity.stop_after_delay(busy_timeout_s),
        "wait": tenacity.wait_fixed(RETRY_PAUSE_S),
        "reraise": True,
    }


def _pragmas(wal: bool, synchronous: str | None) -> list[str]:
    out = ["PRAGMA journal_mode=WAL"] if wal else []
    if synchronous:
        out.append(f"PRAGMA synchronous={synchronous}")
    return out


def _file(path: str | Path) -> Path | None:
    """The file ``path`` names, its directory created; None for :data:`MEMORY`. Raises
    ``sqlite3.OperationalError`` naming ``path`` when no file can be there (a parent that is a
    file, no permission, a NUL in the path), as for any other file SQLite cannot open."""
    if str(path) == MEMORY:
        return None
    file = Path(path)
    try:
        if "\x00" in str(path):
            raise ValueError("the path holds a NUL character")
        file.parent.mkdir(parents=True, exist_ok=True)
    except (OSError, ValueError) as exc:
        raise sqlite3.OperationalError(f"unable to open database file {str(path)!r}: {exc}") from exc
    return file


def _target(path: str | Path, read_only: bool, schema: str, has_setup: bool) -> tuple[str | Path, Path | None]:
    """What ``sqlite3.connect`` opens and the file it is (None for :data:`MEMORY`). Read-only:
    the ``file:...?mode=ro`` URI of an existing file (its directory not created); ValueError
    for :data:`MEMORY`, a ``schema`` or a ``setup``, which would write."""
    if not read_only:
        file = _file(path)
        return (file if file is not None else MEMORY), file
    if str(path) == MEMORY or schema or has_setup:
        raise ValueError("a read-only connection takes a file and no schema or setup")
    return f"file:{quote(str(path))}?mode=ro", None  # no WAL switch on a read-only file


def open_sqlite(
    path: str | Path,
    *,
    schema: str = "",
    setup: Callable[[sqlite3.Connection], None] | None = None,
    autocommit: bool = True,
    wal: bool = True,
    synchronous: str | None = None,
    busy_timeout_s: float = BUSY_TIMEOUT_S,
    check_same_thread: bool = True,
    read_only: bool = False,
) -> sqlite3.Connection:
    """A ``sqlite3`` connection to ``path`` (its directory created; :data:`MEMORY` for a private
    in-memory database, never WAL) with the busy timeout, the WAL journal (``wal``), the
    ``synchronous`` mode, then
    ``schema`` (an SQL script of idempotent ``CREATE ... IF NOT EXISTS``) and ``setup(con)`` (e.g.
    added columns) — that step retried while the file is locked (module docstring).

    ``autocommit``: ``isolation_level=None`` (callers open transactions with ``BEGIN
    IMMEDIATE``); False keeps ``sqlite3``'s implicit (deferred) transactions. ``synchronous``: a
    ``PRAGMA synchronous`` value ("NORMAL") or None for SQLite's default.
    ``read_only``: an existing file opened with the ``mode=ro`` URI — no directory created, no
    WAL switch; ValueError with :data:`MEMORY`, a ``schema`` or a ``setup``.
    Raises ``sqlite3.Error`` (the connection closed) when the file cannot be opened (read-only:
    also when it does not exist) or stays locked past ``busy_timeout_s`` seconds."""
    target, file = _target(path, read_only, schema, setup is not None)
    con = sqlite3.connect(
        target,
        timeout=busy_timeout_s,
        isolation_level=None if autocommit else "DEFERRED",
        check_same_thread=check_same_thread,
        uri=read_only,
    )

    try:
        for attempt in tenacity.Retrying(**_attempts(busy_timeout_s)):
            with attempt:
                for pragma in _pragmas(wal and file is not None, synchronous):
                    con.execute(pragma)
                if schema:
                    con.executescript(schema)
                if setup is not None:
                    setup(con)
    except BaseException:
        con.close()
        raise
    return con


async def open_aiosqlite(
    path: str | Path,
    *,
    schema: str = "",
    autocommit: bool = True,
    wal: bool = True,
    synchronous: str | None = None,
    busy_timeout_s: float = BUSY_TIMEOUT_S,
    read_only: bool = False,
) -> aiosqlite.Connection:
    """:func:`open_sqlite` for ``aiosqlite`` (no ``setup``): a started connection — the caller
    closes it with ``await conn.close()``. Same arguments and errors; the directory is created
    in a worker thread (nothing blocks the event loop)."""
    target, file = await asyncio.to_thread(_target, path, read_only, schema, False)
    conn = await aiosqlite.connect(
        str(target),
        timeout=busy_timeout_s,
        isolation_level=None if autocommit else "DEFERRED",
        uri=read_only,
    )
    try:
        async for attempt in tenacity.AsyncRetrying(**_attempts(busy_timeout_s)):
            with attempt:
                for pragma in _pragmas(wal and file is not None, synchronous):
                    await conn.execute(pragma)
                if schema:
                    await conn.executescript(schema)
    except BaseException:
        await conn.close()
        raise
    return conn
