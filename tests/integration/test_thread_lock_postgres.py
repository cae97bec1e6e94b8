"""One turn per thread at a time across hosts (``graph.thread_lock`` on ``HERMES_POSTGRES_URL``;
issue 22): processes with different data directories on one PostgreSQL (the pgserver of the
package) share each thread's lock — a second turn on a busy thread is refused, another thread is
not, the lock is free again after the turn, and a holder killed with kill -9 frees it."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time

import pytest
from langchain_core.messages import AIMessage

from graph.postgres import PostgresUnavailable
from graph.runner import ThreadBusyError, run_turn
from graph.thread_lock import thread_lock

pytestmark = pytest.mark.slow  # PostgreSQL starts for the session; a holder process

HOLDER = """
import asyncio, sys
from pathlib import Path
from graph.thread_lock import thread_lock

async def main():
    async with thread_lock(Path(sys.argv[1]), "T", sys.argv[2]):
        print("held", flush=True)
        await asyncio.sleep(3600)

asyncio.run(main())
"""


async def test_two_data_directories_on_one_database_share_each_threads_lock(scripted, tmp_path, postgres_url):
    ctx = scripted([AIMessage("hello"), AIMessage("again")])
    here = ctx.model_copy(update={"postgres_url": postgres_url, "data_dir": str(tmp_path / "host-a")})
    async with thread_lock(tmp_path / "host-b", "T", postgres_url):
        with pytest.raises(ThreadBusyError, match="thread 'T' is busy"):
            await run_turn("hi", here, "T", quiet=True)  # another data directory: its own lock files
        async with thread_lock(tmp_path / "host-a", "U", postgres_url):  # another thread: free
            pass
    assert (await run_turn("hi", here, "T", quiet=True))["answer"] == "hello"  # free again
    async with thread_lock(tmp_path / "host-b", "T", postgres_url):  # the turn let it go
        pass


async def test_a_holder_killed_mid_turn_frees_the_lock(tmp_path, postgres_url):
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(tmp_path / "host-b"), postgres_url],
        stdout=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        with pytest.raises(ThreadBusyError):
            async with thread_lock(tmp_path / "host-a", "T", postgres_url):
                pass
        os.kill(holder.pid, signal.SIGKILL)
        holder.wait()
        # the server ends the dead process's session (its socket closed): waited for, not timed
        deadline = time.monotonic() + 60
        while True:
            try:
                async with thread_lock(tmp_path / "host-a", "T", postgres_url):
                    break
            except ThreadBusyError:
                if time.monotonic() > deadline:
                    raise
                await asyncio.sleep(0.2)
    finally:
        if holder.poll() is None:
            holder.kill()
            holder.wait()


async def test_an_unreachable_database_is_one_clear_error_without_the_password(tmp_path):
    url = f"postgresql://hermes:s3cret@/hermes?host={tmp_path / 'no-server-here'}"
    with pytest.raises(PostgresUnavailable) as caught:
        async with thread_lock(tmp_path, "T", url):
            pass
    assert "HERMES_POSTGRES_URL" in str(caught.value) and "s3cret" not in str(caught.value)
