"""Embedded episodic store on SQLite (DESIGN.md §4 / seed §4.1–4.2, §6.4).

The default store: no server, one file (``memory.db``) shared with the retry queue.

Retrieval: FTS5 keyword search ranked by ``score = relevance × decay`` where
    relevance = -bm25(...)                      (FTS5's bm25 is <= 0, more negative = better)
    decay     = 0.5 ** (age_days / half_life)   (exponential; half-life 7 days by default)
and filtered by user, kind, and validity (events older than ``ttl_days`` are never returned).
An empty query matches every event: relevance 1.0, so ranking is by recency alone.
English words are Porter-stemmed ("reports" matches "report"); Chinese text is indexed one
character per token (no segmenter), so 数据 matches 数据清洗.

Vector search is not here: this Python cannot load SQLite extensions (no sqlite-vec), so the
hybrid (vector + keyword) half of seed §4.2 is left to ``WeaviateEpisodicStore`` and a later issue.

K11: ``add`` first looks up the content hash (normalised whitespace/case) among the user's live
events; a match is a no-op returning the existing id. A partial unique index on
``(user_id, content_hash) WHERE expired_at IS NULL`` backs this under concurrent writers.
Nothing is ever deleted: ``expire`` marks events retired (``expired_at``), seed §6.4's "archive".
"""

from __future__ import annotations

import json
import logging
import re
from datetime import datetime, timedelta
from pathlib import Path
from typing import Sequence

from memory.db import DB_FILENAME, SqliteDb
from memory.episodic.base import (
    DEFAULT_HALF_LIFE_DAYS,
    EpisodicEvent,
    ScoredEvent,
    content_hash,
    scored,
    utcnow,
)
from memory.policy import EPISODIC_TTL_DAYS

log = logging.getLogger(__name__)

SCHEMA = """
CREATE TABLE IF NOT EXISTS episodic_events (
    rowid        INTEGER PRIMARY KEY,
    id           TEXT NOT NULL UNIQUE,
    user_id      TEXT NOT NULL,
    kind         TEXT NOT NULL,
    text         TEXT NOT NULL,
    content_hash TEXT NOT NULL,
    created_at   TEXT NOT NULL,          -- ISO 8601, UTC, microseconds
    confidence   REAL NOT NULL,
    evidence     TEXT NOT NULL DEFAULT 'direct',
    metadata     TEXT NOT NULL DEFAULT '{}',
    expired_at   TEXT                    -- NULL while live
);
CREATE UNIQUE INDEX IF NOT EXISTS episodic_live_hash
    ON episodic_events (user_id, content_hash) WHERE expired_at IS NULL;
CREATE INDEX IF NOT EXISTS episodic_user_time ON episodic_events (user_id, created_at);
CREATE VIRTUAL TABLE IF NOT EXISTS episodic_fts
    USING fts5 (body, tokenize = 'porter unicode61 remove_diacritics 2');
"""

_CJK = re.compile(r"([\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uac00-\ud7af])")
_TOKEN = re.compile(r"\w+", re.UNICODE)
#: At most this many query terms reach FTS5.
MAX_QUERY_TERMS = 32
#: Candidates (best keyword relevance first) re-ranked by decay in one search.
MAX_CANDIDATES = 500


def _iso(dt: datetime) -> str:
    return dt.isoformat(timespec="microseconds")


def fts_body(text: str) -> str:
    """The indexed form of ``text``: CJK characters spaced out so each is its own token."""
    return _CJK.sub(r" \1 ", text)


def fts_query(query: str) -> str | None:
    """An FTS5 MATCH expression: the query's words, each quoted, joined by OR; ``None`` if the
    query has no word. Quoting makes user text (``AND``, ``*``, ``"``, ``:``) inert."""
    terms: list[str] = []
    for token in _TOKEN.findall(fts_body(query).casefold()):
        if token not in terms:
            terms.append(token)
    if not terms:
        return None
    return " OR ".join(f'"{t}"' for t in terms[:MAX_QUERY_TERMS])


def _row_to_event(row) -> EpisodicEvent:
    return EpisodicEvent(
        id=row["id"],
        user_id=row["user_id"],
        kind=row["kind"],
        text=row["text"],
        created_at=datetime.fromisoformat(row["created_at"]),
        confidence=row["confidence"],
        evidence=row["evidence"],
        metadata=json.loads(row["metadata"]),
    )


