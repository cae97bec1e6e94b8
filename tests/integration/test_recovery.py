"""Dual write and recovery on a real SQLite checkpoint file (graph/mirror.py, graph/recovery.py):
the head checkpoint's row is corrupted for real; the next turn rebuilds the session from the
plain-text mirror, continues, and says what was lost. First through the CLI (``run_turn``,
``ensure_readable``), then through the real ``langgraph dev`` server and ``langgraph_sdk``, whose
checkpointer (``langgraph.json`` → ``graph/checkpoints.py: server_checkpointer``) rebuilds the
thread inside ``aget_tuple``; the model there is the OpenAI-compatible stub (tests/support)."""

from __future__ import annotations

import asyncio
import json
import sqlite3
import sys
from pathlib import Path

import ormsgpack
import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver
from typer.testing import CliRunner

from graph import resources
from graph.branches import Branches
from graph.builder import make_graph
from graph.cli import app
from graph.mirror import ThreadMirror, mirror_path
from graph.recovery import RecoveryError, ensure_readable
from graph.runner import run_turn
from tests.conftest import FakeToolbox, tool_call
from tests.integration.conftest import ROOT, langgraph_dev

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
            "ORDER BY checkpoint_id DESC LIMIT 1",
            (thread,),
        ).fetchone()
        new_blob, new_kind = CORRUPTIONS[how](blob, kind)
        con.execute(
            "UPDATE checkpoints SET checkpoint = ?, type = ? WHERE thread_id = ? AND checkpoint_id = ?",
            (new_blob, new_kind, thread, cid),
        )
    return cid


def lookup_box() -> FakeToolbox:
    box = FakeToolbox()
    box.add(
        "lookup",
        lambda q: {"q": q, "hits": 2},
        {"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]},
    )
    return box


async def two_turns(scripted, thread: str = "T"):
    ctx = scripted(
        [
            tool_call("lookup", {"q": "invoices"}, "call-1"),
            AIMessage("Found 2 invoices."),
            AIMessage("You asked about invoices."),
        ],
        lookup_box(),
    )
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
        "HumanMessage",
        "AIMessage",
        "ToolMessage",
        "AIMessage",
        "HumanMessage",
        "AIMessage",
    ]
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
    await mirror.append_turn(
        "P",
        [
            HumanMessage("two things", id="h1"),
            AIMessage(
                "",
                id="a1",
                tool_calls=[
                    {"name": "x", "args": {}, "id": "p1", "type": "tool_call"},
                    {"name": "y", "args": {}, "id": "p2", "type": "tool_call"},
                ],
            ),
            ToolMessage("x done", tool_call_id="p1", name="x", id="t1"),
        ],
    )
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
    _, data_dir = await two_turns(scripted)
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


# --- the same recovery under `langgraph dev` (langgraph.json "checkpointer": graph/checkpoints.py) ---


@pytest.fixture
def openai_stub():
    """An OpenAI-compatible stub endpoint (tests/support/openai_stub.py), stopped at the end."""
    from tests.support.openai_stub import OpenAIStub

    with OpenAIStub(answer="Hello, Ada.") as stub:
        yield stub


def _human(text: str) -> dict:
    return {"messages": [{"role": "human", "content": text}]}


async def _wait_for_mirror(data_dir: Path, thread: str, text: str, timeout_s: float = 20.0) -> None:
    """write_memory mirrors the turn in the background: wait until ``text`` is in it."""
    path = mirror_path(data_dir, thread)
    for _ in range(int(timeout_s / 0.1)):
        if await asyncio.to_thread(lambda: path.exists() and text in path.read_text()):
            return
        await asyncio.sleep(0.1)
    raise AssertionError(f"the mirror {path} never held {text!r}")


def _assert_rebuilt(result: dict, stub, log_path: Path) -> str:
    """The second run's output holds the first turn, the recovery notice, then the new turn;
    the model was sent the rebuilt conversation. Returns the notice."""
    log_text = log_path.read_text(errors="replace")
    assert isinstance(result, dict) and "messages" in result, f"run failed: {result} {log_text[-3000:]}"
    msgs = result["messages"]
    humans = [m["content"] for m in msgs if m["type"] == "human"]
    assert humans == ["My name is Ada. Say hello.", "What is my name?"], msgs
    notices = [m for m in msgs if m.get("name") == "hermes" and str(m["content"]).startswith("Recovered:")]
    assert len(notices) == 1, msgs
    notice = notices[0]["content"]
    assert "rebuilt from the plain-text mirror" in notice and "Lost:" in notice
    assert msgs.index(notices[0]) < [m["content"] for m in msgs].index("What is my name?")
    assert msgs[-1]["type"] == "ai" and msgs[-1]["content"] == "Hello, Ada."
    sent = json.dumps(stub.requests[-1]["messages"])
    assert "My name is Ada. Say hello." in sent and "Recovered:" in sent  # the model saw the history
    assert "BlockingError" not in log_text and "Traceback" not in log_text, log_text[-3000:]
    return notice


