"""Failure classes end to end through the graph (seed §5.3, graph/failures.py): retry with
backoff for timeouts/transport, regenerate for invalid arguments, ask the user for missing data."""

from __future__ import annotations

import json

import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command

from graph import failures
from graph.builder import make_graph
from tests.conftest import FakeToolbox, tool_call
from tools.errors import ToolTimeout, ToolTransportError


@pytest.fixture(autouse=True)
def fast_backoff(monkeypatch):
    monkeypatch.setattr(failures, "RETRY_BACKOFF_S", 0.001)
    import nodes.dispatch_tools as d

    monkeypatch.setattr(d, "RETRY_BACKOFF_S", 0.001)


def box_spec(name: str):
    from tools.spec import ToolSpec

    return ToolSpec(
        name=name,
        description=f"Test tool {name} for the failure-class tests only.",
        parameters={"type": "object", "properties": {}, "required": []},
    )


def results(out) -> list[ToolMessage]:
    return [m for m in out["messages"] if isinstance(m, ToolMessage)]


async def test_transport_failures_are_retried_under_the_same_request_id(scripted):
    seen: list[str] = []
    box = FakeToolbox()

    async def flaky(args, request_id):
        seen.append(request_id)
        if len(seen) < 3:
            raise ToolTransportError("chat", "connection reset")
        return {"ok": True}

    box.registry.register(box_spec("flaky_post"), flaky)
    ctx = scripted([tool_call("flaky_post", {}, "call-id-never-in-a-request-id"), AIMessage("posted")], box)
    out = await make_graph(InMemorySaver()).ainvoke(
        {"messages": [HumanMessage("go")]}, {"configurable": {"thread_id": "t"}}, context=ctx
    )
    # one request id for every retry, and it does not contain the model's call id
    assert len(seen) == 3 and len(set(seen)) == 1 and "call-id-never-in-a-request-id" not in seen[0]
    assert results(out)[0].status == "success"
    assert out["metrics"]["tool_retries"] == 2


async def test_timeouts_stop_retrying_at_the_cap(scripted):
    calls = 0
    box = FakeToolbox()

    async def slow(args, request_id):
        nonlocal calls
        calls += 1
        raise ToolTimeout("over 10 s")

    box.registry.register(box_spec("slow_tool"), slow)
    ctx = scripted([tool_call("slow_tool", {}, "s1"), AIMessage("gave up")], box)
    out = await make_graph(InMemorySaver()).ainvoke(
        {"messages": [HumanMessage("go")]}, {"configurable": {"thread_id": "t"}}, context=ctx
    )
    assert calls == 1 + failures.MAX_RETRIES
    body = json.loads(results(out)[0].content)
    assert body["status"] == "error" and "after 3 attempts" in body["error"]


async def test_invalid_arguments_are_not_retried_but_regenerated(scripted):
    box = FakeToolbox()
    box.add("typed", lambda n: n, {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]})
    ctx = scripted([tool_call("typed", {"n": "seven"}, "b1"), tool_call("typed", {"n": 7}, "b2"), AIMessage("7")], box)
    out = await make_graph(InMemorySaver()).ainvoke(
        {"messages": [HumanMessage("go")]}, {"configurable": {"thread_id": "t"}}, context=ctx
    )
    first, second = results(out)
    assert first.status == "error" and "seven" in json.loads(first.content)["error"]
    assert second.status == "success"
    assert out["metrics"].get("tool_retries", 0) == 0


async def test_missing_data_asks_the_user_and_resumes_at_the_same_place(scripted):
    posted: list[dict] = []
    box = FakeToolbox()
    box.add(
        "post_note",
        lambda **kw: posted.append(kw) or {"id": len(posted)},
        {
            "type": "object",
            "properties": {"channel": {"type": "string", "description": "where"}, "text": {"type": "string"}},
            "required": ["channel", "text"],
        },
    )
    ctx = scripted([tool_call("post_note", {"text": "hello"}, "m1"), AIMessage("posted to project")], box)
    agent = make_graph(InMemorySaver())
    config = {"configurable": {"thread_id": "ask"}}
    first = await agent.ainvoke({"messages": [HumanMessage("post hello")]}, config, context=ctx)
    question = first["__interrupt__"][0].value
    assert question["type"] == "missing_arguments" and question["missing"] == ["channel"]
    assert "channel (where)" in question["question"]
    assert posted == []  # nothing ran before the answer
    # resume with the head checkpoint id, exactly like by thread id (K10)
    head = (await agent.aget_state(config)).config
    out = await agent.ainvoke(Command(resume="project"), head, context=ctx)
    assert posted == [{"channel": "project", "text": "hello"}]
    assert out["messages"][-1].content == "posted to project"
