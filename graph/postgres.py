"""Checkpoints on PostgreSQL (``HERMES_POSTGRES_URL``; issue 22, first capability).

When the setting is not empty, :func:`graph.checkpoints.open_checkpointer` and
:func:`graph.checkpoints.server_checkpointer` yield a :class:`HermesPostgresSaver` from here
instead of the SQLite file: LangGraph's ``AsyncPostgresSaver`` (langgraph-checkpoint-postgres
3.2.0, tables ``checkpoints``, ``checkpoint_blobs``, ``checkpoint_writes``,
``checkpoint_migrations``, created by ``setup()``) on a psycopg connection pool, plus what the
SQLite saver adds where it applies to a database server:

* ``adelete_for_runs`` (the LangGraph server calls it for ``multitask_strategy="rollback"``;
  the stock saver lacks it). ``aprune`` is the stock one (``"keep_latest"`` / ``"delete"``).
* ``adelete_thread`` with ``mirror_dir`` also moves the thread's plain-text mirror aside, as
  on SQLite, so that ``hermes run --thread X`` on this machine does not rebuild a thread that
  was deleted through the API.
* **No recovery inside the saver.** Rebuilding from ``<data_dir>/mirror/`` exists for a SQLite
  file that was damaged, replaced or lost with its disk. A PostgreSQL server is durable on its
  own (WAL, its backups and replicas), and its workers run on many machines, each with a
  mirror of only the turns it ran, so none of them is the thread's whole record. The CLI's
  ``graph.recovery.ensure_readable`` still runs before each turn (a head that cannot be
  deserialised is rebuilt from this machine's mirror, with the notice printed).
* **No lock retry.** SQLite's "database is locked" has no Postgres counterpart for these
  writes (row locks wait; each statement commits on its own, ``autocommit``). A connection
  broken by a restarted server is replaced: the pool checks each connection before lending it
  (``AsyncConnectionPool.check_connection``).
* **A server that stays down fails the turn once, not once per write.** A statement that gets
  no connection within :data:`CONNECTION_WAIT_S` raises :class:`PostgresUnavailable`, and for
  :data:`DOWN_FOR_S` seconds after that every other wait for a connection of the pool fails at
  once: the saver runs its statements one at a time (its lock), so the checkpoint writes a turn
  has queued would each wait the full time, one after the other (measured: a ``hermes run``
  whose server was stopped mid-turn exited 304 s later, with psycopg's ``PoolTimeout``).

A URL the server does not answer is :class:`PostgresUnavailable`, which names the setting and
the URL without its password.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator, Iterable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import tenacity
from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
from psycopg import AsyncConnection
from psycopg.rows import DictRow, dict_row
from psycopg_pool import AsyncConnectionPool, PoolTimeout

from base.postgres_urls import redacted
from graph.mirror import ThreadMirror

#: Seconds to wait for the first connection before :class:`PostgresUnavailable`.
CONNECT_TIMEOUT_S = 10.0
#: Key of the session advisory lock that serialises ``setup()`` (tables and migrations) among
#: processes starting at once on a new database: concurrent ``CREATE TABLE IF NOT EXISTS``
#: statements of two sessions can fail with ``UniqueViolation`` on ``pg_type``.
SETUP_LOCK_KEY = 0x4845524D4553  # "HERMES"
#: Seconds a process waits for another's ``setup()`` of the same database before ``TimeoutError``.
SETUP_WAIT_S = 120.0
#: Connections of one process's pool (the server runs a run's tasks concurrently; the CLI
#: needs one). Each ``hermes`` process and each server worker has its own pool.
POOL_MAX_SIZE = 8
#: Seconds a statement waits for a connection of the pool (psycopg's default) before
#: :class:`PostgresUnavailable`.
CONNECTION_WAIT_S = 30.0
#: Seconds after such a timeout during which the pool's other waits fail at once (the server is
#: down; a restart that takes less than :data:`CONNECTION_WAIT_S` never starts this).
DOWN_FOR_S = 30.0


class _SetupBusy(TimeoutError):
    """Another session holds :data:`SETUP_LOCK_KEY` (retried until :data:`SETUP_WAIT_S`)."""


class PostgresUnavailable(ConnectionError):
    """The PostgreSQL server of ``HERMES_POSTGRES_URL`` could not be reached in time (the
    message names the URL without its password and the cause)."""


class _FailFastPool(AsyncConnectionPool[Any]):
    """A pool whose waits for a connection fail at once for :data:`DOWN_FOR_S` seconds after
    one timed out (see the module docstring)."""

    down_until = 0.0

    async def getconn(self, timeout: float | None = None) -> Any:  # noqa: ASYNC109 - psycopg_pool's signature
        loop = asyncio.get_running_loop()
        if loop.time() < self.down_until:
            raise PoolTimeout("another wait for a connection timed out just before: the server is down")
        try:
            return await super().getconn(timeout)
        except PoolTimeout:
            self.down_until = loop.time() + DOWN_FOR_S
            raise


class HermesPostgresSaver(AsyncPostgresSaver):
    """``AsyncPostgresSaver`` plus ``adelete_for_runs`` and, with ``mirror_dir`` (a data
    directory), moving a deleted thread's mirror aside (see the module docstring)."""

    def __init__(self, conn: AsyncConnectionPool[AsyncConnection[DictRow]], *, mirror_dir: str | Path | None = None):
        super().__init__(conn)
        self.mirror = ThreadMirror(mirror_dir) if mirror_dir is not None else None

    async def setup(self) -> None:
        """``AsyncPostgresSaver.setup`` (tables, migrations) under a session advisory lock held
        on another pooled connection (:data:`SETUP_LOCK_KEY`), so that processes starting at
        once on a new database migrate it one after the other. The lock is polled
        (``pg_try_advisory_lock``), not waited for in a statement: a migration runs ``CREATE
        INDEX CONCURRENTLY``, which waits for every other session's running statement, so a
        waiter blocked in ``pg_advisory_lock`` would deadlock with the holder (measured: 8
        sessions' setups on a new database hung). Raises ``TimeoutError`` after
        :data:`SETUP_WAIT_S` seconds."""
        pool = self.conn
        assert isinstance(pool, AsyncConnectionPool)
        async with pool.connection() as holder:
            async for attempt in tenacity.AsyncRetrying(
                retry=tenacity.retry_if_exception_type(_SetupBusy),
                stop=tenacity.stop_after_delay(SETUP_WAIT_S),
                wait=tenacity.wait_random(0.05, 0.25),
                reraise=True,
            ):
                with attempt:
                    cur = await holder.execute("SELECT pg_try_advisory_lock(%s) AS got", (SETUP_LOCK_KEY,))
                    row = await cur.fetchone()
                    if not (row and row["got"]):
                        raise _SetupBusy(
                            f"another process has been setting up the checkpoint tables for {SETUP_WAIT_S:g} s"
                        )
            try:
                await super().setup()
            finally:
                await holder.execute("SELECT pg_advisory_unlock(%s)", (SETUP_LOCK_KEY,))

    @asynccontextmanager
    async def _cursor(self, *, pipeline: bool = False) -> AsyncIterator[Any]:
        """The stock saver's cursor; a wait for a connection that timed out is
        :class:`PostgresUnavailable`, naming the setting and the server."""
        entered = False
        try:
            async with super()._cursor(pipeline=pipeline) as cur:
                entered = True
                yield cur
        except PoolTimeout as exc:
            if entered:
                raise
            info = getattr(self.conn, "conninfo", None)
            where = redacted(info) if isinstance(info, str) else "its server"
            raise PostgresUnavailable(
                f"the checkpoints cannot be written or read: PostgreSQL at {where} (HERMES_POSTGRES_URL) gave "
                f"no connection within {CONNECTION_WAIT_S:g} s ({exc}). Check that the server runs; what was "
                "written before is kept, and the thread goes on from its last checkpoint."
            ) from exc

    async def adelete_thread(self, thread_id: str) -> None:
        """Delete the thread's checkpoints, blobs and writes; with a mirror, its mirror file is
        renamed to ``<file>.deleted``."""
        await super().adelete_thread(thread_id)
        if self.mirror is not None:
            await asyncio.to_thread(move_mirror_aside, self.mirror.path(str(thread_id)))

    async def adelete_for_runs(self, run_ids: Iterable[str]) -> None:
        """Delete the checkpoints whose metadata ``run_id`` is one of ``run_ids``, with their
        writes, in one transaction. Blobs stay: they are keyed by channel version and may be
        shared with the thread's other checkpoints (``aprune``/``adelete_thread`` remove them)."""
        ids = [str(r) for r in run_ids]
        if not ids:
            return
        async with self._cursor() as cur, cur.connection.transaction():
            await cur.execute(
                "DELETE FROM checkpoint_writes w USING checkpoints c WHERE c.metadata->>'run_id' = ANY(%s) "
                "AND w.thread_id = c.thread_id AND w.checkpoint_ns = c.checkpoint_ns "
                "AND w.checkpoint_id = c.checkpoint_id",
                (ids,),
            )
            await cur.execute("DELETE FROM checkpoints WHERE metadata->>'run_id' = ANY(%s)", (ids,))


