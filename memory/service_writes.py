"""The memory service's write path: a turn's plan (``memory.turn_events``) held durable in the
retry queue, then written (events in one batch, facts, conflict signals); a write that fails
after in-process retries is queued (``memory.queue``) and replayed later; the use of recalled
facts recorded off the recall path. Never blocks, never loses (seed §5.2)."""

from __future__ import annotations

import logging
import sqlite3
from collections.abc import Awaitable, Callable, Sequence
from datetime import datetime
from typing import Any, TypeVar

from tenacity import AsyncRetrying, retry_if_exception_type, stop_after_attempt, wait_exponential

from memory import fact_extraction, observations, task_outcome
from memory.db import one_connection
from memory.episodic.base import EpisodicEvent, utcnow
from memory.held_writes import OP_TURN_PLAN, plan_from_payload, plan_payload
from memory.semantic import UpsertResult, origin_of
from memory.service_core import MemoryCore
from memory.turn_events import TurnPlan, build_turn_events

log = logging.getLogger(__name__)

T = TypeVar("T")

#: Queue operations.
OP_EPISODIC_ADD = "episodic.add"
OP_SEMANTIC_UPSERT = "semantic.upsert"
#: Errors worth an immediate in-process retry before the write falls back to the queue.
TRANSIENT_ERRORS: tuple[type[BaseException], ...] = (sqlite3.OperationalError, ConnectionError, TimeoutError, OSError)


