"""The user's database, read-only: ``describe_database`` and ``query_database`` (DESIGN §0 "the
user's own data"), plus the helpers ``generate_report`` shares (:mod:`tools.builtin.report`).

Which database: the setting ``HERMES_DATABASE`` / ``Context.database`` — an SQLite file path or
an SQLAlchemy-style URL ``sqlite:///relative/path`` / ``sqlite:////absolute/path``. The toolbox
resolves it against the agent's working directory (:func:`database_location`) and the executor
hands the absolute path to the tool as the injected argument ``database`` (like ``data_dir``; a
model-supplied value is dropped), with read access to that file and its ``-wal``/``-shm``/
``-journal`` companions. Nothing here ever creates, repairs or substitutes a database: an empty
setting, a missing path, a directory, a file that is not SQLite, or another engine's URL is a
:class:`DatabaseError` naming the setting and the path.

Read-only, three ways: ``mode=ro`` URI, ``PRAGMA query_only=ON`` and an authorizer that denies
everything but reading (no writes, ATTACH, PRAGMA, temp tables). A query runs under a time limit
(``set_progress_handler``), returns at most ``MAX_ROWS`` rows (``row_count`` is the true total)
and cells are bounded. These functions run inside the executor's worker process.
"""

from __future__ import annotations

import datetime as dt
import os
import re
import sqlite3
import time
from pathlib import Path
from typing import Any
from urllib.parse import quote

from tools.database_setting import (  # noqa: F401  (the setting's helpers, re-exported)
    ENV_DATABASE,
    SETTING_NAME,
    DatabaseError,
    DatabaseSettingError,
    _file_part,
    _redact,
    database_location,
    database_read_paths,
)

NOT_CONFIGURED = (
    "no database configured: set HERMES_DATABASE (or the run context's `database` field) to "
    "your SQLite file; `bash scripts/demo.sh` uses a generated demo database"
)

#: Rows returned by query_database at most; ``row_count`` still gives the full count.
MAX_ROWS = 500
#: Seconds a query may run (below the tool's 10 s executor limit, so the model gets a clear error;
#: lowered under a tighter tool timeout, see :func:`time_limit`).
QUERY_TIME_LIMIT_S = 5.0
#: Seconds describe_database may spend on row counts and date ranges in total.
DESCRIBE_TIME_LIMIT_S = 7.0
#: Characters kept of a text cell; blobs become "<N bytes>".
MAX_CELL_CHARS = 300
#: describe_database lists at most this many tables, and this many columns per table.
MAX_TABLES = 40
MAX_COLUMNS = 40
#: Non-NULL values sampled from a text column to decide whether it holds ISO dates.
DATE_SAMPLE = 20

_SQLITE_MAGIC = b"SQLite format 3\x00"
_ISO_DATE_RE = re.compile(
    r"^\d{4}-(0[1-9]|1[0-2])-(0[1-9]|[12]\d|3[01])"
    r"([ T]([01]\d|2[0-3]):[0-5]\d(:[0-5]\d(\.\d+)?)?(Z|[+-]\d{2}:?\d{2})?)?$"
)
_DATE_TYPE_RE = re.compile(r"DATE|TIMESTAMP", re.IGNORECASE)
_NUMERIC_TYPE_RE = re.compile(r"INT|REAL|FLOA|DOUB|NUM|DEC|BOOL|BLOB", re.IGNORECASE)
_AGGREGATE_RE = re.compile(r"\b(count|sum|total|avg|min|max|group_concat)\s*\(", re.IGNORECASE)


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


# -- read-only connections ----------------------------------------------------------------------

_ALLOWED_ACTIONS = {
    sqlite3.SQLITE_SELECT,
    sqlite3.SQLITE_READ,
    sqlite3.SQLITE_FUNCTION,
    getattr(sqlite3, "SQLITE_RECURSIVE", 33),
}
#: Pragmas describe_database reads (schema introspection only; never one that sets a value).
_SCHEMA_PRAGMAS = {"table_info", "table_xinfo", "foreign_key_list", "index_list", "index_info"}


