"""tools.mcp.progress: the sink rides a context variable, runs in its installer's context, nests,
and a failing sink never raises (DESIGN §3)."""

from __future__ import annotations

import asyncio
import contextvars

from tools.mcp.progress import ProgressEvent, current_sink, emit, progress_to

RUN = contextvars.ContextVar("run", default="none")


def _event(progress: float) -> ProgressEvent:
    return ProgressEvent(
        type="mcp_progress", server="s", tool="t", request_id="r", progress=progress, total=None, message=None
    )


async def test_sink_runs_in_the_context_it_was_installed_in():
    seen: list[tuple[float, str]] = []
    RUN.set("node")
    with progress_to(lambda e: seen.append((e["progress"], RUN.get()))):
        sink = current_sink()

        async def reader() -> None:  # like the SDK's receive loop: another task, another context
            RUN.set("reader")
            emit(sink, _event(1))

        await asyncio.get_running_loop().create_task(reader(), context=contextvars.Context())
    assert seen == [(1, "node")]
    assert current_sink() is None


def test_nesting_and_failures():
    outer: list[float] = []
    with progress_to(lambda e: outer.append(e["progress"])):
        with progress_to(None):
            assert current_sink() is None
        emit(current_sink(), _event(2))
        with progress_to(lambda e: 1 / 0):
            emit(current_sink(), _event(3))  # logged, not raised
    assert outer == [2]
    emit(None, _event(4))
