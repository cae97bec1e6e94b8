"""Tool ranking is safe in the event loop of ``langgraph dev`` (blockbuster: a blocking call
there is a BlockingError): the first ranking of a fresh process — where bm25s's progress bars
would create a multiprocessing lock — blocks nothing."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]

SCRIPT = textwrap.dedent("""
    import asyncio
    from blockbuster import BlockBuster
    from tools.selection import rank_tools
    from tools.spec import ToolSpec

    topics = ["weather forecasts", "invoice totals", "sales reports", "calendar events", "file uploads"]
    specs = [ToolSpec(name=f"tool_{i}", description=f"Works with {t}: looks them up and lists them for you.",
                      parameters={"type": "object", "properties": {}}) for i, t in enumerate(topics)]

    async def main():
        bb = BlockBuster(excluded_modules=[])
        bb.activate()
        try:
            ranked = rank_tools(specs, "last month's sales reports")
        finally:
            bb.deactivate()
        print(ranked[0][1].name)

    asyncio.run(main())
""")


def test_the_first_ranking_in_a_fresh_process_blocks_nothing_in_the_event_loop():
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT], cwd=ROOT, capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["tool_2"]
