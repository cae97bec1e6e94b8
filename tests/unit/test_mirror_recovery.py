"""Recovery helpers (graph/recovery.py) without SQLite: tool-call pairing repair (the
``graph.history.close_unanswered`` recovery uses, with its ``LOST_RESULT``), which errors count
as unreadable data, and a rebuild from the mirror into an in-memory checkpointer."""

from __future__ import annotations

import sqlite3

import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langgraph.checkpoint.memory import InMemorySaver

from graph.builder import make_graph
from graph.history import close_unanswered
from graph.mirror import ThreadMirror
from graph.recovery import LOST_RESULT, RecoveryError, is_data_error, recover_thread


def ai_calls(msg_id: str, *ids: str) -> AIMessage:
    return AIMessage(
        "", id=msg_id, tool_calls=[{"type": "tool_call", "name": f"tool_{i}", "args": {}, "id": i} for i in ids]
    )


def pair_tool_calls(messages):
    """What recovery does to the mirror's messages: ``(messages, filled call ids, dropped ids)``."""
    out, closed, dropped = close_unanswered(messages, LOST_RESULT)
    return out, [call_id for call_id, _ in closed], dropped


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
        ai_calls("a1", "c1", "c2"),
        result("c2"),  # c1's result is missing
        HumanMessage("next", id="h2"),
        ai_calls("a2", "c3"),  # cut at the end
    ]
    out, filled, dropped = pair_tool_calls(msgs)
    assert dropped == ["ghost"] and filled == ["c1", "c3"]
    assert [getattr(m, "tool_call_id", m.id) for m in out] == ["h", "a1", "c2", "c1", "h2", "a2", "c3"]
    lost = [m for m in out if isinstance(m, ToolMessage) and m.content == LOST_RESULT]
    assert [m.status for m in lost] == ["error", "error"] and lost[0].name == "tool_c1"


def test_invalid_tool_calls_count_as_calls():
    bad = AIMessage(
        "",
        id="a",
        invalid_tool_calls=[{"type": "invalid_tool_call", "name": "s", "args": "{", "id": "bad1", "error": "json"}],
    )
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
    await mirror.append_turn(
        "r",
        [HumanMessage("hello", id="h"), ai_calls("a", "c1"), result("c1"), AIMessage("answer", id="z")],
        checkpoint_id="old",
    )
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


# --- the recovering saver (graph/checkpoints.py), on a real SQLite file -------------------------


async def _seeded(tmp_path, thread: str = "s"):
    """A checkpoint file with one finished turn on ``thread`` and its mirror."""
    from graph.checkpoints import open_checkpointer

    msgs = [HumanMessage("hello", id="h"), ai_calls("a", "c1"), result("c1"), AIMessage("answer", id="z")]
    async with open_checkpointer(tmp_path / "checkpoints.sqlite") as saver:
        agent = make_graph(checkpointer=saver)
        await agent.aupdate_state({"configurable": {"thread_id": thread}}, {"messages": msgs}, as_node="write_memory")
        state = await agent.aget_state({"configurable": {"thread_id": thread}})
    await ThreadMirror(tmp_path).append_turn(thread, msgs, checkpoint_id=state.config["configurable"]["checkpoint_id"])
    return state.config["configurable"]["checkpoint_id"]


