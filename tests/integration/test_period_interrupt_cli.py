"""Periods without data through the real ``hermes`` command (issue 18 point 4, DESIGN §5.6): the
flagship sentence on a database whose data ends in 2011-12, with a scripted OpenAI-compatible
model in front of real processes (``hermes run`` / ``hermes resume``, the subprocess executor
running the real ``generate_report``, the bundled team-chat MCP server, SQLite checkpoints).

The model asks for "last month"; the refusal's suggestion reaches the graph through the worker
process, and ``hermes run`` stops at the question (exit 3) without writing or posting anything.
``hermes resume … yes`` goes on: the report of 2011-12 titled as the latest month with data, a
post carrying its period, figures and path, the monthly reminder. ``hermes resume … no`` stops
and says so: nothing written, nothing posted."""

from __future__ import annotations

import datetime as dt
import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.support.scripted_openai import ScriptedOpenAI
from tools.builtin.database.periods import month_before
from tools.builtin.demo_db import generate_sales_db

pytestmark = pytest.mark.slow  # hermes processes, an MCP server

ROOT = Path(__file__).resolve().parents[2]
TASK = "Summarise last month's sales into an analysis report, post it to the project group, and remind me every month."
END = "2011-12"
LAST = month_before(dt.date.today())
PROCESS_S = 240
JOIN = "FROM orders o JOIN order_items i ON i.order_id = o.order_id"
UNDATED = [
    {"label": "Orders", "sql": "SELECT COUNT(*) AS orders FROM orders"},
    {"label": "Revenue", "sql": f"SELECT ROUND(SUM(i.quantity * i.unit_price), 2) AS revenue {JOIN}"},
]
WHERE = f" WHERE strftime('%Y-%m', order_date) = '{END}'"
DATED = [{**q, "sql": q["sql"] + WHERE} for q in UNDATED]


def model(body: dict[str, Any]) -> dict[str, Any]:
    """Does the flagship in order; after a refused report, the report of the latest month."""
    messages = body["messages"]
    start = max(i for i, m in enumerate(messages) if m["role"] == "user")
    names = {c["id"]: c["function"]["name"] for m in messages for c in m.get("tool_calls") or []}
    results = [
        (names.get(m.get("tool_call_id"), "?"), json.loads(m["content"]))
        for m in messages[start:]
        if m["role"] == "tool"
    ]
    if not results:
        return {
            "tool_calls": [
                {
                    "name": "generate_report",
                    "arguments": {"title": "Sales report", "period": "last month", "queries": UNDATED},
                }
            ]
        }
    tool, envelope = results[-1]
    if tool == "generate_report" and envelope["status"] == "error":
        return {
            "tool_calls": [
                {
                    "name": "generate_report",
                    "arguments": {"title": "Sales report", "period": "latest", "queries": DATED},
                }
            ]
        }
    if tool == "generate_report":
        share = envelope["data"]["share"]["text"]
        return {"tool_calls": [{"name": "post_message", "arguments": {"channel": "project", "text": share}}]}
    if tool == "post_message":
        args = {"text": "Send the monthly sales report", "day_of_month": 1}
        return {"tool_calls": [{"name": "schedule_reminder", "arguments": args}]}
    return {"content": "The sales report is written, posted to the project group, and the monthly reminder is set."}


def hermes(data: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "graph.cli", *args, "--data-dir", str(data)],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=PROCESS_S,
        check=False,
    )


def rows(path: Path, sql: str) -> list[tuple[Any, ...]]:
    if not path.exists():
        return []
    with sqlite3.connect(path) as con:
        try:
            return con.execute(sql).fetchall()
        except sqlite3.OperationalError:
            return []


@pytest.fixture
def setup(tmp_path: Path):
    db = generate_sales_db(tmp_path / "user" / "sales.db", months=6, end_month=END)
    with ScriptedOpenAI(model) as stub:
        env = {**os.environ, **stub.env(), "HERMES_EMBEDDINGS": "hash", "HERMES_DATABASE": str(db)}
        for name in ("HERMES_MCP_CONFIG", "HERMES_TEST_HOLD_ANSWER", "HERMES_DEBUG"):
            env.pop(name, None)
        yield tmp_path / "data", env, stub


@pytest.mark.timeout(900)
def test_hermes_run_asks_and_resume_yes_reports_the_latest_month(setup):
    data, env, stub = setup
    asked = hermes(data, env, "run", TASK, "--thread", "t-yes", "--json")
    assert asked.returncode == 3, asked.stderr[-2000:]
    summary = json.loads(asked.stdout)
    assert summary["question"].startswith(f"Your data ends in {END}; there is none for {LAST}. Shall I report {END}")
    assert (
        list(data.glob("threads/*/reports/*.md")) == [] and rows(data / "team_chat.db", "SELECT 1 FROM messages") == []
    )
    assert len(stub.requests) == 1, "asked at once: no retry rounds"

    done = hermes(data, env, "resume", "yes", "--thread", "t-yes", "--json")
    assert done.returncode == 0, done.stderr[-2000:]
    summary = json.loads(done.stdout)
    assert summary["stop_reason"] is None and summary["question"] is None
    [report] = data.glob("threads/t-yes/reports/*.md")
    text = report.read_text()
    assert text.startswith(f"# Sales report — {END} (latest month with data; last month, {LAST}, has none)")
    [(channel, post)] = rows(data / "team_chat.db", "SELECT channel, text FROM messages")
    assert channel == "project" and END in post and str(report) in post
    assert rows(data / "reminders.db", "SELECT recurrence FROM reminders") == [("monthly",)]


@pytest.mark.timeout(900)
def test_hermes_resume_no_stops_and_does_nothing(setup):
    data, env, _stub = setup
    asked = hermes(data, env, "run", TASK, "--thread", "t-no")
    assert asked.returncode == 3, asked.stderr[-2000:]
    out = " ".join(asked.stdout.split())
    assert f"there is none for {LAST}" in out and "hermes resume --thread t-no" in out
    done = hermes(data, env, "resume", "no", "--thread", "t-no", "--json")
    summary = json.loads(done.stdout)
    assert f"there is none for {LAST}" in summary["stop_reason"] and "answered 'no'" in summary["stop_reason"]
    assert "Stopped before finishing" in summary["answer"]
    assert (
        list(data.glob("threads/*/reports/*.md")) == [] and rows(data / "team_chat.db", "SELECT 1 FROM messages") == []
    )
    assert rows(data / "reminders.db", "SELECT 1 FROM reminders") == []
