"""Ctrl-C closes a command without waiting the full drain for its background writes
(``graph/cli/common.py: guarded, aclose_opened``): a memory write is held durably before its slow
part, so the next process replays what is cut off. Measured: ``hermes serve`` still running 30 s
after Ctrl-C on a loaded machine, while the drain waited up to 30 s for a passage embedding."""

from __future__ import annotations

import asyncio

import pytest

from graph import resources
from graph.cli import common


def test_an_interrupted_command_drains_briefly_and_a_finished_one_fully(monkeypatch: pytest.MonkeyPatch):
    timeouts: list[float] = []

    async def record(drain_timeout_s: float = 30.0) -> None:
        timeouts.append(drain_timeout_s)

    monkeypatch.setattr(resources, "aclose_resources", record)

    async def interrupted() -> None:
        task = asyncio.ensure_future(common.guarded(lambda: asyncio.sleep(3600)))
        await asyncio.sleep(0)
        task.cancel()  # what asyncio.run does to the main task on Ctrl-C
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(interrupted())
    asyncio.run(common.guarded(lambda: asyncio.sleep(0)))
    assert timeouts == [common.INTERRUPTED_DRAIN_S, 30.0]


def test_the_drain_returns_at_its_bound_and_leaves_the_write_to_the_next_process():
    async def main() -> bool:
        never = resources.run_in_background(asyncio.Event().wait(), "held write")
        await resources.drain_background(0.05)
        pending = not never.done()
        never.cancel()
        return pending

    assert asyncio.run(main())
