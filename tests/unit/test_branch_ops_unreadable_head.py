"""Branch operations (rollback, switch, fork) on a thread whose active head checkpoint is
corrupt: one clear line naming the head and the way back, exit 1, nothing written (checkpoint
file and mirror unchanged, no new files); the read-only commands keep working; the way back
the message names (a run on the thread rebuilds it from the mirror, then a fork) works."""

from __future__ import annotations

import asyncio
import hashlib
import json
import sqlite3
from pathlib import Path

import ormsgpack
import pytest
from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.runnables import RunnableConfig
from typer.testing import CliRunner

from graph import resources
from graph.branches import Branches
from graph.builder import make_graph
from graph.checkpoint_tree import BranchError
from graph.checkpoints import open_checkpointer
from graph.cli import app
from graph.context import Context
from graph.mirror import ThreadMirror
from graph.model import register_model
from tests.conftest import FakeToolbox, ScriptedChat

runner = CliRunner()

#: blob and type written over the head row
CORRUPTIONS = {
    "garbage": lambda blob, kind: (b"\x00\xffnot a checkpoint\xc1\xc1", kind),
    "torn_write": lambda blob, kind: (blob[: len(blob) // 2], kind),
    "unknown_serialisation": lambda blob, kind: (blob, "pickle"),
    "wrong_shape": lambda blob, kind: (ormsgpack.packb({"v": 4, "id": "x"}), "msgpack"),
}


def seed(data_dir: Path, how: str, mirror: bool = True) -> list[str]:
    """Thread T with two finished turns (two checkpoints) and its mirror; the head row is then
    overwritten by ``CORRUPTIONS[how]``. Returns the checkpoint ids, oldest first."""

    async def write() -> tuple[str, list]:
        async with open_checkpointer(data_dir / "checkpoints.sqlite") as saver:
            agent = make_graph(checkpointer=saver)
            cfg: RunnableConfig = {"configurable": {"thread_id": "T"}}
            await agent.aupdate_state(
                cfg, {"messages": [HumanMessage("hello", id="h1"), AIMessage("hi", id="a1")]}, as_node="write_memory"
            )
            await agent.aupdate_state(
                cfg, {"messages": [HumanMessage("again", id="h2"), AIMessage("yes", id="a2")]}, as_node="write_memory"
            )
            state = await agent.aget_state(cfg)
        return state.config["configurable"]["checkpoint_id"], list(state.values["messages"])

    data_dir.mkdir(parents=True, exist_ok=True)
    head, messages = asyncio.run(write())
    if mirror:
        asyncio.run(ThreadMirror(data_dir).append_turn("T", messages, checkpoint_id=head))
    with sqlite3.connect(data_dir / "checkpoints.sqlite") as con:
        rows = con.execute(
            "SELECT checkpoint_id, checkpoint, type FROM checkpoints WHERE thread_id = 'T' ORDER BY checkpoint_id"
        ).fetchall()
        cid, blob, kind = rows[-1]
        con.execute(
            "UPDATE checkpoints SET checkpoint = ?, type = ? WHERE checkpoint_id = ?",
            (*CORRUPTIONS[how](blob, kind), cid),
        )
    con.close()
    return [r[0] for r in rows]


def snapshot(data_dir: Path) -> dict[str, str]:
    return {
        str(p.relative_to(data_dir)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(data_dir.rglob("*"))
        if p.is_file()
    }


def head_changes(ids: list[str]) -> dict[str, list[str]]:
    old, head = ids[0][-8:], ids[-1][-8:]
    return {
        "rollback_to_earlier": ["branch", "rollback", "T", old],
        "rollback_to_head": ["branch", "rollback", "T", head],
        "switch_to_head": ["branch", "switch", "T", head],
        "switch_to_earlier": ["branch", "switch", "T", old],
        "fork_from_earlier": ["branch", "fork", "T", old, "try again", "--model", "no-such-model"],
        "fork_from_head": ["branch", "fork", "T", head, "try again", "--model", "no-such-model"],
    }


@pytest.mark.parametrize("how", sorted(CORRUPTIONS))
@pytest.mark.parametrize("op", sorted(head_changes(["x" * 8, "y" * 8])))
def test_head_changes_on_a_corrupt_head_say_what_to_do_and_write_nothing(tmp_path, how, op):
    data = tmp_path / "data"
    ids = seed(data, how)
    before = snapshot(data)
    result = runner.invoke(app, [*head_changes(ids)[op], "--data-dir", str(data)], env={"COLUMNS": "80"})
    assert result.exit_code == 1, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    lines = [line for line in result.output.splitlines() if line.startswith("error:")]
    assert len(lines) == 1, result.output
    line = lines[0]
    assert "Traceback" not in result.output
    assert f"the active head {ids[-1][-8:]} of thread 'T' cannot be read" in line
    assert "nothing was changed" in line and "hermes run --thread T" in line and "hermes branch fork T" in line
    assert snapshot(data) == before


def test_without_a_mirror_the_message_says_to_start_a_new_thread(tmp_path):
    data = tmp_path / "data"
    ids = seed(data, "garbage", mirror=False)
    before = snapshot(data)
    result = runner.invoke(app, ["branch", "rollback", "T", ids[0][-8:], "--data-dir", str(data)])
    assert result.exit_code == 1
    assert "no plain-text mirror" in result.output and "new thread" in result.output
    assert "hermes run --thread T" not in result.output
    assert snapshot(data) == before


@pytest.mark.parametrize(
    "command", [["branch", "list", "T"], ["branch", "show", "T"], ["session", "list"], ["branch", "show", "T", "FIRST"]]
)
def test_read_only_commands_still_work_on_a_corrupt_head(tmp_path, command):
    data = tmp_path / "data"
    ids = seed(data, "garbage")
    before = snapshot(data)
    command = [ids[0][-8:] if part == "FIRST" else part for part in command]
    result = runner.invoke(app, [*command, "--data-dir", str(data)], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    assert "unreadable" in result.output or "hi" in result.output
    assert snapshot(data) == before


def test_the_named_way_back_works_rebuild_by_a_run_then_fork(tmp_path):
    data = tmp_path / "data"
    ids = seed(data, "garbage")
    model = ScriptedChat(messages=iter([AIMessage("rebuilt and answering"), AIMessage("forked answer")]))
    register_model("unreadable-head", lambda _c: model)
    resources.set_toolbox(Context(model="unreadable-head", data_dir=str(data)), FakeToolbox())
    run = runner.invoke(
        app, ["run", "go on", "--thread", "T", "--model", "unreadable-head", "--data-dir", str(data), "--json"]
    )
    assert run.exit_code == 0, run.output
    assert json.loads(run.output.strip().splitlines()[-1])["recovery"]  # rebuilt from the mirror
    resources.set_toolbox(Context(model="unreadable-head", data_dir=str(data)), FakeToolbox())
    fork = runner.invoke(
        app,
        [
            "branch",
            "fork",
            "T",
            ids[0][-8:],
            "another try",
            "--model",
            "unreadable-head",
            "--data-dir",
            str(data),
            "--json",
        ],
    )
    assert fork.exit_code == 0, fork.output
    summary = json.loads(fork.output.strip().splitlines()[-1])
    assert summary["answer"] == "forked answer" and summary["forked_from"] == ids[0]


async def test_the_library_refuses_too(tmp_path):
    data = tmp_path / "data"
    await asyncio.to_thread(seed, data, "torn_write")
    async with open_checkpointer(data / "checkpoints.sqlite") as saver:
        branches = Branches(make_graph(checkpointer=saver), mirror=ThreadMirror(data))
        tree = await branches.branch_tree("T")
        first = min(tree.nodes)
        for call in (
            branches.rollback("T", first),
            branches.switch("T", tree.active),
            branches.fork_base("T", first),
            branches.fork("T", first, "x"),
        ):
            with pytest.raises(BranchError, match=r"active head .* cannot be read"):
                await call
