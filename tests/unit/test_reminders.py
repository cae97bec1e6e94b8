"""Reminders fire (DESIGN §5.4): the reminder model (actions, stated date adjustments, bad
input), ``tools.scheduler`` (once per period, catch-up once, atomic claim, retries, takeover)
and its runners (``hermes reminders run|due|list``, ``hermes serve``, the ``reminders`` graph),
all with an injected clock and scripted models. Everything is written under tmp_path."""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import sqlite3
import threading

import pytest
from langchain_core.messages import AIMessage, HumanMessage
from typer.testing import CliRunner

from graph import resources
from graph.cli import app
from graph.context import Context
from graph.model import register_model
from tests.conftest import FakeToolbox, ScriptedChat, use_toolbox
from tools.builtin.reminders import list_reminders, schedule_reminder
from tools.idempotency import IdempotencyLedger
from tools.registry import ToolRegistry
from tools.reminder_history import firing_history
from tools.scheduler import (
    MAX_ATTEMPTS,
    call_tool_action,
    due_reminders,
    fire_due,
    mark_fired,
    record_outcome,
)
from tools.spec import ToolSpec

runner = CliRunner()
T = dt.datetime  # naive = local time, as the CLI's --now


def at(year: int, month: int, day: int, hour: int = 0, minute: int = 0) -> dt.datetime:
    return T(year, month, day, hour, minute)


@pytest.fixture(autouse=True)
def configured_channels(monkeypatch):
    """The tool actions here are stored directly, not by a request: their channels are allowed
    by configuration (a firing re-checks every action's destination, tools/destinations.py)."""
    monkeypatch.setenv("HERMES_ALLOWED_DESTINATIONS", '["p", "project"]')


def post_tool(effects: list, fail_first: int = 0) -> tuple[ToolSpec, object]:
    """A side-effect tool that appends to ``effects`` (fails its first ``fail_first`` calls)."""
    calls = {"n": 0}

    async def run(args: dict, request_id: str) -> dict:
        calls["n"] += 1
        if calls["n"] <= fail_first:
            raise RuntimeError("chat server down")
        effects.append((request_id, args))
        return {"posted": len(effects)}

    spec = ToolSpec(
        name="post_note",
        description="Post a note to a channel (test tool with a side effect).",
        parameters={
            "type": "object",
            "properties": {"channel": {"type": "string"}, "text": {"type": "string"}},
            "required": ["channel", "text"],
        },
        side_effect=True,
    )
    return spec, run


# -- the reminder model -------------------------------------------------------------------------


def test_day_31_and_february_30_are_stated_adjustments_not_errors(tmp_path):
    nov = schedule_reminder("pay rent", 31, "09:00", data_dir=tmp_path, now=at(2026, 11, 5))
    assert nov["next_run"].startswith("2026-11-30T09:00")
    assert "November 2026 (30 days)" in nov["adjustment"] and "2026-11-30" in nov["adjustment"]
    feb = schedule_reminder("send invoices", 30, "08:00", data_dir=tmp_path, now=at(2027, 2, 2))
    assert feb["next_run"].startswith("2027-02-28T08:00")
    assert "February 2027 (28 days)" in feb["adjustment"] and "last day" in feb["adjustment"]
    leap = schedule_reminder("send leap invoices", 30, "08:00", data_dir=tmp_path, now=at(2028, 2, 2))
    assert leap["next_run"].startswith("2028-02-29T08:00") and "2028-02-29" in leap["adjustment"]
    # a day every month has needs no adjustment; 29-31 say what happens in shorter months
    assert schedule_reminder("a", 28, data_dir=tmp_path, now=at(2026, 1, 1))["adjustment"] is None
    assert "shorter months" in schedule_reminder("b", 31, data_dir=tmp_path, now=at(2026, 1, 1))["adjustment"]
    # and it fires on the last day of November, saying so
    due = due_reminders(tmp_path, at(2026, 11, 30, 9, 5))
    rent = next(d for d in due if d.text == "pay rent")
    assert rent.period == "2026-11" and rent.scheduled_for.startswith("2026-11-30T09:00")
    assert "November 2026 (30 days)" in rent.adjustment


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"day_of_month": 0}, "1-31"),
        ({"day_of_month": 32}, "1-31"),
        ({"day_of_month": True}, "1-31"),
        ({"day_of_month": "31"}, "1-31"),
        ({"time": "24:00"}, "HH:MM"),
        ({"time": "9:00"}, "HH:MM"),
        ({"time": "09:60"}, "HH:MM"),
        ({"recurrence": "weekly"}, "recurrence"),
        ({"action": {"kind": "email"}}, "action.kind"),
        ({"action": {"kind": "tool"}}, "action.tool"),
        ({"action": {"kind": "tool", "tool": "post_note", "args": [1]}}, "action.args"),
        ({"action": {"kind": "task", "task": "  "}}, "action.task"),
        ({"action": {"kind": "task", "thread_id": "../x"}}, "thread_id"),
    ],
)
def test_a_bad_day_time_or_action_is_a_clear_error_and_writes_nothing(tmp_path, kwargs, message):
    with pytest.raises(ValueError, match=message):
        schedule_reminder("send the report", **kwargs, data_dir=tmp_path, now=at(2026, 1, 1))
    assert list_reminders(data_dir=tmp_path)["count"] == 0


