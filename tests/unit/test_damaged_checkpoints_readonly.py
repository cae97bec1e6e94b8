"""The read-only commands (session list|show, branch list|show) on a damaged checkpoint file:
a clear message that names the file and the way back, exit 1, no traceback — and the file is
left exactly as it was (they never write)."""

from __future__ import annotations

import sqlite3

import pytest
from typer.testing import CliRunner

from graph.cli import app


def truncated(path):
    path.write_bytes(b"SQLite format 3\x00" + b"\x00" * 84)


def garbage(path):
    path.write_bytes(b"\x13\x37" * 3000)


def empty(path):
    path.write_bytes(b"")


def unrelated_tables(path):
    con = sqlite3.connect(path)
    con.execute("CREATE TABLE checkpoints (x INTEGER)")
    con.commit()
    con.close()


def directory(path):
    path.mkdir()


@pytest.mark.parametrize("damage", [truncated, garbage, empty, unrelated_tables, directory])
@pytest.mark.parametrize(
    "command", [["session", "list"], ["session", "show", "T"], ["branch", "list", "T"], ["branch", "show", "T"]]
)
def test_read_only_commands_explain_a_damaged_file_and_leave_it_alone(tmp_path, damage, command):
    data = tmp_path / "data"
    data.mkdir()
    path = data / "checkpoints.sqlite"
    damage(path)
    before = path.read_bytes() if path.is_file() else None
    result = CliRunner().invoke(app, [*command, "--data-dir", str(data)], env={"COLUMNS": "200"})
    assert result.exit_code == 1, result.output
    assert "Traceback" not in result.output and "cannot be read" in result.output and "mv " in result.output
    assert (path.read_bytes() if path.is_file() else None) == before
    assert sorted(p.name for p in data.iterdir()) == ["checkpoints.sqlite"]  # no -wal/-shm, nothing new
