"""Node ``consolidate_expire`` (the ``consolidate`` graph, seed §6.4): episodic items expire
after ``episodic_ttl_days`` (30), semantic facts not confirmed again nor used after
``semantic_ttl_days`` (180); facts unused for 30 days lose confidence and are archived under
the threshold. Update: ``counts`` (episodic_expired, semantic_expired, downweighted, archived)."""

from __future__ import annotations

from typing import Any

from langgraph.runtime import Runtime

from graph.consolidate_state import ConsolidateState, run_clock
from graph.context import Context
from graph.resources import get_memory


async def consolidate_expire(state: ConsolidateState, runtime: Runtime[Context]) -> dict[str, Any]:
    """Graph node: see the module docstring."""

    context = runtime.context or Context()
    return {"counts": await get_memory(context).expire(run_clock(state.now))}