def _authorizer(action: int, arg1: Any, arg2: Any, *_: Any) -> int:
    return sqlite3.SQLITE_OK if action in _ALLOWED_ACTIONS else sqlite3.SQLITE_DENY


def _schema_authorizer(action: int, arg1: Any, arg2: Any, *_: Any) -> int:
    if action == sqlite3.SQLITE_PRAGMA and str(arg1).lower() in _SCHEMA_PRAGMAS:
        return sqlite3.SQLITE_OK
    return _authorizer(action, arg1, arg2)


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
    con.set_authorizer(_schema_authorizer if schema else _authorizer)
    return con


# -- checking a statement -------------------------------------------------------------------------


def _split_sql(sql: str) -> tuple[list[str], list[str]]:
    """``(statements, code)``: the source of each ``;``-separated statement and the same with
    comments blanked, splitting only at ``;`` outside strings, quoted names and comments.
    Raises DatabaseError for an unterminated string or comment."""
    statements: list[str] = []
    codes: list[str] = []
    start, i, n = 0, 0, len(sql)
    code: list[str] = []
    closers = {"'": "'", '"': '"', "`": "`", "[": "]"}
    while i < n:
        ch = sql[i]
        if ch in closers:
            end = sql.find(closers[ch], i + 1)
            while end != -1 and ch != "[" and end + 1 < n and sql[end + 1] == ch:  # '' escape
                end = sql.find(closers[ch], end + 2)
            if end == -1:
                raise DatabaseError("the SQL has an unterminated string or quoted name")
            code.append(sql[i : end + 1])
            i = end + 1
        elif sql.startswith("--", i):
            end = sql.find("\n", i)
            i = n if end == -1 else end
            code.append(" ")
        elif sql.startswith("/*", i):
            end = sql.find("*/", i + 2)
            if end == -1:
                raise DatabaseError("the SQL has an unterminated /* comment")
            i = end + 2
            code.append(" ")
        elif ch == ";":
            statements.append(sql[start:i])
            codes.append("".join(code))
            code = []
            i += 1
            start = i
        else:
            code.append(ch)
            i += 1
    statements.append(sql[start:])
    codes.append("".join(code))
    keep = [(s, c) for s, c in zip(statements, codes) if c.strip()]
    return [s for s, _ in keep], [c for _, c in keep]


def check_select(sql: str) -> str:
    """The statement to run (without a trailing ``;``) if ``sql`` is a single SELECT / WITH
    statement; raise DatabaseError with the reason otherwise. A ``;`` inside a string, a quoted
    name or a comment does not count as a second statement."""
    if not isinstance(sql, str) or not sql.strip():
        raise DatabaseError("sql is empty; send one SELECT statement")
    statements, codes = _split_sql(sql)
    if not statements:
        raise DatabaseError("sql holds only comments; send one SELECT statement")
    if len(statements) > 1:
        raise DatabaseError("only one statement is allowed (remove the extra ';' and what follows)")
    keyword = re.match(r"\s*([A-Za-z]+)", codes[0])
    first = keyword.group(1).upper() if keyword else ""
    if first not in ("SELECT", "WITH", "VALUES"):
        raise DatabaseError(
            f"only a single read-only SELECT (or WITH ... SELECT) statement is allowed, got "
            f"{first or codes[0].strip()[:20]!r}; this tool cannot write, ATTACH or run PRAGMA"
        )
    return statements[0].strip()


# -- running a query ------------------------------------------------------------------------------


class _Deadline:
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

    def __enter__(self) -> _Deadline:
        self.con.set_progress_handler(self, 5000)
        return self

    def __exit__(self, *exc: Any) -> None:
        self.con.set_progress_handler(None, 0)


def _cell(value: Any) -> Any:
    if isinstance(value, (bytes, bytearray, memoryview)):
        return f"<{len(value)} bytes>"
    if isinstance(value, str) and len(value) > MAX_CELL_CHARS:
        return value[:MAX_CELL_CHARS] + "…"
    return value


