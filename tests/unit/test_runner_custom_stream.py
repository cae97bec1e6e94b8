"""The turn runner passes what nodes write to LangGraph's custom stream (MCP progress while a
long tool runs) to its observer, and the terminal renders it as progress lines."""

from __future__ import annotations

from typing import Any

from langchain_core.messages import AIMessage

from graph.cli.render import ConsoleObserver, console
from graph.runner import execute_turn
from tests.conftest import FakeToolbox, tool_call
from tools.mcp.progress import current_sink, emit


def long_job() -> dict[str, Any]:
    sink = current_sink()  # the dispatch node's sink: LangGraph's custom stream
    for step in (1, 2):
        emit(
            sink,
            {
                "type": "mcp_progress",
                "server": "jobs",
                "tool": "long_job",
                "request_id": "",
                "progress": step,
                "total": 2,
                "message": f"step {step} [of 2]",
            },
        )
    return {"done": True}


class Recorder:
    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = []
        self.nodes: list[str] = []

    def on_update(self, node: str, update: dict[str, Any] | None) -> None:
        self.nodes.append(node)

    def on_event(self, event: dict[str, Any]) -> None:
        self.events.append(event)

    def on_recovery(self, report: Any) -> None: ...

    def on_warning(self, text: str) -> None: ...

    async def ask(self, question: str) -> str | None:
        return None


async def test_progress_events_reach_the_observer_in_order_with_their_call(scripted):
    box = FakeToolbox()
    box.add("long_job", long_job)
    ctx = scripted(
        [
            tool_call("long_job", {}, "job1"),
            AIMessage("The job is done."),
            tool_call("long_job", {}, "job2"),
            AIMessage("Done again."),
        ],
        box,
    )
    seen = Recorder()
    summary = await execute_turn("run the long job", ctx, "progress-1", observer=seen)
    assert summary["answer"] == "The job is done."
    assert [(e["progress"], e["total"]) for e in seen.events] == [(1, 2), (2, 2)]
    assert all(e["tool_call_id"] == "job1" and e["name"] == "long_job" for e in seen.events)
    assert "dispatch_tools" in seen.nodes  # node updates still arrive beside the events

    quiet = Recorder()  # --json: no progress lines
    await execute_turn("run the long job", ctx, "progress-2", observer=quiet, quiet=True)
    assert quiet.events == [] and quiet.nodes == []


def test_the_terminal_prints_progress_as_text_not_markup():
    with console.capture() as out:
        ConsoleObserver().on_event(
            {
                "type": "mcp_progress",
                "server": "jobs",
                "tool": "long_job",
                "progress": 3,
                "total": 10,
                "message": "copying [bold]x[/bold]",
            }
        )
        ConsoleObserver().on_event({"type": "something_else"})
    assert out.get().strip() == "⋯ jobs/long_job 3/10 copying [bold]x[/bold]"


def test_progress_lines_cut_long_text_with_an_ellipsis_and_keep_the_error_cause():
    from graph.cli.render import describe_update

    error = (
        "DatabaseError: query 1 ('Revenue by region') failed, nothing was written: unknown column "
        "'region_id': the database has no such column. Tables and columns here: orders(order_id)"
    )
    line = describe_update(
        "dispatch_tools", {"pending_results": [{"name": "generate_report", "status": "error", "error": error}]}
    )
    assert "unknown column 'region_id'" in line
    long_answer = describe_update("call_model", {"messages": [AIMessage("word " * 100)]})
    assert long_answer.endswith("…") and len(long_answer) < 130
