"""Opening the user's SQLite database read-only (DESIGN §0 "the user's own data"): the setting
checked (:func:`database_file`), the connection (``mode=ro`` URI, ``PRAGMA query_only=ON`` and an
authorizer that denies everything but reading: no writes, ATTACH, PRAGMA, temp tables) and the
statement deadline (``set_progress_handler``), bounded by the worker's CPU limit
(:func:`time_limit`). Nothing here ever creates, repairs or substitutes a database."""

from __future__ import annotations

import os
import sqlite3
import time
from pathlib import Path
from typing import Any
from urllib.parse import quote

from tools.database_setting import ENV_DATABASE, SETTING_NAME, DatabaseError, DatabaseSettingError, _file_part

NOT_CONFIGURED = (
    "no database configured: set HERMES_DATABASE (or the run context's `database` field) to "
    "your SQLite file; `bash scripts/demo.sh` uses a generated demo database"
)


#: Seconds a query may run (below the tool's 10 s executor limit, so the model gets a clear error;
#: lowered under a tighter tool timeout, see :func:`time_limit`).
QUERY_TIME_LIMIT_S = 5.0
#: Seconds describe_database may spend on row counts and date ranges in total.
DESCRIBE_TIME_LIMIT_S = 7.0


_SQLITE_MAGIC = b"SQLite format 3\x00"


def time_limit(default_s: float, share: float = 0.6) -> float:
    """``default_s``, or less when this process runs under a tighter tool timeout: the
    executor's worker sets RLIMIT_CPU to about the tool's timeout + 1 s, and a query must stop
    with a clear error well before the executor kills the run (``share`` of that budget)."""
    try:
        import resource

        soft, _ = resource.getrlimit(resource.RLIMIT_CPU)
    except (ImportError, OSError, ValueError):
        return default_s
    if soft == resource.RLIM_INFINITY or soft <= 1:
        return default_s
    return max(0.5, min(default_s, share * (soft - 1)))


def database_file(database: str | None) -> Path:
    """The SQLite file the setting ``database`` names, checked: it exists, is a file and starts
    with the SQLite header. Raises DatabaseError (naming the setting and the path) otherwise;
    creates nothing."""
    setting = (database or "").strip()
    if not setting:
        raise DatabaseSettingError(NOT_CONFIGURED)
    path = Path(os.path.abspath(os.path.expanduser(_file_part(setting))))
    shown = f"{ENV_DATABASE}={setting!r}" + (f" ({path})" if str(path) != setting else "")
    if not path.exists():
        raise DatabaseSettingError(
            f"the database {shown} does not exist. Set {SETTING_NAME} to an existing SQLite "
            "file; nothing was created there"
        )
    if path.is_dir():
        raise DatabaseSettingError(
            f"the database {shown} is a directory, not an SQLite file. Set {SETTING_NAME} to the database file itself"
        )
    try:
        with open(path, "rb") as fh:
            head = fh.read(len(_SQLITE_MAGIC))
    except OSError as exc:
        raise DatabaseSettingError(
            f"the database {shown} cannot be read ({exc.strerror or exc}); check "
            f"its permissions or set {SETTING_NAME} to another file"
        ) from None
    if head != _SQLITE_MAGIC:
        what = "an empty file" if not head else "not an SQLite database"
        raise DatabaseSettingError(
            f"the database {shown} is {what}. Only SQLite files are supported: set "
            f"{SETTING_NAME} to an SQLite database file"
        )
    return path


_ALLOWED_ACTIONS = {
    sqlite3.SQLITE_SELECT,
    sqlite3.SQLITE_READ,
    sqlite3.SQLITE_FUNCTION,
    getattr(sqlite3, "SQLITE_RECURSIVE", 33),
}
#: Pragmas describe_database reads (schema introspection only; never one that sets a value).
_SCHEMA_PRAGMAS = {"table_info", "table_xinfo", "foreign_key_list", "index_list", "index_info"}


def read_authorizer(action: int, arg1: Any, arg2: Any, *_: Any) -> int:
    return sqlite3.SQLITE_OK if action in _ALLOWED_ACTIONS else sqlite3.SQLITE_DENY


def schema_authorizer(action: int, arg1: Any, arg2: Any, *_: Any) -> int:
    if action == sqlite3.SQLITE_PRAGMA and str(arg1).lower() in _SCHEMA_PRAGMAS:
        return sqlite3.SQLITE_OK
    return read_authorizer(action, arg1, arg2)


def _open(path: Path, immutable: bool) -> sqlite3.Connection:
    uri = f"file:{quote(str(path))}?mode=ro" + ("&immutable=1" if immutable else "")
    con = sqlite3.connect(uri, uri=True, check_same_thread=False)
    try:
        con.execute("SELECT count(*) FROM sqlite_master").fetchone()
    except BaseException:
        con.close()
        raise
    return con


def connect_readonly(path: Path, *, schema: bool = False) -> sqlite3.Connection:
    """Open ``path`` read-only: ``mode=ro`` URI, ``PRAGMA query_only=ON`` and an authorizer
    that denies everything except reading (``schema=True`` also allows the introspection
    pragmas table_info / foreign_key_list / index_list). A WAL database whose ``-shm`` file is
    missing and cannot be created (read-only access) is opened ``immutable`` — only when no
    ``-wal`` file holds commits that would then be missed. Raises DatabaseError."""
    path = Path(path)
    try:
        con = _open(path, immutable=False)
    except sqlite3.DatabaseError as first:
        wal = Path(str(path) + "-wal")
        if wal.exists() and wal.stat().st_size > 0:
            raise DatabaseError(
                f"the database {path} is in WAL mode with pending changes in {wal.name} and cannot "
                f"be opened read-only here ({first}); checkpoint it (e.g. sqlite3 {path} "
                "'PRAGMA wal_checkpoint') or make its directory readable"
            ) from None
        try:
            con = _open(path, immutable=True)
        except sqlite3.DatabaseError as exc:
            raise DatabaseSettingError(
                f"the database {path} cannot be opened as SQLite ({exc}); set {SETTING_NAME} to a valid SQLite file"
            ) from None
    con.execute("PRAGMA query_only=ON")
    con.set_authorizer(schema_authorizer if schema else read_authorizer)
    return con


class Deadline:
    """A progress handler that interrupts the statement once ``seconds`` have passed."""

    def __init__(self, con: sqlite3.Connection, seconds: float) -> None:
        self.con = con
        self.seconds = seconds
        self.until = time.monotonic() + seconds
        self.hit = False

    def __call__(self) -> int:
        if time.monotonic() > self.until:
            self.hit = True
            return 1
        return 0

    def __enter__(self) -> Deadline:
        self.con.set_progress_handler(self, 5000)
        return self

    def __exit__(self, *exc: Any) -> None:
        self.con.set_progress_handler(None, 0)