def _table_names(con: sqlite3.Connection) -> list[str]:
    return [
        r[0]
        for r in con.execute(
            "SELECT name FROM sqlite_master WHERE type IN ('table', 'view') AND name NOT LIKE 'sqlite_%' ORDER BY name"
        )
    ]


def schema_summary(database: str, limit: int = 1200) -> str:
    """``table(col, col, ...); ...`` of the configured database, at most ``limit`` characters,
    or "" when there is none or it cannot be read (the tools then say why). Put in the data
    tools' descriptions when the toolbox opens, so a model writes SQL on a schema it has never
    seen even before it calls describe_database (small models rarely call it first)."""
    try:
        con = connect_readonly(database_file(database), schema=True)
    except Exception:  # noqa: BLE001 - no database, or not readable: the tools will explain
        return ""
    try:
        return _schema_hint(con, "", only_named=False, limit=limit)
    finally:
        con.close()


def _schema_hint(con: sqlite3.Connection, sql: str, only_named: bool, limit: int = 1200) -> str:
    """``table(col, col, ...); ...`` of the tables ``sql`` names (all tables when it names none
    or ``only_named`` is False), at most ``limit`` characters."""
    con.set_authorizer(_schema_authorizer)  # the model's statement is over: introspection only
    try:
        names = _table_names(con)
        named = [t for t in names if _mentions(sql, t)] if only_named else []
        parts = []
        for table in named or names:
            parts.append(f"{table}({', '.join(c[0] for c in _columns(con, table))})")
    except sqlite3.Error:
        return ""
    text = "; ".join(parts)
    return text if len(text) <= limit else text[:limit].rsplit(";", 1)[0] + "; …"


# Other engines' date and limit syntax, which SQLite rejects with a bare "syntax error" or
# "no such function" that does not say what to write instead; models trained mostly on MySQL /
# PostgreSQL write these first (measured: Qwen2.5-Coder wrote DATE_SUB(CURDATE(), INTERVAL 1
# MONTH) on the demo database). Each entry: (pattern, what was used, the SQLite way).
_OTHER_DIALECTS: list[tuple[re.Pattern[str], str, str]] = [
    (
        re.compile(r"\b(DATE_SUB|DATE_ADD|DATEADD|DATEDIFF|ADDDATE|SUBDATE)\s*\(|\bINTERVAL\s+'?-?[0-9]", re.I),
        "date arithmetic (DATE_SUB / DATE_ADD / INTERVAL)",
        "date(col, '-1 month'), date('now', 'start of month', '-1 month')",
    ),
    (
        re.compile(r"\b(CURDATE|NOW|GETDATE|SYSDATE)\s*\(\s*\)", re.I),
        "the current date (CURDATE() / NOW())",
        "date('now') or datetime('now')",
    ),
    (
        re.compile(r"\b(YEAR|MONTH|DAY|EXTRACT|DATE_FORMAT|DATE_TRUNC|TO_CHAR)\s*\(", re.I),
        "date parts (YEAR() / MONTH() / EXTRACT / DATE_FORMAT / DATE_TRUNC)",
        "strftime('%Y-%m', col) = 'YYYY-MM' for a month, strftime('%Y', col) for a year",
    ),
    (re.compile(r"\bSELECT\s+TOP\s+[0-9]", re.I), "SELECT TOP n", "ORDER BY ... LIMIT n"),
    (re.compile(r"\bILIKE\b", re.I), "ILIKE", "LIKE (case-insensitive for ASCII in SQLite)"),
]


def dialect_hint(sql: str) -> str:
    """What in ``sql`` is another engine's syntax and the SQLite way to write it, as one
    sentence ("" when nothing is recognised). Used in SQL error messages."""
    found = [f"{used} → {sqlite}" for pattern, used, sqlite in _OTHER_DIALECTS if pattern.search(sql)]
    if not found:
        return ""
    return " This database is SQLite, which has no such syntax: " + "; ".join(found) + "."


