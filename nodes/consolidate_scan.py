"""Node ``consolidate_scan`` (the ``consolidate`` graph): the episodes of every user created in
the last ``lookback_minutes`` before ``now`` (seed §4.2: "every 30 minutes scan recent
interactions"). Update: ``now`` (the clock used, ISO), ``episodes``, ``counts.scanned``."""

from __future__ import annotations

import datetime as dt
from typing import Any

from langgraph.runtime import Runtime

from graph.consolidate_state import ConsolidateState
from graph.context import Context
from graph.resources import get_memory

#: Episodes scanned per run at most (newest first); the rest wait for the next run.
MAX_SCAN = 2000


def run_clock(now: str) -> dt.datetime:
    """``now`` as an aware UTC datetime (empty: the current time; naive: taken as UTC)."""
    if not now:
        return dt.datetime.now(dt.timezone.utc)
    value = dt.datetime.fromisoformat(now.replace("Z", "+00:00"))
    return value.replace(tzinfo=dt.timezone.utc) if value.tzinfo is None else value.astimezone(dt.timezone.utc)


async def consolidate_scan(state: ConsolidateState, runtime: Runtime[Context]) -> dict[str, Any]:
    """Graph node: see the module docstring."""
    context = runtime.context or Context()
    now = run_clock(state.now)
    since = now - dt.timedelta(minutes=state.lookback_minutes)
    events = await get_memory(context).recent_episodes(since, MAX_SCAN)
    return {"now": now.isoformat(), "episodes": [e.model_dump(mode="json") for e in events],
            "counts": {"scanned": len(events)}}
