"""MemoryService: the four write triggers, labelled recall in prompt order, conflicts shown as
such and decided by the user's next behaviour, working memory per session, never-raising
writes through the persistent retry queue."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

import pytest

from memory.embeddings import HashEmbedder
from memory.episodic.base import EpisodicEvent
from memory.episodic.lance import LanceEpisodicStore
from memory.service import MemoryService
from memory.task_outcome import TurnEvidence

NOW = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)
EPISODE = re.compile(r"^\[episodic · (\w+) · \d{4}-\d{2}-\d{2} · confidence \d\.\d\d · (evidence|inferred)\] .+")
FACT = re.compile(r"^\[semantic · fact · since \d{4}-\d{2}-\d{2} · confidence \d\.\d\d · (evidence: .+|inferred)\] .+")


def turn(**overrides):
    args = {
        "user_id": "u",
        "thread_id": "t1",
        "goal": "Run the monthly sales report for 2026-10.",
        "answer": "Report saved to reports/sales-2026-10.md",
        "tools_used": ["query_database", "generate_report"],
        "stop_reason": None,
        "failed_then_succeeded": [],
    }
    args.update(overrides)
    if "evidence" not in args:  # the state of a turn whose tools were the goal's steps, all done
        tools = tuple(args["tools_used"])
        args["evidence"] = TurnEvidence(
            required_steps=tools,
            steps_done=tools,
            tools_succeeded=tools,
            side_effects_done=tools[-1:],
            artifacts=("reports/sales-2026-10.md",) if tools else (),
        )
    return args


def make(tmp_path, **kwargs) -> MemoryService:
    store = kwargs.pop("episodic", None) or LanceEpisodicStore(tmp_path / "data" / "episodic.lance", HashEmbedder())
    return MemoryService(tmp_path / "data", episodic=store, **kwargs)


@pytest.fixture
async def mem(tmp_path):
    service = make(tmp_path)
    yield service
    await service.aclose()


async def write(mem: MemoryService, now=NOW, **overrides) -> dict[str, int]:
    return await mem.write_plan(mem.plan_turn(**turn(**overrides)), now=now)


async def test_constructor_is_cheap(tmp_path):
    make(tmp_path)
    assert not (tmp_path / "data").exists()


async def test_trigger_task_completed_is_recorded_and_recalled_with_labels(mem):
    assert (await write(mem))["episodes"] == 1
    lines = await mem.recall("u", "sales report", now=NOW)
    (line,) = [x for x in lines if x.startswith("[episodic")]
    assert EPISODE.match(line).groups() == ("task", "evidence"), line
    # steps done, tool results, an artifact, an answer naming it: 1 - .25*.6*.7*.6 (noisy-OR)
    assert "confidence 0.94" in line and "query_database, generate_report" in line
    assert "produced: reports/sales-2026-10.md" in line


async def test_no_trigger_no_write(mem):
    plan = mem.plan_turn(**turn(goal="hello", answer="", tools_used=[], stop_reason="the model gave no answer"))
    assert len(plan) == 0


async def test_trigger_explicit_preference_writes_an_episode_and_a_fact_with_its_evidence(mem):
    counts = await write(mem, goal="I prefer PDF reports.", tools_used=[], answer="Noted.")
    # the preference (no task: "Noted." with no tool result is no evidence of work), fact prefers_format
    assert counts["episodes"] == 1 and counts["facts"] == 1
    (fact,) = await mem.semantic.facts("u")
    assert (fact.predicate, fact.object, fact.status) == ("prefers_format", "pdf", "confirmed")
    preference = (await mem.episodic.list("u", kinds=["preference"]))[0]
    assert fact.sources == [preference.id]
    lines = await mem.recall("u", "make the sales report", now=NOW)
    assert any(FACT.match(x) and "prefers format: pdf" in x and "evidence: 1 episode" in x for x in lines), lines


async def test_trigger_tool_failed_then_succeeded(mem):
    await write(mem, failed_then_succeeded=["query_database"])
    (event,) = await mem.episodic.list("u", kinds=["tool_recovery"])
    assert event.metadata["tool"] == "query_database" and "failed, then succeeded on retry" in event.text


async def test_trigger_cross_session_reference_is_recorded_and_widens_recall(mem):
    await write(mem, goal="Summarise the March sales into a report", now=NOW - timedelta(days=3))
    await write(mem, goal="Do the sales summary like last time", tools_used=[], answer="Done.")
    (event,) = await mem.episodic.list("u", kinds=["cross_session"])
    assert "like last time" in event.text
    lines = await mem.recall("u", "the report from March", now=NOW)
    assert any("March sales" in x for x in lines)


async def test_threshold_keeps_weak_records_out(tmp_path):
    mem = make(tmp_path, min_confidence=0.95)
    assert len(mem.plan_turn(**turn())) == 0
    await mem.aclose()


async def test_k11_the_same_turn_twice_is_one_memory(mem):
    assert (await write(mem))["episodes"] == 1
    assert (await write(mem))["episodes"] == 0
    assert await mem.episodic.count("u") == 1


async def test_conflict_is_pending_shown_as_such_and_decided_by_the_next_request(mem):
    await write(mem, goal="I prefer PDF reports.", tools_used=[], answer="ok", now=NOW - timedelta(days=2))
    counts = await write(
        mem, goal="I prefer markdown reports.", tools_used=[], answer="ok", now=NOW - timedelta(days=1)
    )
    assert counts["facts"] == 1
    statuses = {f.object: f.status for f in await mem.semantic.facts("u")}
    assert statuses == {"pdf": "confirmed", "markdown": "pending"}  # the new one does not overwrite
    lines = await mem.recall("u", "write the monthly report", now=NOW)
    conflict = [x for x in lines if "CONFLICT" in x]
    assert (
        len(conflict) == 1 and "pdf" in conflict[0] and "markdown" in conflict[0] and "not both are true" in conflict[0]
    )
    assert not any(FACT.match(x) and "prefers format" in x for x in lines)  # never two facts as both true
    # the user's next behaviour: they ask for markdown again
    counts = await write(mem, goal="Send me the sales report as markdown", now=NOW)
    assert counts["resolved"] == 1
    facts = await mem.semantic.facts("u", statuses=("confirmed", "pending", "superseded"))
    by_value = {f.object: f for f in facts}
    assert by_value["markdown"].status == "confirmed"
    assert by_value["pdf"].status == "superseded" and by_value["pdf"].valid_to == NOW
    assert by_value["pdf"].superseded_by == by_value["markdown"].id
    lines = await mem.recall("u", "write the monthly report", now=NOW)
    assert not any("CONFLICT" in x for x in lines)
    assert any("prefers format: markdown" in x for x in lines)


async def test_one_off_instruction_lives_in_working_memory_reaches_recall_and_ends_with_the_session(mem):
    lines = await mem.recall("u", "Give me short answers this time. What is in the database?", thread_id="t1", now=NOW)
    assert lines[0] == "[working · this session] Give me short answers this time."
    later = await mem.recall("u", "and the sales table?", thread_id="t1", now=NOW)
    assert later[0].startswith("[working · this session] Give me short answers")
    assert not any("[working" in x for x in await mem.recall("u", "and the sales table?", thread_id="t2", now=NOW))
    plan = mem.plan_turn(**turn(goal="Give me short answers this time.", tools_used=[], answer="ok"))
    assert plan.events == [] and plan.facts == []  # never long-term (and "ok" is no task evidence)
    assert mem.end_session("t1") == 1
    assert not any("[working" in x for x in await mem.recall("u", "and the sales table?", thread_id="t1", now=NOW))


async def test_working_memory_items_expire_after_their_ttl(tmp_path):
    class Clock:
        t = 0.0

        def __call__(self):
            return self.t

    clock = Clock()
    mem = make(tmp_path)
    from memory.working import SessionMemories

    mem.sessions = SessionMemories(60, timer=clock)
    mem.note_one_offs("t1", "Reply in French this time.")
    assert len(mem.working("t1")) == 1
    clock.t = 61
    assert len(mem.working("t1")) == 0
    await mem.aclose()


async def test_recall_block_order_and_budget(mem):
    await mem.episodic.add_many(
        [
            EpisodicEvent(
                user_id="u", kind="task", text=f"sales report number {i} " + "x" * 200, confidence=0.9, created_at=NOW
            )
            for i in range(10)
        ]
    )
    await mem.episodic.add(
        EpisodicEvent(
            user_id="u",
            kind="note",
            text="sales report inferred pattern",
            confidence=0.7,
            evidence="inferred",
            created_at=NOW,
        )
    )
    await write(mem, goal="I prefer excel for sales reports.", tools_used=[], answer="ok")
    mem.memory_tokens = 150
    block = await mem.recall_for_turn("u", "t9", "Short answers this time: the sales report", k=20, now=NOW)
    kinds = [line.split(" · ")[0] for line in block.lines]
    assert kinds[0] == "[working" and kinds[1] == "[semantic"
    assert block.tokens <= 150 and block.dropped > 0
    mem.memory_tokens = 5000
    block = await mem.recall_for_turn("u", "t9", "the sales report", k=20, now=NOW)
    episodic = [x for x in block.lines if x.startswith("[episodic")]
    assert episodic[-1].endswith("sales report inferred pattern") and "· inferred]" in episodic[-1]
    assert all("· evidence]" in x for x in episodic[:-1])  # direct evidence ranked apart, first


async def test_a_failing_store_never_raises_queues_and_the_queue_drains(tmp_path):
    class Flaky(LanceEpisodicStore):
        broken = True

        async def add_many(self, events):
            if self.broken:
                raise RuntimeError("disk full")
            return await super().add_many(events)

    store = Flaky(tmp_path / "data" / "episodic.lance", HashEmbedder())
    mem = make(tmp_path, episodic=store)
    counts = await write(mem)
    assert counts == {"episodes": 0, "facts": 0, "resolved": 0, "queued": 1}
    (entry,) = await mem.queue.pending()
    assert entry.op == "episodic.add" and "disk full" in entry.error
    assert await mem.recall("u", "sales report", now=NOW) == []  # nothing stored, nothing raised
    store.broken = False
    assert await mem.flush_retry_queue() == 1
    assert await mem.queue.pending() == []
    assert any("sales report" in x for x in await mem.recall("u", "sales report", now=NOW))
    await mem.aclose()


async def test_recall_never_raises_when_the_store_is_broken(tmp_path):
    class Broken(LanceEpisodicStore):
        async def search(self, *a, **k):
            raise OSError("gone")

    mem = make(tmp_path, episodic=Broken(tmp_path / "b", HashEmbedder()))
    assert await mem.recall("u", "anything", thread_id="t", now=NOW) == []
    await mem.aclose()


async def test_rolled_back_branch_memories_of_this_session_are_not_recalled(mem):
    plan = mem.plan_turn(**turn(), origin_message_id="m-abandoned")
    await mem.write_plan(plan, now=NOW)
    assert not any(
        "[episodic" in x
        for x in await mem.recall("u", "sales report", thread_id="t1", visible_origins={"m-other"}, now=NOW)
    )
    assert any(
        "[episodic" in x
        for x in await mem.recall("u", "sales report", thread_id="t2", visible_origins={"m-other"}, now=NOW)
    )


async def test_forget_by_reference(mem):
    await write(mem)
    await write(mem, goal="I prefer PDF reports.", tools_used=[], answer="ok")
    (fact,) = await mem.semantic.facts("u")
    event = (await mem.episodic.list("u", kinds=["preference"]))[0]
    assert await mem.forget("u", f"semantic:{fact.id}") and await mem.semantic.facts("u") == []
    assert await mem.forget("u", event.id) and await mem.episodic.get("u", event.id) is None
    assert not await mem.forget("u", "episodic:nope")
    assert not await mem.forget("v", f"episodic:{(await mem.episodic.list('u'))[0].id}")


async def test_expire_defaults_30_and_180_days(mem):
    await mem.episodic.add_many(
        [
            EpisodicEvent(
                user_id="u", kind="note", text="old note", confidence=0.9, created_at=NOW - timedelta(days=31)
            ),
            EpisodicEvent(
                user_id="u", kind="note", text="recent note", confidence=0.9, created_at=NOW - timedelta(days=29)
            ),
        ]
    )
    await write(mem, goal="I prefer PDF reports.", tools_used=[], answer="ok", now=NOW - timedelta(days=181))
    await write(mem, goal="I report to Alice.", tools_used=[], answer="ok", now=NOW - timedelta(days=100))
    counts = await mem.expire(NOW)
    assert counts["episodic_expired"] >= 1 and counts["semantic_expired"] == 1
    assert {f.object for f in await mem.semantic.facts("u")} == {"Alice"}
    assert [e.text for e in await mem.episodic.list("u", kinds=["note"])] == ["recent note"]


async def test_a_fact_stated_on_a_rolled_back_branch_is_not_recalled_on_the_branch_that_replaced_it(mem):
    plan = mem.plan_turn(**turn(goal="I prefer PDF reports.", tools_used=[], answer="ok"), origin_message_id="m-gone")
    await mem.write_plan(plan, now=NOW)
    (fact,) = await mem.semantic.facts("u")
    assert fact.origin is not None
    same_session = await mem.recall("u", "the report", thread_id="t1", visible_origins={"m-kept"}, now=NOW)
    assert not any("prefers format" in x for x in same_session)
    on_its_branch = await mem.recall("u", "the report", thread_id="t1", visible_origins={"m-gone"}, now=NOW)
    assert any("prefers format: pdf" in x for x in on_its_branch)
    other_session = await mem.recall("u", "the report", thread_id="t2", visible_origins={"x"}, now=NOW)
    assert any("prefers format: pdf" in x for x in other_session)
    # stated again on the surviving branch: no longer bound to the abandoned one
    again = mem.plan_turn(**turn(goal="I prefer PDF reports.", tools_used=[], answer="ok!"), origin_message_id="m-kept")
    await mem.write_plan(again, now=NOW)
    assert (await mem.semantic.facts("u"))[0].origin is None
    assert any(
        "prefers format: pdf" in x
        for x in await mem.recall("u", "the report", thread_id="t1", visible_origins={"m-kept"}, now=NOW)
    )


async def test_a_store_written_before_the_origin_column_is_migrated(tmp_path):
    import re
    import sqlite3

    from memory.semantic import SCHEMA, SemanticMemory

    path = tmp_path / "old.db"
    old_schema = re.sub(r",\n\s*origin\s+TEXT[^\n]*", "", SCHEMA)  # the table as first released
    with sqlite3.connect(path) as con:
        con.executescript(old_schema)
        assert "origin" not in {r[1] for r in con.execute("PRAGMA table_info(semantic_facts)")}
    kg = SemanticMemory(path)
    result = await kg.upsert(
        "u", "user", "prefers_format", "pdf", object_is_entity=False, confidence=0.9, origin="t\x00m"
    )
    assert result.fact.origin == "t\x00m"
