"""The memory service the graph calls (DESIGN.md §4 / seed §4, §5.2, §6.4).

Ties together the episodic store, the write policy and the persistent retry queue, plus
per-session working memory. Knows nothing of the graph: plain strings and lists in and out.

    mem = MemoryService(data_dir)                     # cheap: touches no file until first use
    lines = await mem.recall(user_id, query, k=3)     # labelled lines for the prompt
    n = await mem.record_turn(user_id, thread_id, goal, answer, tools_used, stop_reason,
                              failed_then_succeeded)  # applies the write triggers, never raises
    n = await mem.flush_retry_queue()                 # replays failed writes

Semantic memory (the knowledge graph with confidence, pending conflicts and a 180-day validity,
seed §4.1/§4.3) is not implemented yet; explicit preferences are kept as episodic events of
kind "preference" until it is.
"""

from __future__ import annotations

import logging
import sqlite3
from datetime import datetime
from pathlib import Path
from typing import Any, Sequence

from tenacity import AsyncRetrying, retry_if_exception_type, stop_after_attempt, wait_exponential

from memory import policy
from memory.episodic.base import EpisodicEvent, EpisodicStore, ScoredEvent
from memory.episodic.sqlite import SqliteEpisodicStore
from memory.queue import RetryQueue
from memory.working import DEFAULT_TTL_SECONDS, WorkingMemory

log = logging.getLogger(__name__)

#: Queue operation name of an episodic write.
OP_EPISODIC_ADD = "episodic.add"
#: Errors worth an immediate in-process retry (a locked SQLite file, a dropped connection)
#: before the write falls back to the persistent queue.
TRANSIENT_ERRORS: tuple[type[BaseException], ...] = (sqlite3.OperationalError, ConnectionError, TimeoutError)
#: Characters of the goal / answer kept in an event's text.
GOAL_CHARS = 200
ANSWER_CHARS = 300


def _clip(text: str, limit: int) -> str:
    text = " ".join((text or "").split())
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def format_memory(hit: ScoredEvent) -> str:
    """A memory as a prompt line (seed §6.4: memories carry confidence and time labels):
    ``"[episodic · task · 2026-11-29 · confidence 0.90 · direct] <text>"`` (date in UTC)."""
    e = hit.event
    return f"[episodic · {e.kind} · {e.created_at.date().isoformat()} · confidence {e.confidence:.2f} · {e.evidence}] {e.text}"


def build_turn_events(
    user_id: str,
    thread_id: str,
    goal: str,
    answer: str,
    tools_used: Sequence[str],
    stop_reason: str | None,
    failed_then_succeeded: Sequence[str],
) -> list[EpisodicEvent]:
    """The events a finished turn triggers (seed §4.2), before the confidence threshold:
    a "task" event (``policy.should_record_task``), one "preference" event per sentence of
    ``goal`` found by ``policy.detect_preferences``, one "tool_recovery" event per tool that
    failed then succeeded. Pure; raises ``pydantic.ValidationError`` on an empty ``user_id``."""
    tools = list(dict.fromkeys(tools_used or []))
    meta: dict[str, Any] = {"thread_id": thread_id}
    events: list[EpisodicEvent] = []
    if policy.should_record_task(answer, stop_reason, tools):
        text = f"{'completed' if stop_reason is None else f'stopped ({stop_reason}) on'} task: {_clip(goal, GOAL_CHARS)}"
        if tools:
            text += f"; tools: {', '.join(tools)}"
        if answer and answer.strip():
            text += f"; answer: {_clip(answer, ANSWER_CHARS)}"
        events.append(
            EpisodicEvent(
                user_id=user_id,
                kind="task",
                text=text,
                confidence=policy.task_confidence(stop_reason),
                metadata={**meta, "tools": tools, "stop_reason": stop_reason},
            )
        )
    for sentence in policy.detect_preferences(goal):
        events.append(
            EpisodicEvent(
                user_id=user_id,
                kind="preference",
                text=f"user preference: {sentence}",
                confidence=policy.PREFERENCE_CONFIDENCE,
                metadata=meta,
            )
        )
    for tool in dict.fromkeys(failed_then_succeeded or []):
        events.append(
            EpisodicEvent(
                user_id=user_id,
                kind="tool_recovery",
                text=f"tool {tool} failed, then succeeded on retry, during task: {_clip(goal, GOAL_CHARS)}",
                confidence=policy.TOOL_RECOVERY_CONFIDENCE,
                metadata={**meta, "tool": tool},
            )
        )
    return events


