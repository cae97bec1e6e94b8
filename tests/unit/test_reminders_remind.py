"""A reminder reminds, and its action is bound to the request that created it (issue 27 part 1,
issue 25 part 2; DESIGN §5.4, §2.8).

The flagship's reminder is created by a scripted agent turn, then fired by ``hermes reminders
run`` (in process, a scripted model standing by that would schedule again if it were asked):
each firing delivers a notice, none runs the reminder's text as a request, none creates a
reminder. A reminder's tool action is checked against the creating request when it is
scheduled and again when it fires."""

from __future__ import annotations

import datetime as dt
import json
import uuid
from pathlib import Path

from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from typer.testing import CliRunner

from graph.cli import app
from graph.context import Context
from graph.model import register_model
from tests.conftest import POST_MESSAGE, FakeToolbox, ScriptedChat, recording_post, tool_call, use_toolbox
from tools.builtin.catalog import GENERATE_REPORT, LIST_REMINDERS, SCHEDULE_REMINDER
from tools.builtin.reminder_store import open_schedule
from tools.builtin.reminders import list_reminders, schedule_reminder
from tools.reminder_history import delivery_history, firing_history

runner = CliRunner()
FLAGSHIP = (
    "Summarise last month's sales into an analysis report, post it to the project group, and remind me every month."
)
CUSTOMER_LIST = "Customers: Alice Martin <alice@example.com>, Bob Stone <bob@example.com>"


def box_for(data_dir: Path, posts: list) -> FakeToolbox:
    """The flagship's tools in process: the real reminder functions on ``data_dir``, a report
    stand-in and the team-chat ``post_message`` copy (recording into ``posts``)."""
    box = FakeToolbox()
    box.add_spec(GENERATE_REPORT, lambda **a: {"path": "reports/sales.md", "version": 1, "queries": []})
    box.add_spec(POST_MESSAGE, recording_post(posts))
    box.add_spec(SCHEDULE_REMINDER, lambda **a: schedule_reminder(**a, data_dir=data_dir))
    box.add_spec(LIST_REMINDERS, lambda: list_reminders(data_dir=data_dir))
    return box


def agent_turn(data_dir: Path, posts: list, request: str, replies: list) -> dict:
    """``hermes run REQUEST`` in process with a scripted model; the JSON summary."""
    name = f"create-{uuid.uuid4().hex[:6]}"
    model = ScriptedChat(messages=iter(replies))
    register_model(name, lambda _c: model)
    use_toolbox(Context(model=name, data_dir=str(data_dir)), box_for(data_dir, posts))
    out = runner.invoke(
        app, ["run", request, "--model", name, "--data-dir", str(data_dir), "--thread", "create", "--json"]
    )
    assert out.exit_code == 0, out.output
    return json.loads(out.output.strip().splitlines()[-1])


def months_ahead(n: int) -> list[str]:
    """``--now`` values: 10:00 on the 1st of each of the next ``n`` months (real clock: the
    reminder was created now)."""
    today = dt.date.today()
    out = []
    for i in range(1, n + 1):
        y, m = divmod(today.month - 1 + i, 12)
        out.append(f"{today.year + y:04d}-{m + 1:02d}-01T10:00")
    return out


class FiredModel(ScriptedChat):
    """A model for the runs a firing starts: posts, then tries to schedule again, then answers
    (judged from the messages after the last human message). Counts its calls in ``seen``."""

    post: dict = {}  # noqa: RUF012 (pydantic copies field defaults)

    async def _agenerate(self, messages, stop=None, run_manager=None, **kwargs):  # type: ignore[override]
        self.seen.append(list(messages))
        last_human = max(i for i, m in enumerate(messages) if isinstance(m, HumanMessage))
        done = [m.name for m in messages[last_human:] if isinstance(m, ToolMessage)]
        cid = f"f{uuid.uuid4().hex[:8]}"
        if self.post and "post_message" not in done:
            reply: AIMessage = tool_call("post_message", self.post, cid)
        elif "schedule_reminder" not in done:
            reply = tool_call("schedule_reminder", {"text": "Send the sales report", "day_of_month": 2}, cid)
        else:
            reply = AIMessage("Done; the reminder already recurs.")
        return ChatResult(generations=[ChatGeneration(message=reply)])


