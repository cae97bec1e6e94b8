"""Schema change rules (seed §6.3): each change class, its actions (ledger expiry, affected
earlier calls, migration note), persistence of versions, and the registry hook."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from langchain_core.messages import AIMessage, AnyMessage, HumanMessage, ToolMessage

from tools.idempotency import IdempotencyLedger
from tools.registry import ToolRegistry
from tools.schema_versions import SchemaStore, classify, invalid_calls, schema_hash
from tools.spec import ToolSpec

BASE = {
    "type": "object",
    "properties": {
        "user_id": {"type": "string", "description": "The user."},
        "limit": {"type": "integer", "minimum": 1},
    },
    "required": ["user_id"],
    "additionalProperties": False,
}


def changed(**edits) -> dict:
    s: dict[str, Any] = copy.deepcopy(BASE)
    for key, value in edits.items():
        if key == "drop":
            for name in value:
                s["properties"].pop(name)
                if name in s["required"]:
                    s["required"].remove(name)
        elif key == "add":
            s["properties"].update(value)
        elif key == "require":
            s["required"] += value
        elif key == "props":
            s["properties"].update(value)
    return s


def history(*calls: tuple[str, dict, str]) -> list:
    msgs: list[AnyMessage] = [HumanMessage("orders please", id="h1")]
    for i, (tool, args, mid) in enumerate(calls):
        msgs.append(
            AIMessage("", id=mid, tool_calls=[{"name": tool, "args": args, "id": f"c{i}", "type": "tool_call"}])
        )
        msgs.append(ToolMessage("{}", tool_call_id=f"c{i}", id=f"t{i}"))
    return msgs


def test_identical_and_doc_only_changes():
    assert classify(BASE, copy.deepcopy(BASE)).kind == "none"
    docs = changed(props={"user_id": {"type": "string", "description": "Who the orders belong to."}})
    ch = classify(BASE, docs, tool="get_user_orders")
    assert ch.kinds == [] and not ch.expire_cache and ch.migration_note is None
    assert ch.old_version != ch.new_version == schema_hash(docs)


def test_optional_field_added():
    ch = classify(BASE, changed(add={"status": {"type": "string"}}), tool="get_user_orders")
    assert ch.kind == "optional_added" and ch.added_optional == ["status"]
    assert not ch.expire_cache and not ch.mark_history and ch.migration_note is None
    assert ch.invalid_calls(history(("get_user_orders", {"user_id": "u1"}, "a1"))) == []


def test_required_field_added():
    new = changed(add={"region": {"type": "string"}}, require=["region"])
    ch = classify(BASE, new, tool="get_user_orders")
    assert ch.kind == "required_added" and ch.added_required == ["region"]
    assert ch.expire_cache and ch.mark_history
    assert "new required field 'region' (string)" in ch.migration_note
    msgs = history(
        ("get_user_orders", {"user_id": "u1"}, "a1"),
        ("get_user_orders", {"user_id": "u2", "region": "eu"}, "a2"),
        ("other_tool", {"user_id": "u3"}, "a3"),
    )
    assert ch.invalid_calls(msgs) == ["a1"]


def test_optional_field_made_required_counts_as_required_added():
    ch = classify(BASE, changed(require=["limit"]), tool="t")
    assert ch.kind == "required_added" and ch.made_required == ["limit"]
    assert "field 'limit' is now required" in ch.migration_note


def test_field_removed():
    ch = classify(BASE, changed(drop=["limit"]), tool="get_user_orders")
    assert ch.kind == "field_removed" and ch.removed == ["limit"]
    assert ch.expire_cache and "field 'limit' was removed" in ch.migration_note
    msgs = history(
        ("get_user_orders", {"user_id": "u1", "limit": 5}, "a1"), ("get_user_orders", {"user_id": "u1"}, "a2")
    )
    assert ch.invalid_calls(msgs) == ["a1"]


def test_field_renamed_is_a_removed_added_pair_of_the_same_type():
    new = changed(drop=["user_id"], add={"customer_id": {"type": "string"}}, require=["customer_id"])
    ch = classify(BASE, new, tool="get_user_orders")
    assert ch.kind == "field_renamed" and ch.renamed == [("user_id", "customer_id")]
    assert ch.removed == [] and ch.added_required == []
    assert "field 'user_id' was renamed to 'customer_id'" in ch.migration_note
    assert ch.invalid_calls(history(("get_user_orders", {"user_id": "u1"}, "a1"))) == ["a1"]


def test_removed_and_added_of_different_types_are_not_a_rename():
    new = changed(drop=["limit"], add={"page": {"type": "string"}})
    ch = classify(BASE, new, tool="t")
    assert ch.renamed == [] and ch.removed == ["limit"] and ch.added_optional == ["page"]
    assert ch.kind == "field_removed"


def test_type_changed():
    ch = classify(BASE, changed(props={"limit": {"type": "string"}}), tool="get_user_orders")
    assert ch.kind == "type_changed" and ch.type_changed == [("limit", "integer", "string")]
    assert ch.expire_cache and "field 'limit' is now string (was integer)" in ch.migration_note
    msgs = history(
        ("get_user_orders", {"user_id": "u1", "limit": 3}, "a1"), ("get_user_orders", {"user_id": "u1"}, "a2")
    )
    assert ch.invalid_calls(msgs) == ["a1"]


def test_constraints_changed_expires_and_marks_only_calls_the_new_schema_rejects():
    ch = classify(BASE, changed(props={"limit": {"type": "integer", "minimum": 1, "maximum": 10}}), tool="t")
    assert ch.kind == "constraints_changed" and ch.expire_cache and ch.migration_note is None
    msgs = history(("t", {"user_id": "u", "limit": 50}, "a1"), ("t", {"user_id": "u", "limit": 5}, "a2"))
    assert ch.invalid_calls(msgs) == ["a1"]


def test_several_classes_at_once_report_the_most_severe():
    new = changed(drop=["limit"], add={"status": {"type": "string"}}, props={"user_id": {"type": "integer"}})
    ch = classify(BASE, new, tool="t")
    assert set(ch.kinds) == {"optional_added", "field_removed", "type_changed"} and ch.kind == "type_changed"


def test_invalid_calls_is_pure_and_accepts_dict_messages():
    ch = classify(BASE, changed(drop=["limit"]), tool="t")
    msgs = [
        {"type": "ai", "id": "d1", "tool_calls": [{"name": "t", "args": {"user_id": "u", "limit": 1}, "id": "x"}]},
        {"type": "human", "id": "h", "content": "hi"},
    ]
    snapshot = copy.deepcopy(msgs)
    assert invalid_calls(msgs, ch) == ["d1"] and msgs == snapshot


async def test_store_versions_persist_across_restarts(tmp_path):
    store = SchemaStore(tmp_path / "s.db")
    store.load()
    store.record_nowait("t", BASE)
    store.record_nowait("t", BASE)  # same hash: no new version
    store.record_nowait("t", changed(drop=["limit"]), classify(BASE, changed(drop=["limit"]), tool="t"))
    await store.flush()
    versions = await store.versions("t")
    store.close()
    assert [(v, k) for v, _, k in versions] == [(1, None), (2, "field_removed")]
    again = SchemaStore(tmp_path / "s.db")
    assert again.load() == {"t": changed(drop=["limit"])}
    again.close()


def spec(params: dict) -> ToolSpec:
    return ToolSpec(
        name="get_user_orders",
        side_effect=True,
        parameters=params,
        description="Lists the orders of one user; read the rows, never refunds anything.",
    )


async def run_ok(args, request_id):
    return {"orders": [], "args": args}


async def test_registry_hook_expires_cache_and_records_the_note_after_a_restart(tmp_path):
    """Run 1 registers v1 and records a result; run 2 (restart) registers a renamed field:
    the recorded result is expired, the migration note is in registry.migration_notes."""
    ledger = IdempotencyLedger(tmp_path / "ledger.db")
    store = SchemaStore(tmp_path / "schemas.db")
    store.load()
    reg = ToolRegistry(ledger=ledger, schema_store=store)
    reg.register(spec(BASE), run_ok)
    assert reg.migration_notes == [] and reg.schema_changes == []
    first = await reg.call("get_user_orders", {"user_id": "u1"}, "call-1")
    assert (await reg.call("get_user_orders", {"user_id": "u1"}, "call-1")).replayed
    await ledger.aclose()
    await store.flush()
    store.close()

    ledger2 = IdempotencyLedger(tmp_path / "ledger.db")
    store2 = SchemaStore(tmp_path / "schemas.db")
    store2.load()
    reg2 = ToolRegistry(ledger=ledger2, schema_store=store2)
    renamed = changed(drop=["user_id"], add={"customer_id": {"type": "string"}}, require=["customer_id"])
    reg2.register(spec(renamed), run_ok)
    try:
        [change] = reg2.schema_changes
        assert change.kind == "field_renamed"
        assert len(reg2.migration_notes) == 1 and "renamed to 'customer_id'" in reg2.migration_notes[0]
        assert await ledger2.get("get_user_orders", "call-1") is None  # expired
        again = await reg2.call("get_user_orders", {"customer_id": "u1"}, "call-1")
        assert not again.replayed and again.content != first.content
        await store2.flush()
        assert [k for _, _, k in await store2.versions("get_user_orders")] == [None, "field_renamed"]
    finally:
        await ledger2.aclose()
        store2.close()


async def test_re_registration_in_process_applies_the_rule_too():
    reg = ToolRegistry()
    reg.register(spec(BASE), run_ok)
    await reg.call("get_user_orders", {"user_id": "u1"}, "c1")
    reg.unregister("get_user_orders")
    reg.register(spec(changed(add={"status": {"type": "string"}})), run_ok)  # optional: nothing expires
    assert (await reg.call("get_user_orders", {"user_id": "u1"}, "c1")).replayed
    assert reg.migration_notes == []
    reg.unregister("get_user_orders")
    reg.register(spec(changed(props={"user_id": {"type": "integer"}})), run_ok)
    assert not (await reg.call("get_user_orders", {"user_id": 7}, "c1")).replayed
    assert "now integer (was string)" in reg.migration_notes[-1]


@pytest.mark.parametrize("kind", ["optional_added", "required_added", "field_removed", "field_renamed", "type_changed"])
def test_each_class_has_its_rule(kind):
    new = {
        "optional_added": changed(add={"x": {"type": "string"}}),
        "required_added": changed(add={"x": {"type": "string"}}, require=["x"]),
        "field_removed": changed(drop=["limit"]),
        "field_renamed": changed(drop=["limit"], add={"max_rows": {"type": "integer"}}),
        "type_changed": changed(props={"limit": {"type": "number"}}),
    }[kind]
    ch = classify(BASE, new, tool="t")
    assert ch.kind == kind
    assert ch.expire_cache is (kind != "optional_added")
    assert (ch.migration_note is not None) is (kind != "optional_added")
