"""base.sqlite_files on paths no SQLite file can be at (helper-24): every failure is the
documented ``sqlite3.Error`` (callers catch that), naming the path, at once (not retried as a
lock). Found: a parent that is a file raised ``FileExistsError``, a NUL in the path
``ValueError``. A path with spaces and non-ASCII letters opens."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from base.sqlite_files import open_aiosqlite, open_sqlite


def bad_paths(tmp_path: Path) -> list[Path | str]:
    (tmp_path / "a file").write_text("x")
    (tmp_path / "a dir.db").mkdir()
    (tmp_path / "corrupt.db").write_bytes(b"not a database " * 40)
    return [tmp_path / "a file" / "x.db", f"{tmp_path}/nul\x00.db", tmp_path / "a dir.db", tmp_path / "corrupt.db"]


def test_a_bad_path_raises_a_sqlite_error(tmp_path: Path) -> None:
    for path in bad_paths(tmp_path):
        with pytest.raises(sqlite3.Error) as raised:
            open_sqlite(path, schema="CREATE TABLE IF NOT EXISTS t(x)")
        if "a file" in str(path) or "\x00" in str(path):
            assert repr(str(path)) in str(raised.value)


async def test_a_bad_path_raises_a_sqlite_error_async(tmp_path: Path) -> None:
    for path in bad_paths(tmp_path):
        with pytest.raises(sqlite3.Error):
            await open_aiosqlite(path, schema="CREATE TABLE IF NOT EXISTS t(x)")


def test_a_path_with_spaces_and_letters_opens(tmp_path: Path) -> None:
    con = open_sqlite(tmp_path / "dönnées et ñ 数据" / "hermes ü.db", schema="CREATE TABLE IF NOT EXISTS t(x)")
    try:
        con.execute("INSERT INTO t VALUES (1)")
        assert con.execute("SELECT x FROM t").fetchall() == [(1,)]
    finally:
        con.close()
