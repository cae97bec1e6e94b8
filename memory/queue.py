"""Persistent retry queue for memory writes (DESIGN.md §4 / seed §5.2).

Seed §5.2: "when a memory write fails it does not block the main flow; it degrades to an
offline retry queue." A failed write is stored with its payload, the last error and the number
of failed attempts in the ``memory_retry_queue`` table of ``memory.db``. ``drain`` replays
pending writes; after ``max_attempts`` failures an entry becomes ``dead`` and stays readable
through ``failures()`` (nothing is dropped silently).

Replays may run twice (two drains at once, or a crash between the write and the dequeue):
handlers must be idempotent. The episodic store's K11 dedupe makes ``add`` so.

A write can also be stored *before* it is tried (:meth:`RetryQueue.hold`, status ``held``, the
holding process named in ``error`` as ``held by <pid>:<start time>``): from that moment it is
durable, and the slow part (the passage embedding) may finish after the answer. The holder
deletes it when done (:meth:`RetryQueue.release`); ``drain`` replays only the ``held`` entries
whose process no longer runs (a crash, a kill, the machine restarted), so a write of a live
process is never replayed under it.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from memory.db import DB_FILENAME, SqliteDb
from memory.episodic.base import utcnow

log = logging.getLogger(__name__)

#: Failed attempts (the original write included) after which an entry is ``dead``.
MAX_ATTEMPTS = 5

SCHEMA = """
CREATE TABLE IF NOT EXISTS memory_retry_queue (
    id         INTEGER PRIMARY KEY AUTOINCREMENT,
    op         TEXT NOT NULL,              -- e.g. "episodic.add"
    payload    TEXT NOT NULL,              -- JSON
    error      TEXT NOT NULL,              -- last error, "Type: message"
    attempts   INTEGER NOT NULL DEFAULT 1, -- failed attempts so far
    status     TEXT NOT NULL DEFAULT 'pending',  -- 'pending' | 'dead' | 'held'
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS memory_retry_status ON memory_retry_queue (status, id);
"""

#: ``handler(op, payload)``: performs one queued write; raising means it failed again.
Handler = Callable[[str, dict[str, Any]], Awaitable[Any]]


@dataclass(frozen=True)
class QueuedWrite:
    """One queue entry. ``payload`` is ``None`` when its stored JSON cannot be parsed."""

    id: int
    op: str
    payload: dict[str, Any] | None
    error: str
    attempts: int
    status: str
    created_at: str
    updated_at: str


#: ``error`` of a held entry: ``held by <pid>:<process start time>``.
HELD_BY = "held by "


def this_process() -> str:
    """``<pid>:<start time>`` of this process (a reused pid has another start time)."""
    import psutil

    pid = os.getpid()
    return f"{pid}:{psutil.Process(pid).create_time():.2f}"


def process_runs(owner: str) -> bool:
    """Whether the process ``owner`` (:func:`this_process`) still runs."""
    import psutil

    pid, _, started = owner.partition(":")
    try:
        return f"{psutil.Process(int(pid)).create_time():.2f}" == started
    except (ValueError, psutil.NoSuchProcess):
        return False
    except psutil.Error:
        return True  # cannot tell: leave it to its owner


def describe_error(exc: BaseException) -> str:
    """``"TypeName: message"``, the form stored in ``error``."""
    return f"{type(exc).__name__}: {exc}"


class RetryQueue:
    """The persistent queue. ``db_path``: the SQLite file (``data_dir/memory.db``)."""

    def __init__(self, db_path: Path, *, max_attempts: int = MAX_ATTEMPTS) -> None:
        if max_attempts < 1:
            raise ValueError("max_attempts must be >= 1")
        self.db = SqliteDb(Path(db_path), SCHEMA)
        self.max_attempts = max_attempts

    @classmethod
    def in_dir(cls, data_dir: Path, *, max_attempts: int = MAX_ATTEMPTS) -> RetryQueue:
        """The queue in ``data_dir/memory.db``."""
        return cls(Path(data_dir) / DB_FILENAME, max_attempts=max_attempts)

    async def enqueue(self, op: str, payload: dict[str, Any], error: BaseException | str) -> int:
        """Store a failed write (one failed attempt so far); return its entry id.
        Raises ``sqlite3.Error`` if the queue itself cannot be written."""
        now = utcnow().isoformat()
        message = error if isinstance(error, str) else describe_error(error)
        async with self.db.connect() as db:
            cur = await db.execute(
                "INSERT INTO memory_retry_queue (op, payload, error, created_at, updated_at) VALUES (?, ?, ?, ?, ?)",
                (op, json.dumps(payload, ensure_ascii=False, default=str), message, now, now),
            )
            assert cur.lastrowid is not None  # set by the INSERT
            return int(cur.lastrowid)

    async def hold(self, op: str, payload: dict[str, Any]) -> int:
        """Store a write before it is tried (status ``held`` by this process); return its id.
        Raises ``sqlite3.Error`` if the queue cannot be written."""
        now = utcnow().isoformat()
        async with self.db.connect() as db:
            cur = await db.execute(
                "INSERT INTO memory_retry_queue (op, payload, error, attempts, status, created_at, updated_at) "
                "VALUES (?, ?, ?, 0, 'held', ?, ?)",
                (op, json.dumps(payload, ensure_ascii=False, default=str), HELD_BY + this_process(), now, now),
            )
            assert cur.lastrowid is not None  # set by the INSERT
            return int(cur.lastrowid)

    async def release(self, entry_id: int) -> None:
        """Delete a held entry: its write is done."""
        async with self.db.connect() as db:
            await db.execute("DELETE FROM memory_retry_queue WHERE id = ?", (entry_id,))

    async def abandoned(self) -> list[QueuedWrite]:
        """Held entries whose process no longer runs, oldest first."""
        return [e for e in await self._list("held") if not process_runs(e.error.removeprefix(HELD_BY))]

    async def drain(self, handler: Handler, *, limit: int | None = None) -> int:
        """Replay pending entries, oldest first, and the held ones of processes that no longer
        run (:meth:`hold`), through ``handler``; return how many succeeded.

        A success removes the entry. A failure (the handler raising, or an unparseable payload)
        increments ``attempts`` and records the error; at ``max_attempts`` the entry turns
        ``dead``. The handler's exceptions are never propagated.
        """
        succeeded = 0
        entries = [*await self.abandoned(), *await self._list("pending")]  # a held write of a dead process first
        for entry in entries[:limit] if limit is not None else entries:
            try:
                if entry.payload is None:
                    raise ValueError("payload is not valid JSON")
                await handler(entry.op, entry.payload)
            except Exception as exc:  # noqa: BLE001 - every failure is recorded, none is raised
                await self._record_failure(entry, exc)
                continue
            async with self.db.connect() as db:
                await db.execute("DELETE FROM memory_retry_queue WHERE id = ?", (entry.id,))
            succeeded += 1
        return succeeded

    async def _record_failure(self, entry: QueuedWrite, exc: BaseException) -> None:
        attempts = entry.attempts + 1
        status = "dead" if attempts >= self.max_attempts else "pending"
        if status == "dead":
            log.warning("memory write %s gave up after %d attempts: %s", entry.op, attempts, exc)
        async with self.db.connect() as db:
            await db.execute(
                "UPDATE memory_retry_queue SET attempts = ?, status = ?, error = ?, updated_at = ? WHERE id = ?",
                (attempts, status, describe_error(exc), utcnow().isoformat(), entry.id),
            )

    async def pending(self) -> list[QueuedWrite]:
        """Entries still to be retried, oldest first."""
        return await self._list("pending")

    async def failures(self) -> list[QueuedWrite]:
        """Entries given up on (``dead``), oldest first, with their last error."""
        return await self._list("dead")

    async def _list(self, status: str, limit: int | None = None) -> list[QueuedWrite]:
        sql = "SELECT * FROM memory_retry_queue WHERE status = ? ORDER BY id"
        params: list[object] = [status]
        if limit is not None:
            sql += " LIMIT ?"
            params.append(limit)
        async with self.db.connect() as db:
            cur = await db.execute(sql, params)
            rows = await cur.fetchall()
        out = []
        for row in rows:
            try:
                payload = json.loads(row["payload"])
                if not isinstance(payload, dict):
                    payload = None
            except (TypeError, ValueError):
                payload = None
            out.append(
                QueuedWrite(
                    id=row["id"],
                    op=row["op"],
                    payload=payload,
                    error=row["error"],
                    attempts=row["attempts"],
                    status=row["status"],
                    created_at=row["created_at"],
                    updated_at=row["updated_at"],
                )
            )
        return out
