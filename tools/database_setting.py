"""The database setting (``HERMES_DATABASE`` / ``Context.database``): what it names and which
files a worker may read for it. Shared by the toolbox (which resolves the setting), the
executors (which give their worker read access) and the data tools (``tools.builtin.database``,
which re-exports these names); it imports neither ``tools.builtin`` nor ``tools.executors``.
"""

from __future__ import annotations

import os
import re
from urllib.parse import unquote

from tools.errors import ConfigurationError

#: Environment variable (and Context field ``database``) naming the user's database.
ENV_DATABASE = "HERMES_DATABASE"
SETTING_NAME = "HERMES_DATABASE (or the run context's `database` field)"
_URL_RE = re.compile(r"^([A-Za-z][A-Za-z0-9+.\-]*)://(.*)$", re.DOTALL)


class DatabaseError(ValueError):
    """The database setting does not name a readable SQLite file, or a query was refused /
    failed; the message says what to do."""


class DatabaseSettingError(DatabaseError, ConfigurationError):
    """The database setting is missing or names no readable SQLite file: the run stops and says
    how to set it (no call the model can make fixes this)."""


# -- the setting ----------------------------------------------------------------------------------


def _redact(url: str) -> str:
    """``postgresql://user:secret@host/db`` → ``postgresql://***@host/db``."""
    return re.sub(r"^([A-Za-z][A-Za-z0-9+.\-]*://)[^@/]*@", r"\1***@", url)


def _file_part(setting: str) -> str:
    """The file path an SQLite setting names (maybe relative). Raises DatabaseError for other
    engines' URLs and in-memory databases."""
    s = setting.strip()
    if s.lower().startswith("file:"):  # an SQLite URI filename: file:x.db, file:///abs/x.db
        rest = unquote(s[5:].split("?", 1)[0])
        if rest.startswith("//"):  # file://host/path: the host is ignored
            rest = "/" + rest[2:].partition("/")[2]
        if rest in ("", "/", ":memory:"):
            raise DatabaseSettingError(
                f"{SETTING_NAME} is {s!r}: that names no database file. Set "
                f"{ENV_DATABASE} to an SQLite file path or sqlite:///path/to/file.db"
            )
        return rest
    m = _URL_RE.match(s)
    if m:
        scheme = m.group(1).lower()
        if scheme not in ("sqlite", "sqlite3") and not scheme.startswith("sqlite+"):
            engine = scheme.split("+")[0]
            raise DatabaseSettingError(
                f"{SETTING_NAME} is {_redact(s)!r}, a {engine} URL: only SQLite is supported. Set "
                f"{ENV_DATABASE} to an SQLite file path or sqlite:///path/to/file.db"
            )
        rest = unquote(m.group(2).split("?", 1)[0])
        if not rest.startswith("/") or rest in ("/", "/:memory:"):
            raise DatabaseSettingError(
                f"{SETTING_NAME} is {s!r}: that is an in-memory SQLite database (or names no "
                f"file), which holds no data. Set {ENV_DATABASE} to an SQLite file path or "
                "sqlite:///path/to/file.db"
            )
        return rest[1:]  # sqlite:///rel.db → rel.db; sqlite:////abs.db → /abs.db
    if s == ":memory:":
        raise DatabaseSettingError(
            f"{SETTING_NAME} is ':memory:', an in-memory database, which holds no "
            f"data. Set {ENV_DATABASE} to an SQLite file path"
        )
    return s


def database_location(setting: str | None) -> str:
    """The absolute path of the SQLite file ``setting`` names (relative paths against the
    current directory; ``~`` expanded), ``""`` for an empty setting, or — when the setting
    names no SQLite file (another engine's URL) — the setting itself with any password hidden,
    so the tool reports why. Never touches the file. Blocking (``os.getcwd``): call it off the
    event loop."""
    s = (setting or "").strip()
    if not s:
        return ""
    try:
        part = _file_part(s)
    except DatabaseError:
        return _redact(s)
    return os.path.abspath(os.path.expanduser(part))


def database_read_paths(location: str) -> list[str]:
    """Files a worker must be able to read for the database at ``location``: the file itself
    and the ``-wal``/``-shm``/``-journal`` files beside it, those that exist (also under the
    file's real path when it is a symlink). Never a directory."""
    if not location or not os.path.isabs(location):
        return []
    out: list[str] = []
    for base in dict.fromkeys([location, os.path.realpath(location)]):
        out.extend(base + suffix for suffix in ("", "-wal", "-shm", "-journal") if os.path.isfile(base + suffix))
    return out
