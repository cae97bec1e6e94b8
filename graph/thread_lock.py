"""One turn per thread at a time, across processes: an ``flock`` on
``<data_dir>/locks/<thread>.lock`` held for the turn (``graph.runner``)."""

from __future__ import annotations

import asyncio
import fcntl
import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path


class ThreadBusyError(RuntimeError):
    """Another process is running a turn on the same thread."""


def _lock_name(thread_id: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in thread_id)[:100] or "_"


@asynccontextmanager
async def thread_lock(data_dir: Path, thread_id: str) -> AsyncIterator[None]:
    """Hold ``<data_dir>/locks/<thread>.lock`` (``flock``) for a turn: two processes on one thread
    would interleave their messages and lose an answer. Raises :class:`ThreadBusyError`."""
    path = data_dir / "locks" / f"{_lock_name(thread_id)}.lock"

    def acquire() -> int:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise ThreadBusyError(
                f"thread {thread_id!r} is busy: another hermes process is running a turn on it. "
                "Wait for it to finish, or use another --thread."
            ) from None
        return fd

    fd = await asyncio.to_thread(acquire)
    try:
        yield
    finally:
        os.close(fd)  # closing releases the lock