class SqliteEpisodicStore:
    """``EpisodicStore`` on SQLite + FTS5.

    Args:
        db_path: the SQLite file (created lazily, with its directory), e.g. ``data_dir/memory.db``.
        half_life_days: half-life of the time decay, days (> 0). Default 7.
        ttl_days: validity period, days; older events are not returned by ``search``. Default 30
            (seed §6.4). ``expire`` retires them for good.
    """

    def __init__(
        self,
        db_path: Path,
        *,
        half_life_days: float = DEFAULT_HALF_LIFE_DAYS,
        ttl_days: int = EPISODIC_TTL_DAYS,
    ) -> None:
        if half_life_days <= 0:
            raise ValueError("half_life_days must be > 0")
        self.db = SqliteDb(Path(db_path), SCHEMA)
        self.half_life_days = half_life_days
        self.ttl_days = ttl_days

    @classmethod
    def in_dir(cls, data_dir: Path, **kwargs) -> "SqliteEpisodicStore":
        """The store in ``data_dir/memory.db``."""
        return cls(Path(data_dir) / DB_FILENAME, **kwargs)

    async def add(self, event: EpisodicEvent) -> str:
        """Store ``event``; return its id, or the id of the live event with the same normalised
        text for the same user (K11 no-op). Raises ``sqlite3.Error`` on storage failure."""
        digest = content_hash(event.text)
        async with self.db.connect() as db:
            existing = await self._live_id(db, event.user_id, digest)
            if existing is not None:
                return existing
            await db.execute("BEGIN IMMEDIATE")
            try:
                existing = await self._live_id(db, event.user_id, digest)  # a writer got in first
                if existing is not None:
                    await db.execute("ROLLBACK")
                    return existing
                cur = await db.execute(
                    "INSERT INTO episodic_events (id, user_id, kind, text, content_hash, created_at,"
                    " confidence, evidence, metadata) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    (
                        event.id,
                        event.user_id,
                        event.kind,
                        event.text,
                        digest,
                        _iso(event.created_at),
                        event.confidence,
                        event.evidence,
                        json.dumps(event.metadata, ensure_ascii=False, default=str),
                    ),
                )
                await db.execute(
                    "INSERT INTO episodic_fts (rowid, body) VALUES (?, ?)", (cur.lastrowid, fts_body(event.text))
                )
                await db.execute("COMMIT")
            except BaseException:
                await db.execute("ROLLBACK")
                raise
        return event.id

    @staticmethod
    async def _live_id(db, user_id: str, digest: str) -> str | None:
        cur = await db.execute(
            "SELECT id FROM episodic_events WHERE user_id = ? AND content_hash = ? AND expired_at IS NULL",
            (user_id, digest),
        )
        row = await cur.fetchone()
        return None if row is None else row["id"]

    async def search(
        self,
        user_id: str,
        query: str,
        k: int = 3,
        kinds: Sequence[str] | None = None,
        now: datetime | None = None,
    ) -> list[ScoredEvent]:
        """Up to ``k`` live, unexpired events of ``user_id``, best ``relevance × decay`` first.

        ``kinds``: keep only these kinds (``None`` = all; ``[]`` = none). ``now``: reference time
        for decay and validity (aware; default now). Rows that cannot be read back (corrupt
        JSON, bad timestamp, unknown kind) are logged and skipped. Raises ``sqlite3.Error`` if
        the database itself cannot be read.
        """
        if k <= 0 or (kinds is not None and not kinds):
            return []
        now = now or utcnow()
        cutoff = _iso(now - timedelta(days=self.ttl_days))
        where = "e.user_id = ? AND e.expired_at IS NULL AND e.created_at >= ?"
        params: list[object] = [user_id, cutoff]
        if kinds:
            where += f" AND e.kind IN ({', '.join('?' for _ in kinds)})"
            params.extend(kinds)
        match = fts_query(query)
        if match is None:
            sql = f"SELECT e.*, 1.0 AS relevance FROM episodic_events e WHERE {where} ORDER BY e.created_at DESC"
        else:
            sql = (
                "SELECT e.*, -bm25(episodic_fts) AS relevance FROM episodic_fts"
                " JOIN episodic_events e ON e.rowid = episodic_fts.rowid"
                f" WHERE episodic_fts MATCH ? AND {where} ORDER BY relevance DESC"
            )
            params.insert(0, match)
        # Decay is applied below, so the best MAX_CANDIDATES by relevance (or recency) are re-ranked.
        sql += " LIMIT ?"
        params.append(max(MAX_CANDIDATES, k))
        async with self.db.connect() as db:
            cur = await db.execute(sql, params)
            rows = await cur.fetchall()
        hits: list[ScoredEvent] = []
        for row in rows:
            try:
                event = _row_to_event(row)
            except Exception as exc:  # noqa: BLE001 - one bad row must not break recall
                log.warning("skipping unreadable episodic row %r: %s", row["id"], exc)
                continue
            hits.append(scored(event, float(row["relevance"]), now, self.half_life_days))
        hits.sort(key=lambda h: h.score, reverse=True)
        return hits[:k]

    async def expire(self, older_than_days: int = EPISODIC_TTL_DAYS, now: datetime | None = None) -> int:
        """Retire (mark ``expired_at``, never delete) live events created more than
        ``older_than_days`` days before ``now``. Returns how many were retired."""
        now = now or utcnow()
        cutoff = _iso(now - timedelta(days=older_than_days))
        async with self.db.connect() as db:
            cur = await db.execute(
                "UPDATE episodic_events SET expired_at = ? WHERE expired_at IS NULL AND created_at < ?",
                (_iso(now), cutoff),
            )
            return cur.rowcount

    async def count(self, user_id: str, *, include_expired: bool = False) -> int:
        """Number of stored events of ``user_id`` (live only unless ``include_expired``)."""
        sql = "SELECT COUNT(*) FROM episodic_events WHERE user_id = ?"
        if not include_expired:
            sql += " AND expired_at IS NULL"
        async with self.db.connect() as db:
            cur = await db.execute(sql, (user_id,))
            (n,) = await cur.fetchone()
        return int(n)
