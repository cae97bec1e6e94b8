"""The idempotency ledger on PostgreSQL (``HERMES_POSTGRES_URL``; issue 22, DESIGN §2.4).

:class:`PostgresLedger` is :class:`tools.idempotency.IdempotencyLedger` — the same
``run_once`` contract (claim before the effect, replay ``done`` and ``unknown`` records, wait
for a live owner, :class:`~tools.idempotency.LedgerBusy` after ``wait_s``) — on one table,
``hermes_tool_requests``, shared by every process and machine that names the database, whatever
its data directory. So exactly-once holds among all of them, not only among processes sharing
a disk.

* **The claim** is ``INSERT ... ON CONFLICT DO NOTHING`` on the primary key ``(tool,
  request_id)``: of two concurrent claimers one inserts, the other waits for that insert's
  commit and then reads the row. Every later change of a claim is a compare-and-set ``UPDATE``
  / ``DELETE ... WHERE state = 'running' AND owner = %s`` (READ COMMITTED re-checks the
  condition on the row it waited for), so two takers-over never both win. Ages are measured
  on the server's clock (``clock_timestamp()``), not on each machine's.
* **Owner liveness across hosts**: a pid means nothing on another machine. Each ledger holds,
  on its own connection, a session advisory lock keyed by its owner id for as long as it
  lives (the lease). A waiter tests that lock (``pg_try_advisory_lock`` then unlock): free
  means the owner's session ended — the process died or was killed, on any host — and the
  claim is handled as on SQLite: a ``retry_safe`` call takes it over and runs, any other call
  is stated ``unknown`` ("the process running it stopped mid-call") and not run again. The
  server drops the session of a killed process at once (its socket closes); a host lost
  without closing its sockets is found by TCP keepalives, which each session sets to
  :data:`KEEPALIVE_IDLE_S` + :data:`KEEPALIVE_COUNT` × :data:`KEEPALIVE_INTERVAL_S` seconds.
  A claim older than ``STALE_CLAIM_S`` counts as dead whatever its lock, as on SQLite.
  Session advisory locks need a session: connect directly or through a pooler in *session*
  mode, not PgBouncer's transaction mode.
* **A broken connection** (the server restarted): the statements that are safe to repeat
  (finish, release, mark unknown, reads, expiry, pruning) reconnect and run again for up to
  :data:`RECONNECT_S` seconds; a claim is not repeated blindly (its insert may have committed)
  and raises :class:`~tools.idempotency.LedgerUnavailable`, as does any other database error:
  no side effect runs without a claim. On reconnect the ledger takes its owner lock again;
  while it had none, a waiter may have found its claims ownerless and stated them unknown —
  the safe side.

The table is created on first use under a transaction advisory lock
(:data:`SCHEMA_LOCK_KEY`), as ``graph.postgres`` does for the checkpoint tables: concurrent
``CREATE TABLE IF NOT EXISTS`` of two sessions on a new database can fail on ``pg_type``.
Like the SQLite ledger, every statement runs on the ledger's own thread, on one connection
(autocommit), so synchronous callers (``expire_nowait``) and several event loops share it.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import hashlib
import json
import logging
from collections.abc import Callable
from typing import Any, TypeVar

import psycopg
import tenacity

from base.postgres_urls import redacted
from tools.idempotency import (
    DEFAULT_WAIT_S,
    STALE_CLAIM_S,
    IdempotencyLedger,
    LedgerUnavailable,
    Record,
    Statements,
)

log = logging.getLogger(__name__)

T = TypeVar("T")

#: Table of the ledger (prefixed: the database may hold the checkpoint tables and others).
TABLE = "hermes_tool_requests"
#: Key of the transaction advisory lock that serialises creating the table ("HERMESLG").
SCHEMA_LOCK_KEY = 0x4845524D45534C47
#: Seconds to wait for a connection before :class:`LedgerUnavailable`.
CONNECT_TIMEOUT_S = 10
#: Seconds a repeatable statement keeps reconnecting (a restarting server) before giving up.
RECONNECT_S = 30.0
#: Server-side TCP keepalive of the ledger's session: idle seconds, probes, seconds between them
#: (a lost host's claims are free after about 10 + 3 × 5 = 25 s; Unix sockets ignore them).
KEEPALIVE_IDLE_S, KEEPALIVE_COUNT, KEEPALIVE_INTERVAL_S = 10, 3, 5

_SCHEMA = f"""
CREATE TABLE IF NOT EXISTS {TABLE} (
    tool        TEXT NOT NULL,
    request_id  TEXT NOT NULL,
    state       TEXT NOT NULL CHECK (state IN ('running', 'done', 'unknown')),
    owner       TEXT NOT NULL,
    fingerprint TEXT,
    record      TEXT,
    created     DOUBLE PRECISION NOT NULL,
    finished    DOUBLE PRECISION,
    PRIMARY KEY (tool, request_id)
)
"""
_NOW = "extract(epoch from clock_timestamp())"


def owner_key(owner: str) -> int:
    """The signed 64-bit advisory lock key of an owner id."""
    return int.from_bytes(hashlib.blake2b(owner.encode(), digest_size=8).digest(), "big", signed=True)


class PostgresThread:
    """One psycopg connection (autocommit) used from one dedicated thread, opened on first use
    and reopened after it broke; calls queue in submission order. Same surface as
    :class:`tools.sqlite_thread.SqliteThread`. ``on_connect(connection)`` runs on each new
    connection (the owner lock). Database errors are raised as :class:`LedgerUnavailable`."""

    def __init__(self, url: str, on_connect: Callable[[psycopg.Connection[Any]], None], name: str) -> None:
        self.url = url
        self._on_connect = on_connect
        self._pool = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix=name)
        self._con: psycopg.Connection[Any] | None = None
        self._schema_ready = False
        self._closed = False

    def _connection(self) -> psycopg.Connection[Any]:
        if self._con is not None and not self._con.closed and not self._con.broken:
            return self._con
        self._drop()
        con = psycopg.connect(self.url, autocommit=True, connect_timeout=CONNECT_TIMEOUT_S, prepare_threshold=None)
        try:
            con.execute(f"SET tcp_keepalives_idle = {KEEPALIVE_IDLE_S}")
            con.execute(f"SET tcp_keepalives_interval = {KEEPALIVE_INTERVAL_S}")
            con.execute(f"SET tcp_keepalives_count = {KEEPALIVE_COUNT}")
            if not self._schema_ready:
                with con.transaction():
                    con.execute("SELECT pg_advisory_xact_lock(%s)", (SCHEMA_LOCK_KEY,))
                    con.execute(_SCHEMA)
                self._schema_ready = True
            self._on_connect(con)
        except BaseException:
            con.close()
            raise
        self._con = con
        return con

    def _drop(self) -> None:
        if self._con is not None:
            with contextlib.suppress(psycopg.Error):
                self._con.close()
            self._con = None

    def _run(self, fn: Callable[..., T], *args: Any) -> T:
        repeatable = fn not in _ONCE

        def attempt() -> T:
            try:
                return fn(self._connection(), *args)
            except psycopg.OperationalError:
                self._drop()  # the next statement reconnects
                raise

        try:
            if not repeatable:
                return attempt()
            return tenacity.Retrying(
                retry=tenacity.retry_if_exception_type(psycopg.OperationalError),
                stop=tenacity.stop_after_delay(RECONNECT_S),
                wait=tenacity.wait_exponential(multiplier=0.1, max=2.0),
                reraise=True,
            )(attempt)
        except psycopg.Error as exc:
            raise LedgerUnavailable(
                f"the idempotency ledger on PostgreSQL {redacted(self.url)} (HERMES_POSTGRES_URL) cannot be used "
                f"({type(exc).__name__}: {str(exc).strip()}), so exactly-once cannot be guaranteed and no side "
                "effect runs: check that the server runs and the URL is right."
            ) from exc

    def submit(self, fn: Callable[..., T], *args: Any) -> concurrent.futures.Future[T]:
        if self._closed:
            raise RuntimeError("ledger is closed")
        return self._pool.submit(self._run, fn, *args)

    async def call(self, fn: Callable[..., T], *args: Any) -> T:
        return await asyncio.wrap_future(self.submit(fn, *args))

    def close(self) -> None:
        if self._closed:
            return
        self._pool.submit(self._drop)  # closing the session frees the owner lock
        self._closed = True
        self._pool.shutdown(wait=True)


class PostgresLedger(IdempotencyLedger):
    """The idempotency ledger in the PostgreSQL database ``url`` (a libpq URL; the password may
    come from ``PGPASSWORD`` or ``~/.pgpass``). See the module docstring; the operations are
    :class:`~tools.idempotency.IdempotencyLedger`'s. ``path`` is None."""

    def __init__(self, url: str, *, wait_s: float = DEFAULT_WAIT_S) -> None:
        self.path = None
        self.url = url
        self._start(PostgresThread(url, self._hold_owner_lock, "hermes-ledger-pg"), POSTGRES_STATEMENTS, wait_s)

    @property
    def where(self) -> str:
        return f"PostgreSQL {redacted(self.url)}"

    def _hold_owner_lock(self, con: psycopg.Connection[Any]) -> None:
        # the lease: held by this session until the ledger closes or its process dies
        con.execute("SELECT pg_advisory_lock(%s)", (owner_key(self.owner),))

    async def claim_alive(self, owner: str, age_s: float) -> bool:
        """Whether ``owner``'s session still holds its owner lock (any host), for a claim younger
        than ``STALE_CLAIM_S``."""
        if age_s > STALE_CLAIM_S:
            return False
        if owner == self.owner:  # this ledger's own claim (another event loop): its lock is ours
            return True
        return await self._db.call(_lock_held, owner_key(owner))


