"""The only place where nodes are wired into graphs (DESIGN §8).

    START → assemble_context → call_model ─┬─(tool calls)→ dispatch_tools → compress_results
                                           │      → evaluate_progress ─┬─(go on)→ assemble_context
                                           │                           └─(stop, or answer accepted)→ write_memory → END
                                           └─(answer)→ evaluate_progress

Every answer goes through ``evaluate_progress``: with goal steps missing it sends the model back
to work; otherwise it judges the answer (grounded, verified, claiming only effects done —
DESIGN §5.5) and accepts it, sends it back once, or stops.

``builder`` is the uncompiled ``StateGraph``; ``graph`` (module level, what ``langgraph.json``
points at) is compiled WITHOUT a checkpointer because the LangGraph server supplies its own;
the CLI binds it to the SQLite saver with ``make_graph``.
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable
from typing import Literal

from langchain_core.messages import AIMessage
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.graph import END, START, StateGraph
from langgraph.graph.state import CompiledStateGraph

from graph.context import Context
from graph.progress import current_goal_messages
from graph.state import InputState, State
from nodes.assemble_context import assemble_context
from nodes.call_model import call_model
from nodes.compress_results import compress_results
from nodes.dispatch_tools import dispatch_tools
from nodes.evaluate_progress import evaluate_progress
from nodes.write_memory import write_memory


def route_model_output(state: State) -> Literal["dispatch_tools", "evaluate_progress"]:
    """Edge after ``call_model``: tool calls (valid or not, K3) go to dispatch; an answer goes
    to evaluate_progress, which sends the model back to work (steps missing, an answer not
    grounded or not supported by the results), stops with a reason, or accepts it."""
    last = state.messages[-1] if state.messages else None
    if isinstance(last, AIMessage) and (last.tool_calls or last.invalid_tool_calls):
        return "dispatch_tools"
    return "evaluate_progress"


def route_progress(state: State) -> Literal["assemble_context", "write_memory"]:
    """Edge after ``evaluate_progress``: a stop reason ends the loop, and so does an accepted
    answer (the last message an answer, and no ``progress_note`` sending the model back)."""
    if state.stop_reason:
        return "write_memory"
    last_ai = next((m for m in reversed(current_goal_messages(state.messages)) if isinstance(m, AIMessage)), None)
    if last_ai is not None and (last_ai.tool_calls or last_ai.invalid_tool_calls):
        return "assemble_context"  # after a tool round
    return "assemble_context" if state.progress_note else "write_memory"


def in_event_loop(route: Callable[[State], str]) -> Callable[[State], Awaitable[str]]:
    """``route`` as a coroutine function with its name and ``Literal`` return type (LangGraph
    reads the edge's destinations from it). LangGraph runs a plain function given as a
    conditional edge in a worker thread, one thread hop per routing decision — four in a turn
    with one tool round — although a router only reads the state (bench_overhead, issue 19)."""

    @functools.wraps(route)
    async def routed(state: State) -> str:
        return route(state)

    return routed


builder = StateGraph(State, input_schema=InputState, context_schema=Context)
builder.add_node(assemble_context)
builder.add_node(call_model)
builder.add_node(dispatch_tools)
builder.add_node(compress_results)
builder.add_node(evaluate_progress)
builder.add_node(write_memory)
builder.add_edge(START, "assemble_context")
builder.add_edge("assemble_context", "call_model")
builder.add_conditional_edges("call_model", in_event_loop(route_model_output))
builder.add_edge("dispatch_tools", "compress_results")
builder.add_edge("compress_results", "evaluate_progress")
builder.add_conditional_edges("evaluate_progress", in_event_loop(route_progress))
builder.add_edge("write_memory", END)


#: Compiled once at import (what ``langgraph.json`` serves): compiling walks every node's code
#: for subgraphs (~9 ms here), which a CLI turn or a test would otherwise pay each time.
graph: CompiledStateGraph[State, Context, InputState, State] = builder.compile(name="hermes")


def make_graph(
    checkpointer: BaseCheckpointSaver[str] | None = None,
) -> CompiledStateGraph[State, Context, InputState, State]:
    """The agent graph bound to ``checkpointer`` (the CLI passes its SQLite saver; None: no
    persistence). A shallow copy of the module's compiled ``graph`` — same nodes, edges and
    name — so each call costs microseconds instead of a compile; the copies share no run
    state (checkpoints live in the saver, not the graph)."""
    if checkpointer is None:
        return graph
    return graph.copy(update={"checkpointer": checkpointer})
