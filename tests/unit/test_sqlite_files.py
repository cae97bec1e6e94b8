"""base/sqlite_files.py: the one opener of shared SQLite files (WAL, busy timeout, opening
retried while the file is locked; read-only on request), and that every module opens its SQLite
files through it."""

from __future__ import annotations

import ast
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


#: The one module outside base/sqlite_files.py that may open an SQLite file itself, and why.
NOT_SHARED = {
    # The user's own database, not a file Hermes shares between its processes: opened read-only
    # behind an authorizer, query_only, a statement deadline and, for a WAL file whose -shm
    # cannot be created, immutable=1 — never switched to WAL, given a schema or retried.
    "tools/builtin/database/connection.py",
}
_PRAGMA_BY_HAND = re.compile(r"execute\(.*PRAGMA (?:journal_mode|busy_timeout)=")


def sqlite_opens(source: str) -> list[int]:
    """The lines of ``source`` that open an SQLite database without the opener: a call of
    ``connect`` from ``sqlite3`` or ``aiosqlite`` (``sqlite3.connect``, an alias of the module,
    ``from sqlite3 import connect``), or a hand-written WAL / busy-timeout pragma."""
    tree = ast.parse(source)
    modules, functions = set(), set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            modules |= {a.asname or a.name for a in node.names if a.name in ("sqlite3", "aiosqlite")}
        elif isinstance(node, ast.ImportFrom) and node.module in ("sqlite3", "aiosqlite"):
            functions |= {a.asname or a.name for a in node.names if a.name == "connect"}
    found = set()
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        if (
            isinstance(func, ast.Attribute)
            and func.attr == "connect"
            and isinstance(func.value, ast.Name)
            and func.value.id in modules
        ) or (isinstance(func, ast.Name) and func.id in functions):
            found.add(node.lineno)
    found |= {n for n, line in enumerate(source.splitlines(), 1) if _PRAGMA_BY_HAND.search(line)}
    return sorted(found)


def test_the_open_finder_sees_every_spelling():
    source = (
        "import sqlite3\nimport aiosqlite as aio\nfrom sqlite3 import connect as c\n"
        "sqlite3.connect('a')\naio.connect('b')\nc('c')\ncon.execute('PRAGMA journal_mode=WAL')\n"
        "open_sqlite('d')\nother.connect('e')\n"
    )
    assert sqlite_opens(source) == [4, 5, 6, 7]


def test_no_module_opens_a_sqlite_file_by_hand():
    """Every open of an SQLite file in graph/, nodes/, tools/, memory/ and base/ — read-write
    or read-only — goes through base/sqlite_files.py; the one exception is :data:`NOT_SHARED`."""
    found = []
    for package in ("graph", "nodes", "tools", "memory", "base"):
        for file in sorted((ROOT / package).rglob("*.py")):
            rel = file.relative_to(ROOT).as_posix()
            if rel in NOT_SHARED or rel == "base/sqlite_files.py":
                continue
            source = file.read_text(encoding="utf-8")
            found += [f"{rel}:{n}: {source.splitlines()[n - 1].strip()}" for n in sqlite_opens(source)]
    assert found == []


def test_read_only_opens_an_existing_file_and_writes_nothing(tmp_path: Path):
    path = tmp_path / "a dir?#%" / "x.db"  # characters a file: URI must escape
    con = open_sqlite(path, schema="CREATE TABLE IF NOT EXISTS t (x); INSERT INTO t VALUES (1);")
    con.close()
    ro = open_sqlite(path, read_only=True)
    try:
        assert ro.execute("SELECT x FROM t").fetchall() == [(1,)]
        assert ro.execute("PRAGMA busy_timeout").fetchone()[0] == int(BUSY_TIMEOUT_S * 1000)
        with pytest.raises(sqlite3.OperationalError, match="readonly"):
            ro.execute("INSERT INTO t VALUES (2)")
    finally:
        ro.close()
    missing = tmp_path / "no" / "such.db"
    with pytest.raises(sqlite3.OperationalError):
        open_sqlite(missing, read_only=True)
    assert not missing.parent.exists()  # nothing created
    for wrong in ({"path": MEMORY}, {"path": path, "schema": "CREATE TABLE u (x);"}):
        with pytest.raises(ValueError, match="read-only"):
            open_sqlite(read_only=True, **wrong)


async def test_the_async_opener_opens_read_only_too(tmp_path: Path):
    open_sqlite(tmp_path / "x.db", schema="CREATE TABLE IF NOT EXISTS t (x);").close()
    conn = await open_aiosqlite(tmp_path / "x.db", read_only=True)
    try:
        with pytest.raises(sqlite3.OperationalError, match="readonly"):
            await conn.execute("INSERT INTO t VALUES (1)")
    finally:
        await conn.close()