def _foreign_keys(con: sqlite3.Connection, tables: list[str]) -> list[tuple[str, str, str]]:
    """``(table, other table, "table.col = other.col")`` of every declared foreign key."""
    edges = []
    for table in tables:
        for row in con.execute(f"PRAGMA foreign_key_list({_q(table)})"):
            other, src, dst = row[2], row[3], row[4]
            if other in tables and src:
                edges.append((table, other, f"{table}.{src} = {other}.{dst or src}"))
    return edges


def _unjoined_table(con: sqlite3.Connection, column: str) -> str:
    """For an unknown qualified column ``table.col`` whose table exists and has ``col``: that
    table's name (the query uses it without joining it), else ""."""
    if "." not in column:
        return ""
    con.set_authorizer(_schema_authorizer)  # the model's statement is over: introspection only
    table, col = (part.strip("\"`[]'") for part in column.rsplit(".", 1))
    try:
        for name in _table_names(con):
            if name.lower() == table.lower() and any(c[0].lower() == col.lower() for c in _columns(con, name)):
                return name
    except sqlite3.Error:
        return ""
    return ""


def join_hint(con: sqlite3.Connection, sql: str, column: str = "") -> str:
    """How the tables ``sql`` names (and, for an unknown ``column``, the tables that do have a
    column of that name) join through the declared foreign keys, as one sentence: the join
    conditions along the shortest paths (breadth-first over the foreign-key graph, taken as
    undirected). "" when fewer than two tables are involved or no path exists. ``con`` must
    allow the schema pragmas. A model that knows the columns still joins two tables directly
    when the link runs through a third (measured: Qwen2.5-Coder-1.5B joined regions to
    order_items on a region_id order_items does not have)."""
    tables = _table_names(con)
    named = [t for t in tables if _mentions(sql, t)]
    bare = column.rsplit(".", 1)[-1].strip("\"`[]'") if column else ""
    having = [t for t in tables if bare and any(c[0].lower() == bare.lower() for c in _columns(con, t))]
    wanted = list(dict.fromkeys(named + having[:2]))
    if len(wanted) < 2:
        return ""
    graph: dict[str, list[tuple[str, str]]] = {t: [] for t in tables}
    for a, b, cond in _foreign_keys(con, tables):
        graph[a].append((b, cond))
        graph[b].append((a, cond))
    joined: set[str] = {wanted[0]}
    conditions: list[str] = []
    for target in wanted[1:]:
        if target in joined:
            continue
        # breadth-first from everything joined so far to ``target``
        previous: dict[str, tuple[str, str] | None] = {t: None for t in joined}
        queue = list(joined)
        while queue and target not in previous:
            node = queue.pop(0)
            for nxt, cond in graph[node]:
                if nxt not in previous:
                    previous[nxt] = (node, cond)
                    queue.append(nxt)
        if target not in previous:
            continue
        node, path = target, []
        while (step := previous[node]) is not None:
            path.append(step[1])
            joined.add(node)
            node = step[0]
        conditions.extend(reversed(path))
    if not conditions:
        return ""
    where = f" Column {bare!r} is in {', '.join(having)}." if having and bare else ""
    return f"{where} These tables join on: {'; '.join(dict.fromkeys(conditions))}."


def _sql_error(exc: sqlite3.Error, con: sqlite3.Connection, sql: str = "") -> DatabaseError:
    error = _plain_sql_error(exc, con, sql)
    hint = dialect_hint(sql) if "refused" not in str(error) else ""
    if not hint:
        return error
    text = str(error)
    return DatabaseError(f"{text}{'' if text.endswith('.') else '.'}{hint}")


