"""A side effect the idempotency ledger replays is reported as done once (issue 23, kind 6).

The kind: after a fork (``hermes branch fork``, ``Branches.fork``, a Studio replay from a
checkpoint), the same request reaches the ledger again; the ledger returns the recorded result
(it does not run again), and the turn must say the effect is done — once, replayed — never
"Stopped … no tool step succeeded", and never run the effect a second time. Siblings: a fork
inside the turn with the turn's own message (the ``hermes branch fork`` path, measured on
main: a new goal, the pending post closed as "already completed", the model not repeating it,
then "Stopped before finishing … Done so far: no tool step succeeded"), a replay from the
checkpoint before the tool round (input None), a new model call id for the same request, a
restart (a new ledger object on the same file), the same command run again after the process
died past the effect.

Real parts: the SQLite checkpointer the CLI opens (``graph.checkpoints.open_checkpointer``) and
the SQLite ledger file; the model is a scripted fake that can only call the tools bound to it."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

from graph.branches import Branches
from graph.builder import make_graph
from graph.checkpoints import checkpoints_file, open_checkpointer
from graph.runner import execute_turn
from tests.conftest import FakeToolbox, flagship_specs, tool_call
from tools.idempotency import IdempotencyLedger

pytestmark = pytest.mark.slow  # whole graph runs on SQLite files

GOAL = "Summarise last month's sales into a report, post it to the project group, and remind me every month."
REPORT = tool_call("generate_report", {"title": "Sales 2025-06", "queries": [{"label": "n", "sql": "SELECT 1"}]}, "r1")
OUTPUTS: dict[str, dict[str, Any]] = {
    "generate_report": {"path": "reports/sales-2025-06.md", "version": 1, "queries": []},
    "post_message": {"ok": True},
    "schedule_reminder": {"id": 1, "next_run": "2025-07-01T09:00"},
}
REPLAYED = "not run again"


def post(call_id: str) -> AIMessage:
    return tool_call("post_message", {"channel": "project group", "text": "Report: reports/sales-2025-06.md"}, call_id)


def remind(call_id: str) -> AIMessage:
    return tool_call("schedule_reminder", {"text": "send the sales report"}, call_id)


FIRST_TURN = [
    REPORT,
    post("p1"),
    remind("s1"),
    AIMessage("Done: report reports/sales-2025-06.md, posted, reminder set."),
]


def flagship_box(data_dir: Path, ran: list[str]) -> FakeToolbox:
    """The flagship's tools (their real metadata) run in process, each run recorded in ``ran``,
    on the SQLite ledger file of ``data_dir`` (as the Toolbox opens it)."""
    box = FakeToolbox()

    def recorded(name: str, output: dict[str, Any]) -> Callable[..., dict[str, Any]]:
        def run(**kw: Any) -> dict[str, Any]:
            ran.append(name)
            return output

        return run

    for spec in flagship_specs():
        box.add_spec(spec, recorded(spec.name, OUTPUTS.get(spec.name, {"ok": True})))
    box.registry.ledger = IdempotencyLedger(data_dir / "idempotency.db")
    return box


async def history(data_dir: Path, thread: str) -> list[Any]:
    async with open_checkpointer(checkpoints_file(data_dir)) as saver:
        agent = make_graph(checkpointer=saver)
        return [s async for s in agent.aget_state_history({"configurable": {"thread_id": thread}})]


def before(snapshots: list[Any], node: str, tool: str) -> str:
    """The id of the checkpoint about to run ``node`` in the round of ``tool``: before its
    dispatch (the AI message asking for it is last), or before the model call that asks for it
    (the result of the step before it is last)."""
    for s in snapshots:
        last = s.values["messages"][-1] if s.values.get("messages") else None
        if s.next != (node,) or last is None:
            continue
        if node == "dispatch_tools" and isinstance(last, AIMessage) and last.tool_calls[0]["name"] == tool:
            return s.config["configurable"]["checkpoint_id"]
        if node == "call_model" and isinstance(last, ToolMessage) and last.name == tool:
            return s.config["configurable"]["checkpoint_id"]
    raise AssertionError(f"no checkpoint before {node} for {tool}")


def replayed_results(values: dict[str, Any]) -> dict[str, ToolMessage]:
    return {
        str(m.name): m
        for m in values["messages"]
        if isinstance(m, ToolMessage) and m.status == "success" and m.additional_kwargs.get("replayed")
    }


@pytest.mark.parametrize(
    ("node", "tool", "fork_replies"),
    [
        # before the post's dispatch: the pending post replays; the model does not do the last step
        ("dispatch_tools", "post_message", [AIMessage("All of it was done already."), AIMessage("It is all done.")]),
        # before the model call that asks for the post: the model asks again (a new call id)
        ("call_model", "generate_report", [post("p2"), AIMessage("All posted."), AIMessage("It is all done.")]),
    ],
)
async def test_a_fork_inside_a_turn_with_its_own_request_replays_and_reports_it(
    scripted, data_dir, node, tool, fork_replies
):
    """``hermes branch fork THREAD CHECKPOINT "<the same request>"`` inside the turn: nothing runs
    twice, and the stop notice lists the replayed post as done, not "no tool step succeeded"."""
    ran: list[str] = []
    box = flagship_box(data_dir, ran)
    ctx = scripted([*FIRST_TURN, *fork_replies], box, embeddings="hash")
    first = await execute_turn(GOAL, ctx, "t1", quiet=True)
    assert first["stop_reason"] is None and sorted(ran) == sorted(OUTPUTS)
    start = before(await history(data_dir, "t1"), node, tool)
    out = await execute_turn(GOAL, ctx, "t1", quiet=True, checkpoint_id=start, op="fork")
    assert sorted(ran) == sorted(OUTPUTS)  # every effect ran once, over both branches
    notice = out["answer"]
    assert out["stop_reason"].startswith("the model answered without doing these steps: schedule_reminder")
    assert "no tool step succeeded" not in notice
    assert "generate_report" in notice and f"post_message (already done for this request earlier; {REPLAYED})" in notice
    # the fork continued the turn: one goal, the same request ids
    async with open_checkpointer(checkpoints_file(data_dir)) as saver:
        values = (await make_graph(checkpointer=saver).aget_state({"configurable": {"thread_id": "t1"}})).values
    assert [m.content for m in values["messages"] if isinstance(m, HumanMessage)] == [GOAL]
    assert set(replayed_results(values)) == {"post_message"}
    await box.registry.ledger.aclose()


async def test_a_fork_that_replays_to_the_end_answers_with_the_replay_stated(scripted, data_dir):
    """The same fork where the model also asks for the reminder again: both replay, the run
    finishes, and the results the model answers from say the effects were not run again."""
    ran: list[str] = []
    box = flagship_box(data_dir, ran)
    fork = [post("p2"), remind("s2"), AIMessage("Done: report reports/sales-2025-06.md, posted, reminder set.")]
    ctx = scripted([*FIRST_TURN, *fork], box, embeddings="hash")
    await execute_turn(GOAL, ctx, "t2", quiet=True)
    start = before(await history(data_dir, "t2"), "call_model", "generate_report")
    out = await execute_turn(GOAL, ctx, "t2", quiet=True, checkpoint_id=start, op="fork")
    assert out["stop_reason"] is None and sorted(ran) == sorted(OUTPUTS)
    async with open_checkpointer(checkpoints_file(data_dir)) as saver:
        values = (await make_graph(checkpointer=saver).aget_state({"configurable": {"thread_id": "t2"}})).values
    replays = replayed_results(values)
    assert set(replays) == {"post_message", "schedule_reminder"}
    for message in replays.values():
        assert REPLAYED in json.loads(str(message.content))["summary"]
    await box.registry.ledger.aclose()


async def test_a_replay_from_the_checkpoint_before_the_tool_round_is_marked_replayed(scripted, data_dir):
    """A replay (input None: Studio's re-run, the SDK's ``invoke(None, old_config)``) after a
    restart (a new ledger object on the same file), and the same request under a new call id:
    the effect ran once, and each replayed result says so."""
    ran: list[str] = []
    box = flagship_box(data_dir, ran)
    replay = [post("p-new"), remind("s1"), AIMessage("")]  # the model then gives no answer: a stop
    ctx = scripted([*FIRST_TURN, *replay], box, embeddings="hash")
    await execute_turn(GOAL, ctx, "t3", quiet=True)
    await box.registry.ledger.aclose()
    box.registry.ledger = IdempotencyLedger(data_dir / "idempotency.db")  # a restart
    start = before(await history(data_dir, "t3"), "call_model", "generate_report")
    async with open_checkpointer(checkpoints_file(data_dir)) as saver:
        agent = make_graph(checkpointer=saver)
        config = {"configurable": {"thread_id": "t3", "checkpoint_id": start}}
        out = await agent.ainvoke(None, config, context=ctx)
    assert sorted(ran) == sorted(OUTPUTS)
    assert set(replayed_results(out)) == {"post_message", "schedule_reminder"}
    notice = str(out["messages"][-1].content)
    assert out["stop_reason"] == "the model gave no answer" and "no tool step succeeded" not in notice
    assert f"schedule_reminder (already done for this request earlier; {REPLAYED})" in notice
    await box.registry.ledger.aclose()


async def test_branches_fork_with_the_turns_own_request_continues_it_another_message_does_not(scripted, data_dir):
    """The SDK's ``Branches.fork``: the same rule as the CLI. Another message is a new request."""
    ran: list[str] = []
    box = flagship_box(data_dir, ran)
    fork = [remind("s2"), AIMessage("Done.")]
    other = [AIMessage("Hello.")]
    ctx = scripted([*FIRST_TURN, *fork, *other], box, embeddings="hash")
    await execute_turn(GOAL, ctx, "t4", quiet=True)
    snapshots = await history(data_dir, "t4")
    at_post = before(snapshots, "dispatch_tools", "post_message")
    async with open_checkpointer(checkpoints_file(data_dir)) as saver:
        branches = Branches(make_graph(checkpointer=saver))
        out = await branches.fork("t4", at_post, "  " + GOAL.replace(" ", "  "), context=ctx)  # spacing aside
        assert sorted(ran) == sorted(OUTPUTS)
        assert [m.content for m in out["messages"] if isinstance(m, HumanMessage)] == [GOAL]
        assert set(replayed_results(out)) == {"post_message", "schedule_reminder"}
        out = await branches.fork("t4", at_post, "say hello", context=ctx)
    assert [m.content for m in out["messages"] if isinstance(m, HumanMessage)] == [GOAL, "say hello"]
    await box.registry.ledger.aclose()


