"""Idempotency ledger: ``request_id`` → recorded result, in SQLite (DESIGN §2.4;
seed §2.2: "the same request_id arriving again returns the previous result instead of repeating
the side effect"). The same ledger on PostgreSQL, shared by processes on many machines
(``HERMES_POSTGRES_URL``), is ``tools.ledger_postgres.PostgresLedger``;
:func:`tools.ledgers.open_ledger` chooses.

One row per ``(tool, request_id)`` in ``tool_requests``; the PRIMARY KEY is the claim. The
request id names what the call *means* (the caller derives it from thread, goal, tool and
canonical arguments), so a fork, a new model call id or a retry of the same request finds it.

* the first caller ``INSERT``s a ``running`` row (owner = host:pid:ledger) *before* the side
  effect runs — a crash mid-call leaves an "in flight" record, never a blank — then turns the
  row into ``done`` with the JSON record; a call that failed cleanly (``keep`` false, not
  ``uncertain``) deletes its claim, so it may be retried;
* a call whose outcome is unknown (it timed out or lost its transport after the request was
  sent: ``uncertain(record)``) is stored as ``unknown``: every later duplicate gets that record
  back and nothing runs again — the caller tells the user instead of guessing;
* a duplicate in the same process and event loop awaits the first caller's future (no database
  round trip, no second run) — 1,000 concurrent duplicates cost one run;
* a duplicate from another process (or another event loop, or after a restart, or a forked
  branch replaying the step) finds the row: ``done`` → the recorded result is returned;
  ``unknown`` → that record; ``running`` → it waits until the owner finishes. If the owner
  process is dead, a ``retry_safe`` call (read-only or idempotent tool) takes the claim over and
  runs; any other call turns the row into ``unknown`` ("the process running it died
  mid-call") and is not run again.

Every database access runs on the ledger's own single thread
(:class:`tools.sqlite_thread.SqliteThread`), never on the event loop (``langgraph dev`` raises
``BlockingError`` on blocking I/O). Operations queue in
order, so an expiry submitted without waiting still happens before any later lookup.

Why ``sqlite3`` on a thread and not ``aiosqlite`` (which ``memory/db.py`` uses): an aiosqlite
connection is the same design — one ``sqlite3`` connection on one worker thread, a queue — but
every call on it needs an event loop in the calling thread (it creates an asyncio future).
This ledger and :class:`tools.schema_versions.SchemaStore` are written to from synchronous code
that cannot await: ``ToolRegistry.register`` queues ``expire_nowait`` / ``record_nowait`` (and
may run with no event loop at all, e.g. in a test or a worker thread), and ``close()`` runs after
a server's loop has stopped; the same ledger also serves several event loops (the CLI's, a
server's, a test's). ``submit`` returns a ``concurrent.futures.Future`` for those callers and
``call`` awaits it from any loop. ``tools/`` may not import ``memory/`` (DESIGN §7.2), so the two
wrappers cannot share code.
``path=None`` keeps the ledger in memory (one process; used by registries built in tests).
WAL journal with ``synchronous=NORMAL``: a record survives a crash of the process, not
necessarily a power cut.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import json
import logging
import sqlite3
import threading
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, TypeVar

import tenacity
from cachetools import LRUCache

from tools.claim_owners import new_owner, owner_alive
from tools.errors import ToolError
from tools.sqlite_thread import SqliteThread

log = logging.getLogger(__name__)

T = TypeVar("T")
Record = dict[str, Any]

#: File name of the ledger inside a data_dir.
LEDGER_FILE = "idempotency.db"
#: Seconds a duplicate waits for another process's run of the same request before giving up.
DEFAULT_WAIT_S = 120.0
#: A ``running`` claim older than this is taken over even if its owner pid looks alive.
STALE_CLAIM_S = 3600.0
#: Done records kept in memory per ledger (replays without a database round trip).
MEMO_SIZE = 4096
#: Waiting for another process's run: first pause, doubling up to the longest pause (seconds).
POLL_FIRST_S, POLL_MAX_S = 0.01, 0.2

_SCHEMA = """
CREATE TABLE IF NOT EXISTS tool_requests (
    tool        TEXT NOT NULL,
    request_id  TEXT NOT NULL,
    state       TEXT NOT NULL CHECK (state IN ('running', 'done', 'unknown')),
    owner       TEXT NOT NULL,
    fingerprint TEXT,
    record      TEXT,
    created     REAL NOT NULL,
    finished    REAL,
    PRIMARY KEY (tool, request_id)
);
"""


class LedgerBusy(ToolError):
    """Another process is still running this ``(tool, request_id)`` after the wait limit."""


class LedgerUnavailable(ToolError):
    """The ledger's database server cannot be used (unreachable, refused the statement): no
    side effect runs without a claim. The message names the store (URL without its password)
    and the cause."""


class LedgerThread(Protocol):
    """The ledger's connection on its own thread: :class:`SqliteThread` or
    ``tools.ledger_postgres.PostgresThread``."""

    def submit(self, fn: Callable[..., T], *args: Any) -> concurrent.futures.Future[T]: ...

    async def call(self, fn: Callable[..., T], *args: Any) -> T: ...

    def close(self) -> None: ...


@dataclass(frozen=True)
class Statements:
    """One backend's ledger statements, each ``fn(connection, *args)`` run on the ledger's
    thread. ``claim(con, key, owner, fingerprint)`` → ``("claimed", None)`` |
    ``("done" | "unknown", record)`` | ``("running", (owner, age in seconds))``; ``prune(con,
    older_than_s)`` measures age on the store's clock."""

    claim: Callable[..., tuple[str, Any]]
    mark_unknown: Callable[..., bool]
    take_over: Callable[..., bool]
    finish: Callable[..., None]
    release: Callable[..., None]
    expire: Callable[..., int]
    get: Callable[..., Record | None]
    state: Callable[..., str | None]
    count: Callable[..., int]
    prune: Callable[..., int]


