"""The LanceDB store opens its table once per event loop even when a recall's two halves ask
for it at the same time on first use: two concurrent openings of a new folder raced creating
its indexes and failed that recall as "cannot be read" (seen in bench_overhead, issue 19)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from memory.embeddings import HashEmbedder
from memory.episodic.lance import LanceEpisodicStore
from memory.episodic.lance_table import open_table


async def test_concurrent_first_searches_open_the_table_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    opened: list[Path] = []

    async def slow_open(path: Path, embedder: Any) -> Any:
        opened.append(path)
        await asyncio.sleep(0.05)  # the other search arrives while this one is opening
        return await open_table(path, embedder)

    monkeypatch.setattr("memory.episodic.lance.open_table", slow_open)
    store = LanceEpisodicStore(tmp_path / "episodic.lance", HashEmbedder())
    try:
        hits = await asyncio.gather(store.search("u1", "weekly report"), store.search("u1", "sales figures"))
        assert hits == [[], []]
        assert len(opened) == 1
    finally:
        await store.close()