def _plain_sql_error(exc: sqlite3.Error, con: sqlite3.Connection, sql: str = "") -> DatabaseError:
    text = str(exc)
    if "not authorized" in text or "readonly" in text or "read-only" in text:
        return DatabaseError(
            f"statement refused: the database is read-only here ({text}); only SELECT queries run, nothing was written"
        )
    m = re.match(r"no such (table|column|function): (.+)", text)
    if m:
        what, name = m.groups()
        if what == "function":
            return DatabaseError(f"unknown SQL function {name!r} (SQLite dialect): {text}")
        if what == "column" and (unjoined := _unjoined_table(con, name)):
            # "no such column: regions.name" while regions has a name column: the table is
            # used but missing from FROM / JOIN, which SQLite reports as an unknown column
            joins = join_hint(con, sql)
            on = [c.rstrip(".") for c in re.findall(r"[\w.]+ = [\w.]+", joins) if f"{unjoined}." in c]
            add = f"JOIN {unjoined} ON {on[0]}" if on else f"JOIN {unjoined} ON ..."
            return DatabaseError(
                f"table {unjoined} is used ({name}) but not in the query's FROM or JOIN: add {add}.{joins}"
            )
        hint = _schema_hint(con, sql, only_named=what == "column")
        hint = f" Tables and columns here: {hint}." if hint else ""
        if what == "column":
            try:
                hint += join_hint(con, sql, name)
            except sqlite3.Error:
                pass
        return DatabaseError(
            f"unknown {what} {name!r}: the database has no such {what}.{hint} "
            "Call describe_database to see its tables and columns, then fix the SQL"
        )
    if "ambiguous column" in text:
        return DatabaseError(f"{text}: qualify the column with its table (see describe_database)")
    hint = _schema_hint(con, sql, only_named=True, limit=600) if sql else ""
    hint = f" Tables and columns it names: {hint}." if hint else ""
    return DatabaseError(f"SQL error: {text}.{hint}")


def run_select(
    con: sqlite3.Connection, body: str, *, max_rows: int = MAX_ROWS, time_limit_s: float | None = None
) -> dict[str, Any]:
    """Run the checked statement ``body`` on ``con``. Returns ``{columns, rows (<= max_rows,
    cells bounded), row_count, truncated}``; when the rows beyond ``max_rows`` could not all be
    counted in time, ``row_count`` is a lower bound and ``row_count_exact`` is False. Raises
    DatabaseError for refused or bad SQL and for a query over the time limit."""
    limit = time_limit(QUERY_TIME_LIMIT_S) if time_limit_s is None else time_limit_s
    with _Deadline(con, limit) as deadline:
        try:
            cur = con.execute(body)
            columns = [d[0] for d in cur.description or []]
            rows = [[_cell(v) for v in r] for r in cur.fetchmany(max_rows)]
        except sqlite3.Error as exc:
            if deadline.hit:
                raise DatabaseError(
                    f"query stopped after {limit:g} s (time limit): it scans or generates too much. "
                    "Narrow it with WHERE, aggregate with GROUP BY, or add LIMIT"
                ) from None
            raise _sql_error(exc, con, body) from None
        extra, exact = 0, True
        if len(rows) == max_rows:
            try:
                while batch := cur.fetchmany(10_000):
                    extra += len(batch)
            except sqlite3.Error as exc:
                if not deadline.hit:
                    raise _sql_error(exc, con, body) from None
                exact = False
    out: dict[str, Any] = {
        "columns": columns,
        "rows": rows,
        "row_count": len(rows) + extra,
        "truncated": extra > 0 or not exact,
    }
    if not exact:
        out["row_count_exact"] = False
        out["note"] = (
            f"more than {out['row_count']} rows; counting stopped at the {limit:g} s time "
            "limit. Aggregate or filter the query to get totals"
        )
    return out


def is_empty_result(result: dict[str, Any], sql: str) -> bool:
    """True when a result carries no data: no rows, or a single row of NULLs, or (for an
    aggregate query) a single row of NULLs and zeros (COUNT over no rows)."""
    rows = result.get("rows") or []
    if not rows:
        return True
    if len(rows) != 1:
        return False
    values = rows[0]
    if all(v is None for v in values):
        return True
    return bool(_AGGREGATE_RE.search(sql)) and all(v is None or v == 0 for v in values)


# -- dates ------------------------------------------------------------------------------------------


