"""Semantic memory: the knowledge graph on SQLite — facts with confidence, evidence, validity
and status; conflicts kept pending; multi-hop queries; expiry and down-weighting."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from memory.semantic import SemanticMemory, entity_key

NOW = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)


@pytest.fixture
def kg(tmp_path) -> SemanticMemory:
    return SemanticMemory.in_dir(tmp_path)


async def rel(kg, s, p, o, user="u", conf=0.9, **kw):
    return await kg.upsert(user, s, p, o, object_is_entity=True, confidence=conf, now=kw.pop("now", NOW), **kw)


async def attr(kg, s, p, o, user="u", conf=0.9, **kw):
    return await kg.upsert(user, s, p, o, object_is_entity=False, confidence=conf, now=kw.pop("now", NOW), **kw)


async def test_a_fact_keeps_confidence_source_validity_and_status(kg):
    result = await attr(kg, "user", "prefers_format", "PDF", sources=["ep1"])
    fact = result.fact
    assert result.outcome == "added"
    assert (fact.subject, fact.predicate, fact.object, fact.status) == ("user", "prefers_format", "PDF", "confirmed")
    assert fact.confidence == 0.9 and fact.evidence == "direct" and fact.sources == ["ep1"]
    assert fact.valid_from == NOW and fact.valid_to is None
    inferred = (await rel(kg, "Bob", "member_of", "Data team", evidence="inferred")).fact
    assert inferred.evidence == "inferred" and inferred.sources == []


async def test_exact_duplicate_is_a_no_op_that_merges_evidence(kg):
    first = (await attr(kg, "user", "prefers_format", "pdf", sources=["ep1"])).fact
    again = await attr(kg, "User", "prefers_format", " PDF ", sources=["ep2"], now=NOW + timedelta(days=1))
    assert again.outcome == "duplicate" and again.fact.id == first.id
    assert again.fact.sources == ["ep1", "ep2"]
    assert await kg.count("u") == 1


async def test_below_threshold_is_not_stored(kg):
    assert (await attr(kg, "user", "prefers_format", "pdf", conf=0.3)).outcome == "rejected"
    assert await kg.count("u") == 0


async def test_a_contradiction_is_kept_pending_beside_the_confirmed_fact(kg):
    pdf = (await attr(kg, "user", "prefers_format", "pdf")).fact
    md = await attr(kg, "user", "prefers_format", "markdown", now=NOW + timedelta(hours=1))
    assert md.outcome == "pending_conflict" and md.fact.status == "pending" and md.fact.conflict_with == pdf.id
    assert (await kg.get("u", pdf.id)).status == "confirmed"  # not overwritten
    ((confirmed, pending),) = await kg.conflicts("u")
    assert (confirmed.object, pending.object) == ("pdf", "markdown")


async def test_the_next_behaviour_decides_and_the_loser_is_superseded_with_a_timestamp(kg):
    pdf = (await attr(kg, "user", "prefers_format", "pdf")).fact
    md = (await attr(kg, "user", "prefers_format", "markdown")).fact
    later = NOW + timedelta(days=1)
    decided = await attr(kg, "user", "prefers_format", "markdown", now=later)
    assert decided.outcome == "resolved" and decided.superseded == [pdf.id]
    loser = await kg.get("u", pdf.id)
    assert loser.status == "superseded" and loser.valid_to == later and loser.superseded_by == md.id
    assert (await kg.get("u", md.id)).status == "confirmed"
    assert await kg.conflicts("u") == []


async def test_reaffirming_the_confirmed_value_supersedes_the_challenger(kg):
    pdf = (await attr(kg, "user", "prefers_format", "pdf")).fact
    md = (await attr(kg, "user", "prefers_format", "markdown")).fact
    assert (await attr(kg, "user", "prefers_format", "pdf")).outcome == "resolved"
    assert (await kg.get("u", pdf.id)).status == "confirmed" and (await kg.get("u", md.id)).status == "superseded"


async def test_multi_valued_predicates_do_not_conflict(kg):
    await rel(kg, "Bob", "member_of", "Data team")
    assert (await rel(kg, "Bob", "member_of", "Platform team")).outcome == "added"
    assert await kg.conflicts("u") == []


async def build_org(kg):
    await rel(kg, "user", "reports_to", "Alice")
    await rel(kg, "Alice", "member_of", "Data Platform group")
    await rel(kg, "Bob", "member_of", "data platform  GROUP", conf=0.8)
    await rel(kg, "Carol", "member_of", "Data Platform group", conf=0.95)
    await rel(kg, "Dan", "member_of", "Sales group")
    await rel(kg, "Eve", "member_of", "Data Platform group", conf=0.65)


async def test_multi_hop_who_is_in_the_group_the_user_reports_to(kg):
    await build_org(kg)
    members = await kg.traverse("u", "user", [("reports_to", "out"), ("member_of", "out"), ("member_of", "in")])
    names = [name for name, _, _ in members]
    assert set(names) == {"Alice", "Bob", "Carol", "Eve"} and "Dan" not in names
    conf = {name: c for name, c, _ in members}
    assert conf["Carol"] == pytest.approx(0.9 * 0.9 * 0.95)  # path confidence = product
    assert all(len(path) == 3 for _, _, path in members)
    strict = await kg.traverse(
        "u", "user", [("reports_to", "out"), ("member_of", "out"), ("member_of", "in")], min_confidence=0.7
    )
    assert {n for n, _, _ in strict} == {"Alice", "Bob", "Carol"}  # Eve's 0.65 is filtered
    assert await kg.traverse("v", "user", [("reports_to", "out")]) == []  # other users see nothing


async def test_multi_hop_ignores_superseded_and_not_yet_valid_facts(kg):
    await build_org(kg)
    await rel(kg, "user", "reports_to", "Dan")  # pending: a conflict with Alice
    await rel(kg, "user", "reports_to", "Dan")  # the next behaviour decides: Dan
    members = await kg.traverse("u", "user", [("reports_to", "out"), ("member_of", "out"), ("member_of", "in")])
    assert {n for n, _, _ in members} == {"Dan"}
    earlier = await kg.traverse("u", "user", [("reports_to", "out")], now=NOW - timedelta(days=1))
    assert earlier == []  # no fact was valid yet


async def test_reachable_within_hops(kg):
    await build_org(kg)
    hops = await kg.reachable("u", "user", max_hops=2)
    assert hops == {"Alice": 1, "Data Platform group": 2}
    assert set(await kg.reachable("u", "user", max_hops=3)) >= {"Bob", "Carol", "Eve"}


async def test_expiry_after_180_days_and_down_weighting_of_unused_facts(kg):
    old = (await attr(kg, "user", "prefers_format", "pdf", now=NOW - timedelta(days=181))).fact
    used = (await rel(kg, "user", "reports_to", "Alice", now=NOW - timedelta(days=200))).fact
    await kg.touch([used.id], now=NOW - timedelta(days=10))
    idle = (await rel(kg, "Bob", "member_of", "Data team", now=NOW - timedelta(days=45), conf=0.62)).fact
    assert await kg.expire(NOW) == 1
    assert (await kg.get("u", old.id)).status == "archived"
    assert (await kg.get("u", used.id)).status == "confirmed"  # used recently: still valid
    weighted, archived = await kg.downweight_unused(NOW)
    assert weighted == 1 and archived == 1  # 0.62 × 0.9 < 0.6
    assert (await kg.get("u", idle.id)).status == "archived"


async def test_search_finds_facts_by_words_and_forget_deletes(kg):
    await build_org(kg)
    hits = await kg.search("u", "who is Carol?")
    assert hits and hits[0].subject_name == "Carol"
    assert await kg.search("u", "!!!") == []
    assert await kg.forget("u", hits[0].id) and not await kg.forget("u", hits[0].id)


def test_entity_keys_fold_case_and_space():
    assert entity_key("Data  Platform Group") == entity_key("data platform group")
