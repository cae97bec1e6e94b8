"""What a new request recalls (``MemoryService.recall_for_turn``): working memory, semantic
conflicts and facts, episodic events (hybrid × decay, kinds matched to the task; a
cross-session reference widens the search to past tasks), each from the session's active
branch. Never raises: a failing part is left out of the block."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Mapping, Sequence
from datetime import datetime

from memory import policy, triggers
from memory.branch_origins import Inactive
from memory.db import one_connection
from memory.episodic.base import ScoredEvent, utcnow
from memory.retrieval import MemoryBlock, build_block, format_episode
from memory.semantic import Fact
from memory.service_core import MemoryCore

log = logging.getLogger(__name__)


def format_memory(hit: ScoredEvent) -> str:
    """An episodic hit as a prompt line (``memory.retrieval.format_episode``)."""
    return format_episode(hit)


class MemoryRecall(MemoryCore):
    """The recall half of the memory service (module docstring)."""

    async def recall_for_turn(
        self,
        user_id: str,
        thread_id: str,
        goal: str,
        *,
        k: int | None = None,
        visible_origins: set[str] | None = None,
        sync_branch: bool = False,
        now: datetime | None = None,
        tool_versions: Mapping[str, str] | None = None,
    ) -> MemoryBlock:
        """The memory block for a new user request (``memory.retrieval``): this session's
        working memory (the request's one-off instructions included), undecided conflicts and
        facts relevant to the request, and episodic events (hybrid × decay, kinds matched to
        the task; a cross-session reference widens the search to past tasks). Never raises:
        a failing part is logged and left out (memory must not break the answer).

        ``visible_origins``: the message ids of ``thread_id``'s active branch — this session's
        memories from other branches are left out. Memories of *any* session whose origin is
        on an inactive branch (``memory.branch_origins``) are left out too. ``sync_branch``:
        first record ``visible_origins`` as ``thread_id``'s active branch (:meth:`sync_branch`;
        a write only when it changed), so a branch moved outside Hermes' own branch
        operations (a Studio fork through the server) is caught by the session's next turn.

        ``tool_versions``: each offered tool's current schema version (the caller's names); a
        memory of a tool whose version changed since, or that is no longer offered, is marked
        so in its line (its calls are not to be copied)."""
        now = now or utcnow()
        if not await self._usable():
            return build_block(working=[], conflicts=[], facts=[], episodes=[], budget_tokens=self.memory_tokens)
        try:
            reference = triggers.detect_cross_session(goal)
            kinds = None if reference else policy.kinds_for_task(goal)
        except Exception:
            log.exception("memory: the request's kinds not matched; every kind searched")
            reference, kinds = None, None
        limit = k or self.recall_k
        # with a session, the episodic search (its query embedding is the slow part) needs nothing
        # of the branch sync below: it runs beside it, its hits are filtered afterwards
        early = asyncio.ensure_future(self._search(user_id, goal, limit * 3, kinds, now)) if thread_id else None
        try:
            # with the episodic search already running in its own task, the branch sync and the
            # semantic reads run in turn on one memory.db connection instead of three (each
            # opening a worker thread: bench_overhead, issue 19)
            async with (
                one_connection(self.origins.db, getattr(self.semantic, "db", None))
                if early is not None
                else contextlib.nullcontext()
            ):
                return await self._recall_block(
                    user_id,
                    thread_id,
                    goal,
                    limit,
                    reference,
                    kinds,
                    early,
                    visible_origins,
                    sync_branch,
                    now,
                    tool_versions,
                )
        finally:
            if early is not None and not early.done():
                early.cancel()  # the recall failed or was cancelled before it used the hits
            elif early is not None and not early.cancelled():
                early.exception()  # read: an error the episodic part logged is not reported again

    async def _search(
        self, user_id: str, query: str, k: int, kinds: Sequence[str] | None, now: datetime
    ) -> list[ScoredEvent]:
        return await self.episodic.search(user_id, query, k=k, kinds=kinds, now=now)

    async def _recall_block(
        self,
        user_id: str,
        thread_id: str,
        goal: str,
        limit: int,
        reference: str | None,
        kinds: Sequence[str] | None,
        early: asyncio.Future[list[ScoredEvent]] | None,
        visible_origins: set[str] | None,
        sync_branch: bool,
        now: datetime,
        tool_versions: Mapping[str, str] | None,
    ) -> MemoryBlock:
        inactive = await self._inactive(thread_id if sync_branch else "", visible_origins)
        working: list[str] = []
        try:
            if thread_id:
                self.note_one_offs(thread_id, goal)
                wm = self.sessions.peek(thread_id)
                working = [str(v) for k, v in (wm.items() if wm else []) if str(k).startswith("instruction:")]
        except Exception:
            log.exception("working memory unavailable")

        async def semantic() -> tuple[list[tuple[Fact, Fact]], list[Fact], set[str]]:
            try:
                retracted = await self.semantic.retracted_sources(user_id)
                conflicts, facts = await self.semantic.recall(
                    user_id,
                    goal,
                    limit,
                    now=now,
                    thread_id=thread_id or None,
                    visible_origins=visible_origins,
                    inactive=inactive,
                    touch=False,
                )
                self._touched.update({f.id: now for f in facts})
                return conflicts, facts, retracted
            except Exception:
                log.exception("semantic recall failed for user %r", user_id)
                return [], [], set()

        async def episodic() -> list[ScoredEvent]:
            try:
                hits = await self._episodes(
                    user_id, goal, limit, kinds, now, thread_id, visible_origins, inactive, early
                )
                if reference and len(hits) < limit:
                    hits += await self._latest_tasks(user_id, limit - len(hits), hits, now, thread_id, inactive)
                return hits
            except Exception:
                log.exception("episodic recall failed for user %r", user_id)
                return []

        if early is not None:  # the search (its query embedding the slow part) already runs beside this
            conflicts, facts, retracted = await semantic()
            episodes = await episodic()
        else:  # the two layers at once: the query embedding overlaps the SQLite reads
            (conflicts, facts, retracted), episodes = await asyncio.gather(semantic(), episodic())
        return build_block(
            working=working,
            conflicts=conflicts,
            facts=facts,
            episodes=episodes,
            budget_tokens=self.memory_tokens,
            retracted=retracted,
            tool_versions=tool_versions,
        )

    async def _episodes(
        self,
        user_id: str,
        query: str,
        k: int,
        kinds: Sequence[str] | None,
        now: datetime,
        thread_id: str | None,
        visible_origins: set[str] | None,
        inactive: Inactive | None = None,
        early: Awaitable[list[ScoredEvent]] | None = None,
    ) -> list[ScoredEvent]:
        """The ``k`` best visible hits; ``early``: the search already started (``k * 3`` hits,
        as asked here for a session)."""
        inactive = inactive or Inactive()
        if early is not None:
            hits = await early
        else:
            hits = await self._search(user_id, query, k * 3 if thread_id or inactive else k, kinds, now)

        def visible(hit: ScoredEvent) -> bool:
            # only memories written on their session's active branch; this session's own are
            # judged by its active message ids (the turn knows them before any sync)
            meta = hit.event.metadata or {}
            return inactive.visible(
                (meta.get("thread_id"), meta.get("origin_message_id")),
                hit.event.id,
                thread_id=thread_id or None,
                active_ids=visible_origins,
            )

        return [h for h in hits if h.event.confidence >= self.min_confidence and visible(h)][:k]

    async def _latest_tasks(
        self,
        user_id: str,
        n: int,
        have: list[ScoredEvent],
        now: datetime,
        thread_id: str,
        inactive: Inactive | None = None,
    ) -> list[ScoredEvent]:
        """The newest task memories of earlier sessions: what "like last time" points at when
        its words match nothing ("do it like last time"). Scored below every search hit."""
        seen = {h.event.id for h in have}
        out: list[ScoredEvent] = []
        for event in await self.episodic.list(user_id, kinds=["task"], limit=n + len(seen) + 5):
            if len(out) >= n:
                break
            meta = event.metadata or {}
            if (
                event.id in seen
                or event.confidence < self.min_confidence
                or (thread_id and meta.get("thread_id") == thread_id)
                or not (inactive or Inactive()).visible(
                    (meta.get("thread_id"), meta.get("origin_message_id")), event.id
                )
            ):
                continue
            out.append(ScoredEvent(event=event, relevance=0.0, decay=1.0, score=0.0))
        return out

    async def recall(
        self,
        user_id: str,
        query: str,
        k: int = 3,
        *,
        now: datetime | None = None,
        thread_id: str | None = None,
        visible_origins: set[str] | None = None,
        sync_branch: bool = False,
        tool_versions: Mapping[str, str] | None = None,
    ) -> list[str]:
        """The memory block's lines for a new request (:meth:`recall_for_turn`; ``k``:
        episodic hits at most). What ``assemble_context`` calls. Never raises."""
        block = await self.recall_for_turn(
            user_id,
            thread_id or "",
            query,
            k=k,
            visible_origins=visible_origins,
            sync_branch=sync_branch,
            now=now,
            tool_versions=tool_versions,
        )
        return block.lines

    async def recall_episodic(
        self,
        user_id: str,
        query: str,
        k: int = 3,
        *,
        kinds: Sequence[str] | None = None,
        now: datetime | None = None,
        thread_id: str | None = None,
        visible_origins: set[str] | None = None,
    ) -> list[str]:
        """Episodic recall only, as labelled lines (best first). Never raises."""
        if not await self._usable():
            return []
        try:
            inactive = await self._inactive("", None)
            hits = await self._episodes(user_id, query, k, kinds, now or utcnow(), thread_id, visible_origins, inactive)
        except Exception:
            log.exception("memory recall failed for user %r", user_id)
            return []
        return [format_memory(h) for h in hits]