# -- SQL, run on the ledger thread ----------------------------------------------------------------


def _lock_held(con: psycopg.Connection[Any], key: int) -> bool:
    # CASE evaluates in order: a free lock is taken and at once given back
    row = con.execute(
        "SELECT CASE WHEN pg_try_advisory_lock(%s) THEN NOT pg_advisory_unlock(%s) ELSE true END", (key, key)
    ).fetchone()
    return bool(row and row[0])


def _claim(con: psycopg.Connection[Any], key: tuple[str, str], owner: str, fingerprint: str | None) -> tuple[str, Any]:
    while True:
        cur = con.execute(
            f"INSERT INTO {TABLE} (tool, request_id, state, owner, fingerprint, created) "
            f"VALUES (%s, %s, 'running', %s, %s, {_NOW}) ON CONFLICT DO NOTHING",
            (*key, owner, fingerprint),
        )
        if cur.rowcount == 1:
            return "claimed", None
        row = con.execute(
            f"SELECT state, owner, record, {_NOW} - created, fingerprint FROM {TABLE} "
            "WHERE tool = %s AND request_id = %s",
            key,
        ).fetchone()
        if row is not None:  # else released between the insert and the select: try again
            break
    state, other, record, age_s, stored_fp = row
    if state in ("done", "unknown"):
        if fingerprint and stored_fp and fingerprint != stored_fp:
            log.warning("ledger: %s request %r repeated with different arguments; replaying the first", key[0], key[1])
        return state, json.loads(record)
    return "running", (other, float(age_s))


