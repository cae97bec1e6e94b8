"""The plain-text thread mirror (graph/mirror.py): records, branches, torn writes, async safety."""

from __future__ import annotations

import json

import pytest
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage

from graph.mirror import ThreadMirror, append_turn, mirror_path, record_to_message


def conversation() -> list:
    return [
        HumanMessage("weather in Paris?", id="h1"),
        AIMessage(
            "",
            id="a1",
            tool_calls=[
                {"type": "tool_call", "name": "get_weather", "args": {"city": "Paris"}, "id": "c1"},
                {"type": "tool_call", "name": "get_time", "args": {}, "id": "c2"},
            ],
        ),
        ToolMessage('{"sky": "sunny"}', tool_call_id="c1", name="get_weather", id="t1"),
        ToolMessage("boom", tool_call_id="c2", name="get_time", status="error", id="t2"),
        AIMessage("Sunny.", id="a2", additional_kwargs={"intent": "chat"}),
    ]


def lines(path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


async def test_one_record_per_message_then_a_head_record(tmp_path):
    mirror = ThreadMirror(tmp_path)
    written = await mirror.append_turn("t1", conversation(), checkpoint_id="cp-1")
    assert written == 5
    records = lines(mirror_path(tmp_path, "t1"))
    assert [r["kind"] for r in records] == ["message"] * 5 + ["head"]
    assert [r["role"] for r in records[:5]] == ["human", "ai", "tool", "tool", "ai"]
    assert records[1]["tool_calls"][0] == {"id": "c1", "name": "get_weather", "args": {"city": "Paris"}}
    assert records[3]["tool_call_id"] == "c2" and records[3]["status"] == "error" and records[3]["name"] == "get_time"
    assert [r["prev"] for r in records[:5]] == [None, "h1", "a1", "t1", "t2"]
    assert records[5] == {**records[5], "last": "a2", "count": 5, "checkpoint_id": "cp-1", "op": "turn"}


async def test_round_trip_restores_langchain_messages_with_pairing(tmp_path):
    mirror = ThreadMirror(tmp_path)
    original = conversation()
    await mirror.append_turn("t1", original)
    back = await ThreadMirror(tmp_path).read("t1")  # a fresh reader: nothing cached
    assert back.exists and back.torn_lines == 0 and back.missing_ids == []
    assert [type(m) for m in back.messages] == [type(m) for m in original]
    assert [m.id for m in back.messages] == [m.id for m in original]
    assert back.messages[1].tool_calls == original[1].tool_calls
    assert back.messages[3].status == "error" and back.messages[3].tool_call_id == "c2"
    assert back.messages[4].additional_kwargs == {"intent": "chat"}


async def test_append_is_incremental_and_idempotent(tmp_path):
    mirror = ThreadMirror(tmp_path)
    msgs = conversation()
    await mirror.append_turn("t1", msgs[:2])
    assert await mirror.append_turn("t1", msgs[:2]) == 0
    size = mirror_path(tmp_path, "t1").stat().st_size
    assert await mirror.append_turn("t1", msgs[:2]) == 0
    assert mirror_path(tmp_path, "t1").stat().st_size == size  # no duplicate head either
    assert await mirror.append_turn("t1", msgs) == 3
    assert [m.id for m in (await mirror.read("t1")).messages] == ["h1", "a1", "t1", "t2", "a2"]


async def test_a_rolled_back_branch_is_not_in_the_active_conversation(tmp_path):
    mirror = ThreadMirror(tmp_path)
    base = [HumanMessage("hello", id="h1"), AIMessage("hi", id="a1")]
    branch_a = [*base, HumanMessage("try A", id="h2"), AIMessage("A failed", id="a2")]
    await mirror.append_turn("t", branch_a)
    await mirror.append_turn("t", base, checkpoint_id="rb", op="rollback")
    assert [m.content for m in (await mirror.read("t")).messages] == ["hello", "hi"]
    branch_b = [*base, HumanMessage("try B", id="h3"), AIMessage("B worked", id="a3")]
    assert await mirror.append_turn("t", branch_b) == 2  # the shared prefix is not repeated
    assert [m.content for m in (await mirror.read("t")).messages] == ["hello", "hi", "try B", "B worked"]
    # both branches stay in the file for a human reader
    text = mirror_path(tmp_path, "t").read_text()
    assert "A failed" in text and "B worked" in text


async def test_a_torn_last_line_is_skipped_and_isolated(tmp_path):
    mirror = ThreadMirror(tmp_path)
    msgs = conversation()
    await mirror.append_turn("t1", msgs[:3])
    path = mirror_path(tmp_path, "t1")
    with open(path, "ab") as fh:  # a crash in the middle of the next append
        fh.write(b'{"kind": "message", "role": "tool", "content": "half a rec')
    fresh = ThreadMirror(tmp_path)
    back = await fresh.read("t1")
    assert back.torn_lines == 1 and [m.id for m in back.messages] == ["h1", "a1", "t1"]
    await fresh.append_turn("t1", msgs)  # the next append must not glue onto the torn line
    back = await ThreadMirror(tmp_path).read("t1")
    assert back.torn_lines == 1 and [m.id for m in back.messages] == ["h1", "a1", "t1", "t2", "a2"]


async def test_a_torn_head_record_still_counts_the_turn(tmp_path):
    mirror = ThreadMirror(tmp_path)
    msgs = conversation()
    await mirror.append_turn("t1", msgs)
    path = mirror_path(tmp_path, "t1")
    data = path.read_bytes()
    path.write_bytes(data[: data.rstrip(b"\n").rfind(b"\n") + 1] + b'{"kind": "head", "la')
    back = await ThreadMirror(tmp_path).read("t1")
    assert [m.id for m in back.messages] == ["h1", "a1", "t1", "t2", "a2"]


async def test_a_cut_chain_reports_missing_ids(tmp_path):
    mirror = ThreadMirror(tmp_path)
    await mirror.append_turn("t1", conversation())
    path = mirror_path(tmp_path, "t1")
    kept = [line for line in path.read_text().splitlines() if '"id": "a1"' not in line]
    path.write_text("\n".join(kept) + "\n")
    back = await ThreadMirror(tmp_path).read("t1")
    assert back.missing_ids == ["a1"] and [m.id for m in back.messages] == ["t1", "t2", "a2"]


async def test_another_writer_is_picked_up_and_a_shrunk_file_is_reread(tmp_path):
    one, two = ThreadMirror(tmp_path), ThreadMirror(tmp_path)
    msgs = conversation()
    await one.append_turn("t1", msgs[:2])
    await two.append_turn("t1", msgs)
    assert len((await one.read("t1")).messages) == 5
    mirror_path(tmp_path, "t1").unlink()
    await two.append_turn("t1", msgs[:1])
    assert [m.id for m in (await one.read("t1")).messages] == ["h1"]


async def test_changed_content_is_rewritten_and_unidentified_messages_skipped(tmp_path):
    mirror = ThreadMirror(tmp_path)
    await mirror.append_turn("t", [HumanMessage("v1", id="h1")])
    assert await mirror.append_turn("t", [HumanMessage("v2", id="h1"), AIMessage("no id")]) == 1
    back = await mirror.read("t")
    assert [m.content for m in back.messages] == ["v2"]


def test_thread_ids_map_to_safe_file_names(tmp_path):
    for thread in ["../escape", "a/b", "..", ".hidden", "ünï cödé", "run-1234"]:
        path = mirror_path(tmp_path, thread)
        assert path.parent == tmp_path / "mirror" and not path.name.startswith(".")
    assert mirror_path(tmp_path, "run-1234").name == "run-1234.jsonl"


def test_record_to_message_defaults():
    assert isinstance(record_to_message({"role": "system", "content": "x"}), SystemMessage)
    assert isinstance(record_to_message({"role": "weird", "content": "x"}), HumanMessage)
    tool = record_to_message({"role": "tool", "content": "x", "tool_call_id": "c"})
    assert tool.status == "success"


async def test_module_hook_and_no_blocking_io_on_the_loop(tmp_path):
    blockbuster = pytest.importorskip("blockbuster")
    with blockbuster.blockbuster_ctx():
        await append_turn(tmp_path, "hooked", conversation(), checkpoint_id="cp")
        back = await ThreadMirror(tmp_path).read("hooked")
    assert len(back.messages) == 5 and back.last_checkpoint_id == "cp"


async def test_node_hook_then_run_turn_adds_only_the_checkpoint_id(tmp_path):
    msgs = conversation()
    await append_turn(tmp_path, "t", msgs)  # from write_memory: the checkpoint id is not known yet
    mirror = ThreadMirror(tmp_path)
    assert await mirror.append_turn("t", msgs, checkpoint_id="cp-9") == 0
    records = lines(mirror_path(tmp_path, "t"))
    assert [r["kind"] for r in records].count("message") == 5
    assert [r.get("checkpoint_id") for r in records if r["kind"] == "head"] == [None, "cp-9"]
    await mirror.append_turn("t", msgs, checkpoint_id="cp-9")
    assert len(lines(mirror_path(tmp_path, "t"))) == len(records)  # idempotent again
    assert (await mirror.read("t")).last_checkpoint_id == "cp-9"
