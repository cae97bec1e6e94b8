"""The SQLite checkpoint file, opened one way for the CLI, the tests and ``langgraph dev``.

:func:`open_checkpointer` opens ``<data_dir>/checkpoints.sqlite`` for several processes at once
(seed: one data directory, many ``hermes`` processes and a server): the aiosqlite connection
(:func:`base.sqlite_files.open_aiosqlite`, the one opener of shared SQLite files) gets a 30 s
busy timeout (``BUSY_TIMEOUT_S``: a writer waits for another's lock instead of failing with
"database is locked"), WAL journal (readers never block the writer; the saver's own
``setup()`` also runs ``PRAGMA journal_mode=WAL``, which is then a no-op) and
``synchronous=NORMAL`` (a committed checkpoint survives a crash of the process; the last
transactions may be lost on a power cut). Switching a *new* file to WAL needs the file to
itself, so when several processes create it at once the switch is retried until the deadline.

It yields a :class:`HermesSqliteSaver` — ``AsyncSqliteSaver`` (langgraph-checkpoint-sqlite
3.1.2) plus:

* ``mirror_dir`` given (the server): **recovery inside the saver** (``graph.recovery``). When
  the thread's head checkpoint cannot be deserialised, or the file has no record of a thread
  whose plain-text mirror exists (the checkpoint file was replaced or moved aside),
  :meth:`~HermesSqliteSaver.aget_tuple` rebuilds the thread from
  ``<mirror_dir>/mirror/<thread>.jsonl`` as a new root checkpoint (with a notice message in
  the state) and returns that. :meth:`~HermesSqliteSaver.alist` skips unreadable checkpoints
  instead of failing the whole listing, so the thread's history still loads (Studio).
  ``adelete_thread`` also moves the thread's mirror aside (a deleted thread is not rebuilt).
  Without ``mirror_dir`` (the CLI, which runs ``graph.recovery.ensure_readable`` itself and
  prints the notice) it reads and lists exactly like ``AsyncSqliteSaver``.
* ``adelete_for_runs`` and ``aprune`` (the server calls them for ``multitask_strategy=
  "rollback"`` and history pruning; the stock saver lacks them).
* **Writes retried on a transient lock** (:func:`retry_locked`): the busy timeout covers a
  writer waiting for another's lock, but SQLite returns ``SQLITE_BUSY`` at once, without
  waiting, in some WAL cases (a read snapshot that went stale before its write, a WAL being
  recovered or reset by another process). On a busy machine with many ``hermes`` processes
  that lost whole turns ("database is locked" in ``aput``, issue 23). Every write of the saver
  (``setup``, ``aput``, ``aput_writes``, deletes, prune) rolls its transaction back and is
  retried with jittered exponential backoff for up to ``LOCK_RETRY_S`` seconds; then the error
  is raised (the run stops with it; nothing it wrote before is lost).

:func:`server_checkpointer` is the ``langgraph.json`` ``checkpointer.path`` target: the same
file as the CLI (``<HERMES_DATA_DIR or .hermes>/checkpoints.sqlite``), recovery on.

**PostgreSQL instead** (``Context.postgres_url``, env ``HERMES_POSTGRES_URL``, not empty): both
:func:`open_checkpointer` (the CLI, the runner, the reminders graph) and
:func:`server_checkpointer` yield ``graph.postgres.HermesPostgresSaver`` on that database and
never touch the SQLite file; what carries over and what does not is in ``graph/postgres.py``
(no recovery inside the saver, no lock retry; ``adelete_for_runs`` and ``aprune`` yes).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import random
import sqlite3
from collections.abc import AsyncGenerator, AsyncIterator, Iterable, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import aiosqlite
import tenacity
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
    get_checkpoint_id,
)
from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver
from langgraph.checkpoint.sqlite.utils import search_where
from langgraph.graph import StateGraph

from base.sqlite_files import BUSY_TIMEOUT_S, open_aiosqlite
from base.sqlite_files import is_locked as is_transient_lock
from graph.builder import builder as agent_builder
from graph.context import Context
from graph.mirror import ThreadMirror
from graph.recovery import RecoveryError, RecoveryReport, check_shape, is_data_error, rebuild_from_mirror

if TYPE_CHECKING:  # psycopg is imported only when the setting asks for PostgreSQL
    from graph.postgres import HermesPostgresSaver

log = logging.getLogger(__name__)

#: File name of the checkpoint database inside a data directory.
CHECKPOINTS_FILE = "checkpoints.sqlite"
#: Seconds a saver write is retried after SQLite answered "database is locked" / "busy" at once
#: (see the module docstring); first pause 0.05 s, doubling, jittered, at most 2 s each.
LOCK_RETRY_S = 60.0


def retry_locked(conn: aiosqlite.Connection, lock: asyncio.Lock, what: str) -> tenacity.AsyncRetrying:
    """``async for attempt in retry_locked(conn, lock, "aput"): with attempt: ...``: retries the
    block on :func:`is_transient_lock` errors for up to :data:`LOCK_RETRY_S` s, rolling back the
    connection's open transaction before each new attempt (a failed statement can leave the
    implicit ``BEGIN`` of Python's sqlite3 open). ``lock`` is the saver's connection lock, held
    for the rollback so that no other task's transaction on the shared connection is undone.
    Raises the last error when time is up."""

    async def rollback(state: tenacity.RetryCallState) -> None:
        outcome = state.outcome.exception() if state.outcome else None
        await _rolled_back(conn, lock, what, outcome, state.attempt_number)

    return tenacity.AsyncRetrying(
        retry=tenacity.retry_if_exception(is_transient_lock),
        stop=tenacity.stop_after_delay(LOCK_RETRY_S),
        wait=tenacity.wait_exponential_jitter(initial=0.05, max=2.0),
        before_sleep=rollback,
        reraise=True,
    )


async def _rolled_back(conn: aiosqlite.Connection, lock: asyncio.Lock, what: str, error: Any, attempt: int) -> None:
    log.warning("checkpoints: %s hit a lock (%s); retry %d", what, error, attempt)
    async with lock:
        with contextlib.suppress(sqlite3.Error):  # nothing open, or the connection is gone: the retry says which
            await conn.rollback()


async def write_retrying(conn: aiosqlite.Connection, lock: asyncio.Lock, what: str, write: Any) -> Any:
    """``await write()`` (a saver write) retried as :func:`retry_locked` says. The first attempt
    runs outside tenacity, whose per-call setup cost ~2 % of a turn's CPU at 21 writes a turn
    (bench_overhead, issue 19); only a transient lock error enters the retry loop, after the same
    rollback and first pause (0.05 s + up to 1 s of jitter)."""
    try:
        return await write()
    except Exception as exc:
        if not is_transient_lock(exc):
            raise
        await _rolled_back(conn, lock, what, exc, 1)
    await asyncio.sleep(min(2.0, 0.05 + random.random()))  # jitter: writers out of lockstep
    async for attempt in retry_locked(conn, lock, what):
        with attempt:
            return await write()
    raise AssertionError("unreachable: tenacity returns or raises")  # pragma: no cover


def checkpoints_file(data_dir: str | Path) -> Path:
    """``<data_dir>/checkpoints.sqlite``."""
    return Path(data_dir) / CHECKPOINTS_FILE


async def connect(path: str | Path, busy_timeout_s: float = BUSY_TIMEOUT_S) -> aiosqlite.Connection:
    """An aiosqlite connection to ``path`` (its directory is created) with busy timeout, WAL
    and ``synchronous=NORMAL`` (:func:`base.sqlite_files.open_aiosqlite`). The isolation level
    stays implicit transactions, which is what ``AsyncSqliteSaver`` expects (it commits after
    each write)."""
    return await open_aiosqlite(path, autocommit=False, synchronous="NORMAL", busy_timeout_s=busy_timeout_s)


class HermesSqliteSaver(AsyncSqliteSaver):
    """``AsyncSqliteSaver`` with recovery from the plain-text mirror (when ``mirror_dir`` is
    given), a listing that survives unreadable rows (same condition), ``adelete_for_runs`` and
    ``aprune``. ``builder``: the ``StateGraph`` whose state a rebuilt checkpoint holds (default:
    the agent graph). ``recoveries``: the reports of the rebuilds this saver did, oldest first."""

    def __init__(
        self,
        conn: aiosqlite.Connection,
        *,
        mirror_dir: str | Path | None = None,
        builder: StateGraph[Any, Any, Any, Any] | None = None,
        serde: Any = None,
    ) -> None:
        super().__init__(conn, serde=serde)
        self.mirror = ThreadMirror(mirror_dir) if mirror_dir is not None else None
        self.builder = builder if builder is not None else agent_builder
        self.recoveries: list[RecoveryReport] = []
        self._thread_locks: dict[str, asyncio.Lock] = {}

    # --- writes, retried on a transient lock ---------------------------------------------

    async def setup(self) -> None:
        """``AsyncSqliteSaver.setup`` (tables, WAL, the ``task_path`` migration), retried on a
        transient lock (:func:`retry_locked`)."""
        if self.is_setup:
            return
        async for attempt in retry_locked(self.conn, self.lock, "setup"):
            with attempt:
                await super().setup()

    async def aput(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        """``AsyncSqliteSaver.aput`` (one ``INSERT OR REPLACE``: repeating it is harmless),
        retried on a transient lock."""
        put = super().aput
        return cast(
            RunnableConfig,
            await write_retrying(self.conn, self.lock, "aput", lambda: put(config, checkpoint, metadata, new_versions)),
        )

    async def aput_writes(
        self, config: RunnableConfig, writes: Sequence[tuple[str, Any]], task_id: str, task_path: str = ""
    ) -> None:
        """``AsyncSqliteSaver.aput_writes`` (keyed rows, ``INSERT OR REPLACE``/``IGNORE``:
        repeating them is harmless), retried on a transient lock."""
        put = super().aput_writes
        await write_retrying(self.conn, self.lock, "aput_writes", lambda: put(config, writes, task_id, task_path))

    # --- recovery ------------------------------------------------------------------------

    async def _newest_id(self, thread_id: str, checkpoint_ns: str = "") -> str | None:
        await self.setup()
        async with (
            self.lock,
            self.conn.execute(
                "SELECT checkpoint_id FROM checkpoints WHERE thread_id = ? AND checkpoint_ns = ? "
                "ORDER BY checkpoint_id DESC LIMIT 1",
                (thread_id, checkpoint_ns),
            ) as cur,
        ):
            row = await cur.fetchone()
        return row[0] if row else None

    async def aget_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        """``AsyncSqliteSaver.aget_tuple``; with a mirror, a thread's head that cannot be read
        (asked for by thread id, or by the head's own id), or a thread without any checkpoint
        whose mirror holds messages, is rebuilt from the mirror first (``graph.recovery``)."""
        try:
            found = await super().aget_tuple(config)
            if found is not None and self.mirror is not None:
                check_shape(found)
        except Exception as exc:
            if self.mirror is None or not is_data_error(exc) or not await self._asks_for_head(config):
                raise
            return await self._recover(config, exc)
        if (
            found is None
            and self.mirror is not None
            and self._head_config(config)
            and (await self.mirror.read(str(config["configurable"]["thread_id"]))).messages
        ):
            return await self._recover(
                config, FileNotFoundError("the checkpoint database has no record of this thread")
            )
        return found

    @staticmethod
    def _head_config(config: RunnableConfig) -> bool:
        conf = config.get("configurable") or {}
        return bool(conf.get("thread_id")) and not conf.get("checkpoint_ns") and not get_checkpoint_id(config)

    async def _asks_for_head(self, config: RunnableConfig) -> bool:
        conf = config.get("configurable") or {}
        if conf.get("checkpoint_ns") or not conf.get("thread_id"):
            return False
        wanted = get_checkpoint_id(config)
        return not wanted or wanted == await self._newest_id(str(conf["thread_id"]))

    async def _recover(self, config: RunnableConfig, error: BaseException) -> CheckpointTuple | None:
        assert self.mirror is not None
        thread_id = str(config["configurable"]["thread_id"])
        head: RunnableConfig = {"configurable": {"thread_id": thread_id, "checkpoint_ns": ""}}
        lock = self._thread_locks.setdefault(thread_id, asyncio.Lock())
        async with lock:
            try:  # another task may have rebuilt it while this one waited
                again = await super().aget_tuple(head)
                if again is not None:
                    return check_shape(again)
            except Exception as exc:  # still unreadable: rebuild below
                if not is_data_error(exc):
                    raise
            try:
                report = await rebuild_from_mirror(
                    self,
                    self.builder,
                    self.mirror,
                    thread_id,
                    error,
                    notice_in_state=True,
                    read_head=super().aget_tuple,
                )
            except RecoveryError:
                if isinstance(error, FileNotFoundError):
                    return None  # nothing to rebuild: simply a new thread
                raise
        self.recoveries.append(report)
        log.warning("%s", report.notice())
        return await super().aget_tuple(head)

    async def alist(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,  # noqa: A002 - BaseCheckpointSaver.alist's keyword
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> AsyncIterator[CheckpointTuple]:
        """``AsyncSqliteSaver.alist``; with a mirror, a checkpoint that cannot be deserialised
        is left out (logged) instead of ending the listing with an error."""
        # an async generator (typed as an iterator): closed below
        listing = cast(
            AsyncGenerator[CheckpointTuple, None], super().alist(config, filter=filter, before=before, limit=limit)
        )
        yielded: set[str] = set()
        try:
            while True:
                try:
                    item = await anext(listing)
                    if self.mirror is not None:
                        check_shape(item)
                except StopAsyncIteration:
                    return
                except Exception as exc:
                    if self.mirror is None or not is_data_error(exc):
                        raise
                    break
                yielded.add(item.config["configurable"]["checkpoint_id"])
                yield item
        finally:
            await listing.aclose()  # releases the saver's lock (a consumer may stop early)
        # slow path: the ids in order, then each checkpoint on its own
        where, params = search_where(config, filter, before)
        async with (
            self.lock,
            self.conn.execute(
                f"SELECT thread_id, checkpoint_ns, checkpoint_id FROM checkpoints {where} ORDER BY checkpoint_id DESC",
                params,
            ) as cur,
        ):
            rows = await cur.fetchall()
        count = len(yielded)
        for thread_id, ns, cid in rows:
            if limit is not None and count >= limit:
                return
            if cid in yielded:
                continue
            one: RunnableConfig = {"configurable": {"thread_id": thread_id, "checkpoint_ns": ns, "checkpoint_id": cid}}
            try:
                found = await AsyncSqliteSaver.aget_tuple(self, one)
                if found is not None:
                    check_shape(found)
            except Exception as exc:
                if not is_data_error(exc):
                    raise
                log.warning(
                    "checkpoint %s of thread %r cannot be read (%s: %s); left out of the listing",
                    cid,
                    thread_id,
                    type(exc).__name__,
                    str(exc)[:120],
                )
                continue
            if found is not None:
                count += 1
                yield found

    async def adelete_thread(self, thread_id: str) -> None:
        """Delete the thread's checkpoints and writes; with a mirror, its mirror file is renamed
        to ``<file>.deleted`` so the thread is not rebuilt from it. Retried on a transient lock."""
        async for attempt in retry_locked(self.conn, self.lock, "adelete_thread"):
            with attempt:
                await super().adelete_thread(thread_id)
        if self.mirror is not None:
            path = self.mirror.path(str(thread_id))

            def move() -> None:
                if path.exists():
                    os.replace(path, path.with_name(path.name + ".deleted"))

            await asyncio.to_thread(move)

    # --- what the LangGraph server asks of a custom checkpointer ---------------------------

    async def adelete_for_runs(self, run_ids: Iterable[str]) -> None:
        """Delete the checkpoints (and their writes) whose metadata ``run_id`` is one of
        ``run_ids`` (``multitask_strategy="rollback"`` cleans up a cancelled run this way)."""
        ids = [str(r) for r in run_ids]
        if not ids:
            return
        await self.setup()
        marks = ",".join("?" * len(ids))
        match = f"json_extract(CAST(metadata AS TEXT), '$.run_id') IN ({marks})"
        async for attempt in retry_locked(self.conn, self.lock, "adelete_for_runs"):
            with attempt:
                async with self.lock:
                    await self.conn.execute(
                        "DELETE FROM writes WHERE (thread_id, checkpoint_ns, checkpoint_id) IN "
                        f"(SELECT thread_id, checkpoint_ns, checkpoint_id FROM checkpoints WHERE {match})",
                        ids,
                    )
                    await self.conn.execute(f"DELETE FROM checkpoints WHERE {match}", ids)
                    await self.conn.commit()

    async def aprune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        """``keep_latest``: keep only each namespace's newest checkpoint of the threads (and its
        writes); ``delete`` (``BaseCheckpointSaver.aprune``'s name, which the server's thread
        TTL sends) or ``delete_all`` (the server adapter's fallback name): delete the threads.
        Raises ``ValueError`` for another strategy."""
        if strategy in ("delete", "delete_all"):
            for tid in thread_ids:
                await self.adelete_thread(str(tid))
            return
        if strategy != "keep_latest":
            raise ValueError(f"unknown prune strategy {strategy!r}: use 'keep_latest' or 'delete'")
        await self.setup()
        keep = (
            "SELECT thread_id, checkpoint_ns, MAX(checkpoint_id) FROM checkpoints "
            "WHERE thread_id = ? GROUP BY thread_id, checkpoint_ns"
        )
        async for attempt in retry_locked(self.conn, self.lock, "aprune"):
            with attempt:
                async with self.lock:
                    for tid in thread_ids:
                        for table in ("writes", "checkpoints"):
                            await self.conn.execute(
                                f"DELETE FROM {table} WHERE thread_id = ? AND "
                                f"(thread_id, checkpoint_ns, checkpoint_id) NOT IN ({keep})",
                                (str(tid), str(tid)),
                            )
                    await self.conn.commit()


def postgres_url() -> str:
    """The checkpoint database setting (``Context.postgres_url``, env ``HERMES_POSTGRES_URL``):
    ``""`` = the data directory's SQLite file."""
    return Context().postgres_url


@asynccontextmanager
async def open_checkpointer(
    path: str | Path,
    *,
    mirror_dir: str | Path | None = None,
    builder: StateGraph[Any, Any, Any, Any] | None = None,
    postgres: str | None = None,
) -> AsyncIterator[HermesSqliteSaver | HermesPostgresSaver]:
    """``async with open_checkpointer(path) as saver:`` a :class:`HermesSqliteSaver` on the
    SQLite file ``path`` (created if missing) with busy timeout, WAL and ``synchronous=NORMAL``;
    the connection is closed at the end. ``mirror_dir`` (a data directory): recovery from its
    ``mirror/`` inside the saver (see the module docstring). Raises ``sqlite3.Error`` if the
    file cannot be used as a database.

    ``postgres``: a PostgreSQL URL; ``None`` = the setting (:func:`postgres_url`). Not empty:
    ``path`` is ignored and the saver is ``graph.postgres.HermesPostgresSaver`` on that
    database (``mirror_dir`` only moves a deleted thread's mirror aside; ``builder`` is unused:
    no recovery inside it). Raises ``graph.postgres.PostgresUnavailable``."""
    url = postgres_url() if postgres is None else postgres
    if url:
        from graph.postgres import open_postgres_checkpointer  # psycopg only when asked for

        async with open_postgres_checkpointer(url, mirror_dir=mirror_dir) as pg_saver:
            yield pg_saver
        return
    conn = await connect(path)
    try:
        saver = HermesSqliteSaver(conn, mirror_dir=mirror_dir, builder=builder)
        await saver.setup()
        yield saver
    finally:
        await conn.close()


@asynccontextmanager
async def server_checkpointer() -> AsyncIterator[HermesSqliteSaver | HermesPostgresSaver]:
    """``langgraph.json`` ``"checkpointer": {"path": "./graph/checkpoints.py:server_checkpointer"}``:
    the data directory's checkpoint file (``HERMES_DATA_DIR``, default ``.hermes`` relative to
    the server's working directory), shared with the CLI, recovery from the mirror on; with
    ``HERMES_POSTGRES_URL``, that PostgreSQL database (shared with every CLI and worker that
    names it)."""
    settings = Context()
    data_dir = settings.data_dir
    async with open_checkpointer(
        checkpoints_file(data_dir), mirror_dir=data_dir, postgres=settings.postgres_url
    ) as saver:
        if settings.postgres_url:
            from base.postgres_urls import redacted

            log.info("checkpoints: PostgreSQL %s (shared with the hermes CLI)", redacted(settings.postgres_url))
        else:
            log.info("checkpoints: %s (shared with the hermes CLI)", checkpoints_file(data_dir))
        yield saver


__all__ = [
    "BUSY_TIMEOUT_S",
    "CHECKPOINTS_FILE",
    "LOCK_RETRY_S",
    "HermesSqliteSaver",
    "checkpoints_file",
    "connect",
    "is_transient_lock",
    "open_checkpointer",
    "postgres_url",
    "retry_locked",
    "server_checkpointer",
]