def move_mirror_aside(path: Path) -> None:
    """Rename the mirror file ``path`` to ``<name>.deleted`` if it exists (a deleted thread is
    not rebuilt from it)."""
    if path.exists():
        os.replace(path, path.with_name(path.name + ".deleted"))


@asynccontextmanager
async def open_pool(url: str, *, max_size: int = POOL_MAX_SIZE) -> AsyncIterator[AsyncConnectionPool[Any]]:
    """``async with open_pool(url) as pool:`` a psycopg pool in the mode ``AsyncPostgresSaver``
    needs (autocommit, dict rows, no server-side prepared statements: safe behind PgBouncer),
    opened and checked; closed at the end. Raises :class:`PostgresUnavailable` when no
    connection is made within :data:`CONNECT_TIMEOUT_S`."""
    pool: AsyncConnectionPool[Any] = _FailFastPool(
        url,
        min_size=1,
        max_size=max_size,
        timeout=CONNECTION_WAIT_S,
        open=False,
        kwargs={"autocommit": True, "prepare_threshold": 0, "row_factory": dict_row},
        check=AsyncConnectionPool.check_connection,
        name="hermes-checkpoints",
    )
    try:
        await pool.open(wait=True, timeout=CONNECT_TIMEOUT_S)
    except PoolTimeout as exc:
        await pool.close()
        raise PostgresUnavailable(
            f"cannot connect to PostgreSQL at {redacted(url)} (HERMES_POSTGRES_URL) within "
            f"{CONNECT_TIMEOUT_S:g} s: is the server running and the URL right? Unset HERMES_POSTGRES_URL "
            "to use the data directory's SQLite file."
        ) from exc
    try:
        yield pool
    finally:
        await pool.close()


@asynccontextmanager
async def open_postgres_checkpointer(
    url: str, *, mirror_dir: str | Path | None = None
) -> AsyncIterator[HermesPostgresSaver]:
    """``async with open_postgres_checkpointer(url) as saver:`` a :class:`HermesPostgresSaver`
    on a pool to ``url`` (a libpq URL, e.g. ``postgresql://user@host:5432/db``; the password
    may come from ``PGPASSWORD`` or ``~/.pgpass`` instead of the URL), its tables created or
    migrated (``setup()``). Raises :class:`PostgresUnavailable`."""
    async with open_pool(url) as pool:
        saver = HermesPostgresSaver(pool, mirror_dir=mirror_dir)
        await saver.setup()
        yield saver


__all__ = [
    "CONNECTION_WAIT_S",
    "CONNECT_TIMEOUT_S",
    "DOWN_FOR_S",
    "POOL_MAX_SIZE",
    "SETUP_LOCK_KEY",
    "SETUP_WAIT_S",
    "HermesPostgresSaver",
    "PostgresUnavailable",
    "move_mirror_aside",
    "open_pool",
    "open_postgres_checkpointer",
]