def test_actions_default_to_a_notice_and_duplicates_are_reused(tmp_path):
    # a reminder's own text is a notice, never a request to run (issue 27)
    plain = schedule_reminder("Send the monthly sales report", data_dir=tmp_path, now=at(2026, 1, 1))
    assert plain["action"] == {"kind": "notify"}
    tool = schedule_reminder(
        "post the numbers",
        2,
        "10:00",
        action={"kind": "tool", "tool": "post_note", "args": {"channel": "project", "text": "numbers"}},
        data_dir=tmp_path,
        now=at(2026, 1, 1),
    )
    assert tool["action"] == {"kind": "tool", "tool": "post_note", "args": {"channel": "project", "text": "numbers"}}
    again = schedule_reminder(
        "post  THE numbers", 2, "10:00", action={"kind": "task", "task": "other"}, data_dir=tmp_path, now=at(2026, 1, 3)
    )
    assert again["already_existed"] and again["id"] == tool["id"] and again["action"] == tool["action"]
    assert "kept" in again["note"]
    listed = list_reminders(data_dir=tmp_path)
    assert listed["count"] == 2 and listed["reminders"][0]["last_fired_period"] is None


def test_an_old_reminders_db_is_migrated(tmp_path):
    con = sqlite3.connect(tmp_path / "reminders.db")
    con.execute(
        "CREATE TABLE reminders (id INTEGER PRIMARY KEY AUTOINCREMENT, text TEXT NOT NULL, "
        "day_of_month INTEGER NOT NULL, time TEXT NOT NULL, recurrence TEXT NOT NULL, "
        "created_at TEXT NOT NULL, next_run TEXT NOT NULL)"
    )
    con.execute(
        "INSERT INTO reminders (text, day_of_month, time, recurrence, created_at, next_run) VALUES "
        "('old one', 1, '09:00', 'monthly', ?, '2026-02-01T09:00')",
        (at(2026, 1, 5).astimezone().isoformat(),),
    )
    con.commit()
    con.close()
    [due] = due_reminders(tmp_path, at(2026, 2, 1, 9, 0))
    assert due.text == "old one" and due.action == {"kind": "notify"} and due.period == "2026-02"


# -- once per period ------------------------------------------------------------------------


def test_a_reminder_fires_once_per_period_and_not_before_its_time(tmp_path):
    r = schedule_reminder("review sales", 15, "09:00", data_dir=tmp_path, now=at(2026, 1, 10))
    assert due_reminders(tmp_path, at(2026, 1, 15, 8, 59)) == []
    [due] = due_reminders(tmp_path, at(2026, 1, 15, 9, 0))
    assert (due.period, due.request_id, due.skipped_periods, due.thread_id) == (
        "2026-01",
        f"reminder:{r['id']}:2026-01",
        [],
        None,  # a plain reminder delivers a notice: no agent turn, no thread
    )
    assert mark_fired(tmp_path, r["id"], "2026-01", now=at(2026, 1, 15, 9, 0))
    assert not mark_fired(tmp_path, r["id"], "2026-01", now=at(2026, 1, 15, 9, 0))  # one claim only
    assert due_reminders(tmp_path, at(2026, 1, 15, 9, 1)) == []  # being fired by a live runner
    record_outcome(tmp_path, r["id"], "2026-01", ok=True, detail="done", now=at(2026, 1, 15, 9, 1))
    for when in (at(2026, 1, 15, 9, 1), at(2026, 1, 31, 23, 59), at(2026, 2, 15, 8, 59)):
        assert due_reminders(tmp_path, when) == []
    [feb] = due_reminders(tmp_path, at(2026, 2, 15, 9, 0))
    assert feb.period == "2026-02"
    listed = list_reminders(data_dir=tmp_path)["reminders"][0]
    assert listed["last_fired_period"] == "2026-01" and listed["next_run"].startswith("2026-02-15T09:00")


