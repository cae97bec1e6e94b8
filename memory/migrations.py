"""The memory store's format version and the migrations run when it is opened (issue 26,
"memories lost on upgrade").

``<data_dir>/memory.db`` records its format in SQLite's ``PRAGMA user_version``. Files written
before formats were numbered have version 0 and are told apart by their tables:

======  ===================  ===============================================================
format  written by           what it holds
======  ===================  ===============================================================
1       2026-11-29 (47bd00d) episodic events in ``memory.db`` itself: ``episodic_events``
                             (+ its FTS5 index ``episodic_fts``), the retry queue
2       2026-12-01 (bd2e44d) episodic events in the episodic store (``episodic.lance/``),
                             the knowledge graph (``semantic_facts`` without ``origin``)
3       2026-12-01 (495b3f0) ``semantic_facts.origin``, ``semantic_forgotten``, branch origins
4       this release         the same as 3, stamped ``user_version = 4``
======  ===================  ===============================================================

:func:`migrate` brings any older file to :data:`MEMORY_FORMAT`: the events of a format-1 file
are copied into the current episodic store (their ids, kinds, dates, confidence and metadata
kept; ``metadata["migrated_from"]`` says from where) and the old table is renamed
``episodic_events_format1`` (kept, not deleted); events that had already expired are not
carried over (they were no longer recalled) and the report says how many. Each migration is
recorded in the ``memory_migrations`` table. Migrating twice, or from two processes at once,
stores each event once (the episodic store's K11 dedupe; the rename under ``BEGIN IMMEDIATE``).

A file that is not a readable SQLite database, or whose format is newer than this release
reads, raises :class:`MemoryStoreError`: one line naming the file and what to do.
"""

from __future__ import annotations

import asyncio
import json
import logging
import sqlite3
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol

from base.sqlite_files import open_sqlite
from memory.episodic.base import EVENT_KINDS, EpisodicEvent

log = logging.getLogger(__name__)

#: The format this release writes and reads (``PRAGMA user_version`` of ``memory.db``).
MEMORY_FORMAT = 4
#: Where a format-1 file's episodic events are kept after they were copied.
FORMAT1_BACKUP = "episodic_events_format1"
#: Events copied per episodic write (one embedding batch).
BATCH = 256

_SQLITE_HEADER = b"SQLite format 3\x00"


class MemoryStoreError(RuntimeError):
    """``memory.db`` cannot be opened by this release: damaged, not SQLite, or written by a
    newer release. The message is one line naming the file and what to do."""

    def __init__(self, path: Path, message: str) -> None:
        self.path = path
        super().__init__(message)


class _Adds(Protocol):
    async def add_many(self, events: list[EpisodicEvent]) -> list[str]: ...


@dataclass
class MigrationReport:
    """What :func:`migrate` did. ``from_format``/``to_format``: versions (equal: nothing to do);
    ``carried``: episodic events copied into the episodic store; ``not_carried``: what was left
    behind and why, in words."""

    path: Path
    from_format: int
    to_format: int
    carried: int = 0
    not_carried: list[str] = field(default_factory=list)

    @property
    def migrated(self) -> bool:
        return self.from_format != self.to_format

    def summary(self) -> str:
        """One line for the log and ``memory_migrations``."""
        text = f"memory {self.path}: format {self.from_format} → {self.to_format}"
        if self.carried:
            text += f"; {self.carried} episodic event(s) carried over into the episodic store"
        if self.not_carried:
            text += "; not carried over: " + "; ".join(self.not_carried)
        return text


def _aside(path: Path) -> str:
    return f"{path}.damaged-{time.strftime('%Y%m%d-%H%M%S')}"


def damaged(path: Path, exc: BaseException | str) -> MemoryStoreError:
    detail = " ".join(str(exc).split())[:200]
    return MemoryStoreError(
        path,
        f"the memory database {path} cannot be read ({detail}). If it is damaged, move it aside "
        f"(mv {path} {_aside(path)}): Hermes then starts a new, empty memory there; the threads "
        "and the episodic folder are not in that file and are kept",
    )


def too_new(path: Path, version: int) -> MemoryStoreError:
    return MemoryStoreError(
        path,
        f"the memory database {path} is in format {version}, written by a newer Hermes (this one reads "
        f"formats up to {MEMORY_FORMAT}): upgrade Hermes, or move the file aside (mv {path} {path}.format{version}) "
        "to start an empty memory with this version",
    )


def _connect(path: Path) -> sqlite3.Connection:
    con = open_sqlite(path, wal=False)  # the journal mode stays what the file has
    con.row_factory = sqlite3.Row
    return con


def _tables(con: sqlite3.Connection) -> set[str]:
    return {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}


def _columns(con: sqlite3.Connection, table: str) -> set[str]:
    return {r[1] for r in con.execute(f"PRAGMA table_info({table})")}


def detect_format(con: sqlite3.Connection) -> int:
    """The format of an open ``memory.db``: its ``user_version``, or for an unnumbered file
    (0) the format its tables show (0 for an empty file)."""
    version = int(con.execute("PRAGMA user_version").fetchone()[0])
    if version:
        return version
    tables = _tables(con)
    if "episodic_events" in tables:
        return 1
    if "semantic_facts" in tables:
        return 3 if "origin" in _columns(con, "semantic_facts") else 2
    return 3 if tables else 0


