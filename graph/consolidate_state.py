"""State of the ``consolidate`` graph (``graph/consolidate_graph.py``): one consolidation run.

Shapes:
    now                 str        input: ISO-8601 clock of this run ("" = now; naive = UTC)
    lookback_minutes    int        input: episodes created this long before ``now`` are scanned
                                   (default 60: a 30-minute schedule scans every episode twice,
                                   harmlessly — facts already known are duplicates)
    ledger_retention_days   int    input: idempotency-ledger records older than this are pruned
    payload_retention_days  int    input: stored tool payloads older than this are deleted
    episodes            list[dict] scanned episodes (``EpisodicEvent`` as JSON)
    extractor           str        "rule-based" or "model:<name>" (which extracted the facts)
    counts              dict       what the run did, merged node by node (Studio shows it):
                                   scanned, candidates, kept, added, duplicates, conflicts,
                                   resolved, episodic_expired, semantic_expired, downweighted,
                                   archived, queue_replayed, queue_pending, queue_dead,
                                   ledger_pruned, payloads_pruned, optimized
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from typing import Annotated, Any


def run_clock(now: str) -> dt.datetime:
    """The run's clock: ``now`` as an aware UTC datetime (empty: the current time; naive: taken
    as UTC). Every node of the graph reads the same ``now`` through it."""
    if not now:
        return dt.datetime.now(dt.UTC)
    value = dt.datetime.fromisoformat(now)
    return value.replace(tzinfo=dt.UTC) if value.tzinfo is None else value.astimezone(dt.UTC)


def merge_counts(old: dict[str, int], new: dict[str, int]) -> dict[str, int]:
    """Reducer: counts of later nodes are added to the run's counts."""
    out = dict(old or {})
    for key, value in (new or {}).items():
        out[key] = out.get(key, 0) + value
    return out


@dataclass(kw_only=True)
class ConsolidateInput:
    """Input of one run (every field optional)."""

    now: str = ""
    lookback_minutes: int = 60
    ledger_retention_days: int = 30
    payload_retention_days: int = 30


@dataclass(kw_only=True)
class ConsolidateState(ConsolidateInput):
    """Input plus what the run found and did (see module doc)."""

    episodes: list[dict[str, Any]] = field(default_factory=list)
    extractor: str = ""
    counts: Annotated[dict[str, int], merge_counts] = field(default_factory=dict)