def test_a_period_that_passed_before_the_reminder_existed_does_not_fire(tmp_path):
    schedule_reminder("review sales", 15, "09:00", data_dir=tmp_path, now=at(2026, 1, 20))
    assert due_reminders(tmp_path, at(2026, 1, 25)) == []
    assert [d.period for d in due_reminders(tmp_path, at(2026, 2, 15, 9))] == ["2026-02"]


async def test_missed_periods_are_caught_up_once_not_n_times(tmp_path):
    r = schedule_reminder(
        "send the report",
        1,
        "09:00",
        action={"kind": "task", "task": "write the sales report"},
        data_dir=tmp_path,
        now=at(2026, 7, 20),
    )
    fired: list = []

    async def fire(due):
        fired.append(due.period)
        return {"ok": True, "detail": "done"}

    assert [f.status for f in await fire_due(tmp_path, at(2026, 8, 1, 10), fire)] == ["fired"]
    # nothing runs from August to December; the December check fires once, for December
    [dec] = await fire_due(tmp_path, at(2026, 12, 2, 10), fire)
    assert dec.status == "fired" and dec.due.period == "2026-12"
    assert dec.due.skipped_periods == ["2026-09", "2026-10", "2026-11"]
    assert fired == ["2026-08", "2026-12"]
    assert await fire_due(tmp_path, at(2026, 12, 20), fire) == []
    history = firing_history(tmp_path, r["id"])
    assert [(h["period"], h["state"]) for h in history] == [("2026-12", "done"), ("2026-08", "done")]
    assert history[0]["skipped"] == ["2026-09", "2026-10", "2026-11"]


def test_a_reminder_never_fired_catches_up_from_its_first_period(tmp_path):
    schedule_reminder("send the report", 1, "09:00", data_dir=tmp_path, now=at(2026, 7, 20))
    [due] = due_reminders(tmp_path, at(2026, 10, 1, 9))
    assert due.period == "2026-10" and due.skipped_periods == ["2026-08", "2026-09"]


# -- racing runners ---------------------------------------------------------------------------


