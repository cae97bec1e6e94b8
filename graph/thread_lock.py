"""One turn per thread at a time, across processes (``graph.runner`` holds it for the turn):

* **SQLite** (``HERMES_POSTGRES_URL`` unset): an ``flock`` on ``<data_dir>/locks/<thread>.lock``
  — the processes that share the data directory's checkpoint file share its disk.
* **PostgreSQL** (the setting names a database; issue 22): a session advisory lock keyed by
  the thread id (:func:`lock_key`), taken with ``pg_try_advisory_lock`` on a connection of its
  own held for the turn. Every process on every host that keeps its checkpoints in that
  database sees it, whatever its data directory. Its liveness is the session's, as for the
  ledger's leases (``tools.ledger_postgres``): a process that dies (kill -9 included) ends its
  session and the server frees the lock at once; a host lost without closing its sockets is
  found by the session's TCP keepalives (about 25 s). Needs a direct connection or a pooler in
  session mode, as the ledger does. A restart of the server ends the session, and so the lock:
  the turn in progress goes on without it (its checkpoints reconnect), and another turn on the
  thread started meanwhile is not refused.

Neither covers the LangGraph server's own runs, which its runtime serialises per thread.
"""

from __future__ import annotations

import asyncio
import fcntl
import hashlib
import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path


class ThreadBusyError(RuntimeError):
    """Another process is running a turn on the same thread."""


def _lock_name(thread_id: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in thread_id)[:100] or "_"


def lock_key(thread_id: str) -> int:
    """The signed 64-bit advisory lock key of a thread (BLAKE2b of ``hermes-thread:<id>``: apart
    from the other advisory keys Hermes uses; two threads share a key with odds of 2**-64)."""
    digest = hashlib.blake2b(f"hermes-thread:{thread_id}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big", signed=True)


def _busy(thread_id: str, where: str) -> ThreadBusyError:
    return ThreadBusyError(
        f"thread {thread_id!r} is busy: another hermes process{where} is running a turn on it. "
        "Wait for it to finish, or use another --thread."
    )


@asynccontextmanager
async def thread_lock(data_dir: Path, thread_id: str, postgres_url: str = "") -> AsyncIterator[None]:
    """Hold the thread's lock for a turn: two processes on one thread would interleave their
    messages and lose an answer. ``postgres_url`` empty: ``<data_dir>/locks/<thread>.lock``;
    else the advisory lock in that database (module docstring). Raises
    :class:`ThreadBusyError`, and ``graph.postgres.PostgresUnavailable`` when the database
    cannot be reached."""
    if postgres_url:
        async with _postgres_lock(postgres_url, thread_id):
            yield
        return
    path = data_dir / "locks" / f"{_lock_name(thread_id)}.lock"

    def acquire() -> int:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise _busy(thread_id, "") from None
        return fd

    fd = await asyncio.to_thread(acquire)
    try:
        yield
    finally:
        os.close(fd)  # closing releases the lock


@asynccontextmanager
async def _postgres_lock(url: str, thread_id: str) -> AsyncIterator[None]:
    import psycopg  # only when the setting names a database

    from base.postgres_urls import connection_error
    from graph.postgres import CONNECT_TIMEOUT_S, PostgresUnavailable
    from tools.ledger_postgres import KEEPALIVE_COUNT, KEEPALIVE_IDLE_S, KEEPALIVE_INTERVAL_S

    try:
        conn = await psycopg.AsyncConnection.connect(
            url, autocommit=True, connect_timeout=int(CONNECT_TIMEOUT_S), prepare_threshold=None
        )
    except psycopg.OperationalError as exc:
        raise PostgresUnavailable(connection_error(exc, url, "the thread lock")) from exc
    try:
        # a lost host's lock is freed once the server's keepalive probes go unanswered
        await conn.execute(f"SET tcp_keepalives_idle = {KEEPALIVE_IDLE_S}")
        await conn.execute(f"SET tcp_keepalives_interval = {KEEPALIVE_INTERVAL_S}")
        await conn.execute(f"SET tcp_keepalives_count = {KEEPALIVE_COUNT}")
        cur = await conn.execute("SELECT pg_try_advisory_lock(%s)", (lock_key(thread_id),))
        row = await cur.fetchone()
        if not (row and row[0]):
            raise _busy(thread_id, " (on this or another machine using HERMES_POSTGRES_URL)")
        yield
    finally:
        await conn.close()  # the session ends: the server frees its advisory lock
