"""HERMES_DEBUG behaves the same for every command: without it a failure is one ``error:`` line
(no traceback); with it the same line and exit code, preceded by the traceback — whether the
command has a thread or not (memory, reminders, tools/MCP, branch, session), whether the failure
was expected (a damaged file, a branch refusal) or not (a bug), inside ``guarded`` or not."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from typer.testing import CliRunner

from graph.checkpoint_reader import CheckpointReader
from graph.cli import app
from tools import scheduler  # the reminders commands import what they use from it when they run

runner = CliRunner()


def garbage(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"\x13\x37" * 3000)
    return path


def checkpoint_file(data: Path) -> Path:
    data.mkdir(parents=True, exist_ok=True)
    path = data / "checkpoints.sqlite"
    con = sqlite3.connect(path)
    con.executescript(
        "CREATE TABLE checkpoints (thread_id TEXT, checkpoint_ns TEXT, checkpoint_id TEXT, "
        "parent_checkpoint_id TEXT, type TEXT, checkpoint BLOB, metadata BLOB);"
        "CREATE TABLE writes (thread_id TEXT, checkpoint_ns TEXT, checkpoint_id TEXT, task_id TEXT, idx INTEGER, "
        "channel TEXT, type TEXT, value BLOB);"
    )
    con.close()
    return path


def boom(*_args, **_kwargs):
    raise RuntimeError("a bug somewhere")


async def aboom(*_args, **_kwargs):
    raise RuntimeError("a bug somewhere")


#: name → (set-up of the data dir and monkeypatches, command line, text the error line names)
CASES = {
    "reminders_list_damaged_db": (lambda d, mp: garbage(d / "reminders.db"), ["reminders", "list"], "reminders.db"),
    "reminders_due_damaged_db": (lambda d, mp: garbage(d / "reminders.db"), ["reminders", "due"], "reminders.db"),
    "reminders_run_damaged_db": (lambda d, mp: garbage(d / "reminders.db"), ["reminders", "run"], "reminders.db"),
    "memory_list_damaged_db": (lambda d, mp: garbage(d / "memory.db"), ["memory", "list"], "memory.db"),
    "tools_list_missing_mcp_config": (
        lambda d, mp: None,
        ["tools", "list", "--mcp-config", "/no/such/mcp.json"],
        "/no/such/mcp.json",
    ),
    "mcp_list_missing_mcp_config": (
        lambda d, mp: None,
        ["mcp", "list", "--mcp-config", "/no/such/mcp.json"],
        "/no/such/mcp.json",
    ),
    "reminders_list_bug_outside_guarded": (
        lambda d, mp: (garbage(d / "reminders.db"), mp.setattr(scheduler, "stored_reminders", boom)),
        ["reminders", "list"],
        "a bug somewhere",
    ),
    "session_list_bug": (
        lambda d, mp: (checkpoint_file(d), mp.setattr(CheckpointReader, "threads", aboom)),
        ["session", "list"],
        "a bug somewhere",
    ),
    "branch_list_unknown_thread": (lambda d, mp: checkpoint_file(d), ["branch", "list", "nosuch"], "nosuch"),
    "branch_list_bad_setting": (
        lambda d, mp: (checkpoint_file(d), mp.setenv("HERMES_TOKEN_BUDGET", "lots")),
        ["branch", "list", "T"],
        "HERMES_TOKEN_BUDGET='lots'",
    ),
    "reminders_list_bad_setting": (
        lambda d, mp: mp.setenv("HERMES_TOKEN_BUDGET", "lots"),
        ["reminders", "list"],
        "HERMES_TOKEN_BUDGET='lots'",
    ),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_debug_adds_a_traceback_to_the_same_one_line_error(tmp_path, monkeypatch, case):
    setup, command, named = CASES[case]
    data = tmp_path / "data"
    data.mkdir()
    setup(data, monkeypatch)
    monkeypatch.delenv("HERMES_DEBUG", raising=False)
    plain = runner.invoke(app, [*command, "--data-dir", str(data)])
    monkeypatch.setenv("HERMES_DEBUG", "1")
    debugged = runner.invoke(app, [*command, "--data-dir", str(data)])
    for result in (plain, debugged):
        assert result.exit_code != 0, result.output
        assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
        errors = [line for line in result.output.splitlines() if line.startswith("error:")]
        assert len(errors) == 1 and named in errors[0], result.output
    assert debugged.exit_code == plain.exit_code
    assert "Traceback" not in plain.output
    assert "Traceback (most recent call last)" in debugged.stderr
    assert "HERMES_DEBUG=1" not in "".join(line for line in debugged.output.splitlines() if line.startswith("error:"))


def test_a_command_without_a_thread_does_not_speak_of_checkpoints(tmp_path):
    result = runner.invoke(app, ["tools", "list", "--mcp-config", "/no/such/mcp.json", "--data-dir", str(tmp_path)])
    assert result.exit_code == 1
    # an unreadable MCP config is an expected failure: one line naming the setting to fix
    assert "checkpoints" not in result.output and "HERMES_MCP_CONFIG" in result.output


def test_a_message_with_brackets_is_printed_as_it_is(tmp_path, monkeypatch):
    def odd(*_a, **_k):
        raise RuntimeError("bad value [/x] at [0]")

    garbage(tmp_path / "reminders.db")
    monkeypatch.setattr(scheduler, "stored_reminders", odd)
    result = runner.invoke(app, ["reminders", "list", "--data-dir", str(tmp_path)])
    assert result.exit_code == 1 and "bad value [/x] at [0]" in result.output
