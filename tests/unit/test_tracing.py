"""A run's trace (issue 24): one trace, one span per node execution, one per tool call and one
for the memory write.

The graph runs in process with a scripted model and in-process tools; a LangChain tracer kept in
memory (what LangSmith's and the OpenTelemetry exporters are built on) collects the runs passed
through ``config["callbacks"]``.
"""

from __future__ import annotations

from typing import Any

from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.tracers.base import AsyncBaseTracer
from langchain_core.tracers.schemas import Run
from langgraph.checkpoint.memory import InMemorySaver

from graph import resources
from graph.builder import make_graph
from graph.state import InputState
from tests.conftest import FakeToolbox
from tools.builtin.catalog import DESCRIBE_DATABASE, QUERY_DATABASE
from tools.builtin.database import describe_database, query_database

NODES = {"assemble_context", "call_model", "dispatch_tools", "compress_results", "evaluate_progress", "write_memory"}


class MemoryTracer(AsyncBaseTracer):
    """Every run started, in start order."""

    def __init__(self) -> None:
        super().__init__()
        self.started: list[Run] = []

    async def _start_trace(self, run: Run) -> None:
        await super()._start_trace(run)
        self.started.append(run)

    async def _persist_run(self, run: Run) -> None:
        pass


def two_reads() -> AIMessage:
    """One model reply asking for two tool calls at once."""
    return AIMessage(
        content="",
        tool_calls=[
            {"type": "tool_call", "name": "describe_database", "args": {}, "id": "d1"},
            {
                "type": "tool_call",
                "name": "query_database",
                "args": {"sql": "SELECT COUNT(*) FROM customers"},
                "id": "q1",
            },
        ],
    )


async def traced_run(scripted, db) -> tuple[MemoryTracer, list[str], dict[str, Any]]:
    box = FakeToolbox()
    box.add_spec(DESCRIBE_DATABASE, lambda: describe_database(database=str(db)))
    box.add_spec(QUERY_DATABASE, lambda sql: query_database(sql, database=str(db)))
    ctx = scripted([two_reads(), AIMessage("There are 60 customers.")], box, embeddings="hash")
    tracer = MemoryTracer()
    executed: list[str] = []
    config: RunnableConfig = {"configurable": {"thread_id": "t"}, "callbacks": [tracer]}
    async for update in make_graph(InMemorySaver()).astream(
        InputState(messages=[HumanMessage("How many customers are there?")]), config, context=ctx, stream_mode="updates"
    ):
        executed += [name for name in update if name in NODES]
    await resources.drain_background()
    return tracer, executed, scripted.models[ctx.model]


async def test_one_trace_with_a_span_per_node_execution_and_per_tool_call(scripted, db):
    tracer, executed, _ = await traced_run(scripted, db)
    runs = tracer.started
    # one trace: a single root, every span in it
    roots = [r for r in runs if r.parent_run_id is None]
    assert len(roots) == 1
    assert {r.trace_id for r in runs} == {roots[0].id}
    # a span per node execution, in order, each directly under the graph's run
    node_spans = [r for r in runs if r.name in NODES and r.run_type == "chain" and r.parent_run_id == roots[0].id]
    assert [r.name for r in node_spans] == executed
    assert set(executed) == NODES  # the run went through every node of the turn
    # a span per tool call, named after its tool, under the dispatch_tools span that ran it
    dispatch = [r for r in node_spans if r.name == "dispatch_tools"]
    tool_spans = [r for r in runs if r.run_type == "tool"]
    assert [(r.name, r.metadata.get("tool_call_id")) for r in tool_spans] == [
        ("describe_database", "d1"),
        ("query_database", "q1"),
    ]
    assert {r.parent_run_id for r in tool_spans} == {dispatch[0].id}
    assert all(r.end_time is not None and r.error is None for r in tool_spans)
    assert tool_spans[1].inputs == {"sql": "SELECT COUNT(*) FROM customers"}
    # the memory write, which runs after write_memory returned: its own span, opened under the
    # write_memory span and ended when the write did
    [write_node] = [r for r in node_spans if r.name == "write_memory"]
    [memory_write] = [r for r in runs if r.name == "memory_write"]
    assert memory_write.parent_run_id == write_node.id and memory_write.trace_id == roots[0].id
    assert memory_write.inputs["records"] > 0
    assert memory_write.end_time is not None and memory_write.error is None


async def test_a_failed_tool_call_is_an_error_span(scripted, db):
    box = FakeToolbox()
    box.add_spec(QUERY_DATABASE, lambda sql: query_database(sql, database=str(db)))
    bad = AIMessage(
        content="",
        tool_calls=[
            {"type": "tool_call", "name": "query_database", "args": {"sql": "SELECT nope FROM nothing"}, "id": "q1"}
        ],
    )
    # spare answers: an answer resting on no data read is sent back to read (evaluate_progress),
    # a rule this test does not cover
    ctx = scripted([bad, *[AIMessage("I could not read that.")] * 5], box, embeddings="hash")
    tracer = MemoryTracer()
    await make_graph(InMemorySaver()).ainvoke(
        InputState(messages=[HumanMessage("How many customers are there?")]),
        {"configurable": {"thread_id": "t"}, "callbacks": [tracer]},
        context=ctx,
    )
    await resources.drain_background()
    [span] = [r for r in tracer.started if r.run_type == "tool"]
    assert span.name == "query_database" and span.error
