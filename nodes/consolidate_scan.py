"""Node ``consolidate_scan`` (the ``consolidate`` graph): the episodes of every user created in
the last ``lookback_minutes`` before ``now`` (seed §4.2: "every 30 minutes scan recent
interactions"). Update: ``now`` (the clock used, ISO), ``episodes``, ``counts.scanned``."""

from __future__ import annotations

import datetime as dt
from typing import Any

from langgraph.runtime import Runtime

from graph.consolidate_state import ConsolidateState, run_clock
from graph.context import Context
from graph.resources import get_memory

#: Episodes scanned per run at most (newest first); the rest wait for the next run.
MAX_SCAN = 2000


async def consolidate_scan(state: ConsolidateState, runtime: Runtime[Context]) -> dict[str, Any]:
    """Graph node: see the module docstring."""
    context = runtime.context or Context()
    now = run_clock(state.now)
    since = now - dt.timedelta(minutes=state.lookback_minutes)
    events = await get_memory(context).recent_episodes(since, MAX_SCAN)
    return {
        "now": now.isoformat(),
        "episodes": [e.model_dump(mode="json") for e in events],
        "counts": {"scanned": len(events)},
    }
