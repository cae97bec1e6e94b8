"""Which memories belong to a branch that is not active (DESIGN §1.5; issue 27).

A memory written by a turn carries its origin: the session (``thread_id``) and the turn's last
message id (episodic ``metadata.origin_message_id``, semantic ``origin``). This table records,
per session, the origin message ids memories were written from, and whether each is on the
session's active branch. Whoever moves a session's active branch (a rollback, a switch, a
fork, or the next turn after a change made elsewhere) calls :meth:`BranchOrigins.sync` with
the message ids of the new active branch; recall in *every* session and ``hermes memory
list`` then leave out the memories of inactive origins. Nothing is deleted: a switch back
marks them active again. Knows nothing of the graph: thread and message ids in, sets out.

    origins = BranchOrigins.in_dir(data_dir)          # <data_dir>/memory.db
    await origins.record("t1", "msg-9")                # a turn of t1 wrote memories (background)
    inactive = await origins.sync("t1", {"msg-1", …})  # t1's active branch changed (or not)
    inactive.visible(("t1", "msg-9"))                  # False once msg-9 left t1's active branch

The episodic store keeps one record per text (K11), so a memory said again on another branch
returns the first record: :meth:`BranchOrigins.restate` notes the second origin, and a record
stays visible while any of its origins is on its session's active branch.

With ``HERMES_POSTGRES_URL`` the tables are on PostgreSQL (:meth:`BranchOrigins.on_postgres`,
``memory.postgres_db``): a branch moved on one host hides its memories on every host.

Why only recorded origins, not every message of a session: a sync then compares a handful of
rows (the session's turns that wrote memory) with the active ids, and in the common linear case
(each turn extends the branch) every recorded origin is still active, so nothing is written.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from memory.db import DB_FILENAME, SqliteDb
from memory.sql import SqlConnection

SCHEMA = """
CREATE TABLE IF NOT EXISTS memory_origins (
    thread_id  TEXT NOT NULL,
    message_id TEXT NOT NULL,
    inactive   INTEGER NOT NULL DEFAULT 0,   -- 1: not on the session's active branch
    PRIMARY KEY (thread_id, message_id)
);
CREATE INDEX IF NOT EXISTS memory_origins_inactive ON memory_origins (inactive);
-- a memory record written again by a later turn (K11 returned the stored record)
CREATE TABLE IF NOT EXISTS memory_restated (
    memory_id  TEXT NOT NULL,
    thread_id  TEXT NOT NULL,
    message_id TEXT NOT NULL,
    PRIMARY KEY (memory_id, thread_id, message_id)
);
"""

#: An origin: (thread id, message id).
Origin = tuple[str, str]


@dataclass(frozen=True)
class Inactive:
    """Every session's ``origins`` that are not on their session's active branch, and the
    ``restated`` records (memory id → the other origins it was written from). ``origin in
    inactive`` tests the first; :meth:`visible` decides for one memory."""

    origins: frozenset[Origin] = frozenset()
    restated: Mapping[str, frozenset[Origin]] = field(default_factory=dict)

    def __contains__(self, origin: object) -> bool:
        return origin in self.origins

    def __len__(self) -> int:
        return len(self.origins)

    def __iter__(self) -> Iterator[Origin]:
        return iter(self.origins)

    def visible(
        self,
        origin: tuple[object, object] | None,
        memory_id: str | None = None,
        *,
        thread_id: str | None = None,
        active_ids: set[str] | None = None,
    ) -> bool:
        """True if a memory written from ``origin`` (thread id, message id; None or a part
        missing: not branch-bound) — or from any origin it was restated from — is on its
        session's active branch. ``thread_id`` with ``active_ids``: that session's active
        message ids are known to the caller (its own turn) and decide for its origins."""
        if origin is None or not origin[0] or not origin[1]:
            return True
        for thread, message in ((str(origin[0]), str(origin[1])), *self.restated.get(memory_id or "", ())):
            if thread_id and active_ids is not None and thread == thread_id:
                if message in active_ids:
                    return True
            elif (thread, message) not in self.origins:
                return True
        return False


class _Tables(Protocol):
    """Where the tables are: a SQLite file (``memory.db.SqliteDb``) or a PostgreSQL database
    (``memory.postgres_db.PostgresDb``)."""

    def connect(self) -> AbstractAsyncContextManager[SqlConnection]: ...


class BranchOrigins:
    """The origin table in a SQLite file (``where``; normally ``<data_dir>/memory.db``), or on
    PostgreSQL (:meth:`on_postgres`). Every method raises ``sqlite3.Error`` / ``psycopg.Error``
    on an unusable store (callers on the answer's path catch it: memory never blocks an answer)."""

    def __init__(self, where: str | Path | _Tables) -> None:
        self.db: _Tables = SqliteDb(Path(where), SCHEMA) if isinstance(where, (str, Path)) else where

    @classmethod
    def in_dir(cls, data_dir: str | Path) -> BranchOrigins:
        return cls(Path(data_dir) / DB_FILENAME)

    @classmethod
    def on_postgres(cls, url: str) -> BranchOrigins:
        """The tables on the PostgreSQL at ``url`` (``HERMES_POSTGRES_URL``; the same DDL)."""
        from memory.postgres_db import PostgresDb  # psycopg only when PostgreSQL is used

        return cls(PostgresDb(url, SCHEMA))

    async def close(self) -> None:
        """Release connections (a SQLite connection lives for one call: nothing to do)."""
        close = getattr(self.db, "close", None)
        if close is not None:
            await close()

    async def record(self, thread_id: str, message_id: str) -> None:
        """Note that memories were written from message ``message_id`` of ``thread_id``
        (active: it is the turn that just ran). Idempotent."""
        async with self.db.connect() as db:
            await db.execute(
                "INSERT INTO memory_origins (thread_id, message_id) VALUES (?, ?) ON CONFLICT DO NOTHING",
                (thread_id, message_id),
            )

    async def restate(self, memory_id: str, thread_id: str, message_id: str) -> None:
        """Note that record ``memory_id`` was written again, from message ``message_id`` of
        ``thread_id`` (the store returned the stored record). Idempotent."""
        async with self.db.connect() as db:
            await db.execute(
                "INSERT INTO memory_restated (memory_id, thread_id, message_id) VALUES (?, ?, ?) ON CONFLICT DO NOTHING",
                (memory_id, thread_id, message_id),
            )

    async def sync(self, thread_id: str, active_ids: Iterable[str]) -> Inactive:
        """Mark ``thread_id``'s recorded origins active if their message is in ``active_ids``
        (the message ids of the session's active branch), inactive otherwise; write only the
        rows whose mark changes. Returns every session's inactive origins after the change."""
        active = set(active_ids)
        async with self.db.connect() as db:
            cur = await db.execute(
                "SELECT thread_id, message_id, inactive FROM memory_origins WHERE thread_id = ? OR inactive = 1",
                (thread_id,),
            )
            rows = [(str(r["thread_id"]), str(r["message_id"]), bool(r["inactive"])) for r in await cur.fetchall()]
            flips = [(int(m not in active), t, m) for t, m, i in rows if t == thread_id and (m not in active) != i]
            if flips:
                await db.executemany(
                    "UPDATE memory_origins SET inactive = ? WHERE thread_id = ? AND message_id = ?", flips
                )
            flipped = {(t, m): bool(i) for i, t, m in flips}
            origins = frozenset((t, m) for t, m, i in rows if flipped.get((t, m), i))
            return Inactive(origins, await self._restated(db) if origins else {})

    async def inactive(self) -> Inactive:
        """Every session's origins that are not on their session's active branch."""
        async with self.db.connect() as db:
            cur = await db.execute("SELECT thread_id, message_id FROM memory_origins WHERE inactive = 1")
            origins = frozenset((str(r["thread_id"]), str(r["message_id"])) for r in await cur.fetchall())
            return Inactive(origins, await self._restated(db) if origins else {})

    @staticmethod
    async def _restated(db: SqlConnection) -> dict[str, frozenset[Origin]]:
        cur = await db.execute("SELECT memory_id, thread_id, message_id FROM memory_restated")
        out: dict[str, set[Origin]] = {}
        for r in await cur.fetchall():
            out.setdefault(str(r["memory_id"]), set()).add((str(r["thread_id"]), str(r["message_id"])))
        return {k: frozenset(v) for k, v in out.items()}
