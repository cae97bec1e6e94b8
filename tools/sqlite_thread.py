"""One SQLite connection on one dedicated thread (:class:`SqliteThread`), for stores written to
from synchronous code that cannot await and from several event loops: the idempotency ledger
(``tools.idempotency``) and the tool-schema store (``tools.schema_versions``). Calls queue in
submission order; the file is opened by :func:`base.sqlite_files.open_sqlite` (WAL,
``synchronous=NORMAL``, busy timeout, opening retried while another process holds the lock).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from base.sqlite_files import MEMORY, open_sqlite

T = TypeVar("T")


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
            self._con = open_sqlite(self.path or MEMORY, schema=self._schema, synchronous="NORMAL")
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
