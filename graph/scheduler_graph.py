"""The ``reminders`` graph (``langgraph.json``): one node that fires due reminders.

    START → fire_due_reminders → END

Meant to be run on a schedule by the LangGraph server's cron (README "Reminders")::

    await client.crons.create(assistant_id="reminders", schedule="*/5 * * * *", input={})

Each run checks ``<data_dir>/reminders.db`` once; what is due fires once per period however
often, and from however many places (this cron, ``hermes reminders run``, ``hermes serve``),
the check runs (``tools.scheduler``). Input ``{"now": "<ISO-8601>"}`` injects the clock.
Compiled without a checkpointer: the server supplies one, and a check keeps no state between
runs (the reminders database does).
"""

from __future__ import annotations

from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.graph import END, START, StateGraph
from langgraph.graph.state import CompiledStateGraph

from graph.context import Context
from graph.reminder_state import ReminderInput, ReminderState
from graph.runner import invoke_turn
from nodes.fire_due_reminders import make_fire_due_reminders

builder = StateGraph(ReminderState, input_schema=ReminderInput, context_schema=Context)
builder.add_node("fire_due_reminders", make_fire_due_reminders(run_task=invoke_turn))
builder.add_edge(START, "fire_due_reminders")
builder.add_edge("fire_due_reminders", END)


def make_graph(
    checkpointer: BaseCheckpointSaver[str] | None = None,
) -> CompiledStateGraph[ReminderState, Context, ReminderInput, ReminderState]:
    """Compile the reminders graph, optionally with a checkpointer."""
    return builder.compile(checkpointer=checkpointer, name="reminders")


graph = make_graph()
