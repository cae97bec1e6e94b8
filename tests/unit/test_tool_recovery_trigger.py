"""The "tool failed, then succeeded on retry" memory (seed §4.2) is written only when the tool
itself failed; a refused call (not offered, unknown tool, malformed arguments) never ran, so a
later success of the same tool is no recovery."""

from __future__ import annotations

from langchain_core.messages import AIMessage, HumanMessage
from langgraph.checkpoint.memory import InMemorySaver

from graph.builder import make_graph
from graph.resources import drain_background, get_memory
from tests.conftest import FakeToolbox, tool_call


async def recoveries(ctx) -> list[str]:
    await drain_background()
    return [e.text for e in await get_memory(ctx).episodic.list(ctx.user_id, kinds=["tool_recovery"])]


async def test_a_tool_that_failed_in_itself_then_worked_is_remembered(scripted):
    attempts: list[int] = []

    def fetch(n: int) -> dict:
        attempts.append(n)
        if len(attempts) == 1:
            raise RuntimeError("backend hiccup")
        return {"value": 7}

    box = FakeToolbox()
    box.add("fetch_value", fetch, {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]})
    ctx = scripted(
        [
            tool_call("fetch_value", {"n": 1}, "a"),
            tool_call("fetch_value", {"n": 2}, "b"),
            AIMessage("The value is 7."),
        ],
        box,
    )
    await make_graph(InMemorySaver()).ainvoke(
        {"messages": [HumanMessage("fetch the value")]}, {"configurable": {"thread_id": "r1"}}, context=ctx
    )
    assert any("fetch_value failed, then succeeded" in t for t in await recoveries(ctx))


async def test_a_refused_call_followed_by_a_success_is_no_recovery(scripted):
    box = FakeToolbox()
    box.add(
        "fetch_value",
        lambda n: {"value": 7},
        {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]},
    )
    ctx = scripted(
        [
            tool_call("fetch_value", {"n": "not a number"}, "a"),
            tool_call("fetch_value", {"n": 2}, "b"),
            AIMessage("The value is 7."),
        ],
        box,
    )
    await make_graph(InMemorySaver()).ainvoke(
        {"messages": [HumanMessage("fetch the value")]}, {"configurable": {"thread_id": "r2"}}, context=ctx
    )
    assert await recoveries(ctx) == []
