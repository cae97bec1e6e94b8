"""Reminders fire for real: ``hermes reminders run`` processes racing over the real toolbox
(subprocess executor, the team-chat MCP server, the idempotency ledger), and the
``reminders`` graph served by the real ``langgraph dev`` — called with ``runs.wait`` and run
by the server's own cron scheduler. One post per period, however many runners and checks."""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import os
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
from langgraph_sdk import get_client

from nodes.fire_due_reminders import server_thread_id
from tests.integration.conftest import ROOT
from tools.builtin.reminders import list_reminders, schedule_reminder
from tools.toolbox import Toolbox

pytestmark = pytest.mark.slow
HERMES = str(Path(sys.executable).parent / "hermes")
# no model is needed for tool actions; a task action must not start the embedded model here
# the actions here are stored directly, not by a request: their channel is allowed by
# configuration (a firing re-checks the action's destination, tools/destinations.py)
NO_MODEL = {
    "HERMES_MODEL": "no-model",
    "HERMES_BASE_URL": "http://127.0.0.1:9/v1",
    "OPENAI_API_KEY": "x",
    "HERMES_ALLOWED_DESTINATIONS": '["project"]',
}


def posts(data_dir: Path, text: str | None = None) -> list[tuple[str, str]]:
    db = data_dir / "team_chat.db"
    if not db.exists():
        return []
    with sqlite3.connect(db) as con:
        # the server creates the file before its table: between the two there is no post yet
        if not con.execute("SELECT 1 FROM sqlite_master WHERE name = 'messages'").fetchone():
            return []
        rows = con.execute("SELECT channel, text FROM messages ORDER BY id").fetchall()
    return [r for r in rows if text is None or r[1] == text]


async def test_schedule_reminder_with_an_action_through_the_real_executor(tmp_path):
    tb = await Toolbox.open(tmp_path, timeout_s=20)
    try:
        action = {"kind": "tool", "tool": "post_message", "args": {"channel": "project", "text": "hi"}}
        out = await tb.registry.call(
            "schedule_reminder", {"text": "post hi", "day_of_month": 31, "action": action}, "rem-a"
        )
        assert out.status == "ok", out.error
        assert out.content["action"] == action and "last day" in out.content["adjustment"]
        # the clock is not a model-supplied argument
        bad = await tb.registry.call("schedule_reminder", {"text": "x", "now": "2020-01-01"}, "rem-b")
        assert bad.status == "error" and bad.error_kind == "invalid_arguments"
        listed = await tb.registry.call("list_reminders", {}, "l1")
        assert listed.content["count"] == 1 and listed.content["reminders"][0]["last_fired_period"] is None
    finally:
        await tb.aclose()