@pytest.mark.slow
@pytest.mark.parametrize("how", ["garbage_bytes", "wrong_shape"])
async def test_dev_server_rebuilds_a_corrupt_thread_from_the_mirror(tmp_path, start_langgraph_dev, openai_stub, how):
    """Through the real `langgraph dev` + langgraph_sdk: a turn, the head checkpoint row
    corrupted under the running server, a second turn on the same thread: the server's saver
    rebuilds the conversation from the mirror and the notice is in the state; the history
    still lists (the bad row left out) and the CLI reads the same thread from the same file."""
    from langgraph_sdk import get_client

    data_dir = tmp_path / "data"
    url, log_path = start_langgraph_dev({**openai_stub.env(), "HERMES_DATA_DIR": str(data_dir)})
    client = get_client(url=url)
    thread = (await client.threads.create())["thread_id"]
    first = await client.runs.wait(thread, "agent", input=_human("My name is Ada. Say hello."), raise_error=False)
    assert isinstance(first, dict) and first["messages"][-1]["content"] == "Hello, Ada.", first
    await _wait_for_mirror(data_dir, thread, "Hello, Ada.")
    bad = await asyncio.to_thread(corrupt_head, data_dir / "checkpoints.sqlite", thread, how)

    second = await client.runs.wait(thread, "agent", input=_human("What is my name?"), raise_error=False)
    notice = _assert_rebuilt(second, openai_stub, log_path)
    assert bad in notice

    history = await client.threads.get_history(thread, limit=100)
    ids = [h["checkpoint"]["checkpoint_id"] for h in history]
    recovered = [h for h in history if h["metadata"].get("hermes_op") == "recovered"]
    assert bad not in ids and len(recovered) == 1 and recovered[0]["parent_checkpoint"] is None
    assert recovered[0]["metadata"]["hermes_recovered_from"] == bad

    # one checkpoint file for the server and the CLI
    shown = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "graph.cli",
        "session",
        "show",
        thread,
        "--data-dir",
        str(data_dir),
        "--json",
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        cwd=ROOT,
    )
    out, err = await asyncio.wait_for(shown.communicate(), 120)
    assert shown.returncode == 0, err.decode()
    seen = json.loads(out)
    assert seen["thread_id"] == thread and seen["checkpoint_id"] == ids[0]
    assert seen["last_messages"][-1]["content"] == "Hello, Ada."


@pytest.mark.slow
async def test_dev_server_rebuilds_a_thread_whose_checkpoint_file_was_moved_aside(tmp_path, openai_stub):
    """The checkpoint file moved aside while no server runs: the thread (created again by id in
    the new server, whose in-memory thread list starts empty) is rebuilt from the mirror on its
    next run."""
    from langgraph_sdk import get_client

    data_dir = tmp_path / "data"
    env = {**openai_stub.env(), "HERMES_DATA_DIR": str(data_dir)}
    (tmp_path / "one").mkdir()
    (tmp_path / "two").mkdir()
    with langgraph_dev(tmp_path / "one", env) as (url, _):
        client = get_client(url=url)
        thread = (await client.threads.create())["thread_id"]
        first = await client.runs.wait(thread, "agent", input=_human("My name is Ada. Say hello."), raise_error=False)
        assert isinstance(first, dict) and "messages" in first, first
        await _wait_for_mirror(data_dir, thread, "Hello, Ada.")
    for suffix in ("", "-wal", "-shm"):
        db = data_dir / f"checkpoints.sqlite{suffix}"
        if db.exists():
            db.rename(db.with_name(db.name + ".aside"))

    with langgraph_dev(tmp_path / "two", env) as (url, log_path):
        client = get_client(url=url)
        await client.threads.create(thread_id=thread, if_exists="do_nothing")
        second = await client.runs.wait(thread, "agent", input=_human("What is my name?"), raise_error=False)
        notice = _assert_rebuilt(second, openai_stub, log_path)
    assert "no record of this thread" in notice
