"""``hermes session list``: every thread of a data directory, newest first, a damaged one listed
with its error instead of failing the listing."""

from __future__ import annotations

import json
import sqlite3

from langchain_core.messages import AIMessage
from typer.testing import CliRunner

from graph import resources
from graph.cli import app
from tests.conftest import FakeToolbox


def test_session_list_shows_each_thread_newest_first_and_survives_a_damaged_head(scripted, data_dir):
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

    hermes("session", "list", *dd, code=1)  # no checkpoint file yet: clear error, exit 1
    for thread, task in (("alpha", "say hello"), ("beta", "say goodbye"), ("alpha", "once more")):
        hermes("run", task, "--thread", thread, "--model", ctx.model, *dd)

    rows = [json.loads(line) for line in hermes("session", "list", *dd, "--json").splitlines()]
    assert [r["thread_id"] for r in rows] == ["alpha", "beta"]  # alpha ran last
    assert rows[0]["goal"] == "once more" and rows[1]["goal"] == "say goodbye"
    assert rows[0]["checkpoints"] > rows[1]["checkpoints"] > 0 and not any(r["error"] for r in rows)
    assert len(hermes("session", "list", *dd, "--json", "--limit", "1").splitlines()) == 1

    con = sqlite3.connect(data_dir / "checkpoints.sqlite")
    with con:  # beta's head blob replaced by garbage: a corrupt record
        con.execute(
            "UPDATE checkpoints SET checkpoint = x'00ff00' WHERE thread_id = 'beta' AND checkpoint_id = "
            "(SELECT MAX(checkpoint_id) FROM checkpoints WHERE thread_id = 'beta')"
        )
    con.close()
    rows = [json.loads(line) for line in hermes("session", "list", *dd, "--json").splitlines()]
    assert [r["thread_id"] for r in rows] == ["alpha", "beta"]
    assert rows[1]["error"] and not rows[0]["error"]
    table = hermes("session", "list", *dd)
    assert "alpha" in table and "unreadable" in table