def _q(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _month(value: Any, epoch: bool) -> str | None:
    if value is None:
        return None
    if epoch:
        seconds = float(value) / (1000 if abs(float(value)) > 1e11 else 1)
        return dt.datetime.fromtimestamp(seconds, dt.UTC).strftime("%Y-%m")
    return str(value)[:7]


def _day(value: Any, epoch: bool) -> str | None:
    if value is None:
        return None
    if epoch:
        seconds = float(value) / (1000 if abs(float(value)) > 1e11 else 1)
        return dt.datetime.fromtimestamp(seconds, dt.UTC).strftime("%Y-%m-%d")
    return str(value)[:10]


def date_kind(con: sqlite3.Connection, table: str, column: str, declared: str) -> str | None:
    """``"text"`` (ISO date strings), ``"epoch"`` (Unix seconds/ms in a DATE/TIMESTAMP column) or
    None (not date-like). Text columns are sampled: every sampled value must parse as ISO."""
    declared_date = bool(_DATE_TYPE_RE.search(declared or ""))
    if not declared_date and declared and _NUMERIC_TYPE_RE.search(declared):
        return None
    sample = [
        r[0]
        for r in con.execute(f"SELECT {_q(column)} FROM {_q(table)} WHERE {_q(column)} IS NOT NULL LIMIT {DATE_SAMPLE}")
    ]
    if not sample:
        return "text" if declared_date else None
    if all(isinstance(v, str) and _ISO_DATE_RE.match(v.strip()) for v in sample):
        return "text"
    if declared_date and all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in sample):
        return "epoch"
    return None


def date_range(
    con: sqlite3.Connection, table: str, column: str, kind: str, today: dt.date | None = None
) -> dict[str, Any]:
    """``{min, max, latest_month, latest_full_month}`` of a date-like column: first and last
    day with data, the month of the last one, and the latest calendar month with data that has
    ended before ``today`` (None when there is none)."""
    col, tab = _q(column), _q(table)
    epoch = kind == "epoch"
    filt = f"typeof({col}) IN ('integer', 'real')" if epoch else f"typeof({col}) = 'text'"
    lo, hi = con.execute(f"SELECT MIN({col}), MAX({col}) FROM {tab} WHERE {filt}").fetchone()
    current = (today or dt.date.today()).strftime("%Y-%m")
    latest = _month(hi, epoch)
    if latest is None or latest < current:
        full = latest
    else:  # the newest data is in the current (unfinished) month or later
        if epoch:
            first = dt.datetime.strptime(current + "-01", "%Y-%m-%d").replace(tzinfo=dt.UTC).timestamp()
            scale = 1000 if hi is not None and abs(float(hi)) > 1e11 else 1
            before = con.execute(
                f"SELECT MAX({col}) FROM {tab} WHERE {filt} AND {col} < ?", (first * scale,)
            ).fetchone()[0]
        else:
            before = con.execute(
                f"SELECT MAX({col}) FROM {tab} WHERE {filt} AND {col} < ?", (current + "-01",)
            ).fetchone()[0]
        full = _month(before, epoch)
    return {"min": _day(lo, epoch), "max": _day(hi, epoch), "latest_month": latest, "latest_full_month": full}


def _columns(con: sqlite3.Connection, table: str) -> list[tuple[str, str, int, int]]:
    """(name, declared type, notnull, pk position) of each column."""
    return [(r[1], r[2] or "", r[3], r[5]) for r in con.execute(f"PRAGMA table_info({_q(table)})")]


def _mentions(sql: str, name: str) -> bool:
    return re.search(r"(?<![\w$])[\"`\[]?" + re.escape(name) + r"[\"`\]]?(?![\w$])", sql, re.IGNORECASE) is not None


def date_columns_in(con: sqlite3.Connection, sql: str, limit: int = 4) -> list[dict[str, Any]]:
    """Date ranges of the date-like columns that ``sql`` names (of the tables it names), at
    most ``limit``. ``con`` must allow the schema pragmas."""
    found: list[dict[str, Any]] = []
    for table in _table_names(con):
        if not _mentions(sql, table):
            continue
        for name, declared, _, _ in _columns(con, table):
            if not _mentions(sql, name):
                continue
            kind = date_kind(con, table, name, declared)
            if kind:
                found.append({"column": f"{table}.{name}", **date_range(con, table, name, kind)})
                if len(found) >= limit:
                    return found
    return found