class MemoryWrites(MemoryCore):
    """The write half of the memory service (module docstring)."""

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
        evidence: task_outcome.TurnEvidence | None = None,
        goal_from_user: bool = True,
    ) -> TurnPlan:
        """What a finished turn writes (seed §4.2 triggers), over the confidence threshold.
        Pure and cheap (no I/O): the caller counts it on its hot path and writes it later
        with :meth:`write_plan`. ``origin_message_id`` (the turn's last message) lets
        :meth:`recall_for_turn` tell which branch of a session an event came from;
        ``evidence`` is what the runtime observed of the outcome (``task_outcome.TurnEvidence``):
        without it only the tool names are known, which is never enough for a task memory.
        ``goal_from_user`` False (a run a reminder's firing started: its request is the stored
        action, not the user's words): no preference, note, fact or conflict signal is read
        from it."""
        plan = TurnPlan(user_id, origin=origin_of(thread_id, origin_message_id))
        try:
            events = build_turn_events(
                user_id,
                thread_id,
                goal,
                answer,
                tools_used,
                stop_reason,
                failed_then_succeeded,
                evidence,
                goal_from_user=goal_from_user,
            )
            for event in events:
                if origin_message_id:
                    event.metadata = {**event.metadata, "origin_message_id": origin_message_id}
            plan.events = [e for e in events if e.confidence >= self.min_confidence]
            said = goal if goal_from_user else ""
            plan.facts = [f for f in fact_extraction.extract_facts(said) if f.confidence >= self.min_confidence]
            stated = {(f.predicate, f.object.casefold()) for f in plan.facts}
            # a statement is not its own decider: only a later use of a value decides a conflict
            plan.signals = [
                (p, v) for p, v in fact_extraction.behaviour_values(said) if p not in {s for s, _ in stated}
            ]
        except Exception:
            log.exception("memory: could not plan the writes of thread %r", thread_id)
        return plan

    async def write_plan(self, plan: TurnPlan, *, now: datetime | None = None) -> dict[str, int]:
        """Write a turn's plan: first held in the retry queue (one SQLite row: from then on it is
        durable, and a process that ends before the rest is done loses nothing — the next drain
        writes it, ``memory.held_writes``); then events in one batch (their passage embedding is
        the slow part), facts (their sources: the turn's preference events), conflict signals;
        then replay the retry queue. Never raises; returns counts (``episodes``, ``facts``,
        ``resolved``, ``queued``)."""
        counts = {"episodes": 0, "facts": 0, "resolved": 0, "queued": 0}
        if not await self._usable():
            return counts
        now = now or utcnow()
        async with one_connection(self.queue.db, self.origins.db):  # hold, origin, release: one (issue 19)
            held = await self._hold(plan, now)
            await self._write_now(plan, now, counts)
            if held is not None:
                try:
                    await self.queue.release(held)
                except Exception:  # written; a replay later is a no-op (K11 dedupe)
                    log.warning("memory: held write %s not released", held, exc_info=True)
        if counts["queued"] == 0 and self._queue_may_hold:
            # replay what earlier failures queued (checked once per process, then after each failure)
            await self.flush_retry_queue()
            self._queue_may_hold = bool(await self._pending_count())
        return counts

    async def _hold(self, plan: TurnPlan, now: datetime) -> int | None:
        # durable before the slow part; without the queue the write is only as safe as before
        if not len(plan):
            return None
        try:
            return await self.queue.hold(OP_TURN_PLAN, plan_payload(plan, now))
        except Exception:
            log.warning("memory: the turn's write could not be held in the queue", exc_info=True)
            return None

    async def _write_now(self, plan: TurnPlan, now: datetime, counts: dict[str, int]) -> None:
        await self.flush_touches()
        await self._record_origin(plan)
        ids = await self._write_events(plan.events, counts)
        await self._record_restated(plan, ids)
        sources = [i for e, i in zip(plan.events, ids) if i and e.kind == "preference"]
        for fact in plan.facts:
            payload = {
                "user_id": plan.user_id,
                "subject": fact.subject,
                "predicate": fact.predicate,
                "obj": fact.object,
                "object_is_entity": fact.object_is_entity,
                "confidence": fact.confidence,
                "sources": sources,
                "now": now.isoformat(),
                "origin": plan.origin,
                "restated": True,  # the user's words of this turn: a forgotten fact stated anew
            }
            outcome = await self._upsert(payload, counts)
            counts["facts"] += outcome in ("added", "pending_conflict")
            counts["resolved"] += outcome == "resolved"
        if plan.signals:
            counts["resolved"] += await self._apply_signals(plan.user_id, plan.signals, sources, now)

    async def _record_origin(self, plan: TurnPlan) -> None:
        # the turn's place, so a later branch change can hide what it wrote (one small
        # idempotent write, only for a turn that writes memory)
        thread_id, _, message_id = (plan.origin or "").partition("\x00")
        if not (len(plan) and thread_id and message_id):
            return
        try:
            await self.origins.record(thread_id, message_id)
        except Exception:  # the memory itself matters more; it stays visible
            log.warning("memory: origin of thread %r not recorded", thread_id, exc_info=True)

    async def _record_restated(self, plan: TurnPlan, ids: Sequence[str | None]) -> None:
        # the store returned a record written before (K11, the same text): it is this turn's
        # too, so it stays visible while either branch is active
        thread_id, _, message_id = (plan.origin or "").partition("\x00")
        again = [i for e, i in zip(plan.events, ids) if i and i != e.id]
        if not (again and thread_id and message_id):
            return
        try:
            for memory_id in again:
                await self.origins.restate(memory_id, thread_id, message_id)
        except Exception:  # at worst the record stays hidden with its first branch
            log.warning("memory: restated records of thread %r not recorded", thread_id, exc_info=True)

    async def _pending_count(self) -> int:
        try:
            return len(await self.queue.pending())
        except Exception:  # noqa: BLE001 - an unreadable queue counts as holding writes: the replay is tried
            return 1

    async def _apply_signals(
        self, user_id: str, signals: list[tuple[str, str]], sources: list[str], now: datetime | None
    ) -> int:
        try:
            conflicts = await self.semantic.conflicts(user_id)
        except Exception:
            log.exception("memory: conflicts unreadable")
            return 0
        resolved = 0
        for predicate, value in signals:
            for confirmed, pending in conflicts:
                if confirmed.predicate != predicate or value.casefold() not in (
                    confirmed.object.casefold(),
                    pending.object.casefold(),
                ):
                    continue
                winner = confirmed if value.casefold() == confirmed.object.casefold() else pending
                payload = {
                    "user_id": user_id,
                    "subject": winner.subject_name or winner.subject,
                    "predicate": predicate,
                    "obj": winner.object,
                    "object_is_entity": winner.object_is_entity,
                    "confidence": winner.confidence,
                    "sources": list(sources),
                    "now": (now or utcnow()).isoformat(),
                }
                resolved += await self._upsert(payload, {"queued": 0}) == "resolved"
        return resolved

    async def _write_events(self, events: Sequence[EpisodicEvent], counts: dict[str, int]) -> list[str | None]:
        if not events:
            return []
        observations.annotate(events)  # conversation turns get their observation (rules, no model)
        try:
            ids = await self._retrying(self.episodic.add_many, list(events))
        except Exception as exc:  # noqa: BLE001 - queued and replayed later (K11): memory never fails the turn
            for event in events:
                await self._enqueue(OP_EPISODIC_ADD, event.model_dump(mode="json"), exc)
            counts["queued"] += len(events)
            return [None] * len(events)
        counts["episodes"] += sum(1 for e, i in zip(events, ids) if i == e.id)
        return list(ids)

    async def _upsert(self, payload: dict[str, Any], counts: dict[str, int]) -> str:
        try:
            result = await self._retrying(self._do_upsert, payload)
        except Exception as exc:  # noqa: BLE001 - queued and replayed later (K11): memory never fails the turn
            await self._enqueue(OP_SEMANTIC_UPSERT, payload, exc)
            counts["queued"] = counts.get("queued", 0) + 1
            return "queued"
        return result.outcome

    async def _do_upsert(self, payload: dict[str, Any]) -> UpsertResult:
        p = dict(payload)
        now = datetime.fromisoformat(p.pop("now")) if p.get("now") else None
        # read at write time (a replayed write too): a fact of an inactive branch contests nothing
        inactive = (await self._inactive("", None)).origins
        return await self.semantic.upsert(
            p.pop("user_id"), p.pop("subject"), p.pop("predicate"), p.pop("obj"), now=now, inactive=inactive, **p
        )

    async def write_events(self, events: Sequence[EpisodicEvent]) -> int:
        """Store ``events`` (one batch); return how many new records were stored (K11
        duplicates and queued writes not counted). Never raises."""
        counts = {"episodes": 0, "queued": 0}
        if not await self._usable():
            return 0
        await self._write_events(list(events), counts)
        return counts["episodes"]

    async def record_turn(
        self,
        user_id: str,
        thread_id: str,
        goal: str,
        answer: str,
        tools_used: list[str],
        stop_reason: str | None,
        failed_then_succeeded: list[str],
        evidence: task_outcome.TurnEvidence | None = None,
    ) -> int:
        """:meth:`plan_turn` then :meth:`write_plan`; returns the new episodic records stored."""
        plan = self.plan_turn(
            user_id, thread_id, goal, answer, tools_used, stop_reason, failed_then_succeeded, evidence=evidence
        )
        return (await self.write_plan(plan))["episodes"]

    async def _retrying(self, fn: Callable[..., Awaitable[T]], *args: Any) -> T:
        async for attempt in AsyncRetrying(
            retry=retry_if_exception_type(TRANSIENT_ERRORS),
            stop=stop_after_attempt(3),
            wait=wait_exponential(multiplier=0.05, max=0.5),
            reraise=True,
        ):
            with attempt:
                return await fn(*args)
        raise AssertionError("unreachable")  # pragma: no cover

    async def _enqueue(self, op: str, payload: dict[str, Any], exc: BaseException) -> None:
        self._queue_may_hold = True
        log.warning("memory write failed (%s: %s); queued for retry", type(exc).__name__, exc)
        try:
            await self.queue.enqueue(op, payload, exc)
        except Exception:
            log.exception("memory: could not queue a failed write; lost: %s", payload)

    async def _replay(self, op: str, payload: dict[str, Any]) -> None:
        if op == OP_EPISODIC_ADD:
            await self.episodic.add_many([EpisodicEvent.model_validate(payload)])
        elif op == OP_SEMANTIC_UPSERT:
            await self._do_upsert(payload)
        elif op == OP_TURN_PLAN:  # held by a process that ended before writing it
            plan, when = plan_from_payload(payload)
            counts = {"episodes": 0, "facts": 0, "resolved": 0, "queued": 0}
            await self._write_now(plan, when, counts)
        else:
            raise ValueError(f"unknown memory operation {op!r}")

    async def flush_touches(self) -> int:
        """Record the use of the facts recall showed since the last flush (``use_count``,
        ``last_used_at``: what down-weighting reads), in one write. Never raises; returns how
        many facts were recorded."""
        if not self._touched:
            return 0
        touched, self._touched = self._touched, {}
        try:
            for when in sorted(set(touched.values())):
                await self.semantic.touch([i for i, t in touched.items() if t == when], now=when)
        except Exception:  # a use count is not worth an error
            log.warning("memory: fact use not recorded", exc_info=True)
            return 0
        return len(touched)

    async def flush_retry_queue(self) -> int:
        """Replay queued writes; return how many succeeded. Never raises."""
        if not await self._usable():
            return 0
        try:
            return await self.queue.drain(self._replay)
        except Exception:
            log.exception("memory: retry queue could not be drained")
            return 0
