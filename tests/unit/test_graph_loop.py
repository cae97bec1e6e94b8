"""The agent graph's logic with scripted fake models (cases K2, K3, K4; loop guards)."""

from __future__ import annotations

import json

from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.memory import InMemorySaver

from graph.builder import make_graph
from graph.state import InputState
from tests.conftest import FakeToolbox, tool_call
from tools.results import MAX_RESULT_CHARS


async def run(context, text: str, thread: str = "t1"):
    agent = make_graph(checkpointer=InMemorySaver())
    config: RunnableConfig = {"configurable": {"thread_id": thread}}
    return await agent.ainvoke(InputState(messages=[HumanMessage(text)]), config, context=context)


def tool_messages(out) -> list[ToolMessage]:
    return [m for m in out["messages"] if isinstance(m, ToolMessage)]


async def test_final_answer_without_tools_ends_the_run(scripted):
    ctx = scripted([AIMessage("Hello there")])
    out = await run(ctx, "hi")
    assert out["messages"][-1].content == "Hello there"
    assert out["stop_reason"] is None
    assert out["metrics"]["turns"] == 1


async def test_tool_result_reaches_the_next_model_call(scripted):
    box = FakeToolbox()
    box.add(
        "get_weather",
        lambda city: {"city": city, "sky": "sunny"},
        {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    )
    ctx = scripted([tool_call("get_weather", {"city": "Paris"}, "c1"), AIMessage("It is sunny.")], box)
    out = await run(ctx, "weather in Paris?")
    model = scripted.models[ctx.model]
    second_prompt = model.seen[1]
    results = [m for m in second_prompt if isinstance(m, ToolMessage)]
    assert [m.tool_call_id for m in results] == ["c1"]
    assert "sunny" in results[0].content
    assert out["metrics"]["tool_calls"] == {"get_weather": 1}


async def test_k3_invalid_json_arguments_go_back_as_an_error_result(scripted):
    bad = AIMessage(
        content="",
        invalid_tool_calls=[
            {
                "type": "invalid_tool_call",
                "name": "search",
                "args": '{"q": "x"',
                "id": "bad1",
                "error": "Unterminated string",
            }
        ],
    )
    box = FakeToolbox()
    box.add("search", lambda q: [q], {"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]})
    ctx = scripted([bad, tool_call("search", {"q": "x"}, "ok1"), AIMessage("found x")], box)
    out = await run(ctx, "search for x")
    results = tool_messages(out)
    assert results[0].tool_call_id == "bad1" and results[0].status == "error"
    assert "not valid JSON" in json.loads(results[0].content)["error"]
    assert results[1].status == "success"
    assert out["messages"][-1].content == "found x"


async def test_k4_exception_and_unknown_tool_become_error_results(scripted):
    def explode():
        raise ValueError("boom")

    box = FakeToolbox()
    box.add("exploding_tool", explode)
    ai = AIMessage(
        content="",
        tool_calls=[
            {"type": "tool_call", "name": "exploding_tool", "args": {}, "id": "e1"},
            {"type": "tool_call", "name": "does_not_exist", "args": {}, "id": "e2"},
        ],
    )
    ctx = scripted([ai, AIMessage("done")], box, ignore_offer=True)  # it names a tool that does not exist
    out = await run(ctx, "try it")
    by_id = {m.tool_call_id: json.loads(m.content) for m in tool_messages(out)}
    assert "boom" in by_id["e1"]["error"]
    assert "unknown tool" in by_id["e2"]["error"] and "exploding_tool" in by_id["e2"]["error"]  # valid names listed
    assert all(m.status == "error" for m in tool_messages(out))
    assert out["messages"][-1].content == "done"


async def test_k2_oversized_results_are_bounded_with_totals_and_a_handle(scripted, data_dir):
    box = FakeToolbox()
    box.add("big_text", lambda: "x" * 500_000)
    box.add(
        "big_rows", lambda: {"columns": ["id", "v"], "rows": [[i, i * 2] for i in range(10_000)], "row_count": 10_000}
    )
    ai = AIMessage(
        content="",
        tool_calls=[
            {"type": "tool_call", "name": "big_text", "args": {}, "id": "b1"},
            {"type": "tool_call", "name": "big_rows", "args": {}, "id": "b2"},
        ],
    )
    # the long unstructured text gets a model summary (stage 3): the script's second reply
    ctx = scripted([ai, AIMessage("A page of x characters."), AIMessage("summarised")], box)
    out = await run(ctx, "get everything")
    results = {m.tool_call_id: m for m in tool_messages(out)}
    assert set(results) == {"b1", "b2"}
    for message in results.values():
        assert len(message.content) <= MAX_RESULT_CHARS + 200
    text = json.loads(results["b1"].content)
    assert text["summary"] == "big_text: A page of x characters." and text["truncated"]
    rows = json.loads(results["b2"].content)
    assert rows["total_items"] == 10_000 and rows["truncated"] is True
    assert "10000 rows" in rows["summary"]
    # the full payload is kept outside the prompt, reachable by the handle
    assert rows["handle"].startswith("payloads/")
    full = json.loads((data_dir / rows["handle"]).read_text())
    assert len(full["rows"]) == 10_000
    assert out["messages"][-1].content == "summarised"


async def test_repeated_identical_calls_stop_with_an_explicit_reason(scripted):
    box = FakeToolbox()
    box.add("ping", lambda: "pong")
    replies = [tool_call("ping", {}, f"p{i}") for i in range(10)]
    # a weak model repeats itself even when the tool is no longer offered
    ctx = scripted(replies, box, max_repeated_calls=2, ignore_offer=True)
    out = await run(ctx, "ping until done")
    assert out["stop_reason"].startswith("repeated identical call")
    assert out["metrics"]["tool_calls"]["ping"] == 2  # the third, unoffered, was refused
    last = out["messages"][-1]
    assert isinstance(last, AIMessage) and last.content.startswith("Stopped before finishing")


async def test_round_cap_stops_a_model_that_never_answers(scripted):
    box = FakeToolbox()
    box.add("count", lambda n: n, {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]})
    replies = [tool_call("count", {"n": i}, f"n{i}") for i in range(20)]
    ctx = scripted(replies, box, max_tool_rounds=4)
    out = await run(ctx, "count forever")
    assert out["stop_reason"] is not None
    assert out["tool_rounds"] <= 4
    assert "Stopped before finishing" in out["messages"][-1].content


async def test_a_failing_memory_write_never_blocks_the_answer(scripted, monkeypatch):
    from memory.service import MemoryService

    def broken(self, **kwargs):
        raise RuntimeError("disk full")

    monkeypatch.setattr(MemoryService, "plan_turn", broken)
    ctx = scripted([AIMessage("the answer")])
    out = await run(ctx, "question")
    assert out["messages"][-1].content == "the answer"


async def test_a_finished_task_is_remembered_in_the_next_session(scripted):
    from graph import resources

    box = FakeToolbox()
    box.add(
        "get_weather",
        lambda city: "sunny",
        {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    )
    ctx = scripted([tool_call("get_weather", {"city": "Paris"}), AIMessage("Sunny in Paris."), AIMessage("ok")], box)
    first = await run(ctx, "weather report for Paris", thread="s1")
    assert first["metrics"]["memory_writes"] == 1
    await resources.drain_background()
    second = await run(ctx, "what about the weather in Paris again?", thread="s2")
    assert any("Paris" in line and "episodic" in line for line in second["memory_context"])
    model = scripted.models[ctx.model]
    assert "What you remember" in model.seen[-1][0].content


async def test_each_turn_is_tagged_with_its_intent_on_the_message(scripted):
    ctx = scripted([AIMessage("ok"), AIMessage("ok again")])
    agent = make_graph(checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "intents"}}
    await agent.ainvoke({"messages": [HumanMessage("hello there")]}, config, context=ctx)
    out = await agent.ainvoke({"messages": [HumanMessage("what is in the sales database?")]}, config, context=ctx)
    humans = [m for m in out["messages"] if isinstance(m, HumanMessage)]
    assert [h.additional_kwargs["intent"] for h in humans] == ["chat", "question"]
    assert out["metrics"]["intents"] == {"chat": 1, "question": 1}
    assert out["intent"] == "question"


async def test_model_supplied_call_ids_cannot_collide_or_escape_the_data_dir(scripted, data_dir):
    notes: list[str] = []
    box = FakeToolbox()
    box.add(
        "note",
        lambda text: notes.append(text) or len(notes),
        {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]},
        side_effect=True,
    )
    ai = AIMessage(
        content="",
        tool_calls=[
            {"type": "tool_call", "name": "note", "args": {"text": "alpha"}, "id": "../../../../escape"},
            {"type": "tool_call", "name": "note", "args": {"text": "beta"}, "id": "../../../../escape"},
        ],
    )
    ctx = scripted([ai, AIMessage("noted both")], box)
    out = await run(ctx, "note alpha and beta")
    assert notes == ["alpha", "beta"]  # a reused id is not mistaken for a replay
    ids = [m.tool_call_id for m in tool_messages(out)]
    assert len(set(ids)) == 2
    written = [p.resolve() for p in data_dir.rglob("*.json")]
    assert written and all(str(p).startswith(str(data_dir.resolve())) for p in written)
    assert not list(data_dir.parent.parent.glob("escape*"))


async def test_a_result_with_lone_surrogates_is_stored_not_crashed(scripted):
    box = FakeToolbox()
    box.add("weird", lambda: {"text": "bad \ud800 char"})
    ctx = scripted([tool_call("weird", {}, "w1"), AIMessage("ok")], box)
    out = await run(ctx, "weird output")
    assert tool_messages(out)[0].status == "success" and out["messages"][-1].content == "ok"


async def test_turn_metrics_count_the_current_turn_only(scripted):
    box = FakeToolbox()
    box.add("ping", lambda: "pong")
    ctx = scripted([tool_call("ping", {}, "p1"), AIMessage("one"), AIMessage("two")], box)
    agent = make_graph(checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "turns"}}
    first = await agent.ainvoke({"messages": [HumanMessage("ping it")]}, config, context=ctx)
    assert first["turn_metrics"]["model_calls"] == 2 and first["turn_metrics"]["tool_calls"] == {"ping": 1}
    second = await agent.ainvoke({"messages": [HumanMessage("again?")]}, config, context=ctx)
    assert second["turn_metrics"]["model_calls"] == 1 and "tool_calls" not in second["turn_metrics"]
    assert second["metrics"]["model_calls"] == 3  # cumulative
    assert second["turn_metrics"]["tokens_in"] > 0


async def test_a_call_cut_off_at_the_output_limit_is_not_quoted_back(scripted):
    # the cut-off text quoted in the error was copied into the next call (measured: 1.5B model
    # wrote "... = ord." and "Send the call again" into its SQL)
    from graph.failures import CUT_OFF

    cut = AIMessage(
        content="",
        invalid_tool_calls=[
            {
                "type": "invalid_tool_call",
                "name": "search",
                "args": '{"q": "SELECT a FROM t JOIN u ON t.id = u.',
                "id": "cut1",
                "error": f"{CUT_OFF} (60 characters): send the call again with shorter arguments",
            }
        ],
    )
    box = FakeToolbox()
    box.add("search", lambda q: [q], {"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]})
    ctx = scripted([cut, tool_call("search", {"q": "x"}, "ok1"), AIMessage("found x")], box)
    out = await run(ctx, "search for x")
    error = json.loads(tool_messages(out)[0].content)["error"]
    assert error.startswith(CUT_OFF) and "JOIN u" not in error
