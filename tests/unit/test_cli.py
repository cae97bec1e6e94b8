"""The `hermes` CLI: exit codes, questions (interrupts) and resume, the per-thread lock, lint."""

from __future__ import annotations

import json

import pytest
from langchain_core.messages import AIMessage
from typer.testing import CliRunner

from graph import resources
from graph.cli import app
from graph.context import Context
from graph.model import register_model
from graph.runner import ThreadBusyError, run_turn, thread_lock
from tests.conftest import FakeToolbox, ScriptedChat, tool_call, use_toolbox

runner = CliRunner()


def scripted_cli(name: str, replies, data_dir, box: FakeToolbox | None = None) -> None:
    model = ScriptedChat(messages=iter(replies))
    register_model(name, lambda _c: model)
    use_toolbox(Context(model=name, data_dir=str(data_dir)), box or FakeToolbox())


def test_a_question_without_a_terminal_exits_3_and_resume_continues(tmp_path):
    posted: list[dict] = []
    box = FakeToolbox()
    box.add(
        "post_note",
        lambda **kw: posted.append(kw) or {"ok": True},
        {
            "type": "object",
            "properties": {"channel": {"type": "string"}, "text": {"type": "string"}},
            "required": ["channel", "text"],
        },
        side_effect=True,
    )
    scripted_cli("cli-ask", [tool_call("post_note", {"text": "hi"}, "c1"), AIMessage("posted")], tmp_path, box)
    first = runner.invoke(
        app,
        ["run", "post a note saying hi", "--model", "cli-ask", "--data-dir", str(tmp_path), "--thread", "T", "--json"],
    )
    assert first.exit_code == 3, first.output
    summary = json.loads(first.output.strip().splitlines()[-1])
    assert "channel" in summary["question"] and posted == []
    resources.set_toolbox(Context(model="cli-ask", data_dir=str(tmp_path)), box)  # closed after the first run
    second = runner.invoke(
        app, ["resume", "project", "--thread", "T", "--model", "cli-ask", "--data-dir", str(tmp_path), "--json"]
    )
    assert second.exit_code == 0, second.output
    assert posted == [{"text": "hi", "channel": "project"}]
    assert json.loads(second.output.strip().splitlines()[-1])["answer"] == "posted"


async def test_one_thread_runs_in_one_process_at_a_time(tmp_path):
    scripted_cli("cli-lock", [AIMessage("hello")], tmp_path)
    context = Context(model="cli-lock", data_dir=str(tmp_path))
    async with thread_lock(tmp_path, "L"):
        with pytest.raises(ThreadBusyError, match="thread 'L' is busy"):
            await run_turn("hi", context, "L", quiet=True)
    assert (await run_turn("hi", context, "L", quiet=True))["answer"] == "hello"  # free again


def test_empty_task_and_bad_settings_are_refused_clearly(tmp_path, monkeypatch):
    empty = runner.invoke(app, ["run", "  ", "--data-dir", str(tmp_path)])
    assert empty.exit_code == 1 and "task is empty" in empty.output
    monkeypatch.setenv("HERMES_TOKEN_BUDGET", "lots")
    bad = runner.invoke(app, ["run", "hi", "--data-dir", str(tmp_path)])
    assert bad.exit_code == 1 and "HERMES_TOKEN_BUDGET='lots'" in bad.output


def test_resume_refuses_a_thread_that_is_not_waiting(tmp_path):
    scripted_cli("cli-noq", [AIMessage("done")], tmp_path)
    assert (
        runner.invoke(app, ["run", "hi", "--model", "cli-noq", "--data-dir", str(tmp_path), "--thread", "F"]).exit_code
        == 0
    )
    for thread in ("F", "nosuch"):
        out = runner.invoke(
            app, ["resume", "yes", "--thread", thread, "--model", "cli-noq", "--data-dir", str(tmp_path)]
        )
        assert out.exit_code == 1 and "not waiting for an answer" in out.output


@pytest.mark.timeout(30)
def test_chat_ends_cleanly_at_end_of_input(tmp_path):
    scripted_cli("cli-chat", [AIMessage("hi back")], tmp_path)
    out = runner.invoke(app, ["chat", "--model", "cli-chat", "--data-dir", str(tmp_path)], input="hello\n")
    assert out.exit_code == 0, out.output
    assert "hi back" in out.output


def test_a_damaged_data_file_is_named_and_the_healthy_checkpoints_are_left_alone(tmp_path):
    import sqlite3

    from graph.cli.common import damaged_database_message

    sqlite3.connect(tmp_path / "checkpoints.sqlite").execute("CREATE TABLE t (x)").connection.close()
    (tmp_path / "idempotency.db").write_text("garbage")
    message = damaged_database_message(tmp_path, sqlite3.DatabaseError("file is not a database"))
    assert "idempotency ledger" in message and str(tmp_path / "idempotency.db") in message
    assert "checkpoints.sqlite" not in message  # healthy: never told to move it aside
    (tmp_path / "checkpoints.sqlite").write_bytes(b"\x00" * 100)
    message = damaged_database_message(tmp_path, sqlite3.DatabaseError("file is not a database"))
    assert "checkpoint database" in message and ".broken-" in message  # a unique name: no overwrite