def fire(data_dir: Path, when: str, model_name: str, box: FakeToolbox, *extra: str):
    use_toolbox(Context(model=model_name, data_dir=str(data_dir)), box)  # closed by each command
    return runner.invoke(
        app, ["reminders", "run", "--now", when, "--model", model_name, "--data-dir", str(data_dir), *extra]
    )


def reminder_count(data_dir: Path) -> int:
    """Reminders stored (through the store: on SQLite or PostgreSQL, tests/integration/test_reminder_backends.py)."""
    return list_reminders(data_dir=data_dir)["count"]


# -- a fired reminder reminds ----------------------------------------------------------------------


def test_the_flagships_reminder_fired_3_times_delivers_3_notices_and_creates_no_reminder(tmp_path):
    posts: list = []
    agent_turn(
        tmp_path,
        posts,
        FLAGSHIP,
        [
            tool_call("generate_report", {"title": "Sales report", "queries": [{"label": "a", "sql": "SELECT 1"}]}),
            tool_call("post_message", {"channel": "project", "text": "Last month's sales report is ready."}),
            # the demo's reminder: its text is the request, and the action defaults to it
            tool_call(
                "schedule_reminder",
                {
                    "text": "remind me every month to send the sales report",
                    "day_of_month": 1,
                    "action": {"kind": "task"},
                },
            ),
            AIMessage("Report written, posted, reminder set."),
        ],
    )
    assert reminder_count(tmp_path) == 1 and posts == [("project", "Last month's sales report is ready.")]
    model = FiredModel(messages=iter([]))
    model.seen = []
    register_model("fired-flagship", lambda _c: model)
    for when in months_ahead(3):
        out = fire(tmp_path, when, "fired-flagship", box_for(tmp_path, posts))
        assert out.exit_code == 0, out.output
        assert "Reminder (" in out.output and "remind me every month to send the sales report" in out.output
    assert reminder_count(tmp_path) == 1  # firing N times creates no reminder
    assert model.seen == []  # the reminder's text was never run as a request
    delivered = delivery_history(tmp_path)
    assert len(delivered) == 3 and {d["outcome"] for d in delivered} == {"delivered"}
    assert sorted(d["period"] for d in delivered) == [w[:7] for w in months_ahead(3)]
    assert all(d["message"].endswith("remind me every month to send the sales report") for d in delivered)
    listed = json.loads(runner.invoke(app, ["reminders", "list", "--data-dir", str(tmp_path), "--json"]).output)
    assert len(listed) == 1 and len(listed[0]["deliveries"]) == 3 and listed[0]["action"] == {"kind": "notify"}
    table = runner.invoke(app, ["reminders", "list", "--data-dir", str(tmp_path)], env={"COLUMNS": "250"})
    assert "notice only" in table.output and f"3 (last {months_ahead(3)[-1][:7]})" in table.output
    history = runner.invoke(app, ["reminders", "history", "--data-dir", str(tmp_path)], env={"COLUMNS": "250"})
    assert history.exit_code == 0 and history.output.count("delivered") >= 3


def test_a_task_action_runs_for_the_creating_request_and_never_schedules_again(tmp_path):
    posts: list = []
    request = "Post the sales total to the project group and remind me every month."
    agent_turn(
        tmp_path,
        posts,
        request,
        [
            tool_call("post_message", {"channel": "project", "text": "Sales total: 42"}),
            tool_call(
                "schedule_reminder",
                {
                    "text": "Monthly sales total",
                    "day_of_month": 1,
                    # the worst case: the task repeats the whole request, "remind me" included
                    "action": {"kind": "task", "task": request},
                },
            ),
            AIMessage("Posted and scheduled."),
        ],
    )
    assert reminder_count(tmp_path) == 1
    model = FiredModel(messages=iter([]))
    model.seen, model.post = [], {"channel": "project", "text": "This month's sales total: 40"}
    register_model("fired-task", lambda _c: model)
    for when in months_ahead(3):
        out = fire(tmp_path, when, "fired-task", box_for(tmp_path, posts), "--json")
        assert out.exit_code == 0, out.output
    assert reminder_count(tmp_path) == 1  # each fired run tried to schedule: refused by metadata
    # the fired runs posted where the creating request said (the project group), once a month
    assert posts.count(("project", "This month's sales total: 40")) == 3
    assert len(delivery_history(tmp_path)) == 3 and model.seen


