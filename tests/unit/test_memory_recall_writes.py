"""Recall reads only; the use of the facts it showed is recorded with the turn's background
write (``MemoryService.flush_touches``), so the recall path holds no write lock."""

from __future__ import annotations

from memory.embeddings import HashEmbedder
from memory.episodic.lance import LanceEpisodicStore
from memory.service import MemoryService


async def test_recall_defers_the_use_count_to_the_next_write(tmp_path):
    mem = MemoryService(tmp_path, episodic=LanceEpisodicStore(tmp_path / "episodic.lance", HashEmbedder()))
    await mem.write_plan(mem.plan_turn("u", "t", "I prefer PDF reports.", "ok", [], None, []))
    (fact,) = await mem.semantic.facts("u")
    assert fact.use_count == 0
    block = await mem.recall_for_turn("u", "t2", "write the monthly report")
    assert any("pdf" in line for line in block.lines)
    assert (await mem.semantic.facts("u"))[0].use_count == 0  # nothing written by recall
    await mem.write_plan(mem.plan_turn("u", "t2", "write the monthly report", "ok", [], None, []))
    used = (await mem.semantic.facts("u"))[0]
    assert used.use_count == 1 and used.last_used_at is not None
    await mem.recall_for_turn("u", "t3", "write the monthly report")
    await mem.aclose()  # the session's end records what is left
    again = MemoryService(tmp_path, episodic=LanceEpisodicStore(tmp_path / "episodic.lance", HashEmbedder()))
    assert (await again.semantic.facts("u"))[0].use_count == 2
    await again.aclose()