def check(path: Path) -> int:
    """The format of ``path`` (0: no file yet), after checking it can be read by this release.
    Raises :class:`MemoryStoreError` (damaged, not SQLite, newer format). Blocking: run it in a
    thread."""
    if not path.exists():
        return 0
    try:
        if path.is_dir():
            raise IsADirectoryError(f"{path} is a directory")
        with path.open("rb") as f:
            head = f.read(len(_SQLITE_HEADER))
        if head and head != _SQLITE_HEADER:
            raise sqlite3.DatabaseError("file is not a database")
        con = _connect(path)
        try:
            version = detect_format(con)
        finally:
            con.close()
    except (OSError, sqlite3.Error) as exc:
        raise damaged(path, f"{type(exc).__name__}: {exc}") from exc
    if version > MEMORY_FORMAT:
        raise too_new(path, version)
    return version


def _format1_events(path: Path) -> tuple[list[EpisodicEvent], list[str]]:
    """The live events of a format-1 ``episodic_events`` table, and what cannot be carried."""
    con = _connect(path)
    try:
        if "episodic_events" not in _tables(con):
            return [], []
        rows = con.execute("SELECT * FROM episodic_events ORDER BY created_at").fetchall()
    finally:
        con.close()
    events: list[EpisodicEvent] = []
    expired = unreadable = 0
    for row in rows:
        if row["expired_at"]:
            expired += 1
            continue
        try:
            meta: dict[str, Any] = json.loads(row["metadata"] or "{}")
            if row["kind"] not in EVENT_KINDS:
                raise ValueError(f"unknown kind {row['kind']!r}")
            events.append(
                EpisodicEvent(
                    id=row["id"],
                    user_id=row["user_id"],
                    kind=row["kind"],
                    text=row["text"],
                    created_at=datetime.fromisoformat(row["created_at"]),
                    confidence=row["confidence"],
                    evidence=row["evidence"] or "direct",
                    metadata={**meta, "migrated_from": f"{path.name} episodic_events (format 1)"},
                )
            )
        except (ValueError, TypeError) as exc:
            unreadable += 1
            log.warning("memory migration: event %s of %s not carried over: %s", row["id"], path, exc)
    skipped = []
    if expired:
        skipped.append(f"{expired} expired event(s) (no longer recalled; kept in table {FORMAT1_BACKUP})")
    if unreadable:
        skipped.append(f"{unreadable} unreadable event(s) (kept in table {FORMAT1_BACKUP})")
    return events, skipped


_MIGRATIONS_TABLE = """
CREATE TABLE IF NOT EXISTS memory_migrations (
    at          TEXT NOT NULL,
    from_format INTEGER NOT NULL,
    to_format   INTEGER NOT NULL,
    summary     TEXT NOT NULL
)
"""


def _finish(path: Path, report: MigrationReport) -> bool:
    """Under ``BEGIN IMMEDIATE``: the schema changes of formats 1–3 → 4, the stamp and the
    record. False when another process finished first (nothing done here)."""
    con = _connect(path)
    try:
        con.execute("BEGIN IMMEDIATE")
        try:
            if detect_format(con) >= MEMORY_FORMAT:
                con.execute("ROLLBACK")
                return False
            tables = _tables(con)
            if "episodic_events" in tables:
                con.execute(f"ALTER TABLE episodic_events RENAME TO {FORMAT1_BACKUP}")
            if "semantic_facts" in tables and "origin" not in _columns(con, "semantic_facts"):
                con.execute("ALTER TABLE semantic_facts ADD COLUMN origin TEXT")
            con.execute(_MIGRATIONS_TABLE)
            if report.from_format:  # a new file has no history to record
                con.execute(
                    "INSERT INTO memory_migrations VALUES (?, ?, ?, ?)",
                    (datetime.now(UTC).isoformat(), report.from_format, report.to_format, report.summary()),
                )
            con.execute(f"PRAGMA user_version = {MEMORY_FORMAT}")
            con.execute("COMMIT")
            return True
        except BaseException:
            con.execute("ROLLBACK")
            raise
    finally:
        con.close()


async def migrate(path: Path, episodic: _Adds) -> MigrationReport:
    """Check ``path`` (``memory.db``) and bring it to :data:`MEMORY_FORMAT` (see the module
    docstring); ``episodic``: the store a format-1 file's events are copied into. A missing file
    is created at the current format. Raises :class:`MemoryStoreError` (damaged, not SQLite,
    newer format); an episodic store that cannot take the events raises its own error and
    leaves the file as it was (the next open tries again)."""
    path = Path(path)
    version = await asyncio.to_thread(check, path)
    report = MigrationReport(path, version, MEMORY_FORMAT)
    if version == MEMORY_FORMAT:
        return report
    await asyncio.to_thread(path.parent.mkdir, parents=True, exist_ok=True)
    if version == 1:
        events, report.not_carried = await asyncio.to_thread(_format1_events, path)
        for start in range(0, len(events), BATCH):
            # K11: an event copied by a run that died before the stamp is found, not doubled
            await episodic.add_many(events[start : start + BATCH])
        report.carried = len(events)
    try:
        done = await asyncio.to_thread(_finish, path, report)
    except sqlite3.Error as exc:
        raise damaged(path, f"{type(exc).__name__}: {exc}") from exc
    if done and report.migrated and version:
        log.warning("%s", report.summary())
    return report


def migrations(path: Path) -> list[dict[str, Any]]:
    """The migrations recorded in ``path`` (oldest first): ``at``, ``from_format``,
    ``to_format``, ``summary``. ``[]`` when none. Blocking."""
    if not Path(path).exists():
        return []
    con = _connect(Path(path))
    try:
        if "memory_migrations" not in _tables(con):
            return []
        return [dict(r) for r in con.execute("SELECT * FROM memory_migrations ORDER BY at")]
    finally:
        con.close()
