"""Node ``consolidate_maintain`` (the ``consolidate`` graph): drain the persistent retry queue
of memory writes (seed §5.2), prune the idempotency ledger and stored tool payloads past their
retention, and compact the episodic store (folds new rows into its indexes).

Update: ``counts`` (queue_replayed, queue_pending, queue_dead, ledger_pruned, payloads_pruned,
optimized)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import time
from pathlib import Path
from typing import Any

from langgraph.runtime import Runtime

from graph.consolidate_state import ConsolidateState, run_clock
from graph.context import Context
from graph.resources import get_memory

log = logging.getLogger(__name__)


def prune_payloads(root: Path, older_than_s: float, now_s: float) -> int:
    """Delete files under ``root`` (``<data_dir>/payloads``) last modified more than
    ``older_than_s`` seconds before ``now_s``, and the directories left empty. Returns files deleted."""
    if not root.is_dir():
        return 0
    removed = 0
    for folder, _dirs, files in os.walk(root, topdown=False):
        for name in files:
            path = Path(folder) / name
            try:
                if now_s - path.stat().st_mtime > older_than_s:
                    path.unlink()
                    removed += 1
            except OSError:
                continue
        if Path(folder) != root:
            with contextlib.suppress(OSError):
                os.rmdir(folder)  # only succeeds when empty
    return removed


async def consolidate_maintain(state: ConsolidateState, runtime: Runtime[Context]) -> dict[str, Any]:
    """Graph node: see the module docstring."""
    from tools.idempotency import LEDGER_FILE
    from tools.ledgers import open_ledger

    context = runtime.context or Context()
    memory = get_memory(context)
    counts: dict[str, int] = {"queue_replayed": await memory.flush_retry_queue()}
    counts["queue_pending"] = len(await memory.queue.pending())
    counts["queue_dead"] = len(await memory.queue.failures())
    data_dir = Path(context.data_dir)
    retention_s = state.ledger_retention_days * 86400.0
    # the ledger in use: PostgreSQL's (shared; pruned by whichever machine consolidates) or the
    # data directory's file, if one was ever created
    on_postgres = bool(context.postgres_url)
    if on_postgres or await asyncio.to_thread((data_dir / LEDGER_FILE).exists):
        ledger = open_ledger(data_dir, context.postgres_url)
        try:
            counts["ledger_pruned"] = await ledger.prune(retention_s)
        finally:
            await ledger.aclose()
    now_s = run_clock(state.now).timestamp() if state.now else time.time()
    counts["payloads_pruned"] = await asyncio.to_thread(
        prune_payloads, data_dir / "payloads", state.payload_retention_days * 86400.0, now_s
    )
    optimize = getattr(memory.episodic, "optimize", None)
    if optimize is not None:
        try:
            await optimize()
            counts["optimized"] = 1
        except Exception:  # an optimisation; the next run tries again
            log.warning("consolidate: episodic store optimize failed", exc_info=True)
    return {"counts": counts}