def test_threads_racing_for_one_period_fire_once(tmp_path):
    r = schedule_reminder("x", 1, "09:00", data_dir=tmp_path, now=at(2026, 1, 20))
    barrier = threading.Barrier(16)
    won: list[bool] = []

    def claim() -> None:
        barrier.wait()
        won.append(mark_fired(tmp_path, r["id"], "2026-02", now=at(2026, 2, 1, 9)))

    threads = [threading.Thread(target=claim) for _ in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert won.count(True) == 1 and len(won) == 16


# -- tool actions through a real registry ---------------------------------------------------


async def test_a_tool_action_has_one_effect_when_run_1000_times_for_a_period(tmp_path):
    effects: list = []
    ledger = IdempotencyLedger.in_data_dir(tmp_path)
    registry = ToolRegistry(ledger=ledger)
    registry.register(*post_tool(effects))
    try:
        schedule_reminder(
            "post the numbers",
            1,
            "09:00",
            action={"kind": "tool", "tool": "post_note", "args": {"channel": "project", "text": "numbers"}},
            data_dir=tmp_path,
            now=at(2026, 11, 20),
        )
        results = []
        for _ in range(1000):
            results += await fire_due(tmp_path, at(2026, 12, 1, 9, 30), lambda due: call_tool_action(registry, due))
        assert [f.status for f in results] == ["fired"]
        assert effects == [("reminder:1:2026-12", {"channel": "project", "text": "numbers"})]
        # even past the claim (a runner re-firing the period, e.g. after a crash) the ledger
        # returns the recorded result for the same request id instead of posting again
        [due] = due_reminders(tmp_path, at(2027, 1, 1, 9, 30))
        due.period, due.request_id = "2026-12", "reminder:1:2026-12"
        replays = await asyncio.gather(*(call_tool_action(registry, due) for _ in range(1000)))
        assert all(r["ok"] and r["replayed"] for r in replays)
        assert len(effects) == 1
    finally:
        await ledger.aclose()


async def test_a_failing_action_is_retried_then_given_up_for_the_period(tmp_path):
    effects: list = []
    registry = ToolRegistry()
    registry.register(*post_tool(effects, fail_first=1))
    schedule_reminder(
        "post",
        1,
        "09:00",
        action={"kind": "tool", "tool": "post_note", "args": {"channel": "p", "text": "t"}},
        data_dir=tmp_path,
        now=at(2026, 11, 20),
    )
    fire = lambda due: call_tool_action(registry, due)  # noqa: E731
    [first] = await fire_due(tmp_path, at(2026, 12, 1, 10), fire)
    assert first.status == "failed" and first.will_retry and "chat server down" in first.detail
    [second] = await fire_due(tmp_path, at(2026, 12, 1, 10, 1), fire)
    assert second.status == "fired" and second.due.attempt == 2 and second.due.request_id == "reminder:1:2026-12"
    assert len(effects) == 1 and await fire_due(tmp_path, at(2026, 12, 1, 10, 2), fire) == []

    async def broken(due):
        raise ConnectionError("no route")

    outcomes = [f for i in range(MAX_ATTEMPTS + 2) for f in await fire_due(tmp_path, at(2027, 1, 1, 10, i), broken)]
    assert [f.status for f in outcomes] == ["failed"] * MAX_ATTEMPTS
    assert [f.will_retry for f in outcomes] == [True] * (MAX_ATTEMPTS - 1) + [False]
    assert firing_history(tmp_path, 1)[0]["state"] == "failed"
    # the next period is a fresh start
    assert [d.period for d in due_reminders(tmp_path, at(2027, 2, 1, 10))] == ["2027-02"]


# -- the CLI ----------------------------------------------------------------------------------


def scripted_cli(name: str, replies, data_dir, box: FakeToolbox | None = None) -> ScriptedChat:
    model = ScriptedChat(messages=iter(replies))
    model.seen = []
    register_model(name, lambda _c: model)
    use_toolbox(Context(model=name, data_dir=str(data_dir)), box or FakeToolbox())
    return model


def test_cli_reminders_run_fires_a_task_turn_once_on_its_thread(tmp_path):
    schedule_reminder(
        "Monthly numbers",
        1,
        "09:00",
        action={"kind": "task", "task": "Check the monthly numbers"},
        data_dir=tmp_path,
        now=at(2026, 8, 20),
    )
    model = scripted_cli("rem-task", [AIMessage("Numbers checked.")], tmp_path)
    before = runner.invoke(
        app, ["reminders", "list", "--now", "2026-12-01T09:30", "--data-dir", str(tmp_path)], env={"COLUMNS": "200"}
    )
    assert before.exit_code == 0 and "2026-09-01T09:00" in before.output and "(overdue)" in before.output
    args = ["reminders", "run", "--now", "2026-12-01T09:30", "--model", "rem-task", "--data-dir", str(tmp_path)]
    out = runner.invoke(app, [*args, "--json"])
    assert out.exit_code == 0, out.output
    [firing] = json.loads(out.output.strip().splitlines()[-1])["firings"]
    assert firing["status"] == "fired" and firing["period"] == "2026-12" and firing["thread_id"] == "reminder-1"
    assert firing["skipped_periods"] == ["2026-09", "2026-10", "2026-11"]
    assert firing["result"]["answer"] == "Numbers checked."
    [prompt] = model.seen
    assert [m.content for m in prompt if isinstance(m, HumanMessage)][-1] == "Check the monthly numbers"
    assert (tmp_path / "checkpoints.sqlite").exists()
    # the same period again: nothing fires, and it says so
    again = runner.invoke(app, args)
    assert again.exit_code == 0 and "nothing due" in again.output and len(model.seen) == 1
    shown = runner.invoke(app, ["session", "show", "reminder-1", "--data-dir", str(tmp_path), "--json"])
    assert shown.exit_code == 0 and "Numbers checked." in shown.output
    listed = json.loads(runner.invoke(app, ["reminders", "list", "--data-dir", str(tmp_path), "--json"]).output)
    assert listed[0]["last_fired_period"] == "2026-12" and listed[0]["last_firing"]["state"] == "done"
    due = json.loads(
        runner.invoke(
            app, ["reminders", "due", "--now", "2027-01-01T09:00", "--data-dir", str(tmp_path), "--json"]
        ).output
    )
    assert [d["period"] for d in due] == ["2027-01"]


def test_cli_reminders_run_prints_fired_and_caught_up_periods(tmp_path):
    effects: list = []
    schedule_reminder(
        "post the numbers",
        31,
        "09:00",
        action={"kind": "tool", "tool": "post_note", "args": {"channel": "project", "text": "numbers"}},
        data_dir=tmp_path,
        now=at(2026, 7, 1),
    )
    box = FakeToolbox()
    box.registry.register(*post_tool(effects))
    scripted_cli("rem-tool", [], tmp_path, box)
    out = runner.invoke(
        app, ["reminders", "run", "--now", "2026-11-30T10:00", "--model", "rem-tool", "--data-dir", str(tmp_path)]
    )
    assert out.exit_code == 0, out.output
    text = " ".join(out.output.split())
    assert "fired reminder 1" in text and "for 2026-11 [tool post_note]" in text
    assert "missed 2026-07, 2026-08, 2026-09, 2026-10 skipped" in text
    assert "November 2026 (30 days)" in text and "2026-11-30" in text
    assert effects == [("reminder:1:2026-11", {"channel": "project", "text": "numbers"})]


def test_cli_rejects_a_bad_clock(tmp_path):
    out = runner.invoke(app, ["reminders", "run", "--now", "next tuesday", "--data-dir", str(tmp_path)])
    assert out.exit_code == 1 and "ISO-8601" in out.output


def test_cli_run_exits_1_when_a_firing_failed_and_says_it_retries(tmp_path):
    schedule_reminder(
        "post", 1, "09:00", action={"kind": "tool", "tool": "no_such_tool"}, data_dir=tmp_path, now=at(2026, 11, 20)
    )
    scripted_cli("rem-fail", [], tmp_path)
    out = runner.invoke(app, ["reminders", "run", "--now", "2026-12-01T09:30", "--data-dir", str(tmp_path)])
    text = " ".join(out.output.split())
    assert out.exit_code == 1 and "failed reminder 1" in text and "unknown tool" in text
    assert "retried at the next check" in text


def test_serve_checks_every_interval_and_fires_once(tmp_path):
    effects: list = []
    now = dt.datetime.now()
    schedule_reminder(
        "post",
        1,
        "00:00",
        action={"kind": "tool", "tool": "post_note", "args": {"channel": "p", "text": "t"}},
        data_dir=tmp_path,
        now=now - dt.timedelta(days=40),
    )
    box = FakeToolbox()
    box.registry.register(*post_tool(effects))
    resources.set_toolbox(Context(data_dir=str(tmp_path)), box)
    out = runner.invoke(app, ["serve", "--interval", "0.05", "--checks", "3", "--data-dir", str(tmp_path)])
    assert out.exit_code == 0, out.output
    assert out.output.count("fired reminder 1") == 1 and len(effects) == 1
    assert effects[0][0] == f"reminder:1:{now:%Y-%m}"


# -- the reminders graph, in process ----------------------------------------------------------


async def test_the_reminders_graph_fires_tool_and_task_actions_in_process(scripted, data_dir):
    from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

    from graph.builder import make_graph
    from graph.scheduler_graph import graph

    effects: list = []
    box = FakeToolbox()
    box.registry.register(*post_tool(effects))
    context = scripted([AIMessage("Reviewed.")], box)
    data_dir.mkdir(parents=True, exist_ok=True)
    schedule_reminder(
        "post",
        1,
        "09:00",
        action={"kind": "tool", "tool": "post_note", "args": {"channel": "p", "text": "t"}},
        data_dir=data_dir,
        now=at(2026, 11, 20),
    )
    schedule_reminder(
        "Monthly review",
        1,
        "09:00",
        action={"kind": "task", "task": "Review the numbers", "thread_id": "monthly-review"},
        data_dir=data_dir,
        now=at(2026, 11, 20),
    )
    out = await graph.ainvoke({"now": "2026-12-01T09:30:00"}, context=context)
    assert [(f["reminder_id"], f["status"]) for f in out["fired"]] == [(1, "fired"), (2, "fired")]
    assert out["failed"] == [] and out["skipped"] == [] and out["checked_at"].startswith("2026-12-01T09:30")
    assert len(effects) == 1 and out["fired"][1]["result"]["answer"] == "Reviewed."
    again = await graph.ainvoke({"now": "2026-12-01T10:00:00"}, context=context)
    assert again["fired"] == [] and len(effects) == 1
    async with AsyncSqliteSaver.from_conn_string(str(data_dir / "checkpoints.sqlite")) as saver:
        snap = await make_graph(checkpointer=saver).aget_state({"configurable": {"thread_id": "monthly-review"}})
    human = [m for m in snap.values["messages"] if isinstance(m, HumanMessage)]
    assert [(m.content, m.id) for m in human] == [("Review the numbers", "reminder:2:2026-12")]


async def test_the_reminders_graph_rejects_a_bad_clock(scripted):
    from graph.scheduler_graph import graph

    with pytest.raises(ValueError, match="ISO-8601"):
        await graph.ainvoke({"now": "soon"}, context=scripted([]))