class IdempotencyLedger:
    """See module doc. ``path``: SQLite file (``data_dir / LEDGER_FILE``) or None (memory).
    ``tools.ledger_postgres.PostgresLedger`` is the same ledger on PostgreSQL."""

    def __init__(self, path: Path | None = None, *, wait_s: float = DEFAULT_WAIT_S) -> None:
        self.path = Path(path) if path is not None else None
        self._start(SqliteThread(self.path, _SCHEMA, "hermes-ledger"), SQLITE_STATEMENTS, wait_s)

    def _start(self, db: LedgerThread, sql: Statements, wait_s: float) -> None:
        self.wait_s = wait_s
        self.owner = new_owner()
        self._db: LedgerThread = db
        self._sql = sql
        self._memo: LRUCache[tuple[str, str], Record] = LRUCache(maxsize=MEMO_SIZE)
        self._inflight: dict[tuple[str, str], asyncio.Future[Record]] = {}
        self._lock = threading.Lock()

    @classmethod
    def in_data_dir(cls, data_dir: Path, **kw: Any) -> IdempotencyLedger:
        return cls(Path(data_dir) / LEDGER_FILE, **kw)

    @property
    def where(self) -> str:
        """The store, for messages: the SQLite file, or "the in-memory ledger"."""
        return str(self.path) if self.path is not None else "the in-memory ledger"

    async def claim_alive(self, owner: str, age_s: float) -> bool:
        """Whether the claim of ``owner``, taken ``age_s`` seconds ago, is still being run: the
        owner process runs (:func:`owner_alive`; a claim on another host counts as alive) and
        the claim is younger than :data:`STALE_CLAIM_S`."""
        return age_s <= STALE_CLAIM_S and owner_alive(owner)

    # -- the one public operation ----------------------------------------------------------------
    async def run_once(
        self,
        tool: str,
        request_id: str,
        fn: Callable[[], Awaitable[Record]],
        *,
        keep: Callable[[Record], bool] = lambda r: True,
        uncertain: Callable[[Record], bool] = lambda r: False,
        lost: Callable[[str], Record] | None = None,
        retry_safe: bool = False,
        fingerprint: str | None = None,
    ) -> tuple[Record, bool]:
        """Run ``fn()`` at most once per ``(tool, request_id)``; returns ``(record, replayed)``.

        ``fn`` returns a JSON-able dict. ``keep(record)`` true → stored as done. Else
        ``uncertain(record)`` true → stored as unknown (never run again). Else the claim is
        released and the record is not stored, so a later call runs again. ``lost(reason)``
        builds the record stored when the outcome became unknown without a record (``fn`` was
        cancelled mid-call, or its owner process died) for a call that is not ``retry_safe``;
        without ``lost`` such a claim is released as before. Raises :class:`LedgerBusy` when
        another process holds the claim beyond ``wait_s``.
        """
        key = (tool, request_id)
        with self._lock:
            memo = self._memo.get(key)
        if memo is not None:
            return memo, True
        loop = asyncio.get_running_loop()
        pending = self._inflight.get(key)
        if pending is not None and pending.get_loop() is loop:
            return await asyncio.shield(pending), True
        fut: asyncio.Future[Record] = loop.create_future()
        self._inflight[key] = fut
        try:
            record, replayed = await self._claim_and_run(
                key, fn, keep, uncertain, lost if not retry_safe else None, fingerprint
            )
            fut.set_result(record)
            return record, replayed
        except BaseException as exc:  # cancellation or LedgerBusy: waiters see it too
            fut.set_exception(exc)
            fut.exception()  # mark retrieved
            raise
        finally:
            if self._inflight.get(key) is fut:
                del self._inflight[key]

    async def _claim_and_run(
        self,
        key: tuple[str, str],
        fn: Callable[[], Awaitable[Record]],
        keep: Callable[[Record], bool],
        uncertain: Callable[[Record], bool],
        lost: Callable[[str], Record] | None,
        fingerprint: str | None,
    ) -> tuple[Record, bool]:
        # while another live process runs the request, wait (POLL_FIRST_S doubling to POLL_MAX_S)
        # up to wait_s; then its LedgerBusy is raised
        waiting = tenacity.AsyncRetrying(
            retry=tenacity.retry_if_exception_type(LedgerBusy),
            reraise=True,
            wait=tenacity.wait_exponential(multiplier=POLL_FIRST_S, max=POLL_MAX_S),
            stop=tenacity.stop_after_delay(self.wait_s),
        )
        replay: Record | None = await waiting(self._try_claim, key, lost, fingerprint)
        if replay is not None:
            return replay, True
        try:
            record = await fn()
        except BaseException:
            if lost is not None:  # cancelled mid-call: it may have run
                gone = json.dumps(lost("the call was interrupted while it ran"), default=str)
                await asyncio.shield(self._db.call(self._sql.mark_unknown, key, self.owner, gone))
            else:
                await asyncio.shield(self._db.call(self._sql.release, key, self.owner))
            raise
        if keep(record) or uncertain(record):
            state = "done" if keep(record) else "unknown"
            try:
                await asyncio.shield(
                    self._db.call(self._sql.finish, key, self.owner, json.dumps(record, default=str), state)
                )
            except (LedgerUnavailable, sqlite3.Error):
                # the call ran: its result goes back to the caller all the same. The claim stays
                # "running" under this live owner; once this owner is gone, a duplicate states
                # the outcome unknown (or, retry-safe, runs again), never a silent second run
                log.exception("ledger: %s/%s ran but its %s record could not be stored", *key, state)
            self._remember(key, record)
        else:
            await asyncio.shield(self._db.call(self._sql.release, key, self.owner))
        return record, False

    async def _try_claim(
        self, key: tuple[str, str], lost: Callable[[str], Record] | None, fingerprint: str | None
    ) -> Record | None:
        """One claim attempt: None when this ledger now holds the claim (run the call), else the
        record to replay. Raises :class:`LedgerBusy` while another live owner runs the request."""
        state, value = await self._db.call(self._sql.claim, key, self.owner, fingerprint)
        if state in ("done", "unknown"):
            record: Record = value  # Statements.claim: a done or unknown request's value is its record
            self._remember(key, record)
            return record
        if state == "claimed":
            return None
        # "running" elsewhere: wait for it (or take over from a dead owner)
        owner, age_s = value
        if await self.claim_alive(owner, age_s):
            raise LedgerBusy(f"{key[0]} call {key[1]!r} is still running in {owner} after {self.wait_s:g} s")
        if lost is not None:
            record = lost(f"the process running it ({owner}) stopped mid-call")
            if await self._db.call(self._sql.mark_unknown, key, owner, json.dumps(record, default=str)):
                log.warning("ledger: %s/%s in flight in dead owner %s: outcome unknown", *key, owner)
                self._remember(key, record)
                return record
        elif await self._db.call(self._sql.take_over, key, owner, self.owner):
            log.warning("ledger: took over %s/%s from dead owner %s", key[0], key[1], owner)
            return None
        return await self._try_claim(key, lost, fingerprint)  # another process got there first: look again

    def _remember(self, key: tuple[str, str], record: Record) -> None:
        with self._lock:
            self._memo[key] = record

    # -- maintenance -------------------------------------------------------------------------------
    def expire_nowait(self, tool: str) -> concurrent.futures.Future[int]:
        """Forget every recorded result of ``tool`` (its schema changed). Returns at once; the
        delete is queued before any later ledger operation."""
        with self._lock:
            for key in [k for k in self._memo if k[0] == tool]:
                del self._memo[key]
        return self._db.submit(self._sql.expire, tool)

    async def expire(self, tool: str) -> int:
        """:meth:`expire_nowait` and wait; returns the number of records removed."""
        return await asyncio.wrap_future(self.expire_nowait(tool))

    async def get(self, tool: str, request_id: str) -> Record | None:
        """The recorded result of ``(tool, request_id)``, or None."""
        return await self._db.call(self._sql.get, (tool, request_id))

    async def state(self, tool: str, request_id: str) -> str | None:
        """The ledger state of ``(tool, request_id)``: "running" (claimed, maybe by a process
        that died mid-call), "done", "unknown" (sent, outcome unknown), or None (never claimed:
        it never reached the tool)."""
        return await self._db.call(self._sql.state, (tool, request_id))

    async def count(self, tool: str | None = None) -> int:
        """Number of done records (of ``tool``)."""
        return await self._db.call(self._sql.count, tool)

    async def prune(self, older_than_s: float) -> int:
        """Remove done records finished more than ``older_than_s`` seconds ago."""
        return await self._db.call(self._sql.prune, older_than_s)

    async def aclose(self) -> None:
        """Finish queued writes and close the database (in a thread)."""
        await asyncio.to_thread(self._db.close)

    def close(self) -> None:
        self._db.close()


