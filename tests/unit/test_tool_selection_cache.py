"""Tool ranking builds one BM25 index per distinct tool list and reuses it (issue 19: a turn
ranks the same tools on every model call); a changed name or description is a new list."""

from __future__ import annotations

import bm25s
import pytest
from cachetools import LRUCache

from tools import selection
from tools.selection import rank_tools
from tools.spec import ToolSpec

P = {"type": "object", "properties": {}}


def spec(name: str, description: str) -> ToolSpec:
    return ToolSpec(name=name, description=description, parameters=P)


@pytest.fixture
def builds(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Counts BM25 indexes built (a fresh cache for the test)."""
    count: list[int] = []
    real = bm25s.BM25

    def counting(*args: object, **kwargs: object) -> object:
        count.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(bm25s, "BM25", counting)
    monkeypatch.setattr(selection, "_indexes", LRUCache(selection.INDEX_CACHE_SIZE))
    return count


def test_same_tools_ranked_again_reuse_the_index(builds: list[int]) -> None:
    specs = [spec("send_report", "Send the report by mail."), spec("read_notes", "Read the user's notes.")]
    first = rank_tools(specs, "send the report")
    again = rank_tools(list(specs), "read my notes")  # another query, the same tools
    assert len(builds) == 1
    assert [s.name for _, s in first] == ["send_report", "read_notes"]
    assert [s.name for _, s in again] == ["read_notes", "send_report"]


def test_a_changed_description_is_ranked_on_a_fresh_index(builds: list[int]) -> None:
    before = [spec("alpha", "Read the user's notes."), spec("beta", "Send the report by mail.")]
    after = [spec("alpha", "Send the weekly report."), spec("beta", "Read the user's notes.")]
    assert rank_tools(before, "send report")[0][1].name == "beta"
    assert rank_tools(after, "send report")[0][1].name == "alpha"
    assert len(builds) == 2
