"""Forgetting is final (issue 26): after ``hermes memory forget`` of a preference,
``hermes memory consolidate`` re-created it (``prefers_format 'pdf'``) from the episodes it was
extracted from, and it reached the next prompt. Now a tombstone keeps it out: consolidation
(rules or a model) re-reading those episodes is refused, the episodes are not recalled, a new
process sees the same; only the user stating it anew brings it back. Sibling: forgetting the
episode forgets the facts read from it alone."""

from __future__ import annotations

from datetime import timedelta

from memory.fact_extraction import FactCandidate
from tests.unit.test_memory_service import NOW, make, write

PREF = "I always prefer reports in PDF format."


async def _facts(mem, predicate="prefers_format"):
    return [f for f in await mem.semantic.facts("u") if f.predicate == predicate]


async def _prompt(mem, now=NOW):
    block = await mem.recall_for_turn("u", "t9", "make the sales report in the usual format", k=20, now=now)
    return "\n".join(block.lines)


async def test_a_forgotten_preference_stays_forgotten_through_consolidation_and_restart(tmp_path):
    mem = make(tmp_path)
    await write(mem, goal=PREF, tools_used=[], answer="Noted.", now=NOW)
    (fact,) = await _facts(mem)
    assert "pdf" in await _prompt(mem)
    assert await mem.forget("u", f"semantic:{fact.id}")
    assert await _facts(mem) == [] and "pdf" not in (await _prompt(mem)).lower()

    episodes = await mem.recent_episodes(NOW - timedelta(days=1))
    counts = await mem.consolidate_facts(episodes, now=NOW + timedelta(minutes=30))
    assert counts["added"] == 0 and await _facts(mem) == []
    # a model's extraction of the same episodes is refused the same way
    model = {
        e.id: [FactCandidate("user", "prefers_format", "pdf", object_is_entity=False, confidence=0.9)] for e in episodes
    }
    await mem.consolidate_facts(episodes, candidates=model, evidence="inferred", now=NOW + timedelta(minutes=31))
    assert await _facts(mem) == []
    await mem.aclose()

    again = make(tmp_path)  # a new process on the same data directory
    try:
        await again.consolidate_facts(
            await again.recent_episodes(NOW - timedelta(days=1)), now=NOW + timedelta(hours=1)
        )
        assert await _facts(again) == []
        assert "pdf" not in (await _prompt(again, NOW + timedelta(hours=1))).lower()

        # the user says it again: it is back
        await write(
            again, goal="I prefer reports in PDF format.", tools_used=[], answer="Noted.", now=NOW + timedelta(hours=2)
        )
        assert [f.object for f in await _facts(again)] == ["pdf"]
    finally:
        await again.aclose()


async def test_forgetting_the_episode_forgets_the_facts_read_from_it(tmp_path):
    mem = make(tmp_path)
    try:
        await write(mem, goal=PREF, tools_used=[], answer="Noted.", now=NOW)
        (episode,) = [e for e in await mem.episodic.list("u") if e.kind == "preference"]
        assert await _facts(mem)
        assert await mem.forget("u", f"episodic:{episode.id}")
        assert await _facts(mem) == []
        await mem.consolidate_facts(await mem.recent_episodes(NOW - timedelta(days=1)), now=NOW + timedelta(minutes=30))
        assert await _facts(mem) == [] and "pdf" not in (await _prompt(mem)).lower()
    finally:
        await mem.aclose()


async def test_forgetting_one_fact_keeps_the_others_of_the_same_turn(tmp_path):
    mem = make(tmp_path)
    try:
        await write(
            mem, goal="I prefer reports in PDF format. I love Chinese food.", tools_used=[], answer="Noted.", now=NOW
        )
        (fmt,) = await _facts(mem)
        assert await mem.forget("u", f"semantic:{fmt.id}")
        await mem.consolidate_facts(await mem.recent_episodes(NOW - timedelta(days=1)), now=NOW + timedelta(minutes=30))
        assert await _facts(mem) == []
        assert [f.object for f in await _facts(mem, "likes")] == ["chinese food"]
    finally:
        await mem.aclose()
