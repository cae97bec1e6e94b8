"""Exactly-once side effects and the enforced offer (DESIGN §0, §2.4, §2.7).

The kinds: a replay is also a fork, a restart, a retry after a timeout, a new call id for the
same request; an unoffered or blocked call never runs, whatever the model; a read-only request
never triggers a side effect; a fork before a pending call leaves a valid history."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langgraph.checkpoint.memory import InMemorySaver

from graph.builder import make_graph
from graph.history import unanswered_calls
from graph.progress import request_id
from tests.conftest import FakeToolbox, flagship_specs, tool_call
from tools.errors import ToolTimeout, ToolTransportError
from tools.idempotency import IdempotencyLedger
from tools.registry import ToolRegistry
from tools.spec import ToolSpec

POST = ToolSpec(
    name="post_note",
    description="Post a note to the team channel (test side effect).",
    parameters={"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]},
    side_effect=True,
    requested_by=(r"\bpost\b",),
)


def counting_registry(path: Path | None, effects: list, spec: ToolSpec = POST, fail: BaseException | None = None):
    registry = ToolRegistry(ledger=IdempotencyLedger(path))

    async def runner(args, rid):
        effects.append(args)
        if fail is not None:
            raise fail
        return {"posted": args["text"], "n": len(effects)}

    registry.register(spec, runner)
    return registry


@pytest.mark.slow  # 1,000 replays
async def test_1000_replays_across_restarts_and_new_call_ids_make_one_effect(tmp_path):
    effects: list = []
    db = tmp_path / "ledger.db"
    args = {"text": "hello"}
    outcomes = []
    for _ in range(4):  # a new process = a new ledger object on the same file
        registry = counting_registry(db, effects)
        # 250 duplicates per "process", each under a new model call id, some concurrently
        rids = [request_id("thread-1", "goal-msg-1", "post_note", dict(args)) for _ in range(250)]
        outcomes += await asyncio.gather(*(registry.call("post_note", args, request_id=r) for r in rids))
        await registry.ledger.aclose()
    assert len(effects) == 1
    assert len(outcomes) == 1000 and all(o.status == "ok" for o in outcomes)
    assert sum(not o.replayed for o in outcomes) == 1


def test_the_request_id_names_the_request_not_the_call():
    a = request_id("t", "g", "post_note", {"text": "x", "channel": "c"})
    assert a == request_id("t", "g", "post_note", {"channel": "c", "text": "x"})  # canonical arguments
    assert a != request_id("t", "g", "post_note", {"text": "y", "channel": "c"})
    assert a != request_id("t", "g2", "post_note", {"text": "x", "channel": "c"})  # another goal
    assert a != request_id("t2", "g", "post_note", {"text": "x", "channel": "c"})  # another thread


async def test_a_timed_out_side_effect_is_not_rerun_and_its_outcome_is_stated(tmp_path):
    effects: list = []
    registry = counting_registry(tmp_path / "l.db", effects, fail=ToolTimeout("no answer within 10 s"))
    first = await registry.call("post_note", {"text": "hi"}, request_id="r1")
    assert first.status == "error" and first.error_kind == "outcome_unknown"
    assert "outcome unknown" in first.error and "will not be run again" in first.error
    again = await registry.call("post_note", {"text": "hi"}, request_id="r1")
    assert again.error_kind == "outcome_unknown" and again.replayed
    await registry.ledger.aclose()
    # after a restart too
    registry = counting_registry(tmp_path / "l.db", effects)
    later = await registry.call("post_note", {"text": "hi"}, request_id="r1")
    assert later.error_kind == "outcome_unknown" and len(effects) == 1
    await registry.ledger.aclose()


async def test_a_transport_failure_after_sending_is_unknown_before_sending_is_retryable(tmp_path):
    effects: list = []
    sent = ToolTransportError("team_chat", "connection lost")
    registry = counting_registry(None, effects, fail=sent)
    assert (await registry.call("post_note", {"text": "a"}, request_id="r")).error_kind == "outcome_unknown"
    not_sent = ToolTransportError("team_chat", "not connected")
    not_sent.sent = False
    registry = counting_registry(None, effects, fail=not_sent)
    outcome = await registry.call("post_note", {"text": "a"}, request_id="r")
    assert outcome.error_kind == "transport"  # known not to have run: a retry is safe
    assert (await registry.call("post_note", {"text": "a"}, request_id="r")).replayed is False  # claim released


async def test_an_idempotent_side_effect_is_retried_after_a_timeout(tmp_path):
    effects: list = []
    spec = POST.model_copy(update={"idempotent": True})
    registry = counting_registry(None, effects, spec=spec, fail=ToolTimeout("slow"))
    assert (await registry.call("post_note", {"text": "a"}, request_id="r")).error_kind == "timeout"


async def test_a_call_in_flight_in_a_dead_process_is_unknown_unless_retry_safe(tmp_path):
    db = tmp_path / "l.db"
    effects: list = []
    registry = counting_registry(db, effects)
    # a claim left by a process that died mid-call (pid 999999999 does not exist)
    await registry.ledger._db.call(
        lambda con: con.execute(
            "INSERT INTO tool_requests (tool, request_id, state, owner, created) "
            "VALUES ('post_note', 'r9', 'running', ?, 0)",
            (f"{__import__('socket').gethostname()}:999999999:dead",),
        )
    )
    outcome = await registry.call("post_note", {"text": "a"}, request_id="r9")
    assert outcome.error_kind == "outcome_unknown" and "stopped mid-call" in outcome.error
    assert effects == []
    await registry.ledger.aclose()


# -- through the graph ------------------------------------------------------------------------


def post_box(effects: list) -> FakeToolbox:
    box = FakeToolbox()

    def post(text: str) -> dict[str, str]:
        effects.append(text)
        return {"posted": text}

    box.add_spec(POST, post)
    return box


async def test_an_unoffered_call_is_refused_and_names_the_allowed_tools(scripted):
    effects: list = []
    box = post_box(effects)
    box.add("get_time", lambda city="": {"time": "10:00"})
    # a model that ignores the offer, as a hosted model can
    ctx = scripted([tool_call("post_note", {"text": "spam"}, "c1"), AIMessage("It is 10:00.")], box, ignore_offer=True)
    agent = make_graph(checkpointer=InMemorySaver())
    out = await agent.ainvoke(
        {"messages": [HumanMessage("What time is it in Tokyo?")]}, {"configurable": {"thread_id": "t"}}, context=ctx
    )
    assert effects == []
    refusal = next(m for m in out["messages"] if isinstance(m, ToolMessage))
    body = json.loads(refusal.content)
    assert refusal.status == "error" and "not offered" in body["error"] and "get_time" in body["error"]
    assert scripted.models[ctx.model].offers[0] == ["get_time"]


@pytest.mark.parametrize("rogue", [spec.name for spec in flagship_specs() if spec.side_effect])
async def test_a_read_only_question_never_runs_a_side_effect_tool(scripted, rogue):
    ran: list = []
    box = FakeToolbox()
    for spec in flagship_specs():
        box.add_spec(spec, lambda **kw: ran.append(kw) or {"ok": True})
    ctx = scripted([tool_call(rogue, {}, "c1"), AIMessage("I cannot tell the time.")], box, ignore_offer=True)
    agent = make_graph(checkpointer=InMemorySaver())
    await agent.ainvoke(
        {"messages": [HumanMessage("What time is it in Tokyo?")]}, {"configurable": {"thread_id": "t"}}, context=ctx
    )
    assert ran == []
    offered = scripted.models[ctx.model].offers[0] or []
    assert not {s.name for s in flagship_specs() if s.side_effect} & set(offered)


@pytest.mark.slow  # ten forks, each a graph run
async def test_forks_replaying_the_goal_under_new_call_ids_post_once(scripted, tmp_path):
    """Ten forks from the checkpoint before the post, each with a new model call id, on a
    persistent ledger: one effect; every fork sees the recorded result."""
    effects: list = []
    box = post_box(effects)
    box.registry.ledger = IdempotencyLedger(tmp_path / "ledger.db")
    replies = [tool_call("post_note", {"text": "done"}, "first"), AIMessage("Posted.")]
    for i in range(10):
        replies += [tool_call("post_note", {"text": "done"}, f"fork-{i}"), AIMessage("Posted again?")]
    ctx = scripted(replies, box)
    agent = make_graph(checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "fork"}}
    await agent.ainvoke({"messages": [HumanMessage("post a note saying done")]}, config, context=ctx)
    history = [s async for s in agent.aget_state_history(config)]
    start = next(s for s in reversed(history) if s.next == ("assemble_context",) and s.values.get("messages"))
    for _ in range(10):
        forked = await agent.ainvoke(None, start.config, context=ctx)  # fork: the same goal again
        replay = [m for m in forked["messages"] if isinstance(m, ToolMessage)][-1]
        assert replay.status == "success"
    assert effects == ["done"]
    await box.registry.ledger.aclose()


async def test_a_fork_before_a_pending_call_leaves_a_valid_history(scripted):
    effects: list = []
    box = post_box(effects)
    ctx = scripted(
        [tool_call("post_note", {"text": "x"}, "pending"), AIMessage("Posted."), AIMessage("Sure, nothing posted.")],
        box,
    )
    agent = make_graph(checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "pending"}}
    await agent.ainvoke({"messages": [HumanMessage("post a note saying x")]}, config, context=ctx)
    history = [s async for s in agent.aget_state_history(config)]
    before_dispatch = next(s for s in history if s.next == ("dispatch_tools",))
    effects.clear()
    out = await agent.ainvoke(
        {"messages": [HumanMessage("actually, just say hi")]}, before_dispatch.config, context=ctx
    )
    assert unanswered_calls(out["messages"]) == []
    closed = next(m for m in out["messages"] if isinstance(m, ToolMessage) and m.tool_call_id == "pending")
    assert closed.status == "error" and "not run" in closed.content
    assert "already completed" in closed.content  # the post exists (ran on the first branch): never "no effect"
    # the closing result sits right after its call, before the new request
    index = {m.id: i for i, m in enumerate(out["messages"])}
    human = next(m for m in out["messages"] if isinstance(m, HumanMessage) and "just say hi" in m.content)
    assert index[closed.id] < index[human.id]
    assert effects == []


async def test_a_side_effect_that_lost_its_transport_runs_once_and_the_user_is_told(scripted):
    calls: list = []
    box = FakeToolbox()

    async def flaky(args, rid):
        calls.append(rid)
        raise ToolTransportError("team_chat", "connection reset after the request was written")

    box.registry.register(POST, flaky)
    ctx = scripted([tool_call("post_note", {"text": "x"}, "c1"), AIMessage("Posted!")], box)
    agent = make_graph(checkpointer=InMemorySaver())
    out = await agent.ainvoke(
        {"messages": [HumanMessage("post a note saying x")]}, {"configurable": {"thread_id": "t"}}, context=ctx
    )
    assert len(calls) == 1  # not retried blindly
    assert "outcome of post_note is unknown" in out["stop_reason"]
    assert out["messages"][-1].content.startswith("Stopped before finishing")


class Crash(BaseException):
    """Stands for the process dying mid-call (not an error a tool reports)."""


async def test_rerunning_a_crashed_turn_continues_it_and_never_repeats_the_effect(scripted, tmp_path):
    from graph.runner import run_turn

    effects: list = []
    box = FakeToolbox()
    box.registry.ledger = IdempotencyLedger(tmp_path / "ledger.db")

    async def post(args, rid):
        effects.append(args)
        if len(effects) == 1:
            raise Crash  # it posted, then the process died before anything was recorded
        return {"posted": args["text"]}

    box.registry.register(POST, post)
    ctx = scripted(
        [
            tool_call("post_note", {"text": "x"}, "c1"),
            tool_call("post_note", {"text": "x"}, "c2"),
            AIMessage("Posted."),
        ],
        box,
    )
    with pytest.raises(Crash):
        await run_turn("post a note saying x", ctx, "crashy", quiet=True)
    # the user runs the same command again: the interrupted turn continues
    summary = await run_turn("post a note saying x", ctx, "crashy", quiet=True)
    assert len(effects) == 1
    assert "outcome of post_note is unknown" in (summary["stop_reason"] or "")
    await box.registry.ledger.aclose()


async def test_parallel_identical_side_effect_calls_collapse_to_one(scripted):
    """Identical calls of one round are one request (the ledger); different arguments are
    different requests ("note alpha and beta"), see test_graph_loop."""
    effects: list = []
    box = post_box(effects)
    many = AIMessage(
        "",
        tool_calls=[
            {"name": "post_note", "args": {"text": "hi all"}, "id": "p1", "type": "tool_call"},
            {"name": "post_note", "args": {"text": "hi all"}, "id": "p2", "type": "tool_call"},
        ],
    )
    ctx = scripted([many, AIMessage("Posted.")], box)
    agent = make_graph(checkpointer=InMemorySaver())
    out = await agent.ainvoke(
        {"messages": [HumanMessage("post a note saying hi all")]}, {"configurable": {"thread_id": "par"}}, context=ctx
    )
    assert effects == ["hi all"]
    by_id = {m.tool_call_id: m for m in out["messages"] if isinstance(m, ToolMessage)}
    assert by_id["p1"].status == by_id["p2"].status == "success"


async def test_a_damaged_ledger_refuses_side_effects_with_a_clear_error(tmp_path):
    db = tmp_path / "idempotency.db"
    db.write_text("garbage, not a database")
    effects: list = []
    registry = counting_registry(db, effects)
    outcome = await registry.call("post_note", {"text": "a"}, request_id="r")
    assert (
        outcome.status == "error" and "idempotency ledger" in outcome.error and "Move the file aside" in outcome.error
    )
    assert effects == []


async def test_a_tool_that_cannot_run_for_a_setting_stops_the_run_with_its_message(scripted):
    from tools.errors import ConfigurationError

    calls: list = []
    box = FakeToolbox()

    def lookup(q: str = ""):
        calls.append(q)
        raise ConfigurationError("no database configured: set HERMES_DATABASE to your SQLite file")

    box.add("lookup_data", lookup, {"type": "object", "properties": {"q": {"type": "string"}}, "required": []})
    ctx = scripted([tool_call("lookup_data", {"q": "x"}, "c1"), AIMessage("unused")], box)
    agent = make_graph(checkpointer=InMemorySaver())
    out = await agent.ainvoke(
        {"messages": [HumanMessage("how many rows are there?")]}, {"configurable": {"thread_id": "cfg"}}, context=ctx
    )
    assert calls == ["x"]  # not retried, not regenerated
    assert out["stop_reason"].startswith("lookup_data cannot run") and "HERMES_DATABASE" in out["stop_reason"]
    assert "HERMES_DATABASE" in out["messages"][-1].content
