"""Semantic memory on PostgreSQL (``memory.semantic_postgres``; issue 22): the knowledge graph's
own tests (``tests/unit/test_memory_semantic.py``: facts, conflicts, supersession, multi-hop
queries, expiry, forgetting) run here on the real PostgreSQL 16 that ``pgserver`` starts
(``postgres_server`` in ``conftest.py``), a new database per test; plus what only a shared
server shows: two workers stating conflicting values at once, and the memory service recalling
and forgetting through it (the data directory keeps only the queue)."""

from __future__ import annotations

import asyncio
import sqlite3
from datetime import timedelta

import pytest

from memory.fact_extraction import FactCandidate
from memory.semantic_postgres import PostgresSemanticMemory
from tests.unit.test_memory_semantic import (  # the same tests, on this store (the `kg` fixture below)
    NOW,
    attr,
    test_a_contradiction_is_kept_pending_beside_the_confirmed_fact,
    test_a_fact_keeps_confidence_source_validity_and_status,
    test_below_threshold_is_not_stored,
    test_exact_duplicate_is_a_no_op_that_merges_evidence,
    test_expiry_after_180_days_and_down_weighting_of_unused_facts,
    test_multi_hop_ignores_superseded_and_not_yet_valid_facts,
    test_multi_hop_who_is_in_the_group_the_user_reports_to,
    test_multi_valued_predicates_do_not_conflict,
    test_reachable_within_hops,
    test_reaffirming_the_confirmed_value_supersedes_the_challenger,
    test_search_finds_facts_by_words_and_forget_deletes,
    test_the_next_behaviour_decides_and_the_loser_is_superseded_with_a_timestamp,
)
from tests.unit.test_memory_service import make, write

pytestmark = [pytest.mark.slow, pytest.mark.timeout(120)]

__all__ = [
    "test_a_contradiction_is_kept_pending_beside_the_confirmed_fact",
    "test_a_fact_keeps_confidence_source_validity_and_status",
    "test_below_threshold_is_not_stored",
    "test_exact_duplicate_is_a_no_op_that_merges_evidence",
    "test_expiry_after_180_days_and_down_weighting_of_unused_facts",
    "test_multi_hop_ignores_superseded_and_not_yet_valid_facts",
    "test_multi_hop_who_is_in_the_group_the_user_reports_to",
    "test_multi_valued_predicates_do_not_conflict",
    "test_reachable_within_hops",
    "test_reaffirming_the_confirmed_value_supersedes_the_challenger",
    "test_search_finds_facts_by_words_and_forget_deletes",
    "test_the_next_behaviour_decides_and_the_loser_is_superseded_with_a_timestamp",
]


@pytest.fixture
async def kg(postgres_url):
    store = PostgresSemanticMemory(postgres_url)
    yield store
    await store.close()


async def test_two_workers_stating_conflicting_values_at_once_leave_one_confirmed_and_one_pending(postgres_url):
    """The write lock holds across processes and hosts: concurrent first statements of a
    single-valued predicate are serialised, so the later one is a pending challenger, never a
    second confirmed value."""
    stores = [PostgresSemanticMemory(postgres_url) for _ in range(4)]
    try:
        await stores[0].count()  # the tables exist first: the race is on the facts
        values = ["pdf", "docx", "html", "markdown"]
        await asyncio.gather(*(attr(s, "user", "prefers_format", v) for s, v in zip(stores, values, strict=True)))
        facts = await stores[1].facts("u", predicate="prefers_format")
        assert sorted(f.status for f in facts) == ["confirmed", "pending"]
        (pair,) = await stores[2].conflicts("u")
        assert pair[1].conflict_with == pair[0].id
    finally:
        for store in stores:
            await store.close()


async def test_the_memory_service_recalls_and_forgets_facts_on_postgres(tmp_path, postgres_url):
    """A stated preference is a fact on the server, recalled into the prompt; forgotten, it
    stays forgotten through consolidation; a second service (another worker) sees the same.
    The data directory holds no fact."""
    mem = make(tmp_path, semantic=PostgresSemanticMemory(postgres_url))
    other = make(tmp_path / "other", semantic=PostgresSemanticMemory(postgres_url))
    try:
        await write(mem, goal="I always prefer reports in PDF format.", tools_used=[], answer="Noted.", now=NOW)
        (fact,) = [f for f in await other.semantic.facts("u") if f.predicate == "prefers_format"]
        block = await other.recall_for_turn("u", "t9", "make the sales report", k=5, now=NOW)
        assert any("pdf" in line.lower() and line.startswith("[semantic") for line in block.lines)
        assert await mem.forget("u", f"semantic:{fact.id}")
        model = {
            e.id: [FactCandidate("user", "prefers_format", "pdf", object_is_entity=False, confidence=0.9)]
            for e in await mem.recent_episodes(NOW - timedelta(days=1))
        }
        episodes = await mem.recent_episodes(NOW - timedelta(days=1))
        await other.consolidate_facts(episodes, candidates=model, now=NOW + timedelta(minutes=5))
        assert [f for f in await other.semantic.facts("u") if f.predicate == "prefers_format"] == []
        with sqlite3.connect(tmp_path / "data" / "memory.db") as local:
            tables = {r[0] for r in local.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
            assert "semantic_facts" not in tables or not local.execute("SELECT * FROM semantic_facts").fetchall()
    finally:
        await mem.aclose()
        await other.aclose()


async def test_a_lost_session_costs_no_recall_and_no_write(postgres_url):
    """The server dropped the store's sessions (a restart, an administrator's terminate): the
    next read and write get a live connection and succeed; what was stored is still there."""
    import psycopg

    store = PostgresSemanticMemory(postgres_url)
    try:
        await attr(store, "user", "prefers_format", "pdf")

        async def drop_sessions() -> None:
            async with await psycopg.AsyncConnection.connect(postgres_url, autocommit=True) as admin:
                await admin.execute(
                    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                    "WHERE datname = current_database() AND pid <> pg_backend_pid()"
                )

        await drop_sessions()
        assert [f.object for f in await store.facts("u")] == ["pdf"]
        await drop_sessions()
        assert (await attr(store, "user", "prefers_language", "English")).outcome == "added"
        assert await store.count("u") == 2
    finally:
        await store.close()


async def test_a_branch_moved_on_one_host_hides_its_memories_on_another(tmp_path, postgres_url):
    """Branch origins on PostgreSQL: a fact stated by a turn that one worker then rolls back
    (its session's active branch no longer holds that message) is no longer recalled by a
    worker with another data directory; switched back, it is recalled again."""
    from memory.branch_origins import BranchOrigins
    from tests.unit.test_memory_service import turn

    def service(name: str):
        return make(
            tmp_path / name,
            semantic=PostgresSemanticMemory(postgres_url),
            origins=BranchOrigins.on_postgres(postgres_url),
        )

    writer, reader = service("a"), service("b")
    try:
        plan = writer.plan_turn(**turn(goal="I always prefer reports in PDF format.", origin_message_id="m2"))
        await writer.write_plan(plan, now=NOW)

        async def recalled() -> bool:
            block = await reader.recall_for_turn("u", "t9", "make the sales report", k=5, now=NOW)
            return any("pdf" in line.lower() and line.startswith("[semantic") for line in block.lines)

        assert await recalled()
        await writer.sync_branch("t1", {"m1"})  # rolled back to before m2
        assert not await recalled()
        await writer.sync_branch("t1", {"m1", "m2"})  # switched back
        assert await recalled()
    finally:
        await writer.aclose()
        await reader.aclose()
