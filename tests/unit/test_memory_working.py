"""WorkingMemory: per-session TTL cache (seed §4.1)."""

from __future__ import annotations

import pytest

from memory.service import MemoryService
from memory.working import WorkingMemory


class Clock:
    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


def test_items_expire_after_ttl():
    clock = Clock()
    wm = WorkingMemory(ttl_seconds=10, timer=clock)
    wm.set("style", "concise this time")
    clock.t = 9.9
    assert wm.get("style") == "concise this time"
    clock.t = 10.1
    assert wm.get("style") is None
    assert "style" not in wm and len(wm) == 0


def test_set_restarts_ttl_and_items_lists_live_only():
    clock = Clock()
    wm = WorkingMemory(ttl_seconds=10, timer=clock)
    wm.set("a", 1)
    clock.t = 5
    wm.set("b", 2)
    clock.t = 12
    assert wm.items() == [("b", 2)]
    assert list(wm) == ["b"]


def test_clear_and_invalid_ttl():
    wm = WorkingMemory(ttl_seconds=60)
    wm.set("a", 1)
    wm.clear()
    assert len(wm) == 0
    with pytest.raises(ValueError):
        WorkingMemory(ttl_seconds=0)


def test_service_keeps_one_working_memory_per_session_and_clears_at_end(tmp_path):
    mem = MemoryService(tmp_path)
    mem.working("t1").set("style", "concise")
    assert mem.working("t1").get("style") == "concise"
    assert mem.working("t2").get("style") is None
    held = mem.working("t1")
    mem.end_session("t1")
    assert len(held) == 0 and mem.working("t1").get("style") is None
    mem.end_session("never-started")  # no error
