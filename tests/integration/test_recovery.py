"""Dual write and recovery on a real SQLite checkpoint file (graph/mirror.py, graph/recovery.py):
the head checkpoint's row is corrupted for real; the next turn rebuilds the session from the
plain-text mirror, continues, and says what was lost."""

from __future__ import annotations

import asyncio
import json
import sqlite3
from pathlib import Path

import ormsgpack
import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver
from typer.testing import CliRunner

from graph import resources
from graph.branches import Branches
from graph.builder import make_graph
from graph.cli import app, run_turn
from graph.mirror import ThreadMirror, mirror_path
from graph.recovery import RecoveryError, ensure_readable
from tests.conftest import FakeToolbox, tool_call

CORRUPTIONS = {
    "garbage_bytes": lambda blob, kind: (b"\x00\xffnot a checkpoint\xc1\xc1", kind),
    "torn_write": lambda blob, kind: (blob[: len(blob) // 2], kind),
    "unknown_serialisation": lambda blob, kind: (blob, "pickle"),
    "wrong_shape": lambda blob, kind: (ormsgpack.packb({"v": 4, "id": "x"}), "msgpack"),
}


def corrupt_head(db: Path, thread: str, how: str) -> str:
    """Overwrite the newest checkpoint row of ``thread`` in place; returns its id."""
    with sqlite3.connect(db) as con:
        cid, blob, kind = con.execute(
            "SELECT checkpoint_id, checkpoint, type FROM checkpoints WHERE thread_id = ? "
            "ORDER BY checkpoint_id DESC LIMIT 1", (thread,)).fetchone()
        new_blob, new_kind = CORRUPTIONS[how](blob, kind)
        con.execute("UPDATE checkpoints SET checkpoint = ?, type = ? WHERE thread_id = ? AND checkpoint_id = ?",
                    (new_blob, new_kind, thread, cid))
    return cid


def lookup_box() -> FakeToolbox:
    box = FakeToolbox()
    box.add("lookup", lambda q: {"q": q, "hits": 2},
            {"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]})
    return box


async def two_turns(scripted, thread: str = "T"):
    ctx = scripted([
        tool_call("lookup", {"q": "invoices"}, "call-1"), AIMessage("Found 2 invoices."),
        AIMessage("You asked about invoices."),
    ], lookup_box())
    first = await run_turn("look up invoices", ctx, thread, quiet=True)
    assert first["answer"] == "Found 2 invoices." and first["recovery"] is None
    return ctx, Path(ctx.data_dir)


async def state_of(data_dir: Path, thread: str):
    async with AsyncSqliteSaver.from_conn_string(str(data_dir / "checkpoints.sqlite")) as saver:
        agent = make_graph(checkpointer=saver)
        snap = await agent.aget_state({"configurable": {"thread_id": thread}})
        tree = await Branches(agent).branch_tree(thread)
    return snap, tree


@pytest.mark.parametrize("how", sorted(CORRUPTIONS))
async def test_corrupt_head_is_rebuilt_from_the_mirror_and_the_session_continues(scripted, how):
    ctx, data_dir = await two_turns(scripted)
    model = scripted.models[ctx.model]
    bad = await asyncio.to_thread(corrupt_head, data_dir / "checkpoints.sqlite", "T", how)

    summary = await run_turn("what did I ask?", ctx, "T", quiet=True)

    assert summary["answer"] == "You asked about invoices."
    notice = summary["recovery"]
    assert notice and bad in notice and "mirror" in notice
    assert "derived state" in notice and "metrics" in notice and "branch history" in notice
    # the model saw the restored history, tool call and result paired
    prompt = model.seen[-1]
    human = [m.content for m in prompt if isinstance(m, HumanMessage)]
    assert human[:2] == ["look up invoices", "what did I ask?"]
    calls = [m for m in prompt if isinstance(m, AIMessage) and m.tool_calls]
    results = [m for m in prompt if isinstance(m, ToolMessage)]
    assert [c.tool_calls[0]["id"] for c in calls] == ["call-1"] == [r.tool_call_id for r in results]
    assert prompt.index(results[0]) == prompt.index(calls[0]) + 1
    assert '"hits": 2' in results[0].content

    snap, tree = await state_of(data_dir, "T")
    assert [type(m).__name__ for m in snap.values["messages"]] == [
        "HumanMessage", "AIMessage", "ToolMessage", "AIMessage", "HumanMessage", "AIMessage"]
    assert snap.values["metrics"]["turns"] == 1  # metrics restarted, as the notice says
    recovered = [n for n in tree.nodes.values() if n.node == "recovered"]
    assert len(recovered) == 1 and recovered[0].parent_id is None
    assert recovered[0].metadata["hermes_recovered_from"] == bad
    assert recovered[0].checkpoint_id in tree.path_to(tree.active)
    assert not tree.nodes[bad].readable and tree.nodes[bad].error  # listed, not hidden
    assert len(tree.roots) == 2  # the old (partly readable) history and the recovered root


async def test_recovery_keeps_parallel_call_groups_and_repairs_a_cut_group(scripted, data_dir):
    """Mirror written mid-turn (results of a parallel group partly missing): the rebuilt
    history answers every call, so the next prompt is valid (K1's kind)."""
    data_dir.mkdir(parents=True, exist_ok=True)
    async with AsyncSqliteSaver.from_conn_string(str(data_dir / "checkpoints.sqlite")) as saver:
        agent = make_graph(checkpointer=saver)
        ctx = scripted([AIMessage("seed")])
        await agent.ainvoke({"messages": [HumanMessage("seed")]}, {"configurable": {"thread_id": "P"}}, context=ctx)
    # then the mirror's latest record is a turn cut mid-way (as if the process died there)
    mirror = ThreadMirror(data_dir)
    await mirror.append_turn("P", [
        HumanMessage("two things", id="h1"),
        AIMessage("", id="a1", tool_calls=[{"name": "x", "args": {}, "id": "p1", "type": "tool_call"},
                                           {"name": "y", "args": {}, "id": "p2", "type": "tool_call"}]),
        ToolMessage("x done", tool_call_id="p1", name="x", id="t1"),
    ])
    await asyncio.to_thread(corrupt_head, data_dir / "checkpoints.sqlite", "P", "garbage_bytes")
    async with AsyncSqliteSaver.from_conn_string(str(data_dir / "checkpoints.sqlite")) as saver:
        agent = make_graph(checkpointer=saver)
        report = await ensure_readable(agent, ThreadMirror(data_dir), "P")
        assert report is not None and report.filled_results == ["p2"] and report.restored == 4
        assert "1 missing result(s)" in report.notice()
        snap = await agent.aget_state({"configurable": {"thread_id": "P"}})
        assert await ensure_readable(agent, ThreadMirror(data_dir), "P") is None  # readable now
    msgs = snap.values["messages"]
    assert [getattr(m, "tool_call_id", None) for m in msgs] == [None, None, "p1", "p2"]
    assert msgs[3].status == "error" and "lost in recovery" in msgs[3].content


async def test_without_a_mirror_the_error_says_what_to_do(scripted):
    ctx, data_dir = await two_turns(scripted)
    await asyncio.to_thread(mirror_path(data_dir, "T").unlink)
    await asyncio.to_thread(corrupt_head, data_dir / "checkpoints.sqlite", "T", "torn_write")
    with pytest.raises(RecoveryError, match="no plain-text mirror"):
        await run_turn("again", ctx, "T", quiet=True)


async def test_every_turn_is_mirrored_in_plain_text(scripted):
    ctx, data_dir = await two_turns(scripted)
    records = [json.loads(line) for line in mirror_path(data_dir, "T").read_text().splitlines()]
    messages = [r for r in records if r["kind"] == "message"]
    assert [r["role"] for r in messages] == ["human", "ai", "tool", "ai"]
    assert messages[1]["tool_calls"] == [{"id": "call-1", "name": "lookup", "args": {"q": "invoices"}}]
    assert messages[2]["tool_call_id"] == "call-1" and messages[2]["name"] == "lookup"
    snap, _ = await state_of(data_dir, "T")
    assert records[-1]["kind"] == "head"
    assert records[-1]["checkpoint_id"] == snap.config["configurable"]["checkpoint_id"]
    assert [m.id for m in snap.values["messages"]] == [r["id"] for r in messages]


def test_cli_run_after_corruption_continues_with_a_notice(scripted, data_dir):
    runner = CliRunner()
    box = lookup_box()
    ctx = scripted([tool_call("lookup", {"q": "a"}, "c1"), AIMessage("first answer"), AIMessage("second answer")], box)
    args = ["--thread", "C", "--model", ctx.model, "--data-dir", str(data_dir)]
    first = runner.invoke(app, ["run", "look up a", *args])
    assert first.exit_code == 0, first.output
    corrupt_head(data_dir / "checkpoints.sqlite", "C", "garbage_bytes")

    shown = runner.invoke(app, ["session", "show", "C", "--data-dir", str(data_dir)])
    assert shown.exit_code == 1 and "cannot be read" in shown.output and "rebuilds the session" in shown.output

    resources.set_toolbox(ctx, box)  # the CLI closed it at exit
    second = runner.invoke(app, ["run", "and then?", *args])
    assert second.exit_code == 0, second.output
    assert "Traceback" not in second.output and "recovered" in second.output.lower()
    assert "second answer" in second.output and "Lost:" in second.output

    resources.set_toolbox(ctx, box)
    shown = runner.invoke(app, ["branch", "show", "C", "--data-dir", str(data_dir)])
    assert shown.exit_code == 0 and "UNREADABLE" in shown.output and "recovered" in shown.output


def test_cli_without_mirror_exits_1_with_a_message(scripted, data_dir):
    runner = CliRunner()
    ctx = scripted([AIMessage("one"), AIMessage("two")])
    args = ["--thread", "N", "--model", ctx.model, "--data-dir", str(data_dir)]
    assert runner.invoke(app, ["run", "hi", *args]).exit_code == 0
    mirror_path(data_dir, "N").unlink()
    corrupt_head(data_dir / "checkpoints.sqlite", "N", "torn_write")
    out = runner.invoke(app, ["run", "hi again", *args])
    assert out.exit_code == 1 and "no plain-text mirror" in out.output and "Traceback" not in out.output


async def test_a_checkpoint_file_moved_aside_is_rebuilt_from_the_mirror(scripted):
    ctx, data_dir = await two_turns(scripted)
    db = data_dir / "checkpoints.sqlite"
    await asyncio.to_thread(db.rename, data_dir / "checkpoints.sqlite.corrupt")
    second = await run_turn("what did I ask?", ctx, "T", quiet=True)
    assert second["recovery"] is not None and "no record of this thread" in second["recovery"]
    model = scripted.models[ctx.model]
    assert any("look up invoices" in str(m.content) for m in model.seen[-1])  # history came back
    assert second["answer"] == "You asked about invoices."
