"""``hermes session list``: every thread of a data directory, newest first, a damaged one listed
with its error instead of failing the listing — on both checkpoint stores (``checkpoint_backend``:
the data directory's SQLite file, and a real PostgreSQL through ``HERMES_POSTGRES_URL``)."""

from __future__ import annotations

import json
import os
import sqlite3

import psycopg
import pytest
from langchain_core.messages import AIMessage
from typer.testing import CliRunner

from graph import resources
from graph.cli import app
from tests.conftest import FakeToolbox

pytestmark = pytest.mark.slow  # CLI turns; PostgreSQL starts for the session


def damage_head(checkpoint_backend: str, data_dir, thread: str) -> None:
    """The thread's head checkpoint replaced by garbage in the store: a corrupt record."""
    if checkpoint_backend == "postgres":
        with psycopg.connect(os.environ["HERMES_POSTGRES_URL"], autocommit=True) as conn:
            conn.execute(
                "UPDATE checkpoints SET checkpoint = '{\"garbage\": true}'::jsonb WHERE thread_id = %s "
                "AND checkpoint_id = (SELECT MAX(checkpoint_id) FROM checkpoints WHERE thread_id = %s)",
                (thread, thread),
            )
        return
    con = sqlite3.connect(data_dir / "checkpoints.sqlite")
    with con:
        con.execute(
            "UPDATE checkpoints SET checkpoint = x'00ff00' WHERE thread_id = ? AND checkpoint_id = "
            "(SELECT MAX(checkpoint_id) FROM checkpoints WHERE thread_id = ?)",
            (thread, thread),
        )
    con.close()


def test_session_list_shows_each_thread_newest_first_and_survives_a_damaged_head(
    checkpoint_backend, scripted, data_dir
):
    box = FakeToolbox()
    ctx = scripted([AIMessage("first answer"), AIMessage("second answer"), AIMessage("third answer")], box)
    runner = CliRunner()
    dd = ["--data-dir", str(data_dir)]

    def hermes(*args: str, code: int = 0) -> str:
        resources.set_toolbox(ctx, box)  # each CLI run closes the toolbox at exit
        result = runner.invoke(app, list(args), env={"COLUMNS": "200"})
        assert result.exit_code == code, result.output
        assert "Traceback" not in result.output
        return result.output

    if checkpoint_backend == "sqlite":
        hermes("session", "list", *dd, code=1)  # no checkpoint file yet: clear error, exit 1
    else:  # a new database: its tables are created, no threads yet
        assert "no threads in the PostgreSQL database postgresql://" in hermes("session", "list", *dd)
    for thread, task in (("alpha", "say hello"), ("beta", "say goodbye"), ("alpha", "once more")):
        hermes("run", task, "--thread", thread, "--model", ctx.model, *dd)

    rows = [json.loads(line) for line in hermes("session", "list", *dd, "--json").splitlines()]
    assert [r["thread_id"] for r in rows] == ["alpha", "beta"]  # alpha ran last
    assert rows[0]["goal"] == "once more" and rows[1]["goal"] == "say goodbye"
    assert rows[0]["checkpoints"] > rows[1]["checkpoints"] > 0 and not any(r["error"] for r in rows)
    assert len(hermes("session", "list", *dd, "--json", "--limit", "1").splitlines()) == 1

    damage_head(checkpoint_backend, data_dir, "beta")
    rows = [json.loads(line) for line in hermes("session", "list", *dd, "--json").splitlines()]
    assert [r["thread_id"] for r in rows] == ["alpha", "beta"]
    assert rows[1]["error"] and not rows[0]["error"]
    table = hermes("session", "list", *dd)
    assert "alpha" in table and "unreadable" in table
    # the other read-only commands on the damaged thread: its tree lists the unreadable head
    # (each checkpoint loaded on its own, the rows read from the store's table), show says so
    listed = json.loads(hermes("branch", "list", "beta", *dd, "--json"))
    assert [h["readable"] for h in listed["heads"]] == [False], listed
    assert "cannot be read" in hermes("session", "show", "beta", *dd, code=1)
    assert "once more" in hermes("session", "show", "alpha", *dd)
