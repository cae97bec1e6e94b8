"""The SQLite fact store under semantic memory: the tables (:data:`SCHEMA`, in
``<data_dir>/memory.db`` beside the retry queue), a row read back as a :class:`Fact`, and
:class:`SqliteFactStore`, the connection and the plain reads every part of
``memory.semantic.SemanticMemory`` builds on.

    entities(user_id, key, name, type)                  key = casefolded name
    facts(id, user_id, subject, predicate, object, object_is_entity,
          confidence, evidence, sources, status, valid_from, valid_to,
          created_at, updated_at, last_used_at, use_count, conflict_with, superseded_by, origin)
    forgotten(user_id, subject, predicate, object, sources, forgotten_at)   tombstones
"""

from __future__ import annotations

import json
import logging
import sqlite3
from collections.abc import Sequence
from contextlib import AbstractAsyncContextManager
from datetime import datetime
from pathlib import Path
from typing import Any, Self

import aiosqlite

from memory.db import DB_FILENAME, SqliteDb
from memory.policy import SEMANTIC_TTL_DAYS
from memory.semantic_model import LIVE, Fact
from memory.sql import SqlConnection

SCHEMA = """
CREATE TABLE IF NOT EXISTS semantic_entities (
    user_id TEXT NOT NULL,
    key     TEXT NOT NULL,
    name    TEXT NOT NULL,
    type    TEXT NOT NULL DEFAULT 'thing',
    created_at TEXT NOT NULL,
    PRIMARY KEY (user_id, key)
);
CREATE TABLE IF NOT EXISTS semantic_facts (
    id               TEXT PRIMARY KEY,
    user_id          TEXT NOT NULL,
    subject          TEXT NOT NULL,      -- entity key
    predicate        TEXT NOT NULL,
    object           TEXT NOT NULL,      -- entity key when object_is_entity, else the literal
    object_name      TEXT NOT NULL,      -- as written
    object_is_entity INTEGER NOT NULL,
    confidence       REAL NOT NULL,
    evidence         TEXT NOT NULL,      -- 'direct' | 'inferred'
    sources          TEXT NOT NULL DEFAULT '[]',
    status           TEXT NOT NULL,
    valid_from       TEXT NOT NULL,
    valid_to         TEXT,
    created_at       TEXT NOT NULL,
    updated_at       TEXT NOT NULL,
    last_used_at     TEXT,
    use_count        INTEGER NOT NULL DEFAULT 0,
    conflict_with    TEXT,
    superseded_by    TEXT,
    origin           TEXT                -- thread id, NUL, message id of the turn that stated it; NULL: not branch-bound
);
-- what the user asked to forget: the fact's key and the episodes it was read from (issue 26)
CREATE TABLE IF NOT EXISTS semantic_forgotten (
    user_id      TEXT NOT NULL,
    subject      TEXT NOT NULL,
    predicate    TEXT NOT NULL,
    object       TEXT NOT NULL,
    sources      TEXT NOT NULL DEFAULT '[]',
    forgotten_at TEXT NOT NULL,
    PRIMARY KEY (user_id, subject, predicate, object)
);
CREATE INDEX IF NOT EXISTS semantic_out ON semantic_facts (user_id, subject, predicate, status);
CREATE INDEX IF NOT EXISTS semantic_in ON semantic_facts (user_id, object, predicate, status);
"""

log = logging.getLogger(__name__)


def iso(dt: datetime) -> str:
    """``dt`` as stored: ISO 8601 with microseconds (sorts as text)."""
    return dt.isoformat(timespec="microseconds")


def row_to_fact(row: sqlite3.Row) -> Fact:
    def dt(v: str | None) -> datetime | None:
        return datetime.fromisoformat(v) if v else None

    keys = row.keys()
    return Fact(
        id=row["id"],
        user_id=row["user_id"],
        subject=row["subject"],
        predicate=row["predicate"],
        object=row["object_name"],
        object_is_entity=bool(row["object_is_entity"]),
        confidence=row["confidence"],
        evidence=row["evidence"],
        sources=json.loads(row["sources"] or "[]"),
        status=row["status"],
        valid_from=datetime.fromisoformat(row["valid_from"]),  # NOT NULL columns
        valid_to=dt(row["valid_to"]),
        created_at=datetime.fromisoformat(row["created_at"]),
        updated_at=datetime.fromisoformat(row["updated_at"]),
        last_used_at=dt(row["last_used_at"]),
        use_count=row["use_count"],
        conflict_with=row["conflict_with"],
        superseded_by=row["superseded_by"],
        subject_name=row["subject_name"] if "subject_name" in keys and row["subject_name"] else row["subject"],
        origin=row["origin"] if "origin" in keys else None,
    )


