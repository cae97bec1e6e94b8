"""The agent graph's conditional edges run in the event loop (issue 19): LangGraph runs a plain
function given as a path in a worker thread, a thread hop per routing decision; the routers are
handed over as coroutine functions that keep their names and destinations."""

from __future__ import annotations

import inspect
import threading

from langchain_core.messages import AIMessage, HumanMessage

from graph.builder import builder, in_event_loop, route_model_output
from graph.state import State


def test_every_router_is_a_coroutine_with_its_destinations() -> None:
    ends = {
        (source, name): (getattr(branch.path, "func", None), getattr(branch.path, "afunc", None), branch.ends)
        for source, branches in builder.branches.items()
        for name, branch in branches.items()
    }
    assert set(ends) == {("call_model", "route_model_output"), ("evaluate_progress", "route_progress")}
    for func, afunc, _ in ends.values():
        assert func is None  # no sync function: LangGraph would run it through run_in_executor
        assert inspect.iscoroutinefunction(afunc)
    assert set(ends["call_model", "route_model_output"][2] or {}) == {"dispatch_tools", "evaluate_progress"}
    assert set(ends["evaluate_progress", "route_progress"][2] or {}) == {"assemble_context", "write_memory"}


async def test_a_wrapped_router_decides_as_the_router_in_the_callers_thread() -> None:
    seen: list[threading.Thread] = []

    def route(state: State) -> str:
        seen.append(threading.current_thread())
        return route_model_output(state)

    routed = in_event_loop(route)
    call = AIMessage("", tool_calls=[{"name": "t", "args": {}, "id": "c1"}])
    assert await routed(State(messages=[HumanMessage("hi"), call])) == "dispatch_tools"
    assert await routed(State(messages=[HumanMessage("hi"), AIMessage("done")])) == "evaluate_progress"
    assert seen == [threading.current_thread()] * 2