def _mark_unknown(con: psycopg.Connection[Any], key: tuple[str, str], owner: str, record: str) -> bool:
    cur = con.execute(
        f"UPDATE {TABLE} SET state = 'unknown', record = %s, finished = {_NOW} WHERE tool = %s "
        "AND request_id = %s AND state = 'running' AND owner = %s",
        (record, *key, owner),
    )
    return cur.rowcount == 1


def _take_over(con: psycopg.Connection[Any], key: tuple[str, str], old: str, new: str) -> bool:
    cur = con.execute(
        f"UPDATE {TABLE} SET owner = %s, created = {_NOW} WHERE tool = %s AND request_id = %s "
        "AND state = 'running' AND owner = %s",
        (new, *key, old),
    )
    return cur.rowcount == 1


def _finish(con: psycopg.Connection[Any], key: tuple[str, str], owner: str, record: str, state: str = "done") -> None:
    con.execute(
        f"UPDATE {TABLE} SET state = %s, record = %s, finished = {_NOW} WHERE tool = %s AND request_id = %s "
        "AND owner = %s",
        (state, record, *key, owner),
    )


def _release(con: psycopg.Connection[Any], key: tuple[str, str], owner: str) -> None:
    con.execute(
        f"DELETE FROM {TABLE} WHERE tool = %s AND request_id = %s AND owner = %s AND state = 'running'", (*key, owner)
    )


def _expire(con: psycopg.Connection[Any], tool: str) -> int:
    return con.execute(f"DELETE FROM {TABLE} WHERE tool = %s AND state = 'done'", (tool,)).rowcount


def _get(con: psycopg.Connection[Any], key: tuple[str, str]) -> Record | None:
    row = con.execute(
        f"SELECT record FROM {TABLE} WHERE tool = %s AND request_id = %s AND state IN ('done', 'unknown')", key
    ).fetchone()
    return json.loads(row[0]) if row else None


def _state(con: psycopg.Connection[Any], key: tuple[str, str]) -> str | None:
    row = con.execute(f"SELECT state FROM {TABLE} WHERE tool = %s AND request_id = %s", key).fetchone()
    return str(row[0]) if row else None


def _count(con: psycopg.Connection[Any], tool: str | None) -> int:
    if tool is None:
        row = con.execute(f"SELECT COUNT(*) FROM {TABLE} WHERE state = 'done'").fetchone()
    else:
        row = con.execute(f"SELECT COUNT(*) FROM {TABLE} WHERE state = 'done' AND tool = %s", (tool,)).fetchone()
    return int(row[0]) if row else 0


def _prune(con: psycopg.Connection[Any], older_than_s: float) -> int:
    return con.execute(f"DELETE FROM {TABLE} WHERE state = 'done' AND finished < {_NOW} - %s", (older_than_s,)).rowcount


POSTGRES_STATEMENTS = Statements(
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
#: Statements not repeated after a broken connection: their first attempt may have committed
#: (a claim's insert, a take-over) and a repeat would then misread its own row.
_ONCE: frozenset[Callable[..., Any]] = frozenset({_claim, _take_over})

__all__ = [
    "CONNECT_TIMEOUT_S",
    "POSTGRES_STATEMENTS",
    "RECONNECT_S",
    "SCHEMA_LOCK_KEY",
    "TABLE",
    "PostgresLedger",
    "PostgresThread",
    "owner_key",
]
