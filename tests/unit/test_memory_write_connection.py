"""A turn's memory write holds its plan, records its branch origin and releases the hold on ONE
``memory.db`` connection (``memory.db.one_connection``; issue 19, bench_overhead): each opening
was a worker thread and its round trips. The hold is still committed before the slow part, and
only the task that opened the connection uses it."""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path
from typing import Any

import pytest

import memory.db as memory_db
from memory.branch_origins import BranchOrigins
from memory.db import DB_FILENAME, one_connection
from memory.embeddings import HashEmbedder
from memory.episodic.base import EpisodicEvent
from memory.episodic.lance import LanceEpisodicStore
from memory.held_writes import OP_TURN_PLAN
from memory.queue import RetryQueue
from memory.service import MemoryService
from memory.turn_events import TurnPlan


def _plan(text: str, message_id: str) -> TurnPlan:
    event = EpisodicEvent(
        user_id="u",
        kind="preference",
        text=text,
        confidence=0.9,
        metadata={"thread_id": "t1", "origin_message_id": message_id},
    )
    return TurnPlan(user_id="u", events=[event], origin=f"t1\x00{message_id}")


@pytest.mark.slow  # LanceDB opens its table
async def test_a_turns_write_opens_memory_db_once(tmp_path, monkeypatch):
    service = MemoryService(tmp_path, episodic=LanceEpisodicStore.in_dir(tmp_path, HashEmbedder()))
    opened: list[Path] = []
    real_open = memory_db.open_aiosqlite

    async def counted(path: Any, **kw: Any) -> Any:
        opened.append(Path(path))
        return await real_open(path, **kw)

    held_during_write: list[list[Any]] = []
    real_write_events = service._write_events

    async def write_events(events: Any, counts: Any) -> Any:  # the slow part: the hold is committed
        with sqlite3.connect(tmp_path / DB_FILENAME) as con:
            held_during_write.append(con.execute("SELECT op FROM memory_retry_queue WHERE status = 'held'").fetchall())
        return await real_write_events(events, counts)

    try:
        await service.write_plan(_plan("I prefer aisle seats", "m1"))  # first write: schemas, queue replay
        monkeypatch.setattr(memory_db, "open_aiosqlite", counted)
        monkeypatch.setattr(service, "_write_events", write_events)
        counts = await service.write_plan(_plan("I prefer green tea", "m2"))
        assert counts["episodes"] == 1
        assert [p.name for p in opened] == [DB_FILENAME]  # hold, origin, release: one connection
        assert held_during_write == [[(OP_TURN_PLAN,)]]  # held (committed) before the embedding
        assert await RetryQueue.in_dir(tmp_path)._list("held") == []  # released
        inactive = await BranchOrigins.in_dir(tmp_path).sync("t1", {"m1"})  # m2's origin was recorded
        assert ("t1", "m2") in inactive
    finally:
        await service.aclose()


async def test_one_connection_is_lent_to_its_task_only(tmp_path):
    queue, origins = RetryQueue.in_dir(tmp_path), BranchOrigins.in_dir(tmp_path)
    async with one_connection(queue.db, origins.db):
        async with queue.db.connect() as a, origins.db.connect() as b:
            assert a is b  # one connection for both components in this task

        async def elsewhere() -> Any:
            async with queue.db.connect() as c:
                return c

        other = await asyncio.create_task(elsewhere())
        assert other is not a  # another task opens its own
        held = await queue.hold(OP_TURN_PLAN, {"x": 1})
        with sqlite3.connect(tmp_path / DB_FILENAME) as con:  # committed at once, the block still open
            assert con.execute("SELECT id FROM memory_retry_queue").fetchall() == [(held,)]
        await origins.record("t1", "m1")
    async with queue.db.connect() as after:
        assert after is not a  # closed with the block; each call opens its own again
    with pytest.raises(ValueError):  # the lent connection is closed
        await a.execute("SELECT 1")


@pytest.mark.slow  # LanceDB opens its table
async def test_a_sessions_recall_opens_memory_db_once(tmp_path, monkeypatch):
    """The branch sync and the semantic reads of a session's recall (its episodic search runs in
    a task of its own) share one connection; what they find is unchanged."""
    service = MemoryService(tmp_path, episodic=LanceEpisodicStore.in_dir(tmp_path, HashEmbedder()))
    opened: list[Path] = []
    real_open = memory_db.open_aiosqlite

    async def counted(path: Any, **kw: Any) -> Any:
        opened.append(Path(path))
        return await real_open(path, **kw)

    try:
        await service.write_plan(_plan("I prefer aisle seats", "m1"))
        await service.write_plan(_plan("I prefer window seats", "m2"))
        await service.semantic.upsert("u", "user", "prefers", "green tea", object_is_entity=False, confidence=0.9)
        await service.recall_for_turn("u", "t1", "which seats do I prefer?", visible_origins={"m1"}, sync_branch=True)
        monkeypatch.setattr(memory_db, "open_aiosqlite", counted)
        block = await service.recall_for_turn(
            "u", "t1", "which seats and tea do I prefer?", visible_origins={"m1"}, sync_branch=True
        )
        assert [p.name for p in opened] == [DB_FILENAME]  # sync, retracted sources, facts: one connection
        text = "\n".join(block.lines)
        assert "aisle" in text and "window" not in text  # m2 left the active branch: hidden
        assert "green tea" in text
    finally:
        await service.aclose()


async def test_a_file_that_cannot_be_opened_leaves_each_call_to_open_its_own(tmp_path):
    """Sharing is never the reason a write fails: the block runs, and each call reports its own
    error (what the memory service catches and logs, as without the sharing)."""
    (tmp_path / DB_FILENAME).mkdir()  # a directory where the file should be: SQLite cannot open it
    queue = RetryQueue.in_dir(tmp_path)
    ran = False
    async with one_connection(queue.db):
        ran = True
        with pytest.raises(sqlite3.Error):
            await queue.hold(OP_TURN_PLAN, {"x": 1})
    assert ran
