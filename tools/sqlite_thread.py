"""One SQLite connection on one dedicated thread (:class:`SqliteThread`), for stores written to
from synchronous code that cannot await and from several event loops: the idempotency ledger
(``tools.idempotency``) and the tool-schema store (``tools.schema_versions``). Calls queue in
submission order; a new file is opened in WAL mode with ``synchronous=NORMAL``, retried while
another process holds the lock.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import tenacity

T = TypeVar("T")

#: Opening a new file: attempts and seconds between them while another process holds the lock
#: (several processes creating the same ledger at once; ``journal_mode=WAL`` fails fast on it).
OPEN_ATTEMPTS, OPEN_PAUSE_S = 100, 0.05


class SqliteThread:
    """One SQLite connection used from one dedicated thread; calls queue in submission order.

    ``submit(fn, *args)`` → concurrent future of ``fn(connection, *args)`` (never blocks);
    ``await call(fn, *args)`` from any event loop; ``close()`` finishes queued work.
    """

    def __init__(self, path: Path | None, schema: str, name: str) -> None:
        self.path = path
        self._schema = schema
        self._pool = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix=name)
        self._con: sqlite3.Connection | None = None
        self._closed = False

    def _connection(self) -> sqlite3.Connection:
        if self._con is None:
            if self.path is None:
                con = sqlite3.connect(":memory:", isolation_level=None)
            else:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                con = sqlite3.connect(self.path, timeout=30.0, isolation_level=None)
            _prepare(con, self._schema, wal=self.path is not None)
            self._con = con
        return self._con

    def submit(self, fn: Callable[..., T], *args: Any) -> concurrent.futures.Future[T]:
        if self._closed:
            raise RuntimeError("ledger is closed")
        return self._pool.submit(lambda: fn(self._connection(), *args))

    async def call(self, fn: Callable[..., T], *args: Any) -> T:
        return await asyncio.wrap_future(self.submit(fn, *args))

    def _close_connection(self) -> None:
        if self._con is not None:
            self._con.close()
            self._con = None

    def close(self) -> None:
        if self._closed:
            return
        self._pool.submit(self._close_connection)
        self._closed = True
        self._pool.shutdown(wait=True)


def _locked(exc: BaseException) -> bool:
    return isinstance(exc, sqlite3.OperationalError) and "locked" in str(exc)


@tenacity.retry(
    retry=tenacity.retry_if_exception(_locked),
    stop=tenacity.stop_after_attempt(OPEN_ATTEMPTS),
    wait=tenacity.wait_fixed(OPEN_PAUSE_S),
    reraise=True,
)
def _prepare(con: sqlite3.Connection, schema: str, *, wal: bool) -> None:
    """Journal settings and schema of a new connection; retried while the file is locked."""
    if wal:
        con.execute("PRAGMA journal_mode=WAL")
        con.execute("PRAGMA synchronous=NORMAL")
    con.executescript(schema)
