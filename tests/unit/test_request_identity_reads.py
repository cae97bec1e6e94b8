"""The request identity of a turn at the thread's head (issue 19, bench_overhead): decided from the
newest rows' ids, parents and sources plus ONE full checkpoint read (the base), not three; and
the short decision is the general walk's (``graph.request_identity``, DESIGN §2.4).

Real parts: the SQLite checkpointer the CLI and the server use, the compiled graph, the ledger
file; the scripted model of ``tests.unit.test_fork_same_request``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage

import graph.request_identity as identity
from graph.branches import Branches
from graph.builder import make_graph
from graph.checkpoints import checkpoints_file, open_checkpointer
from tests.unit.test_fork_same_request import GOAL, Cancelled, Thread, humans, posting, replayed, toolbox

pytestmark = pytest.mark.slow  # whole graph runs on SQLite files


class Spy:
    """Wraps ``graph.request_identity.repeated_request``: for each call, the saver's full reads
    (``aget_tuple``, ``alist``) it made, what the short path decided (``"general"`` when it
    handed over), and what the general walk alone decides for the same call."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.calls: list[dict[str, Any]] = []
        real = identity.repeated_request

        async def spied(saver: Any, thread_id: str, checkpoint_id: str, message: Any) -> str | None:
            reads: list[str] = []
            get, listing = saver.aget_tuple, saver.alist

            async def counted_get(config: Any) -> Any:
                reads.append("aget_tuple")
                return await get(config)

            def counted_list(*args: Any, **kw: Any) -> Any:
                reads.append("alist")
                return listing(*args, **kw)

            saver.aget_tuple, saver.alist = counted_get, counted_list
            try:
                got = await real(saver, thread_id, checkpoint_id, message)
            finally:
                del saver.aget_tuple, saver.alist  # the class's methods again
            try:
                short: Any = await identity._head_run(saver, thread_id, checkpoint_id, message)
            except identity._General:
                short = "general"
            walked = await identity._walk(saver, thread_id, checkpoint_id, message)
            self.calls.append({"got": got, "reads": reads, "short": short, "walk": walked})
            return got

        monkeypatch.setattr(identity, "repeated_request", spied)


async def test_a_turn_at_the_head_reads_one_checkpoint_state(scripted, data_dir, monkeypatch):
    spy = Spy(monkeypatch)
    ran: list[str] = []
    box = toolbox(data_dir, ran)
    ctx = scripted([AIMessage("Hello."), *posting("p1"), AIMessage("Fine.")], box, embeddings="hash")
    async with open_checkpointer(checkpoints_file(data_dir)) as saver:
        thread = Thread(make_graph(checkpointer=saver), "t", ctx)
        await thread.send("hi")
        await thread.send(GOAL)
        await thread.send("thanks")
    await box.registry.ledger.aclose()
    assert len(spy.calls) == 3
    first, *later = spy.calls
    assert first["reads"] == [] and first["short"] is None  # the thread's first run: no base
    for call in later:  # one full read, of the base; the general walk read three
        assert call["reads"] == ["aget_tuple"]
        assert call["short"] is None and call["walk"] is None and call["got"] is None


async def test_the_short_decision_is_the_general_walks(scripted, data_dir, monkeypatch):
    """A run stopped mid-turn then the same text at the head (decided short: the stopped turn's
    goal id), a rollback then the same text (a copy: handed to the walk), a fork from an earlier
    checkpoint (handed to the walk): every call's answer is the walk's."""
    import nodes.dispatch_tools as dispatch

    spy = Spy(monkeypatch)
    ran: list[str] = []
    box = toolbox(data_dir, ran)
    real_write = dispatch._write_payload
    cancelled: list[bool] = []

    def write_then_stop(path: Any, payload: Any) -> None:
        if Path(path).name.startswith("p1-") and not cancelled:
            cancelled.append(True)
            raise Cancelled
        real_write(path, payload)

    monkeypatch.setattr(dispatch, "_write_payload", write_then_stop)
    replies = [AIMessage("Hello."), *posting("p1"), *posting("p2"), *posting("p3"), *posting("p4")]
    ctx = scripted(replies, box, embeddings="hash")
    async with open_checkpointer(checkpoints_file(data_dir)) as saver:
        thread = Thread(make_graph(checkpointer=saver), "t", ctx)
        await thread.send("hi")
        with pytest.raises(Cancelled):
            await thread.send(GOAL)
        stopped = humans((await thread.agent.aget_state(thread.config())).values)[-1]
        out = await thread.send(GOAL.lower())  # at the head, stopped mid-turn: the same request
        assert ran == ["post_message"] and replayed(out) == [True]
        base = await thread.before_turn()
        await Branches(thread.agent).rollback(thread.thread_id, base)
        out = await thread.send(GOAL)  # after a rollback: the same request again
        assert ran == ["post_message"] and replayed(out) == [True]
        out = await thread.send(GOAL, checkpoint_id=base)  # a fork: the same request
        assert ran == ["post_message"] and replayed(out) == [True]
    await box.registry.ledger.aclose()
    assert [c["got"] for c in spy.calls] == [c["walk"] for c in spy.calls]
    shorts = [c["short"] for c in spy.calls]
    assert shorts[:3] == [None, None, stopped.id]  # "hi", GOAL, GOAL again after the stop: decided short
    assert shorts[3:] == ["general", "general"]  # the rollback's copy and the fork: the walk decides
    assert spy.calls[2]["got"] == stopped.id