class Crash(BaseException):
    """Stands for the process dying (not an error a tool reports)."""


async def test_a_rerun_after_a_crash_past_the_effect_replays_it_and_says_so(scripted, data_dir, monkeypatch):
    """The process died after the post completed and was recorded, before the round was
    checkpointed; the user runs the same command again: the turn continues, the post replays
    (marked), nothing runs twice."""
    import nodes.dispatch_tools as dispatch

    ran: list[str] = []
    box = flagship_box(data_dir, ran)
    real_write = dispatch._write_payload
    crashed: list[bool] = []

    def write_then_die(path, payload):
        if Path(path).name.startswith("p1-") and not crashed:  # the post's payload (call id p1)
            crashed.append(True)
            raise Crash
        real_write(path, payload)

    monkeypatch.setattr(dispatch, "_write_payload", write_then_die)
    replies = [
        REPORT,
        post("p1"),
        remind("s1"),
        AIMessage("Done: report reports/sales-2025-06.md, posted, reminder set."),
    ]
    ctx = scripted(replies, box, embeddings="hash")
    with pytest.raises(Crash):
        await execute_turn(GOAL, ctx, "t5", quiet=True)
    assert ran == ["generate_report", "post_message"]
    out = await execute_turn(GOAL, ctx, "t5", quiet=True)
    assert ran == ["generate_report", "post_message", "schedule_reminder"] and out["stop_reason"] is None
    async with open_checkpointer(checkpoints_file(data_dir)) as saver:
        values = (await make_graph(checkpointer=saver).aget_state({"configurable": {"thread_id": "t5"}})).values
    assert set(replayed_results(values)) == {"post_message"}
    await box.registry.ledger.aclose()


