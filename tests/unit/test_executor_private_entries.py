"""Which parts of a data directory a tool run may not see (tools/executors/agent_state.py:
private_entries); the processes that enforce it: tests/integration/test_sandbox_defaults.py."""

from __future__ import annotations

from pathlib import Path

from tools.executors.agent_state import private_entries, request_thread


def layout(data: Path) -> None:
    for name in (
        "checkpoints.sqlite",
        "checkpoints.sqlite-wal",
        "checkpoints.sqlite.broken-20261203-090000",
        "idempotency.db",
        "idempotency.db-shm",
        "deliveries.db",
        "memory.db",
        "team_chat.db",
        "reminders.db",
        "reminders.db-wal",
        "tool_schemas.db",
        "sales.sqlite",
        "notes.txt",
    ):
        (data / name).write_text("x")
    for folder in ("episodic.lance", "mirror", "locks", "mcp_auth", "reports", "payloads/bob", "payloads/alice"):
        (data / folder).mkdir(parents=True)


def names(data: Path, paths: list[str]) -> set[str]:
    return {str(Path(p).relative_to(data)) for p in paths}


def test_the_agent_state_and_other_threads_payloads_are_private(tmp_path):
    layout(tmp_path)
    hidden = names(tmp_path, private_entries(tmp_path, "bob:goal-1:abc"))
    assert hidden == {
        "checkpoints.sqlite",
        "checkpoints.sqlite-wal",
        "checkpoints.sqlite.broken-20261203-090000",
        "idempotency.db",
        "idempotency.db-shm",
        "deliveries.db",
        "memory.db",
        "team_chat.db",
        "episodic.lance",
        "mirror",
        "locks",
        "mcp_auth",
        "payloads/alice",
        "reports",  # the flat reports of before they were per thread: nobody's own
        "reminders.db",  # the schedule: only for a tool that schedules
        "reminders.db-wal",
    }


def test_the_schedule_is_shown_only_to_a_scheduling_call(tmp_path):
    layout(tmp_path)
    hidden = names(tmp_path, private_entries(tmp_path, "bob:goal-1:abc", schedule=True))
    assert not {"reminders.db", "reminders.db-wal"} & hidden
    assert {"checkpoints.sqlite", "reports", "payloads/alice"} <= hidden


def test_each_thread_has_a_workspace_of_its_own(tmp_path):
    from tools.executors.workspace import folder_name, workspace_for

    assert workspace_for(tmp_path, "bob:goal-1:abc") == tmp_path / "threads" / "bob"
    assert workspace_for(tmp_path, "a:b:goal:abc") == tmp_path / "threads" / "a.3ab"
    # names that would meet when unsafe characters are merely replaced stay apart
    ids = ["a:b", "a_b", "a.b", "a.2eb", "..", ".", "sales/β", "sales__", "x" * 300, "x" * 301]
    folders = [folder_name(t) for t in ids]
    assert len(set(folders)) == len(ids)
    assert all(f not in (".", "..") and "/" not in f and len(f) <= 100 for f in folders)
    # a request naming no thread gets a folder no thread's name takes
    assert workspace_for(tmp_path, "reminder-7").name.startswith("+")
    # a reminder's tool action (reminder:<id>:<period>) is no request of a thread named "reminder"
    assert workspace_for(tmp_path, "reminder:5:2026-12") != workspace_for(tmp_path, "reminder:g:abc")


def test_a_request_without_a_thread_sees_no_payloads_and_kept_paths_stay(tmp_path):
    layout(tmp_path)
    (tmp_path / "memory.db").rename(tmp_path / "memory.db.keep")
    (tmp_path / "memory.db").mkdir()
    (tmp_path / "memory.db" / "users.sqlite").write_text("x")  # the user's database, in there
    hidden = names(tmp_path, private_entries(tmp_path, "reminder-7", keep=(str(tmp_path / "memory.db/users.sqlite"),)))
    assert {"payloads/alice", "payloads/bob"} <= hidden
    assert "memory.db" not in hidden and "memory.db.keep" in hidden


def test_the_thread_of_a_request_id():
    assert request_thread("bob:goal-1:abc") == "bob"
    assert request_thread("sales/β:goal:abc") == "sales__"  # as dispatch_tools names the folder
    assert request_thread("a:b:goal:abc") == "a_b"  # a thread id may hold ':' (the payload folder's form)
    assert request_thread("reminder-7") is None


def test_one_warning_when_a_run_could_not_be_confined(tmp_path, caplog):
    import logging

    from tools.executors.subprocess import RunContext, SubprocessExecutor

    executor = SubprocessExecutor(tmp_path)
    ctx = RunContext(tmpdir=tmp_path, cgroup=None, extra={"network": False, "hide": [str(tmp_path / "mirror")]})
    with caplog.at_level(logging.WARNING, logger="tools.executors.subprocess"):
        executor._check_sandbox(b'{"ok": true, "sandbox": "landlock-v7+netns+mountns"}\n', ctx)
        assert caplog.records == []
        executor._check_sandbox(b'{"ok": true, "sandbox": "landlock-v3"}\n', ctx)
        executor._check_sandbox(b'{"ok": true, "sandbox": "audit-hook"}\n', ctx)
    assert len(caplog.records) == 1
    line = caplog.records[0].getMessage()
    assert "network" in line and "agent's state" in line and "HERMES_TOOL_EXECUTOR=container" in line
