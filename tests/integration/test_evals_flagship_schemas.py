"""The flagship cases of ``python -m evals tasks`` on three schemas, wired end to end against a
scripted OpenAI-compatible model (wiring, not quality): the suite builds each database (Chinook
from its cached PyPI sdist), runs the flagship sentence through the real runner (subprocess
executor, the team-chat MCP server, SQLite checkpoints) and scores it with the flagship checks.

The script reads the schema, then on sales and tickets writes the report of last month, posts
the report's own ready message and sets the monthly reminder (→ passed: the post carries the
period, figures and path); on Chinook, whose data ends in 2011-12, it asks for "last month" and
the run stops at the question naming 2011-12 (→ passed, nothing written)."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Any

import pytest

from evals.harness import EvalConfig, run_suite
from evals.suites.tasks import FLAGSHIP_TASKS
from tests.support.scripted_openai import ScriptedOpenAI
from tools.builtin.database.periods import month_before

pytestmark = pytest.mark.slow  # the runner, an MCP server, tool worker processes

LAST = month_before(dt.date.today())
QUERIES = {
    "sales": [
        ("Orders", f"SELECT COUNT(*) AS orders FROM orders WHERE strftime('%Y-%m', order_date) = '{LAST}'"),
        (
            "Revenue",
            (
                "SELECT ROUND(SUM(i.quantity * i.unit_price), 2) AS revenue FROM orders o JOIN order_items i "
                f"ON i.order_id = o.order_id WHERE strftime('%Y-%m', o.order_date) = '{LAST}'"
            ),
        ),
    ],
    "tickets": [
        ("Tickets", f"SELECT COUNT(*) AS tickets FROM tickets WHERE strftime('%Y-%m', opened_at) = '{LAST}'"),
        (
            "Rated tickets",
            (
                "SELECT COUNT(csat) AS rated, ROUND(AVG(csat), 2) AS csat FROM tickets "
                f"WHERE strftime('%Y-%m', opened_at) = '{LAST}'"
            ),
        ),
    ],
    "chinook": [("Revenue", "SELECT ROUND(SUM(Total), 2) AS revenue, COUNT(*) AS invoices FROM Invoice")],
}
#: A name near the start of each schema's description (a long one is cut for the prompt).
MARKERS = {"chinook": "AlbumId", "tickets": "agent_id", "sales": ""}


def model(body: dict[str, Any]) -> dict[str, Any]:
    messages = body["messages"]
    start = max(i for i, m in enumerate(messages) if m["role"] == "user")
    prompt = str(messages[start]["content"])
    names = {c["id"]: c["function"]["name"] for m in messages for c in m.get("tool_calls") or []}
    results = [(names.get(m.get("tool_call_id"), "?"), m["content"]) for m in messages[start:] if m["role"] == "tool"]
    if not results:
        return {"tool_calls": [{"name": "describe_database", "arguments": {}}]}
    schema = next(s for s, marker in MARKERS.items() if marker in results[0][1])
    tool, content = results[-1]
    if tool == "describe_database":
        period = "last month" if schema == "chinook" else LAST
        queries = [{"label": label, "sql": sql} for label, sql in QUERIES[schema]]
        args: dict[str, Any] = {"title": f"{schema.title()} report", "period": period, "queries": queries}
        return {"tool_calls": [{"name": "generate_report", "arguments": args}]}
    if tool == "generate_report":
        share = json.loads(content)["data"]["share"]["text"]
        channel = "support" if "support group" in prompt else "project"
        return {"tool_calls": [{"name": "post_message", "arguments": {"channel": channel, "text": share}}]}
    if tool == "post_message":
        args = {
            "text": f"Send the monthly {'support tickets' if schema == 'tickets' else 'sales'} report",
            "day_of_month": 1,
        }
        return {"tool_calls": [{"name": "schedule_reminder", "arguments": args}]}
    return {"content": "The report is written, posted to the group, and the monthly reminder is set."}


@pytest.mark.timeout(900)
async def test_the_flagship_runs_and_is_scored_on_three_schemas(tmp_path: Path, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "x")
    with ScriptedOpenAI(model) as stub:
        report = await run_suite(
            EvalConfig(suite="tasks", model="stub", base_url=stub.base_url, cases=FLAGSHIP_TASKS, out=tmp_path / "out")
        )
    rows = {r["task"]: r for r in map(json.loads, (report.out / "results.jsonl").read_text().splitlines())}
    assert set(rows) == set(FLAGSHIP_TASKS) == {"sales-flagship", "tickets-workflow", "chinook-flagship"}
    for task in ("sales-flagship", "tickets-workflow"):
        r = rows[task]
        assert r["passed"], r
        assert r["tools_called"] == {
            "describe_database": 1,
            "generate_report": 1,
            "post_message": 1,
            "schedule_reminder": 1,
        }, r
    chinook = rows["chinook-flagship"]
    assert chinook["passed"], json.dumps(chinook)[:3000]
    assert chinook["question"].startswith("Your data ends in 2011-12; there is none for " + LAST)
    assert chinook["side_effects"]["report_files"] == 0 and chinook["side_effects"]["chat_messages"] == 0
