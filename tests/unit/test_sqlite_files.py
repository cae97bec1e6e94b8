"""base/sqlite_files.py: the one opener of shared SQLite files (WAL, busy timeout, opening
retried while the file is locked), and that every store opens its file through it."""

from __future__ import annotations

import re
import sqlite3
from pathlib import Path

import pytest

from base.sqlite_files import BUSY_TIMEOUT_S, MEMORY, is_locked, open_aiosqlite, open_sqlite

ROOT = Path(__file__).resolve().parents[2]


def test_a_file_is_opened_in_wal_with_the_busy_timeout_and_its_schema(tmp_path: Path):
    path = tmp_path / "sub" / "x.db"  # the directory is created
    con = open_sqlite(path, schema="CREATE TABLE IF NOT EXISTS t (x INTEGER);", synchronous="NORMAL")
    try:
        assert con.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert con.execute("PRAGMA busy_timeout").fetchone()[0] == int(BUSY_TIMEOUT_S * 1000)
        assert con.execute("PRAGMA synchronous").fetchone()[0] == 1  # NORMAL
        assert con.isolation_level is None  # autocommit: callers BEGIN IMMEDIATE
        con.execute("INSERT INTO t VALUES (1)")
    finally:
        con.close()
    again = open_sqlite(path, schema="CREATE TABLE IF NOT EXISTS t (x INTEGER);", autocommit=False)
    try:
        assert again.execute("SELECT x FROM t").fetchall() == [(1,)]
        assert again.isolation_level is not None
    finally:
        again.close()


def test_memory_is_never_wal(tmp_path: Path):
    con = open_sqlite(MEMORY, schema="CREATE TABLE t (x);")
    try:
        assert con.execute("PRAGMA journal_mode").fetchone()[0] == "memory"
    finally:
        con.close()


def test_opening_is_retried_while_the_file_is_locked(tmp_path: Path):
    """Another process switching the same new file to WAL answers "database is locked" at once
    (no busy wait): the opening step is tried again."""
    attempts = []

    def setup(con: sqlite3.Connection) -> None:
        attempts.append(1)
        if len(attempts) < 3:
            raise sqlite3.OperationalError("database is locked")

    con = open_sqlite(tmp_path / "x.db", setup=setup)
    con.close()
    assert len(attempts) == 3


def test_other_errors_are_not_retried_and_the_connection_is_closed(tmp_path: Path, monkeypatch):
    attempts = []
    opened: list[sqlite3.Connection] = []
    real_connect = sqlite3.connect

    def connect(*args, **kwargs):
        opened.append(real_connect(*args, **kwargs))
        return opened[-1]

    monkeypatch.setattr(sqlite3, "connect", connect)  # the module sqlite_files opens with

    def setup(con: sqlite3.Connection) -> None:
        attempts.append(1)
        raise sqlite3.OperationalError("no such table: t")

    with pytest.raises(sqlite3.OperationalError, match="no such table"):
        open_sqlite(tmp_path / "x.db", setup=setup)
    assert len(attempts) == 1
    with pytest.raises(sqlite3.ProgrammingError):  # closed
        opened[0].execute("SELECT 1")


def test_is_locked():
    assert is_locked(sqlite3.OperationalError("database is locked"))
    assert is_locked(sqlite3.OperationalError("database table is locked: t"))
    assert is_locked(sqlite3.OperationalError("database is busy"))
    assert not is_locked(sqlite3.OperationalError("no such table: t"))
    assert not is_locked(ValueError("database is locked"))


async def test_the_async_opener_does_the_same(tmp_path: Path):
    conn = await open_aiosqlite(tmp_path / "sub" / "a.db", schema="CREATE TABLE IF NOT EXISTS t (x);")
    try:
        mode = await (await conn.execute("PRAGMA journal_mode")).fetchone()
        assert mode is not None and mode[0] == "wal"
        timeout = await (await conn.execute("PRAGMA busy_timeout")).fetchone()
        assert timeout is not None and timeout[0] == int(BUSY_TIMEOUT_S * 1000)
        await conn.execute("INSERT INTO t VALUES (1)")
    finally:
        await conn.close()


def test_no_store_opens_a_sqlite_file_by_hand():
    """Every read-write open of a shared SQLite file in graph/, nodes/, tools/ and memory/ goes
    through base/sqlite_files.py. Read-only opens (``mode=ro``) and the files Hermes does not
    share (the user's database, the demo database being built, a stand-alone test server's chat)
    are exempt."""
    not_shared = {
        "tools/builtin/database/connection.py",  # the user's database, behind a read-only authorizer
        "tools/builtin/demo_db.py",  # builds the demo database in a temporary file, then renames it
        "tools/mcp/servers/team_chat.py",  # a stand-alone MCP server's own file
    }
    by_hand = re.compile(r"(?:sqlite3|aiosqlite)\.connect\(|execute\(.*PRAGMA (?:journal_mode|busy_timeout)=")
    found = []
    for package in ("graph", "nodes", "tools", "memory"):
        for file in sorted((ROOT / package).rglob("*.py")):
            rel = file.relative_to(ROOT).as_posix()
            if rel in not_shared:
                continue
            lines = file.read_text(encoding="utf-8").splitlines()
            read_only = any("mode=ro" in line for line in lines)
            for n, line in enumerate(lines, 1):
                if by_hand.search(line) and not ("mode=ro" in line or (read_only and "busy_timeout" in line)):
                    found.append(f"{rel}:{n}: {line.strip()}")
    assert found == []