def undated_columns(con: sqlite3.Connection, sql: str) -> list[str]:
    """``table.column`` of every date-like column of the tables ``sql`` names, when ``sql``
    names none of them — its figures then cover all dates, whatever period a report claims;
    ``[]`` when it filters (or can filter) on a date column, or its tables have none. ``con``
    must allow the schema pragmas."""
    found: list[str] = []
    try:
        # sampling a view runs it: bounded, and a broken or endless view means "cannot tell"
        with _Deadline(con, 2.0):
            for table in _table_names(con):
                if not _mentions(sql, table):
                    continue
                for name, declared, _, _ in _columns(con, table):
                    if date_kind(con, table, name, declared):
                        if _mentions(sql, name):
                            return []
                        found.append(f"{table}.{name}")
    except sqlite3.Error:
        return []  # the check cannot tell: the query itself reports what is wrong
    return found


def no_data_note(
    con: sqlite3.Connection, sql: str, why: str = "it returned no rows"
) -> tuple[str, list[dict[str, Any]]]:
    """The note for a result without data: says so (``why``), and for each date-like column the
    SQL names, the dates present and the latest full month with data. ``con`` must allow the
    schema pragmas. Returns ``(note, ranges)``."""
    note = f"No data for this query: {why}."
    try:
        with _Deadline(con, 2.0):
            ranges = date_columns_in(con, sql)
    except sqlite3.Error:
        ranges = []
    parts = []
    for r in ranges:
        if r["max"] is None:
            parts.append(f"{r['column']} holds no dates at all")
            continue
        text = f"{r['column']} has data from {r['min']} to {r['max']}"
        if r["latest_full_month"]:
            text += f"; the latest full month with data is {r['latest_full_month']}"
        if r["latest_month"] != r["latest_full_month"]:
            text += f" (the latest month with any data is {r['latest_month']}, not finished yet)"
        parts.append(text)
    if parts:
        note += (
            " "
            + "; ".join(parts)
            + ". Use a period with data, or tell the user there is no data for the period asked; never invent figures."
        )
    else:
        note += (
            " Tell the user there is no data for it (check the filters with describe_database); never invent figures."
        )
    return note, ranges


# -- the tools ------------------------------------------------------------------------------------


def execute_query(
    con: sqlite3.Connection, sql: str, *, max_rows: int = MAX_ROWS, time_limit_s: float | None = None
) -> dict[str, Any]:
    """check_select + run_select on an open connection (``schema=True``), plus ``note`` and
    ``data_range`` when the result holds no data. Shared by query_database and generate_report."""
    body = check_select(sql)
    con.set_authorizer(_authorizer)  # the model's SQL never gets the schema pragmas
    try:
        result = run_select(con, body, max_rows=max_rows, time_limit_s=time_limit_s)
    finally:
        con.set_authorizer(_schema_authorizer)
    if is_empty_result(result, body):
        result["no_data"] = True
        why = "it returned no rows" if not result["rows"] else "its values are NULL or 0 (no rows matched)"
        result["note"], ranges = no_data_note(con, body, why)
        if ranges:
            result["data_range"] = ranges
    return result


def query_database(sql: str, *, database: str = "") -> dict[str, Any]:
    """Run one read-only SELECT on the configured database (see module doc).

    Returns ``{"columns": [str], "rows": [[...]], "row_count": n, "truncated": bool}``, plus
    ``"note"`` (and ``"data_range"``) when there is no data for it. Raises DatabaseError for a
    missing/invalid database, anything but a single SELECT/WITH statement, unknown tables or
    columns, and queries over the time limit.
    """
    path = database_file(database)
    con = connect_readonly(path, schema=True)
    try:
        result = execute_query(con, sql)
    finally:
        con.close()
    result.pop("no_data", None)
    return result