# -- SQL, run on the ledger thread ----------------------------------------------------------------


def _claim(con: sqlite3.Connection, key: tuple[str, str], owner: str, fingerprint: str | None) -> tuple[str, Any]:
    cur = con.execute(
        "INSERT OR IGNORE INTO tool_requests (tool, request_id, state, owner, fingerprint, created) "
        "VALUES (?, ?, 'running', ?, ?, ?)",
        (*key, owner, fingerprint, time.time()),
    )
    if cur.rowcount == 1:
        return "claimed", None
    row = con.execute(
        "SELECT state, owner, record, created, fingerprint FROM tool_requests WHERE tool = ? AND request_id = ?", key
    ).fetchone()
    if row is None:  # released between our insert and select: try again
        return _claim(con, key, owner, fingerprint)
    state, other, record, created, stored_fp = row
    if state in ("done", "unknown"):
        if fingerprint and stored_fp and fingerprint != stored_fp:
            log.warning("ledger: %s request %r repeated with different arguments; replaying the first", key[0], key[1])
        return state, json.loads(record)
    return "running", (other, time.time() - created)


def _mark_unknown(con: sqlite3.Connection, key: tuple[str, str], owner: str, record: str) -> bool:
    cur = con.execute(
        "UPDATE tool_requests SET state = 'unknown', record = ?, finished = ? WHERE tool = ? "
        "AND request_id = ? AND state = 'running' AND owner = ?",
        (record, time.time(), *key, owner),
    )
    return cur.rowcount == 1