async def test_the_same_request_under_two_call_ids_in_one_round_runs_once_and_one_is_marked(scripted, data_dir):
    ran: list[str] = []
    box = flagship_box(data_dir, ran)
    twice = AIMessage(
        "",
        tool_calls=[
            {**post("p1").tool_calls[0], "id": "p1"},
            {**post("p2").tool_calls[0], "id": "p2"},
        ],
    )
    goal = "Post the report reports/sales-2025-06.md to the project group."
    ctx = scripted([twice, AIMessage("Posted to the project group.")], box, embeddings="hash")
    out = await execute_turn(goal, ctx, "t6", quiet=True)
    assert ran == ["post_message"] and out["stop_reason"] is None
    async with open_checkpointer(checkpoints_file(data_dir)) as saver:
        values = (await make_graph(checkpointer=saver).aget_state({"configurable": {"thread_id": "t6"}})).values
    results = {m.tool_call_id: m for m in values["messages"] if isinstance(m, ToolMessage)}
    assert results["p1"].status == results["p2"].status == "success"
    assert [bool(m.additional_kwargs.get("replayed")) for m in (results["p1"], results["p2"])].count(True) == 1
    await box.registry.ledger.aclose()


async def test_a_server_fork_with_a_new_message_states_the_effect_the_ledger_holds(scripted, data_dir):
    """On ``langgraph dev`` (Studio, the SDK's threads API) a fork with a new message goes into
    the graph as new input: the call the fork left pending is closed as not run on this branch,
    and a model that (rightly) does not post again stops — the notice states the post the ledger
    holds from the branch the fork left, not "no tool step succeeded"."""
    ran: list[str] = []
    box = flagship_box(data_dir, ran)
    fork = [AIMessage("It was already posted."), AIMessage("It is posted already.")]
    ctx = scripted([*FIRST_TURN, *fork], box, embeddings="hash")
    await execute_turn(GOAL, ctx, "t7", quiet=True)
    at_post = before(await history(data_dir, "t7"), "dispatch_tools", "post_message")
    async with open_checkpointer(checkpoints_file(data_dir)) as saver:
        agent = make_graph(checkpointer=saver)
        config = {"configurable": {"thread_id": "t7", "checkpoint_id": at_post}}
        again = "Post the sales report to the project group."
        out = await agent.ainvoke({"messages": [HumanMessage(again)]}, config, context=ctx)
    assert sorted(ran) == sorted(OUTPUTS)
    notice = str(out["messages"][-1].content)
    assert out["stop_reason"].startswith("the model answered without doing these steps: post_message")
    assert "no tool step succeeded" not in notice
    assert "not run again here): post_message." in notice
    await box.registry.ledger.aclose()