#: Facts with their subject's name as written (``subject_name``).
SELECT = (
    "SELECT f.*, e.name AS subject_name FROM semantic_facts f LEFT JOIN semantic_entities e"
    " ON e.user_id = f.user_id AND e.key = f.subject"
)


class SqliteFactStore:
    """The fact store's connection and plain reads. ``db_path``: the SQLite file.

    ``ttl_days``: a fact not confirmed again (nor used) for this long is archived by
    ``expire`` (seed §6.4: 180 days). ``min_confidence``: facts below it are not stored and,
    after down-weighting, archived.
    """

    def __init__(self, db_path: Path, *, ttl_days: int = SEMANTIC_TTL_DAYS, min_confidence: float = 0.6) -> None:
        self.db = SqliteDb(Path(db_path), SCHEMA)
        self._migrated = False
        self.ttl_days = ttl_days
        self.min_confidence = min_confidence

    def _connect(self) -> AbstractAsyncContextManager[SqlConnection]:
        """A connection; the first one adds columns that files written before them lack."""
        return _Migrating(self)

    @classmethod
    def in_dir(cls, data_dir: Path, **kwargs: Any) -> Self:
        return cls(Path(data_dir) / DB_FILENAME, **kwargs)

    @property
    def memory_db_path(self) -> Path | None:
        """The local ``memory.db`` this store writes (None: the store is a server's)."""
        return self.db.path

    async def _begin(self, db: SqlConnection) -> None:
        """Start a write transaction that holds the write lock from its first statement: a
        check and the write it decides are one step for every writer."""
        await db.execute("BEGIN IMMEDIATE")

    async def close(self) -> None:
        """Release connections (a SQLite connection lives for one call: nothing to do)."""

    async def _get(self, db: SqlConnection, fact_id: str) -> Fact | None:
        cur = await db.execute(SELECT + " WHERE f.id = ?", (fact_id,))
        row = await cur.fetchone()
        return row_to_fact(row) if row else None

    async def get(self, user_id: str, fact_id: str) -> Fact | None:
        async with self._connect() as db:
            fact = await self._get(db, fact_id)
        return fact if fact and fact.user_id == user_id else None

    async def _names(self, db: SqlConnection, user_id: str, keys: list[str]) -> dict[str, str]:
        if not keys:
            return {}
        out: dict[str, str] = {}
        for i in range(0, len(keys), 500):
            chunk = keys[i : i + 500]
            cur = await db.execute(
                f"SELECT key, name FROM semantic_entities WHERE user_id = ? AND key IN"
                f" ({', '.join('?' for _ in chunk)})",
                (user_id, *chunk),
            )
            out.update({r["key"]: r["name"] for r in await cur.fetchall()})
        return out

    async def users(self) -> list[str]:
        """Ids of the users with at least one fact (any status), sorted."""
        async with self._connect() as db:
            cur = await db.execute("SELECT DISTINCT user_id FROM semantic_facts ORDER BY user_id")
            return [str(r["user_id"]) for r in await cur.fetchall()]

    async def count(self, user_id: str | None = None, *, statuses: Sequence[str] = LIVE) -> int:
        sql = f"SELECT COUNT(*) AS n FROM semantic_facts WHERE status IN ({', '.join('?' for _ in statuses)})"
        params: list[Any] = list(statuses)
        if user_id is not None:
            sql += " AND user_id = ?"
            params.append(user_id)
        async with self._connect() as db:
            cur = await db.execute(sql, params)
            row = await cur.fetchone()
        assert row is not None  # COUNT(*) always returns a row
        return int(row["n"])


class _Migrating:
    """``async with``: a connection of the store's database, after adding once the columns a
    file written by an earlier version lacks (``origin``)."""

    def __init__(self, store: SqliteFactStore) -> None:
        self.store = store
        self.cm = store.db.connect()

    async def __aenter__(self) -> aiosqlite.Connection:
        db = await self.cm.__aenter__()
        if not self.store._migrated:
            cur = await db.execute("PRAGMA table_info(semantic_facts)")
            columns = {row[1] for row in await cur.fetchall()}
            if "origin" not in columns:
                try:
                    await db.execute("ALTER TABLE semantic_facts ADD COLUMN origin TEXT")
                except Exception:  # noqa: BLE001 - another process added it first
                    log.debug("origin column added concurrently")
            self.store._migrated = True
        return db

    async def __aexit__(self, *exc: Any) -> bool | None:
        return await self.cm.__aexit__(*exc)
