"""A session's recall starts its episodic search (the query embedding, the slow part) beside the
branch sync instead of after it (issue 19: the recall is on the turn's critical path); the hits
are still filtered by the branch the sync found, and a failed search leaves the block without
episodes, never failing the recall."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from memory.branch_origins import Inactive
from memory.embeddings import HashEmbedder
from memory.episodic.base import EpisodicEvent
from memory.episodic.lance import LanceEpisodicStore
from memory.service import MemoryService


def service(tmp_path: Path) -> MemoryService:
    return MemoryService(tmp_path, episodic=LanceEpisodicStore(tmp_path / "episodic.lance", HashEmbedder()))


def task(text: str, thread_id: str, origin: str) -> EpisodicEvent:
    meta = {"thread_id": thread_id, "origin_message_id": origin, "outcome": "completed"}
    return EpisodicEvent(user_id="u", kind="task", text=text, confidence=0.9, evidence="direct", metadata=meta)


async def test_the_search_runs_beside_the_branch_sync(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    mem = service(tmp_path)
    await mem.episodic.add(task("completed task: Write the quarterly sales report.; tools: make_report", "t1", "m1"))
    # this session's, written by a message no longer on its branch: filtered out after the search
    await mem.episodic.add(task("completed task: Draft the quarterly sales report.; tools: draft", "t2", "gone"))
    searching = asyncio.Event()
    search = mem.episodic.search
    sync = mem.origins.sync
    overlapped: list[bool] = []

    async def watched_search(*args: Any, **kwargs: Any) -> Any:
        searching.set()
        return await search(*args, **kwargs)

    async def slow_sync(thread_id: str, active: set[str]) -> Inactive:
        try:  # the search starts while the sync is still running
            await asyncio.wait_for(searching.wait(), 2.0)
            overlapped.append(True)
        except TimeoutError:
            overlapped.append(False)
        return await sync(thread_id, active)

    monkeypatch.setattr(mem.episodic, "search", watched_search)
    monkeypatch.setattr(mem.origins, "sync", slow_sync)
    try:
        block = await mem.recall_for_turn(
            "u", "t2", "write the quarterly sales report", visible_origins={"now"}, sync_branch=True
        )
        assert overlapped == [True]
        assert any("Write the quarterly sales report" in line for line in block.lines)
        assert not any("Draft the quarterly" in line for line in block.lines)
    finally:
        await mem.aclose()


async def test_a_failed_search_leaves_the_episodes_out(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    mem = service(tmp_path)
    await mem.write_plan(mem.plan_turn("u", "t1", "I prefer PDF reports.", "ok", [], None, []))

    async def broken(*args: Any, **kwargs: Any) -> Any:
        raise OSError("episodic store unreadable")

    monkeypatch.setattr(mem.episodic, "search", broken)
    try:
        block = await mem.recall_for_turn(
            "u", "t2", "write the monthly report", visible_origins=set(), sync_branch=True
        )
        assert any("pdf" in line.casefold() for line in block.lines)  # the facts are still there
    finally:
        await mem.aclose()
