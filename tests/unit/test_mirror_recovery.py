"""Recovery helpers (graph/recovery.py) without SQLite: tool-call pairing repair, which errors
count as unreadable data, and a rebuild from the mirror into an in-memory checkpointer."""

from __future__ import annotations

import sqlite3

import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langgraph.checkpoint.memory import InMemorySaver

from graph.builder import make_graph
from graph.mirror import ThreadMirror
from graph.recovery import LOST_RESULT, RecoveryError, is_data_error, pair_tool_calls, recover_thread


def ai_calls(msg_id: str, *ids: str) -> AIMessage:
    return AIMessage("", id=msg_id, tool_calls=[{"type": "tool_call", "name": f"tool_{i}", "args": {}, "id": i} for i in ids])


def result(call_id: str) -> ToolMessage:
    return ToolMessage(f"result {call_id}", tool_call_id=call_id, name=f"tool_{call_id}", id=f"r-{call_id}")


def test_complete_groups_pass_unchanged():
    msgs = [HumanMessage("q", id="h"), ai_calls("a", "c1", "c2"), result("c1"), result("c2"), AIMessage("done", id="z")]
    out, filled, dropped = pair_tool_calls(msgs)
    assert out == msgs and filled == [] and dropped == []


def test_missing_results_are_filled_in_place_and_orphans_dropped():
    msgs = [
        HumanMessage("q", id="h"),
        ToolMessage("orphan", tool_call_id="ghost", id="o"),  # its AI message was lost
        ai_calls("a1", "c1", "c2"), result("c2"),             # c1's result is missing
        HumanMessage("next", id="h2"),
        ai_calls("a2", "c3"),                                  # cut at the end
    ]
    out, filled, dropped = pair_tool_calls(msgs)
    assert dropped == ["ghost"] and filled == ["c1", "c3"]
    assert [getattr(m, "tool_call_id", m.id) for m in out] == ["h", "a1", "c2", "c1", "h2", "a2", "c3"]
    lost = [m for m in out if isinstance(m, ToolMessage) and m.content == LOST_RESULT]
    assert [m.status for m in lost] == ["error", "error"] and lost[0].name == "tool_c1"


def test_invalid_tool_calls_count_as_calls():
    bad = AIMessage("", id="a", invalid_tool_calls=[{"type": "invalid_tool_call", "name": "s", "args": "{",
                                                      "id": "bad1", "error": "json"}])
    out, filled, _ = pair_tool_calls([bad, ToolMessage("error: not JSON", tool_call_id="bad1", status="error")])
    assert filled == [] and len(out) == 2


def test_only_data_errors_trigger_recovery():
    assert is_data_error(ValueError("unexpected end of file"))
    assert is_data_error(TypeError("'int' object is not subscriptable"))
    assert is_data_error(NotImplementedError("Unknown serialization type: pickle"))
    assert not is_data_error(sqlite3.OperationalError("database is locked"))
    assert not is_data_error(sqlite3.DatabaseError("file is not a database"))
    assert not is_data_error(OSError("disk"))
    assert not is_data_error(KeyboardInterrupt())


async def test_rebuild_into_a_checkpointer_without_sql(tmp_path):
    mirror = ThreadMirror(tmp_path)
    await mirror.append_turn("r", [HumanMessage("hello", id="h"), ai_calls("a", "c1"), result("c1"),
                                   AIMessage("answer", id="z")], checkpoint_id="old")
    agent = make_graph(checkpointer=InMemorySaver())
    report = await recover_thread(agent, mirror, "r", ValueError("corrupt"))
    state = await agent.aget_state({"configurable": {"thread_id": "r"}})
    assert [m.id for m in state.values["messages"]] == ["h", "a", "r-c1", "z"]
    assert state.next == () and state.metadata["hermes_op"] == "recovered"
    assert state.config["configurable"]["checkpoint_id"] == report.new_checkpoint_id
    notice = report.notice()
    assert "ValueError: corrupt" in notice and "4 messages restored" in notice and "same thread" in notice
    assert report.as_dict()["notice"] == notice
    assert (await mirror.read("r")).last_checkpoint_id == report.new_checkpoint_id


async def test_rebuild_without_mirror_raises_with_a_next_step(tmp_path):
    with pytest.raises(RecoveryError, match="new thread"):
        await recover_thread(make_graph(checkpointer=InMemorySaver()), ThreadMirror(tmp_path), "none")