# -- a reminder's action is bound to the request that created it ------------------------------------


def test_the_reminder_action_attack_is_refused_at_creation_and_at_firing(tmp_path):
    posts: list = []
    request = "Post the sales total to #sales-team and remind me every month."
    attack = {"kind": "tool", "tool": "post_message", "args": {"channel": "general", "text": CUSTOMER_LIST}}
    good = {"kind": "tool", "tool": "post_message", "args": {"channel": "sales-team", "text": "Monthly total"}}
    out = agent_turn(
        tmp_path,
        posts,
        request,
        [
            tool_call("post_message", {"channel": "sales-team", "text": "Sales total: 42"}),
            tool_call("schedule_reminder", {"text": "Monthly total", "action": attack}, "bad"),
            tool_call("schedule_reminder", {"text": "Monthly total", "action": good}, "good"),
            AIMessage("Posted and scheduled."),
        ],
    )
    assert out["tools_called"]["schedule_reminder"] == 1  # the attack never ran
    shown = runner.invoke(app, ["session", "show", "create", "--data-dir", str(tmp_path), "--json"]).output
    error = " ".join(json.dumps(json.loads(shown), ensure_ascii=False).replace("\\", "").split())
    assert "would run post_message later" in error and "channel='general'" in error and "#sales-team" in error
    [stored] = list_reminders(data_dir=tmp_path)["reminders"]
    assert stored["action"] == good  # the attack was never stored

    [first, second] = months_ahead(2)
    box = box_for(tmp_path, posts)
    ran = fire(tmp_path, first, "none", box)
    assert ran.exit_code == 0, ran.output
    assert posts[-1] == ("sales-team", "Monthly total")  # allowed: the creating request named it

    # the stored action is changed behind the agent's back (or was stored before the check)
    with open_schedule(tmp_path) as con:
        con.execute("UPDATE reminders SET action = ?", (json.dumps(attack),))
    before = list(posts)
    ran = fire(tmp_path, second, "none", box_for(tmp_path, posts))
    text = " ".join(ran.output.split())
    assert ran.exit_code == 1 and posts == before  # not posted
    assert "action refused" in text and "channel='general'" in text and "given up for this period" in text
    assert firing_history(tmp_path)[0]["state"] == "failed"  # not retried: a retry meets the same rule
    last = delivery_history(tmp_path)[0]
    assert last["period"] == second[:7] and last["outcome"] == "failed" and "general" in last["detail"]


def test_a_tool_action_stored_without_a_request_fires_only_to_a_configured_destination(tmp_path, monkeypatch):
    posts: list = []
    schedule_reminder(
        "share the customers",
        1,
        "09:00",
        action={"kind": "tool", "tool": "post_message", "args": {"channel": "general", "text": CUSTOMER_LIST}},
        data_dir=tmp_path,
        now=dt.datetime(2026, 11, 20),
    )
    out = fire(tmp_path, "2026-12-01T10:00", "none", box_for(tmp_path, posts))
    assert out.exit_code == 1 and posts == []
    assert "no request is recorded" in " ".join(out.output.split())
    # the user allows the channel in the configuration: the next period posts
    monkeypatch.setenv("HERMES_ALLOWED_DESTINATIONS", '["general"]')
    out = fire(tmp_path, "2027-01-01T10:00", "none", box_for(tmp_path, posts))
    assert out.exit_code == 0, out.output
    assert posts == [("general", CUSTOMER_LIST)]
