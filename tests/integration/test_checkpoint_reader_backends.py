"""``graph.checkpoint_reader`` on both checkpoint stores (the data directory's SQLite file, and a
real PostgreSQL through ``HERMES_POSTGRES_URL``: ``checkpoint_backend``): what the read-only
commands show without the agent graph equals what the compiled graph's ``aget_state`` /
``aget_state_history`` says, checkpoint by checkpoint (values, next nodes, parent, metadata,
time), over a real thread: tool rounds, a question (``interrupt``) and its answer, a rollback;
the thread listing and the row counts read the saver's table on either store (issue 22)."""

from __future__ import annotations

from typing import Any

import pytest
from langchain_core.messages import AIMessage

from graph.branches import Branches
from graph.builder import make_graph
from graph.checkpoint_reader import open_reader, postgres_url
from graph.checkpoints import checkpoints_file, open_checkpointer
from graph.runner import execute_turn, run_turn
from tests.conftest import FakeToolbox, tool_call

pytestmark = pytest.mark.slow  # three turns through the real graph; PostgreSQL starts for the session


def _asked_toolbox() -> FakeToolbox:
    box = FakeToolbox()
    box.add(
        "lookup",
        lambda **kw: {"value": 7},
        {"type": "object", "properties": {"key": {"type": "string"}}, "required": ["key"]},
    )
    box.add(
        "post_note",
        lambda **kw: {"ok": True},
        {
            "type": "object",
            "properties": {"channel": {"type": "string"}, "text": {"type": "string"}},
            "required": ["channel", "text"],
        },
        side_effect=True,
    )
    return box


async def test_every_checkpoint_reads_as_the_graph_reads_it(checkpoint_backend, scripted, data_dir):
    ctx = scripted(
        [
            tool_call("lookup", {"key": "a"}, "c1"),
            AIMessage("the value is 7"),
            tool_call("post_note", {"text": "hi"}, "c2"),  # asks for the channel: an interrupt
            AIMessage("posted"),
            AIMessage("third"),
        ],
        _asked_toolbox(),
    )
    await run_turn("look up a", ctx, "T", quiet=True)
    asked = await execute_turn("post a note saying hi", ctx, "T", quiet=True)
    assert asked["question"]  # the thread's head waits for an answer
    async with open_checkpointer(checkpoints_file(data_dir)) as saver:
        graph = make_graph(checkpointer=saver)
        waiting = await graph.aget_state(Branches.config("T"))
        assert waiting.next and waiting.interrupts
        async with open_reader(checkpoints_file(data_dir), postgres_url()) as reader:
            head = await reader.state("T")
        assert head is not None and head.next == tuple(waiting.next)
        assert head.values == waiting.values
    await execute_turn("", ctx, "T", quiet=True, resume="project")
    await run_turn("once more", ctx, "T", quiet=True)
    async with open_checkpointer(checkpoints_file(data_dir)) as saver:
        graph = make_graph(checkpointer=saver)
        branches = Branches(graph)
        ends = [
            s.config["configurable"]["checkpoint_id"]
            async for s in graph.aget_state_history(Branches.config("T"))
            if s.values.get("goal") == "look up a" and not s.next
        ]
        first_end = ends[-1]
        await branches.rollback("T", first_end)  # a second branch in the tree
        history = [s async for s in graph.aget_state_history(Branches.config("T"))]
        expected_tree = await branches.branch_tree("T")
        listed = await branches.threads()  # the same reader (graph.checkpoint_reader), through the graph's saver
    assert len(history) > 20 and any(s.next for s in history) and any(s.interrupts for s in history)
    async with open_reader(checkpoints_file(data_dir), postgres_url()) as reader:
        read = {}
        for snap in history:
            cid = snap.config["configurable"]["checkpoint_id"]
            mine = await reader.state("T", cid)
            assert mine is not None
            read[cid] = mine
        tree = await reader.tree("T")
        counts = await reader.counts("T")
        threads = await reader.threads()
    for snap in history:
        mine = read[snap.config["configurable"]["checkpoint_id"]]
        # a reducer channel never written shows its empty default in the graph (metrics: {}),
        # and is absent from the stored checkpoint
        never_written = {k for k in set(snap.values) - set(mine.values) if snap.values[k] in ({}, [])}
        want: dict[str, Any] = {
            "values": {k: v for k, v in snap.values.items() if k not in never_written},
            "next": tuple(snap.next),
            "parent": (snap.parent_config or {}).get("configurable", {}).get("checkpoint_id"),
            "metadata": dict(snap.metadata or {}),
            "created_at": snap.created_at,
        }
        got = {
            "values": mine.values,
            "next": mine.next,
            "parent": mine.parent_id,
            "metadata": mine.metadata,
            "created_at": mine.created_at,
        }
        assert got == want, snap.config
    assert tree == expected_tree
    assert counts == (len(expected_tree), len(expected_tree.heads)) and counts[1] == 2
    assert [(t.thread_id, t.goal, t.updated_at) for t in threads] == [
        ("T", history[0].values["goal"], history[0].created_at)
    ]
    assert listed == threads
