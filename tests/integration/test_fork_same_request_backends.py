"""The fork rule of ``graph.request_identity`` on both checkpoint stores (issue 23, DESIGN §2.4):
SQLite (the data directory's file) and PostgreSQL (``HERMES_POSTGRES_URL``, a real server from
PyPI ``pgserver``). The rule reads the checkpointer the graph runs with (``aget_tuple``, ``alist``
with ``before``/``limit``, a listing closed early), so each store must answer those the same way:
a fork with the forked-from turn's text replays the post, an edited text posts."""

from __future__ import annotations

import pytest
from langchain_core.messages import AIMessage

from graph.builder import make_graph
from graph.checkpoints import checkpoints_file, open_checkpointer
from graph.request_identity import SAME_REQUEST_AS
from tests.unit.test_fork_same_request import GOAL, Thread, humans, posting, replayed, toolbox

pytestmark = pytest.mark.slow  # a PostgreSQL server, whole graph runs


async def test_a_fork_with_the_same_text_replays_on_each_checkpoint_store(checkpoint_backend, scripted, data_dir):
    ran: list[str] = []
    box = toolbox(data_dir, ran)
    replies = [AIMessage("Hello."), *posting("p1"), *posting("p2"), *posting("p3")]
    ctx = scripted(replies, box, embeddings="hash")
    try:
        async with open_checkpointer(checkpoints_file(data_dir)) as saver:
            thread = Thread(make_graph(checkpointer=saver), "t", ctx)
            await thread.send("hi")
            first = await thread.send(GOAL)
            original = humans(first)[-1]
            base = await thread.before_turn()
            out = await thread.send(GOAL.lower(), checkpoint_id=base)
            assert ran == ["post_message"] and replayed(out) == [True]
            assert humans(out)[-1].additional_kwargs[SAME_REQUEST_AS] == original.id
            out = await thread.send(GOAL + " Mark it final.", checkpoint_id=base)
            assert ran == ["post_message", "post_message"] and replayed(out) == [False]
    finally:
        await box.registry.ledger.aclose()
