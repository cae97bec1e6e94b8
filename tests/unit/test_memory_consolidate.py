"""The ``consolidate`` graph in process: scan → extract → expire → maintain, counts in the state."""

from __future__ import annotations

import json
import os
import time
from datetime import UTC, datetime, timedelta

from langchain_core.messages import AIMessage

from graph import resources
from graph.consolidate_graph import graph as consolidate
from graph.context import Context
from memory.episodic.base import EpisodicEvent
from nodes.consolidate_extract import parse_facts

NOW = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)


def ctx(tmp_path, **kw) -> Context:
    return Context(data_dir=str(tmp_path / "data"), embeddings="hash", **kw)


async def seed(context: Context) -> None:
    mem = resources.get_memory(context)
    await mem.episodic.add_many(
        [
            EpisodicEvent(
                user_id="u",
                kind="preference",
                text="user preference: I prefer PDF reports.",
                confidence=0.9,
                created_at=NOW - timedelta(minutes=10),
            ),
            EpisodicEvent(
                user_id="u",
                kind="task",
                text="completed task: I report to Alice. Alice is in the Data Platform group.; answer: noted",
                confidence=0.9,
                created_at=NOW - timedelta(minutes=5),
            ),
            EpisodicEvent(
                user_id="v",
                kind="preference",
                text="user preference: From now on use markdown for reports",
                confidence=0.9,
                created_at=NOW - timedelta(minutes=3),
            ),
            EpisodicEvent(
                user_id="u", kind="note", text="an old note", confidence=0.9, created_at=NOW - timedelta(days=40)
            ),
        ]
    )
    await mem.queue.enqueue(
        "episodic.add",
        EpisodicEvent(user_id="u", kind="note", text="queued while down", confidence=0.9, created_at=NOW).model_dump(
            mode="json"
        ),
        "OSError: disk full",
    )


async def test_a_run_extracts_facts_expires_drains_and_reports_counts(tmp_path):
    context = ctx(tmp_path)
    await seed(context)
    payloads = tmp_path / "data" / "payloads" / "t1"
    payloads.mkdir(parents=True)
    (payloads / "old.json").write_text("{}")
    (payloads / "new.json").write_text("{}")
    old = time.time() - 40 * 86400
    os.utime(payloads / "old.json", (old, old))
    try:
        out = await consolidate.ainvoke({"now": NOW.isoformat()}, context=context)
        counts = out["counts"]
        assert out["extractor"] == "rule-based"
        assert counts["scanned"] == 3  # the 40-day-old note is outside the lookback
        assert counts["added"] == 4  # u: prefers_format pdf, reports_to Alice, Alice member_of; v: markdown
        assert counts["episodic_expired"] == 1 and counts["queue_replayed"] == 1 and counts["queue_pending"] == 0
        assert counts["payloads_pruned"] == 1 and (payloads / "new.json").exists()
        mem = resources.get_memory(context)
        members = await mem.semantic.traverse("u", "user", [("reports_to", "out"), ("member_of", "out")], now=NOW)
        assert [m[0] for m in members] == ["Data Platform group"]
        assert {f.object for f in await mem.semantic.facts("v")} == {"markdown"}  # per user
        again = await consolidate.ainvoke({"now": NOW.isoformat()}, context=context)
        assert again["counts"]["added"] == 0 and again["counts"]["duplicates"] == 4  # idempotent
    finally:
        await resources.aclose_resources()


async def test_the_idempotency_ledger_is_pruned_past_its_retention(tmp_path):
    from tools.idempotency import IdempotencyLedger

    context = ctx(tmp_path)
    ledger = IdempotencyLedger.in_data_dir(tmp_path / "data")

    async def effect():
        return {"status": "ok"}

    await ledger.run_once("post_message", "r1", effect)
    await ledger.aclose()
    try:
        kept = await consolidate.ainvoke({"now": NOW.isoformat()}, context=context)
        assert kept["counts"]["ledger_pruned"] == 0  # within 30 days
        time.sleep(0.01)
        pruned = await consolidate.ainvoke({"ledger_retention_days": 0}, context=context)
        assert pruned["counts"]["ledger_pruned"] == 1
    finally:
        await resources.aclose_resources()


async def test_a_capable_model_extracts_and_a_useless_answer_falls_back_to_rules(tmp_path):
    from langchain_core.language_models.fake_chat_models import GenericFakeChatModel

    from graph.model import register_model

    answer = json.dumps(
        [
            {
                "record": 1,
                "subject": "user",
                "predicate": "Prefers Format",
                "object": "pdf",
                "object_is_entity": False,
                "confidence": 0.95,
            }
        ]
    )
    register_model("fake-extractor", lambda c: GenericFakeChatModel(messages=iter([AIMessage(answer)] * 5)))
    register_model("fake-broken", lambda c: GenericFakeChatModel(messages=iter([AIMessage("no idea")] * 5)))
    context = ctx(tmp_path, model="fake-extractor")
    await seed(context)
    try:
        out = await consolidate.ainvoke({"now": NOW.isoformat()}, context=context)
        assert out["extractor"] == "model:fake-extractor"
        facts = await resources.get_memory(context).semantic.facts("v")
        assert [(f.predicate, f.object, f.evidence, f.confidence) for f in facts] == [
            ("prefers_format", "pdf", "inferred", 0.9)
        ]
        broken = ctx(tmp_path / "b", model="fake-broken")
        await seed(broken)
        assert (await consolidate.ainvoke({"now": NOW.isoformat()}, context=broken))["extractor"] == "rule-based"
    finally:
        await resources.aclose_resources()


def test_parse_facts_takes_the_json_list_and_rejects_prose():
    got = parse_facts(
        'Sure: [{"record": 2, "subject": "Bob", "predicate": "member-of", "object": "ops team",'
        ' "object_is_entity": true, "confidence": 3}]',
        2,
    )
    ((index, (fact,)),) = got.items()
    assert index == 1 and (fact.predicate, fact.object_is_entity, fact.confidence) == ("member_of", True, 0.9)
    assert parse_facts('[{"record": 9, "subject": "x", "predicate": "p", "object": "o"}]', 2) == {}
    import pytest

    with pytest.raises(ValueError):
        parse_facts("no facts here", 1)