def test_two_cli_runners_racing_post_once_through_the_real_toolbox(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    schedule_reminder(
        "post the monthly numbers",
        1,
        "09:00",
        action={"kind": "tool", "tool": "post_message", "args": {"channel": "project", "text": "monthly numbers"}},
        data_dir=data,
        now=dt.datetime(2026, 8, 20),
    )
    env = {**os.environ, **NO_MODEL, "HERMES_DATA_DIR": str(data)}
    cmd = [HERMES, "reminders", "run", "--now", "2026-12-01T09:30", "--json"]
    procs = [
        subprocess.Popen(
            cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True
        )
        for _ in range(2)
    ]
    results = []
    try:
        for p in procs:
            out, err = p.communicate(timeout=120)
            assert p.returncode == 0, err + out
            results.append(json.loads(out.strip().splitlines()[-1])["firings"])
    finally:
        for p in procs:
            if p.poll() is None:
                os.killpg(p.pid, 9)
                p.wait()
    statuses = sorted(f["status"] for r in results for f in r)
    assert statuses in (["fired"], ["fired", "skipped"]), results
    assert posts(data) == [("project", "monthly numbers")]
    # again, later the same month: nothing due; the next month posts once more
    again = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=120, check=False)
    assert again.returncode == 0 and json.loads(again.stdout.strip().splitlines()[-1])["firings"] == []
    jan = subprocess.run(
        [HERMES, "reminders", "run", "--now", "2027-01-01T09:30"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert jan.returncode == 0 and "fired reminder 1" in jan.stdout, jan.stdout + jan.stderr
    assert len(posts(data)) == 2
    assert list_reminders(data_dir=data)["reminders"][0]["last_fired_period"] == "2027-01"


def test_hermes_serve_fires_due_reminders_and_stops_on_ctrl_c(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    now = dt.datetime.now()
    schedule_reminder(
        "serve post",
        1,
        "00:00",
        action={"kind": "tool", "tool": "post_message", "args": {"channel": "project", "text": "from serve"}},
        data_dir=data,
        now=now - dt.timedelta(days=40),
    )
    env = {**os.environ, **NO_MODEL, "HERMES_DATA_DIR": str(data)}
    proc = subprocess.Popen(
        [HERMES, "serve", "--interval", "0.5"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 60
        while not posts(data) and time.monotonic() < deadline:
            time.sleep(0.3)
        time.sleep(2)  # a few more checks
        os.killpg(proc.pid, 2)  # Ctrl-C
        out, _ = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, 9)
            proc.wait()
    assert proc.returncode == 0, out
    assert posts(data) == [("project", "from serve")]
    assert out.count("fired reminder 1") == 1 and "stopped" in out


@pytest.fixture
def dev_server(tmp_path, start_langgraph_dev):
    data = tmp_path / "data"
    data.mkdir()
    url, log = start_langgraph_dev({**NO_MODEL, "HERMES_DATA_DIR": str(data), "CRON_SCHEDULER_SLEEP_TIME": "1"})
    return url, log, data


async def test_the_reminders_graph_on_langgraph_dev_fires_once_by_runs_and_by_cron(dev_server):
    url, log_path, data = dev_server
    client = get_client(url=url)
    assert await client.assistants.search(graph_id="reminders"), "the reminders graph is not served"
    created = dt.datetime(2031, 1, 10)
    schedule_reminder(
        "post the numbers",
        1,
        "09:00",
        action={"kind": "tool", "tool": "post_message", "args": {"channel": "project", "text": "numbers"}},
        data_dir=data,
        now=created,
    )
    schedule_reminder(
        "Monthly sales review",
        1,
        "09:00",
        action={"kind": "task", "task": "Review the sales numbers"},
        data_dir=data,
        now=created,
    )

    # a check with an injected clock, through the SDK
    first = await client.runs.wait(None, "reminders", input={"now": "2031-02-01T09:30:00"}, raise_error=False)
    log_text = log_path.read_text(errors="replace")
    assert isinstance(first, dict) and "fired" in first, f"{first} {log_text[-3000:]}"
    assert "BlockingError" not in log_text, log_text[-3000:]
    assert [(f["reminder_id"], f["period"]) for f in first["fired"]] == [(1, "2031-02"), (2, "2031-02")]
    assert posts(data) == [("project", "numbers")]
    # the task action queued an agent run on the reminder's thread (server thread = uuid5 of its name)
    task = first["fired"][1]["result"]
    assert task["thread_id"] == server_thread_id("reminder-2")
    runs = await client.runs.list(task["thread_id"])
    assert [r["run_id"] for r in runs] == [task["run_id"]]
    assert runs[0]["metadata"]["hermes_reminder"] == "reminder:2:2031-02"
    second = await client.runs.wait(None, "reminders", input={"now": "2031-02-01T10:00:00"})
    assert second["fired"] == [] and len(posts(data)) == 1
    assert len(await client.runs.list(task["thread_id"])) == 1

    # the server's cron, on the real clock: due now, fired once over many ticks
    schedule_reminder(
        "cron post",
        1,
        "00:00",
        action={"kind": "tool", "tool": "post_message", "args": {"channel": "project", "text": "from cron"}},
        data_dir=data,
        now=dt.datetime.now() - dt.timedelta(days=40),
    )
    cron = await client.crons.create(assistant_id="reminders", schedule="* * * * * */2", input={})
    try:
        deadline = time.monotonic() + 90
        while not posts(data, "from cron") and time.monotonic() < deadline:
            await asyncio.sleep(0.5)
        assert posts(data, "from cron"), log_path.read_text(errors="replace")[-3000:]
        await asyncio.sleep(7)  # three or more further cron runs
    finally:
        await client.crons.delete(cron["cron_id"])
    assert posts(data, "from cron") == [("project", "from cron")]
    assert len(posts(data, "numbers")) == 1
    log_text = log_path.read_text(errors="replace")
    assert "BlockingError" not in log_text, log_text[-3000:]