#: blob and type written over the head row: bytes that parse as msgpack into a non-checkpoint,
#: a checkpoint cut in half, a serialisation type nobody knows, a mapping of the wrong shape
BAD_ROWS = {
    "parses_as_int": lambda blob, kind: (b"\x00\xffnot a checkpoint\xc1\xc1", kind),
    "torn_write": lambda blob, kind: (blob[: len(blob) // 2], kind),
    "unknown_serialisation": lambda blob, kind: (blob, "pickle"),
    "wrong_shape": lambda blob, kind: (__import__("ormsgpack").packb({"v": 4, "id": "x"}), "msgpack"),
}


def _corrupt(db, thread: str, how: str = "parses_as_int") -> None:
    with sqlite3.connect(db) as con:
        cid, blob, kind = con.execute(
            "SELECT checkpoint_id, checkpoint, type FROM checkpoints WHERE thread_id = ? "
            "ORDER BY checkpoint_id DESC LIMIT 1",
            (thread,),
        ).fetchone()
        con.execute(
            "UPDATE checkpoints SET checkpoint = ?, type = ? WHERE thread_id = ? AND checkpoint_id = ?",
            (*BAD_ROWS[how](blob, kind), thread, cid),
        )


async def test_open_checkpointer_sets_wal_busy_timeout_and_synchronous(tmp_path):
    from graph.checkpoints import BUSY_TIMEOUT_S, open_checkpointer

    async with open_checkpointer(tmp_path / "sub" / "c.sqlite") as saver:
        async with saver.conn.execute("PRAGMA journal_mode") as cur:
            assert (await cur.fetchone())[0] == "wal"
        async with saver.conn.execute("PRAGMA busy_timeout") as cur:
            assert (await cur.fetchone())[0] == int(BUSY_TIMEOUT_S * 1000)
        async with saver.conn.execute("PRAGMA synchronous") as cur:
            assert (await cur.fetchone())[0] == 1  # NORMAL


async def test_saver_without_mirror_dir_reads_like_the_stock_saver(tmp_path):
    from graph.checkpoints import open_checkpointer

    await _seeded(tmp_path)
    _corrupt(tmp_path / "checkpoints.sqlite", "s", "unknown_serialisation")
    async with open_checkpointer(tmp_path / "checkpoints.sqlite") as saver:
        with pytest.raises(Exception) as caught:
            await saver.aget_tuple({"configurable": {"thread_id": "s"}})
        assert is_data_error(caught.value)
        assert saver.recoveries == []


@pytest.mark.parametrize("how", sorted(BAD_ROWS))
async def test_saver_with_mirror_rebuilds_an_unreadable_head_with_a_notice_in_the_state(tmp_path, how):
    from graph.checkpoints import open_checkpointer

    bad = await _seeded(tmp_path)
    _corrupt(tmp_path / "checkpoints.sqlite", "s", how)
    async with open_checkpointer(tmp_path / "checkpoints.sqlite", mirror_dir=tmp_path) as saver:
        got = await saver.aget_tuple({"configurable": {"thread_id": "s"}})
        assert got is not None and got.metadata["hermes_op"] == "recovered" and got.parent_config is None
        assert got.metadata["hermes_recovered_from"] == bad and bad in got.metadata["hermes_notice"]
        messages = got.checkpoint["channel_values"]["messages"]
        assert [m.id for m in messages[:4]] == ["h", "a", "r-c1", "z"]
        notice = messages[-1]
        assert isinstance(notice, AIMessage) and notice.name == "hermes" and notice.content.startswith("Recovered:")
        assert "rebuilt from the plain-text mirror" in notice.content and "Lost:" in notice.content
        assert len(saver.recoveries) == 1 and saver.recoveries[0].new_checkpoint_id == got.checkpoint["id"]
        # read again: readable now, no second rebuild; the history lists around the bad row
        again = await saver.aget_tuple({"configurable": {"thread_id": "s"}})
        assert again.checkpoint["id"] == got.checkpoint["id"] and len(saver.recoveries) == 1
        listed = [t.checkpoint["id"] async for t in saver.alist({"configurable": {"thread_id": "s"}})]
        assert got.checkpoint["id"] in listed and bad not in listed
        # a graph on it continues from the recovered head
        state = await make_graph(checkpointer=saver).aget_state({"configurable": {"thread_id": "s"}})
        assert state.next == () and state.values["messages"][-1].name == "hermes"
    assert (await ThreadMirror(tmp_path).read("s")).last_checkpoint_id == got.checkpoint["id"]


async def test_saver_with_mirror_rebuilds_a_thread_missing_from_a_new_file(tmp_path):
    from graph.checkpoints import open_checkpointer

    await _seeded(tmp_path)
    (tmp_path / "checkpoints.sqlite").rename(tmp_path / "checkpoints.sqlite.aside")
    async with open_checkpointer(tmp_path / "checkpoints.sqlite", mirror_dir=tmp_path) as saver:
        assert await saver.aget_tuple({"configurable": {"thread_id": "new-thread"}}) is None  # no mirror: new
        got = await saver.aget_tuple({"configurable": {"thread_id": "s"}})
        assert got is not None and "no record of this thread" in got.metadata["hermes_notice"]
        assert [m.id for m in got.checkpoint["channel_values"]["messages"][:4]] == ["h", "a", "r-c1", "z"]
        # a deleted thread's mirror is moved aside: it is not rebuilt again
        await saver.adelete_thread("s")
        assert await saver.aget_tuple({"configurable": {"thread_id": "s"}}) is None
    assert not ThreadMirror(tmp_path).path("s").exists()
    assert ThreadMirror(tmp_path).path("s").with_suffix(".jsonl.deleted").exists()


async def test_adelete_for_runs_and_aprune(tmp_path):
    from graph.checkpoints import open_checkpointer

    async with open_checkpointer(tmp_path / "c.sqlite") as saver:
        agent = make_graph(checkpointer=saver)
        for i, run in enumerate(["run-a", "run-a", "run-b"]):
            cfg = {"configurable": {"thread_id": "p"}, "metadata": {"run_id": run}}
            await agent.aupdate_state(cfg, {"messages": [HumanMessage(f"m{i}", id=f"m{i}")]}, as_node="write_memory")
        ids = [t.metadata.get("run_id") async for t in saver.alist({"configurable": {"thread_id": "p"}})]
        assert ids == ["run-b", "run-a", "run-a"]
        await saver.adelete_for_runs(["run-b"])
        ids = [t.metadata.get("run_id") async for t in saver.alist({"configurable": {"thread_id": "p"}})]
        assert ids == ["run-a", "run-a"]
        await saver.aprune(["p"], strategy="keep_latest")
        assert len([t async for t in saver.alist({"configurable": {"thread_id": "p"}})]) == 1
        await saver.aprune(["p"], strategy="delete_all")
        assert await saver.aget_tuple({"configurable": {"thread_id": "p"}}) is None


async def test_listing_skips_an_unreadable_middle_checkpoint_and_releases_the_lock(tmp_path):
    import asyncio

    from graph.checkpoints import open_checkpointer

    async with open_checkpointer(tmp_path / "c.sqlite", mirror_dir=tmp_path) as saver:
        agent = make_graph(checkpointer=saver)
        for i in range(3):
            await agent.aupdate_state(
                {"configurable": {"thread_id": "l"}},
                {"messages": [HumanMessage(f"m{i}", id=f"m{i}")]},
                as_node="write_memory",
            )
        ids = [t.checkpoint["id"] async for t in saver.alist({"configurable": {"thread_id": "l"}})]
        with sqlite3.connect(tmp_path / "c.sqlite") as con:
            con.execute("UPDATE checkpoints SET type = 'pickle' WHERE checkpoint_id = ?", (ids[1],))
        listed = [t.checkpoint["id"] async for t in saver.alist({"configurable": {"thread_id": "l"}})]
        assert listed == [ids[0], ids[2]]
        limited = [t.checkpoint["id"] async for t in saver.alist({"configurable": {"thread_id": "l"}}, limit=2)]
        assert limited == [ids[0], ids[2]]
        async for _ in saver.alist({"configurable": {"thread_id": "l"}}):
            break  # a consumer that stops early must not keep the saver's lock
        head = await asyncio.wait_for(saver.aget_tuple({"configurable": {"thread_id": "l"}}), 5)
        assert head.checkpoint["id"] == ids[0]
