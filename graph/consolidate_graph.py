"""The ``consolidate`` graph (``langgraph.json``): memory consolidation, the background job of
seed §4.2 / §6.4.

    START → consolidate_scan → consolidate_extract → consolidate_expire → consolidate_maintain → END

Every 30 minutes: on the LangGraph server with its cron (README "Memory")::

    await client.crons.create(assistant_id="consolidate", schedule="*/30 * * * *", input={})

from the CLI: ``hermes memory consolidate`` (once; ``--every 30m`` keeps running it). Each run
scans recent episodes, extracts candidate semantic facts (model-based with a capable model,
rule-based otherwise — ``extractor`` says which), keeps those over the confidence threshold,
resolves duplicates and conflicts, expires episodic items (30 days) and semantic facts (180),
down-weights and archives unused facts, drains the retry queue, prunes the idempotency ledger
and tool payloads past their retention; ``counts`` in the state says how many of each (Studio
shows it). Input ``{"now": "<ISO-8601>"}`` injects the clock. Compiled without a
checkpointer (the server supplies one; a run keeps nothing between runs).
"""

from __future__ import annotations

from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.graph import END, START, StateGraph
from langgraph.graph.state import CompiledStateGraph

from graph.consolidate_state import ConsolidateInput, ConsolidateState
from graph.context import Context
from nodes.consolidate_expire import consolidate_expire
from nodes.consolidate_extract import consolidate_extract
from nodes.consolidate_maintain import consolidate_maintain
from nodes.consolidate_scan import consolidate_scan

builder = StateGraph(ConsolidateState, input_schema=ConsolidateInput, context_schema=Context)
builder.add_node(consolidate_scan)
builder.add_node(consolidate_extract)
builder.add_node(consolidate_expire)
builder.add_node(consolidate_maintain)
builder.add_edge(START, "consolidate_scan")
builder.add_edge("consolidate_scan", "consolidate_extract")
builder.add_edge("consolidate_extract", "consolidate_expire")
builder.add_edge("consolidate_expire", "consolidate_maintain")
builder.add_edge("consolidate_maintain", END)


def make_graph(
    checkpointer: BaseCheckpointSaver[str] | None = None,
) -> CompiledStateGraph[ConsolidateState, Context, ConsolidateInput, ConsolidateState]:
    """Compile the consolidate graph, optionally with a checkpointer."""
    return builder.compile(checkpointer=checkpointer, name="consolidate")


graph = make_graph()