def _take_over(con: sqlite3.Connection, key: tuple[str, str], old: str, new: str) -> bool:
    cur = con.execute(
        "UPDATE tool_requests SET owner = ?, created = ? WHERE tool = ? AND request_id = ? "
        "AND state = 'running' AND owner = ?",
        (new, time.time(), *key, old),
    )
    return cur.rowcount == 1


def _finish(con: sqlite3.Connection, key: tuple[str, str], owner: str, record: str, state: str = "done") -> None:
    con.execute(
        "UPDATE tool_requests SET state = ?, record = ?, finished = ? WHERE tool = ? AND request_id = ? AND owner = ?",
        (state, record, time.time(), *key, owner),
    )


def _release(con: sqlite3.Connection, key: tuple[str, str], owner: str) -> None:
    con.execute(
        "DELETE FROM tool_requests WHERE tool = ? AND request_id = ? AND owner = ? AND state = 'running'", (*key, owner)
    )


def _expire(con: sqlite3.Connection, tool: str) -> int:
    return con.execute("DELETE FROM tool_requests WHERE tool = ? AND state = 'done'", (tool,)).rowcount


def _get(con: sqlite3.Connection, key: tuple[str, str]) -> Record | None:
    row = con.execute(
        "SELECT record FROM tool_requests WHERE tool = ? AND request_id = ? AND state IN ('done', 'unknown')", key
    ).fetchone()
    return json.loads(row[0]) if row else None


def _state(con: sqlite3.Connection, key: tuple[str, str]) -> str | None:
    row = con.execute("SELECT state FROM tool_requests WHERE tool = ? AND request_id = ?", key).fetchone()
    return str(row[0]) if row else None


def _count(con: sqlite3.Connection, tool: str | None) -> int:
    if tool is None:
        return int(con.execute("SELECT COUNT(*) FROM tool_requests WHERE state = 'done'").fetchone()[0])
    return int(
        con.execute("SELECT COUNT(*) FROM tool_requests WHERE state = 'done' AND tool = ?", (tool,)).fetchone()[0]
    )


def _prune(con: sqlite3.Connection, older_than_s: float) -> int:
    before = time.time() - older_than_s
    return con.execute("DELETE FROM tool_requests WHERE state = 'done' AND finished < ?", (before,)).rowcount


SQLITE_STATEMENTS = Statements(
    claim=_claim,
    mark_unknown=_mark_unknown,
    take_over=_take_over,
    finish=_finish,
    release=_release,
    expire=_expire,
    get=_get,
    state=_state,
    count=_count,
    prune=_prune,
)


__all__ = [
    "LEDGER_FILE",
    "IdempotencyLedger",
    "LedgerBusy",
    "LedgerThread",
    "LedgerUnavailable",
    "Statements",
]