def describe_database(*, database: str = "") -> dict[str, Any]:
    """Tables and views of the configured database: columns with declared types, primary and
    foreign keys, row counts, and for date-like columns (declared DATE/DATETIME/TIMESTAMP, or
    text whose sampled values are ISO dates) ``{min, max, latest_month, latest_full_month}``.

    Returns ``{"database": path, "table_count": n, "tables": [{"name", "type", "row_count",
    "columns": [{"name", "type", "pk"?, "not_null"?, "references"?, "dates"?}]}], "notes"?}``;
    at most MAX_TABLES tables and MAX_COLUMNS columns each (``notes`` says what was left out).
    Raises DatabaseError when the database is missing or invalid.
    """
    path = database_file(database)
    con = connect_readonly(path, schema=True)
    notes: list[str] = []
    try:
        with _Deadline(con, time_limit(DESCRIBE_TIME_LIMIT_S, 0.7)) as deadline:
            try:
                entries = con.execute(
                    "SELECT name, type FROM sqlite_master WHERE type IN ('table', 'view') "
                    "AND name NOT LIKE 'sqlite_%' ORDER BY type = 'view', name"
                ).fetchall()
            except sqlite3.Error as exc:
                raise DatabaseError(f"cannot read the schema of {path}: {exc}") from None
            if len(entries) > MAX_TABLES:
                notes.append(
                    f"{len(entries)} tables and views; the first {MAX_TABLES} are described "
                    "(query sqlite_master for the rest)"
                )
            tables = []
            for name, kind in entries[:MAX_TABLES]:
                tables.append(_describe_table(con, name, kind, deadline, notes))
    finally:
        con.close()
    out: dict[str, Any] = {"database": str(path), "table_count": len(entries), "tables": tables}
    if not entries:
        notes.append("the database has no tables")
    if notes:
        out["notes"] = notes
    return out


def _describe_table(
    con: sqlite3.Connection, name: str, kind: str, deadline: _Deadline, notes: list[str]
) -> dict[str, Any]:
    table: dict[str, Any] = {"name": name}
    if kind == "view":
        table["type"] = "view"
    try:
        cols = _columns(con, name)
        fks = (
            {}
            if kind == "view"
            else {r[3]: f"{r[2]}.{r[4]}" if r[4] else r[2] for r in con.execute(f"PRAGMA foreign_key_list({_q(name)})")}
        )
    except sqlite3.Error as exc:
        table["error"] = f"cannot read its columns: {exc}"
        return table
    try:
        table["row_count"] = None if deadline.hit else con.execute(f"SELECT COUNT(*) FROM {_q(name)}").fetchone()[0]
    except sqlite3.Error:
        table["row_count"] = None
    if table["row_count"] is None:
        table["row_count_note"] = "not counted: over the time limit of describe_database"
    if len(cols) > MAX_COLUMNS:
        notes.append(f"{name}: {len(cols)} columns, the first {MAX_COLUMNS} are listed")
    pk_count = sum(1 for c in cols if c[3])
    columns = []
    for col, declared, notnull, pk in cols[:MAX_COLUMNS]:
        entry: dict[str, Any] = {"name": col, "type": declared or "(none)"}
        if pk:
            entry["pk"] = True if pk_count == 1 else pk
        if notnull:
            entry["not_null"] = True
        if col in fks:
            entry["references"] = fks[col]
        if not deadline.hit:
            try:
                kind_ = date_kind(con, name, col, declared)
                if kind_:
                    entry["dates"] = date_range(con, name, col, kind_)
            except sqlite3.Error:
                pass
        columns.append(entry)
    table["columns"] = columns
    return table


__all__ = [
    "ENV_DATABASE",
    "MAX_ROWS",
    "NOT_CONFIGURED",
    "QUERY_TIME_LIMIT_S",
    "DatabaseError",
    "check_select",
    "connect_readonly",
    "database_file",
    "database_location",
    "database_read_paths",
    "describe_database",
    "execute_query",
    "query_database",
]