class MemoryService:
    """Working + episodic memory with a persistent retry queue.

    Args:
        data_dir: directory of ``memory.db`` (created lazily on first use).
        store: the episodic store; default ``SqliteEpisodicStore`` in ``data_dir/memory.db``.
        queue: the retry queue; default ``RetryQueue`` in ``data_dir/memory.db``.
        working_ttl_seconds: lifetime of working-memory items, seconds.
    """

    def __init__(
        self,
        data_dir: Path,
        *,
        store: EpisodicStore | None = None,
        queue: RetryQueue | None = None,
        working_ttl_seconds: float = DEFAULT_TTL_SECONDS,
    ) -> None:
        self.data_dir = Path(data_dir)
        self.episodic: EpisodicStore = store if store is not None else SqliteEpisodicStore.in_dir(self.data_dir)
        self.queue = queue if queue is not None else RetryQueue.in_dir(self.data_dir)
        self.working_ttl_seconds = working_ttl_seconds
        self._sessions: dict[str, WorkingMemory] = {}

    # --- working memory ---------------------------------------------------------------------

    def working(self, thread_id: str) -> WorkingMemory:
        """The working memory of session ``thread_id`` (created on first use)."""
        wm = self._sessions.get(thread_id)
        if wm is None:
            wm = self._sessions[thread_id] = WorkingMemory(self.working_ttl_seconds)
        return wm

    def end_session(self, thread_id: str) -> None:
        """Clear and forget the working memory of ``thread_id`` (seed §4.1: cleared at session end)."""
        wm = self._sessions.pop(thread_id, None)
        if wm is not None:
            wm.clear()

    # --- episodic memory --------------------------------------------------------------------

    async def recall(
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
        """Up to ``k`` labelled memories of ``user_id`` relevant to ``query``, best first
        (relevance × time decay; ``kinds`` filters by event kind). Records under
        ``policy.MIN_CONFIDENCE`` are left out. With ``thread_id`` and ``visible_origins``
        (the message ids of the session's active branch), this session's own memories whose
        origin message is not on that branch are left out: a rolled-back attempt is not
        remembered on the branch that replaced it. Never raises: a store failure is logged and
        gives ``[]`` (memory must not break the answer, seed §5.2)."""
        try:
            hits = await self.episodic.search(user_id, query, k=k * 3 if thread_id else k, kinds=kinds, now=now)
        except Exception:  # noqa: BLE001
            log.exception("memory recall failed for user %r", user_id)
            return []

        def visible(hit: ScoredEvent) -> bool:
            meta = hit.event.metadata or {}
            if thread_id is None or visible_origins is None or meta.get("thread_id") != thread_id:
                return True
            origin = meta.get("origin_message_id")
            return origin is None or origin in visible_origins

        kept = [h for h in hits if policy.passes_threshold(h.event.confidence) and visible(h)]
        return [format_memory(h) for h in kept[:k]]

    def plan_turn(
        self,
        user_id: str,
        thread_id: str,
        goal: str,
        answer: str,
        tools_used: list[str],
        stop_reason: str | None,
        failed_then_succeeded: list[str],
        origin_message_id: str | None = None,
    ) -> list[EpisodicEvent]:
        """The events a finished turn triggers (seed §4.2) that pass the confidence threshold.
        ``origin_message_id`` (the turn's user message) is kept in each event's metadata so
        :meth:`recall` can tell which branch of a session an event came from.
        Pure and cheap (no I/O), so a caller can count them on its hot path and write them
        later with :meth:`write_events`. Never raises (a bad input gives ``[]``, logged)."""
        try:
            events = build_turn_events(
                user_id, thread_id, goal, answer, tools_used, stop_reason, failed_then_succeeded
            )
        except Exception:  # noqa: BLE001
            log.exception("memory: could not build events for thread %r", thread_id)
            return []
        if origin_message_id:
            for event in events:
                event.metadata = {**event.metadata, "origin_message_id": origin_message_id}
        return [e for e in events if policy.passes_threshold(e.confidence)]

    async def write_events(self, events: Sequence[EpisodicEvent]) -> int:
        """Store ``events``; return how many new records were stored (K11 duplicates and
        queued writes are not counted). Never raises: a failed write goes to the retry queue;
        if even that fails it is logged."""
        written = 0
        for event in events:
            try:
                stored_id = await self._add_with_retry(event)
            except Exception as exc:  # noqa: BLE001
                await self._enqueue(event, exc)
                continue
            written += stored_id == event.id
        return written

    async def record_turn(
        self,
        user_id: str,
        thread_id: str,
        goal: str,
        answer: str,
        tools_used: list[str],
        stop_reason: str | None,
        failed_then_succeeded: list[str],
    ) -> int:
        """:meth:`plan_turn` then :meth:`write_events`; returns the new records stored."""
        return await self.write_events(
            self.plan_turn(user_id, thread_id, goal, answer, tools_used, stop_reason, failed_then_succeeded)
        )

    async def flush_retry_queue(self) -> int:
        """Replay queued writes; return how many succeeded. Never raises."""
        try:
            return await self.queue.drain(self._replay)
        except Exception:  # noqa: BLE001
            log.exception("memory: retry queue could not be drained")
            return 0

    async def _add_with_retry(self, event: EpisodicEvent) -> str:
        async for attempt in AsyncRetrying(
            retry=retry_if_exception_type(TRANSIENT_ERRORS),
            stop=stop_after_attempt(3),
            wait=wait_exponential(multiplier=0.05, max=0.5),
            reraise=True,
        ):
            with attempt:
                return await self.episodic.add(event)
        raise AssertionError("unreachable")  # pragma: no cover

    async def _enqueue(self, event: EpisodicEvent, exc: BaseException) -> None:
        log.warning("memory write failed (%s: %s); queued for retry", type(exc).__name__, exc)
        try:
            await self.queue.enqueue(OP_EPISODIC_ADD, event.model_dump(mode="json"), exc)
        except Exception:  # noqa: BLE001
            log.exception("memory: could not queue a failed write; event lost: %s", event.text)

    async def _replay(self, op: str, payload: dict[str, Any]) -> None:
        if op != OP_EPISODIC_ADD:
            raise ValueError(f"unknown memory operation {op!r}")
        await self.episodic.add(EpisodicEvent.model_validate(payload))
