"""A side effect dispatched just before the process died (kill -9 mid-call) is never reported as
"not run" and never silently repeated: the ledger's claim makes the next turn say its outcome is
unknown, and running the same call again under a new goal needs the user's confirmation
(a LangGraph interrupt). Sibling kinds: a fork from before the call (nothing dispatched: "not
run" stays true), and the user confirming the repeat."""

from __future__ import annotations

from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command

from graph.builder import builder, make_graph
from graph.progress import request_id
from graph.state import InputState
from nodes.assemble_context import NOT_RUN
from tests.conftest import FakeToolbox, tool_call

ARGS = {"label": "alpha"}
PARAMS = {"type": "object", "properties": {"label": {"type": "string"}}, "required": ["label"]}


def counter_box(effects: list[str]) -> FakeToolbox:
    box = FakeToolbox()

    def bump_counter(label: str) -> dict:
        effects.append(label)
        return {"count": len(effects)}

    box.add("bump_counter", bump_counter, PARAMS, side_effect=True, requested_by=(r"\bbump\b",))
    return box


async def crashed_turn(scripted, effects, replies, *, dispatched: bool):
    """Turn 1 stops after the model asked for bump_counter (the process 'died' there); when
    ``dispatched``, the ledger holds the call's claim and the effect happened."""
    box = counter_box(effects)
    ctx = scripted(replies, box)
    saver = InMemorySaver()
    config: RunnableConfig = {"configurable": {"thread_id": "T"}}
    crashing = builder.compile(checkpointer=saver, interrupt_before=["dispatch_tools"])
    await crashing.ainvoke(
        InputState(messages=[HumanMessage("Bump the deployment counter for label alpha")]), config, context=ctx
    )
    state = (await crashing.aget_state(config)).values
    goal = next(m for m in state["messages"] if isinstance(m, HumanMessage))
    if dispatched:
        rid = request_id("T", str(goal.id), "bump_counter", ARGS)

        def claim(con, key):
            con.execute(
                "INSERT INTO tool_requests (tool, request_id, state, owner, created) "
                "VALUES (?, ?, 'running', 'pid:999999:dead', 0)",
                key,
            )
            con.commit()

        await box.registry.ledger._db.call(claim, ("bump_counter", rid))
        effects.append("alpha")  # the effect happened before the kill
    return make_graph(saver), ctx, config


def closed_result(values) -> ToolMessage:
    return next(m for m in values["messages"] if isinstance(m, ToolMessage) and m.tool_call_id == "c1")


async def test_a_claimed_call_is_reported_unknown_and_its_repeat_waits_for_confirmation(scripted):
    effects: list[str] = []
    replies = [
        tool_call("bump_counter", ARGS, "c1"),
        tool_call("bump_counter", ARGS, "c2"),
        AIMessage("It may have run already; please check."),
    ]
    agent, ctx, config = await crashed_turn(scripted, effects, replies, dispatched=True)
    await agent.ainvoke(
        {"messages": [HumanMessage("That crashed. Bump the deployment counter for label alpha")]}, config, context=ctx
    )
    snap = await agent.aget_state(config)
    result = closed_result(snap.values)
    assert "outcome unknown" in str(result.content) and "had no effect" not in str(result.content)
    assert result.additional_kwargs.get("error_kind") == "outcome_unknown"
    # the repeat under the new goal is held at a question, not run
    assert snap.interrupts and "may already have run" in snap.interrupts[0].value["question"]
    assert effects == ["alpha"]
    out = await agent.ainvoke(Command(resume="no"), config, context=ctx)
    assert effects == ["alpha"], "ran again without the user's confirmation"
    assert "unknown" in str(out["messages"][-1].content)  # the stop says what to check


async def test_the_user_confirming_runs_it_once_more(scripted):
    effects: list[str] = []
    replies = [tool_call("bump_counter", ARGS, "c1"), tool_call("bump_counter", ARGS, "c2"), AIMessage("Bumped again.")]
    agent, ctx, config = await crashed_turn(scripted, effects, replies, dispatched=True)
    await agent.ainvoke(
        {"messages": [HumanMessage("It did not run. Bump the deployment counter for label alpha")]}, config, context=ctx
    )
    out = await agent.ainvoke(Command(resume="yes"), config, context=ctx)
    assert effects == ["alpha", "alpha"] and out["messages"][-1].content == "Bumped again."


async def test_a_call_never_dispatched_is_still_not_run_and_needs_no_confirmation(scripted):
    effects: list[str] = []
    replies = [tool_call("bump_counter", ARGS, "c1"), tool_call("bump_counter", ARGS, "c2"), AIMessage("Done.")]
    agent, ctx, config = await crashed_turn(scripted, effects, replies, dispatched=False)
    out = await agent.ainvoke(
        {"messages": [HumanMessage("Bump the deployment counter for label alpha now")]}, config, context=ctx
    )
    assert str(closed_result(out).content) == NOT_RUN
    assert effects == ["alpha"] and out["messages"][-1].content == "Done."
