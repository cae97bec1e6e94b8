"""Scoring rules of the ``tools`` (BFCL) and ``tasks`` eval suites and the probe's pick
classes: pure functions, no model, no process."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from langchain_core.messages import AIMessage

from evals.probe_tool_calls import PROBES, keywords_in, who_picked
from evals.suites.tasks import TASKS, contains_number, make_databases, pass_hat, side_effects, workflow_problems
from evals.tasks_db import generate_tickets_db


def test_pass_hat_is_tau_bench_estimator():
    # 2 tasks, k = 3: one passed 3/3, one 1/3
    assert pass_hat([3, 1], 3, 1) == pytest.approx((1 + 1 / 3) / 2)
    assert pass_hat([3, 1], 3, 3) == pytest.approx(0.5)  # only the all-pass task counts
    assert pass_hat([], 3, 1) == 0.0


def test_contains_number_ignores_separators_and_dates():
    assert contains_number("There were 1,234 orders.", 1234, 0)
    assert contains_number("Average 3.39 out of 5", 3.39, 2)
    assert not contains_number("Average 3.4", 3.39, 2)
    assert not contains_number("on 2026-11-06", 6, 0)
    assert contains_number("Revenue: 173218.00", 173218, 0)


def test_tickets_db_is_deterministic_and_differently_shaped(tmp_path: Path):
    a = generate_tickets_db(tmp_path / "a.db")
    b = generate_tickets_db(tmp_path / "b.db")
    dump = [list(sqlite3.connect(p).iterdump()) for p in (a, b)]
    assert dump[0] == dump[1]
    with sqlite3.connect(a) as con:
        tables = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    assert tables == {"agents", "tickets", "ticket_replies"}


def test_every_task_has_a_computable_expected_value(tmp_path: Path):
    from evals.suites.tasks import expected_value

    dbs = make_databases(tmp_path)
    for task in TASKS:
        if task.kind in ("answer", "readonly"):
            assert expected_value(dbs[task.db], task.expected) > 0, task.id
        else:
            assert not task.expected


def test_side_effects_of_an_empty_data_dir(tmp_path: Path):
    assert side_effects(tmp_path) == {"ledger_requests": 0, "chat_messages": 0, "reminders": 0, "report_files": 0}


def test_probe_plain_prompts_hold_no_tool_keyword():
    names = [
        "describe_database",
        "query_database",
        "generate_report",
        "schedule_reminder",
        "list_reminders",
        "list_messages",
        "post_message",
        "read_result",
    ]
    plain = [p for g, p, _ in PROBES if g == "plain"]
    assert len(plain) >= 10 and all(not keywords_in(p, names) for p in plain)
    assert sum(bool(keywords_in(p, names)) for g, p, _ in PROBES if g == "keyword") >= 10
    assert who_picked(True, ["post_message"]) == "forced"
    assert who_picked(True, ["post_message", "list_messages"]) == "required"
    assert who_picked(False, ["post_message"]) == "chosen"
    assert who_picked(True, []) == "no_offer"


def test_bfcl_case_becomes_a_registry_and_is_scored_by_bfcls_checker():
    pytest.importorskip("bfcl_eval")
    from evals.suites.tools import load_category, registry_for, score

    case = next(c for c in load_category("simple") if c["id"] == "simple_python_1")  # math.factorial
    registry, names, refused = registry_for(case["function"])
    assert not refused and names == {"math_factorial": "math.factorial"}
    params = registry.get("math_factorial").parameters
    assert params["type"] == "object" and params["properties"]["number"]["type"] == "integer"
    assert score(case, "simple", [{"math.factorial": {"number": 5}}]) == (1, "")
    assert score(case, "simple", [{"math.factorial": {"number": 6}}])[0] == 0
    assert score(case, "simple", [])[0] == 0
    irrelevant = load_category("irrelevance")[0]
    assert score(irrelevant, "irrelevance", []) == (1, "")
    assert score(irrelevant, "irrelevance", [{"x": {}}])[0] == 0


async def test_a_bfcl_case_runs_through_the_call_model_node(tmp_path: Path):
    pytest.importorskip("bfcl_eval")
    from evals.suites.tools import load_category, run_case
    from graph import resources
    from graph.context import Context
    from graph.model import register_model
    from tests.conftest import ScriptedChat, tool_call

    case = next(c for c in load_category("parallel") if c["id"] == "parallel_0")  # spotify.play twice
    replies = [
        tool_call("spotify_play", {"artist": "Taylor Swift", "duration": 20}),
        tool_call("spotify_play", {"artist": "Maroon 5", "duration": 15}),
        AIMessage("Both are playing."),
    ]
    model = ScriptedChat(messages=iter(replies))
    register_model("bfcl-script", lambda _c: model)
    context = Context(model="bfcl-script", data_dir=str(tmp_path))
    try:
        row = await run_case(case, "parallel", context, loop=True)
    finally:
        resources._toolboxes.clear()
    assert model.offers[0] == ["spotify_play"], "the node offered the case's function, under its snake_case name"
    assert row["calls"] == [{"spotify.play": {"artist": "Taylor Swift", "duration": 20}}]
    assert row["score"] == 0, "one call of two in the first reply"
    assert row["loop_score"] == 1 and len(row["loop_calls"]) == 2, "both calls through the loop"
    assert len(model.seen) == 3 and row["tokens_in"] > 0


def _workflow_dir(root: Path, period: str, channel: str, post: str, reminder: str, recurrence: str = "monthly") -> Path:
    # where generate_report writes: the run's thread folder (tools.executors.workspace)
    reports = root / "threads" / "eval-1" / "reports"
    reports.mkdir(parents=True)
    (reports / "sales.md").write_text(
        f"# Sales\n\nPeriod: **{period}**\n\n| region | revenue |\n|---|---:|\n| North | 1,234.50 |\n"
    )
    with sqlite3.connect(root / "team_chat.db") as con:
        con.execute("CREATE TABLE messages (id INTEGER PRIMARY KEY, channel TEXT, text TEXT, created_at TEXT)")
        con.execute("INSERT INTO messages (channel, text, created_at) VALUES (?, ?, '')", (channel, post))
    with sqlite3.connect(root / "reminders.db") as con:
        con.execute("CREATE TABLE reminders (id INTEGER PRIMARY KEY, text TEXT, recurrence TEXT)")
        con.execute("INSERT INTO reminders (text, recurrence) VALUES (?, ?)", (reminder, recurrence))
    return root


def test_the_flagship_checks_judge_content_not_only_counts(tmp_path: Path):
    task = {t.id: t for t in TASKS}["sales-flagship"]
    good = _workflow_dir(
        tmp_path / "good",
        "2026-11",
        "sales-team",
        "The sales report for 2026-11 is ready: North 1,234.50. Full report: sales.md",
        "Send the monthly sales report",
    )
    assert workflow_problems(task, {}, {}, good, "November 2026") == []
    # issue 18: a post that does not carry the report (no figure, no path) fails the run
    thin = _workflow_dir(
        tmp_path / "thin", "2026-11", "sales-team", "The sales report for 2026-11 is ready.", "Send the sales report"
    )
    problems = workflow_problems(task, {}, {}, thin, "November 2026")
    assert any("figures" in p for p in problems) and any("path" in p for p in problems), problems
    # what README command one produced on SmolLM2 (issue "embedded default"): a URL for a
    # channel, a reminder about nothing, a report for the wrong month
    bad = _workflow_dir(
        tmp_path / "bad",
        "2026-09",
        "https#www.facebook.com",
        "This is a task that needs to be done",
        "This is a task that needs to be done, but it's not possible",
    )
    problems = workflow_problems(task, {"stop_reason": ""}, {}, bad, "November 2026")
    assert any("period 2026-09" in p for p in problems)
    assert any("not a channel name" in p for p in problems)
    assert any("does not say what it is about" in p for p in problems)
    assert any("reminder" in p for p in problems)
    assert workflow_problems(task, {"stop_reason": "no progress"}, {}, good, "November 2026") == [
        "stopped: no progress"
    ]
    assert side_effects(good)["report_files"] == 1


def test_the_flagship_on_data_that_ends_years_ago_passes_only_the_question_or_the_latest_month_titled_so(
    tmp_path: Path,
):
    """Chinook's data ends in 2011-12 (DESIGN §5.6): the run stops at the question naming that
    month with nothing written, or reports that month titled as the latest month with data —
    never a report for last month, never an untitled substitute."""
    import datetime as dt

    task = {t.id: t for t in TASKS}["chinook-flagship"]
    today = dt.date(2026, 12, 3)
    question = "Your data ends in 2011-12; there is none for 2026-11. Shall I report 2011-12 instead? (yes/no)"
    asked = {"question": question, "stop_reason": None}
    assert workflow_problems(task, asked, {}, tmp_path / "nothing", "December 2011", today) == []
    wrote = _workflow_dir(
        tmp_path / "wrote", "2011-12", "project", "Sales 2011-12: 1,234.50 (sales.md)", "sales report"
    )
    assert "already wrote" in workflow_problems(task, asked, {}, wrote, "December 2011", today)[0]
    # a question on fresh data, or one not naming the latest month, is no pass
    assert workflow_problems(task, asked, {}, tmp_path / "nothing", "November 2026", today)
    assert workflow_problems(task, {"question": "Which month?"}, {}, tmp_path / "nothing", "December 2011", today)
    # the report of 2011-12 passes only when its title says it is the latest month with data
    problems = workflow_problems(task, {}, {}, wrote, "December 2011", today)
    assert problems == ["report of 2011-12 not titled as the latest month with data: '# Sales'"]
    titled = wrote / "threads" / "eval-1" / "reports" / "sales.md"
    titled.write_text(
        titled.read_text().replace(
            "# Sales", "# Sales — 2011-12 (latest month with data; last month, 2026-11, has none)"
        )
    )
    assert workflow_problems(task, {}, {}, wrote, "December 2011", today) == []
    # a report for last month (which has no data) is never the pass
    last = _workflow_dir(tmp_path / "last", "2026-11", "project", "Sales 2026-11: 1,234.50 (sales.md)", "sales report")
    assert any("period 2026-11" in p for p in workflow_problems(task, {}, {}, last, "December 2011", today))


def test_chinook_is_built_only_when_a_chosen_task_uses_it(tmp_path: Path, monkeypatch):
    import evals.sample_dbs

    def offline(path, cache=None):
        raise AssertionError("chinook fetched for tasks that do not use it")

    monkeypatch.setattr(evals.sample_dbs, "chinook_db", offline)
    assert set(make_databases(tmp_path, ["sales", "tickets", "sales"])) == {"sales", "tickets"}
