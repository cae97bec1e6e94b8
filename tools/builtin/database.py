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

import collections
import datetime as dt
import functools
import os
import re
import sqlite3
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any
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
from tools.results import cut_text

if TYPE_CHECKING:
    from sqlglot import exp
    from sqlglot.dialects.dialect import Dialect
    from sqlglot.tokens import Token

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
#: Non-NULL, non-blank values sampled from a column to decide whether it holds dates.
DATE_SAMPLE = 20
#: Share of the sampled values that must be dates (or periods) for a column to count as one:
#: a stray 'N/A' or '-' among ISO dates must not switch the period check off for that column.
DATE_SHARE = 0.9
#: Characters of a name or SQL fragment quoted back in an error message at most.
MAX_ECHO_CHARS = 200

_SQLITE_MAGIC = b"SQLite format 3\x00"
_ISO_DATE_RE = re.compile(
    r"^\d{4}-(0[1-9]|1[0-2])-(0[1-9]|[12]\d|3[01])"
    r"([ T]([01]\d|2[0-3]):[0-5]\d(:[0-5]\d(\.\d+)?)?(Z|[+-]\d{2}:?\d{2})?)?$",
    re.ASCII,  # ISO dates are written in 0-9: SQLite's date functions read no other digits
)
_DATE_TYPE_RE = re.compile(r"DATE|TIMESTAMP", re.IGNORECASE)
_NUMERIC_TYPE_RE = re.compile(r"INT|REAL|FLOA|DOUB|NUM|DEC|BOOL|BLOB", re.IGNORECASE)
_AGGREGATE_RE = re.compile(r"\b(count|sum|total|avg|min|max|group_concat)\s*\(", re.IGNORECASE)
#: Unix seconds of 1973-03-03: a smaller number in a DATE column is no timestamp (see _is_epoch).
_EPOCH_MIN = 1e8
_MONTH_NAME = (
    r"(jan(uary)?|feb(ruary)?|mar(ch)?|apr(il)?|may|june?|july?|aug(ust)?|sep(t(ember)?)?|oct(ober)?"
    r"|nov(ember)?|dec(ember)?)\.?"
)
# Months, quarters and dates written other than ISO (see period_kind); a bare year or a YYYYMM /
# YYYYMMDD string only in a column named like a period (a product code may be '2003').
_PERIOD_TEXT_RE = re.compile(
    r"\d{4}[-/](0?[1-9]|1[0-2])|(0?[1-9]|1[0-2])[-/.]\d{4}"
    rf"|{_MONTH_NAME}[ ,\-']*\d{{2}}(\d{{2}})?|\d{{4}}[ ,\-]*{_MONTH_NAME}"
    r"|\d{4}[ \-]?Q[1-4]|Q[1-4][ \-]?\d{4}|\d{4}[-/.]\d{1,2}[-/.]\d{1,2}|\d{1,2}[-/.]\d{1,2}[-/.]\d{2,4}"
    r"|\d{4}-\d{2}-\d{2}([ T].*)?",
    re.IGNORECASE | re.ASCII,
)
_PERIOD_NUMBER_TEXT_RE = re.compile(r"(19|20)\d{2}((0[1-9]|1[0-2])(\d{2})?)?", re.ASCII)
# a column name that says it holds a point in time (created_at, paid_on, order_date, event_time,
# timestamp, ts, createdAt, sent_at_ms): its integers in an epoch range are Unix timestamps
_TIME_NAME_RE = re.compile(
    r"(^|_)(at|on|date|time|timestamp|datetime|ts|epoch)(_(ms|millis|s|secs?|seconds|utc))?$"
    r"|^(timestamp|datetime|ts|epoch|time|date)(_|$)"
    r"|(^|_)(created|updated|modified|deleted|inserted)(_|$)"
)
#: Unix timestamps a time-named INTEGER column may hold: seconds or milliseconds, 1973-2286.
_EPOCH_SECONDS = (1e8, 1e10)
_EPOCH_MILLIS = (1e11, 1e13)
_PERIOD_NAME_RE = re.compile(
    r"year|month|quarter|period|date|day|week|yyyy|fiscal|(^|_)(yr|mon|qtr|fy|ym|dt)(_|$)", re.IGNORECASE
)


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


# -- reading SQL ----------------------------------------------------------------------------------

#: Characters of SQL read at most: check_select refuses longer SQL, so reading one stays in tens
#: of milliseconds (the tools' own schemas cap ``sql`` at 4,000 characters).
MAX_SQL_CHARS = 100_000

# Every SQLite keyword (sqlite.org/lang_keywords.html). An unquoted keyword is not a name the SQL
# uses (a table called "order" is named only when quoted), and a name that is one is quoted in
# hints.
_KEYWORDS = frozenset(
    """ABORT ACTION ADD AFTER ALL ALTER ALWAYS ANALYZE AND AS ASC ATTACH AUTOINCREMENT BEFORE BEGIN
    BETWEEN BY CASCADE CASE CAST CHECK COLLATE COLUMN COMMIT CONFLICT CONSTRAINT CREATE CROSS CURRENT
    CURRENT_DATE CURRENT_TIME CURRENT_TIMESTAMP DATABASE DEFAULT DEFERRABLE DEFERRED DELETE DESC
    DETACH DISTINCT DO DROP EACH ELSE END ESCAPE EXCEPT EXCLUDE EXCLUSIVE EXISTS EXPLAIN FAIL FILTER
    FIRST FOLLOWING FOR FOREIGN FROM FULL GENERATED GLOB GROUP GROUPS HAVING IF IGNORE IMMEDIATE IN
    INDEX INDEXED INITIALLY INNER INSERT INSTEAD INTERSECT INTO IS ISNULL JOIN KEY LAST LEFT LIKE
    LIMIT MATCH MATERIALIZED NATURAL NO NOT NOTHING NOTNULL NULL NULLS OF OFFSET ON OR ORDER OTHERS
    OUTER OVER PARTITION PLAN PRAGMA PRECEDING PRIMARY QUERY RAISE RANGE RECURSIVE REFERENCES REGEXP
    REINDEX RELEASE RENAME REPLACE RESTRICT RETURNING RIGHT ROLLBACK ROW ROWS SAVEPOINT SELECT SET
    TABLE TEMP TEMPORARY THEN TIES TO TRANSACTION TRIGGER UNBOUNDED UNION UNIQUE UPDATE USING VACUUM
    VALUES VIEW VIRTUAL WHEN WHERE WINDOW WITH WITHOUT""".split()
)
#: sqlglot token types of literals (their text is data, never code or a name).
_LITERAL_TOKENS = frozenset(
    {"STRING", "NATIONAL_STRING", "HEX_STRING", "BIT_STRING", "BYTE_STRING", "RAW_STRING"}
    | {"HEREDOC_STRING", "UNICODE_STRING", "NUMBER"}
)
_WORD_RE = re.compile(r"[\w$]+")
_BARE_NAME_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


@dataclass(frozen=True)
class _Scan:
    """One read of an SQL text: its tokens (strings, quoted names and comments told apart by
    sqlglot's SQLite tokenizer), the ``(source, tokens)`` of each ``;``-separated statement that
    holds code, the lower-cased names its code uses (tables, columns, aliases; quoted or bare, not
    keywords nor function names), and ``code``: the tokens again with every string as ``''``,
    every quoted name as ``""`` and the comments left out."""

    tokens: tuple[Token, ...]
    statements: tuple[tuple[str, tuple[Token, ...]], ...]
    names: frozenset[str]
    code: str


@functools.cache
def _sqlite_dialect() -> Dialect:
    # imported on first use: the worker process starts for every call (tools/executors/worker.py)
    # and describe_database never reads SQL
    from sqlglot.dialects.sqlite import SQLite

    return SQLite()


@functools.lru_cache(maxsize=4)
def _read(sql: str) -> _Scan:
    """The :class:`_Scan` of ``sql``, in time linear in its length. Raises DatabaseError when it
    is longer than MAX_SQL_CHARS or has an unterminated string, quoted name or ``/*`` comment.
    Cached: an error message reads the same SQL several times."""
    if len(sql) > MAX_SQL_CHARS:
        raise DatabaseError(
            f"the SQL is {len(sql):,} characters long, over the limit of {MAX_SQL_CHARS:,}; send one shorter SELECT"
        )
    from sqlglot.errors import TokenError

    try:
        tokens = tuple(_sqlite_dialect().tokenize(sql))
    except TokenError:
        raise DatabaseError("the SQL has an unterminated string, quoted name or /* comment") from None
    statements: list[tuple[str, tuple[Token, ...]]] = []
    names: set[str] = set()
    code: list[str] = []
    start = 0
    current: list[Token] = []
    for i, tok in enumerate(tokens):
        kind = tok.token_type.name
        if kind == "SEMICOLON":
            if current:
                statements.append((sql[start : tok.start], tuple(current)))
            start, current = tok.end + 1, []
            code.append(";")
            continue
        current.append(tok)
        if kind in _LITERAL_TOKENS:
            code.append("''" if kind != "NUMBER" else tok.text)
        elif kind == "IDENTIFIER":
            names.add(tok.text.lower())
            code.append('""')
        else:
            code.append(sql[tok.start : tok.end + 1])
            called = i + 1 < len(tokens) and tokens[i + 1].token_type.name == "L_PAREN"
            if _WORD_RE.fullmatch(tok.text) and tok.text.upper() not in _KEYWORDS and not called:
                names.add(tok.text.lower())
    if current:
        statements.append((sql[start:], tuple(current)))
    return _Scan(tokens, tuple(statements), frozenset(names), " ".join(code))


def _scan(sql: str) -> _Scan | None:
    """:func:`_read`, or None when ``sql`` cannot be read (hints then have nothing to say)."""
    try:
        return _read(sql)
    except DatabaseError:
        return None


def _names(sql: str) -> frozenset[str]:
    """Lower-cased names the code of ``sql`` uses (see :class:`_Scan`); empty when unreadable."""
    scan = _scan(sql)
    return scan.names if scan else frozenset()


def _ident(name: str) -> str:
    """``name`` as SQL: bare when it is a plain ASCII word and not a keyword, else double-quoted."""
    return name if _BARE_NAME_RE.fullmatch(name) and name.upper() not in _KEYWORDS else _q(name)


def _ref(table: str, column: str) -> str:
    return f"{_ident(table)}.{_ident(column)}"


@functools.lru_cache(maxsize=4)
def _tree(sql: str) -> exp.Expr | None:
    """The syntax tree of ``sql`` (sqlglot, SQLite dialect), or None when it is not a single
    statement sqlglot can parse (too long, unterminated, a syntax it does not know, nesting too
    deep): the checks that need it then cannot tell."""
    scan = _scan(sql)
    if scan is None or len(scan.statements) != 1:
        return None
    try:
        trees = _sqlite_dialect().parser().parse(list(scan.statements[0][1]), sql)
    except Exception:  # noqa: BLE001 - ParseError, RecursionError on deep nesting, ...: cannot tell
        return None
    trees = [t for t in trees if t is not None]
    return trees[0] if len(trees) == 1 else None


# -- checking a statement -------------------------------------------------------------------------


def strip_bom(sql: str) -> str:
    """``sql`` without a leading byte-order mark (U+FEFF; text saved by some editors starts with
    one) and the white space around it: the tokenizer would read it as part of the first word."""
    return sql.strip().lstrip("\ufeff").strip()


def quote_back(text: str, limit: int = MAX_ECHO_CHARS) -> str:
    """What an error message quotes back of a name or SQL the caller gave: ``text`` itself, or
    its first ``limit`` characters with the project's one truncation mark
    (``tools.results.cut_text``) — a 99 kB name must not come back whole."""
    return text if len(text) <= limit else cut_text(text, limit)


def check_select(sql: str) -> str:
    """The statement to run (without a trailing ``;``) if ``sql`` is a single SELECT / WITH /
    VALUES statement of at most MAX_SQL_CHARS characters; raise DatabaseError with the reason
    otherwise. A ``;`` inside a string, a quoted name or a comment does not count as a second
    statement."""
    if not isinstance(sql, str):
        raise DatabaseError(
            f"sql must be a string holding one SELECT statement, got {type(sql).__name__}"
            + (" (send the SQL as text)" if isinstance(sql, (bytes, bytearray)) else "")
        )
    sql = strip_bom(sql)
    if not sql.strip():
        raise DatabaseError("sql is empty; send one SELECT statement")
    statements = _read(sql).statements
    if not statements:
        raise DatabaseError("sql holds only comments; send one SELECT statement")
    if len(statements) > 1:
        raise DatabaseError("only one statement is allowed (remove the extra ';' and what follows)")
    source, tokens = statements[0]
    first = tokens[0]
    word = first.text.upper() if first.token_type.name != "IDENTIFIER" and _WORD_RE.fullmatch(first.text) else ""
    if word not in ("SELECT", "WITH", "VALUES"):
        raise DatabaseError(
            f"only a single read-only SELECT (or WITH ... SELECT) statement is allowed, got "
            f"{quote_back(word) or source.strip()[:20]!r}; this tool cannot write, ATTACH or run PRAGMA"
        )
    return source.strip()


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
    or ``only_named`` is False), at most ``limit`` characters; odd names quoted."""
    con.set_authorizer(_schema_authorizer)  # the model's statement is over: introspection only
    try:
        names = _table_names(con)
        used = _names(sql) if only_named else frozenset()
        named = [t for t in names if t.lower() in used]
        parts = []
        for table in named or names:
            parts.append(f"{_ident(table)}({', '.join(_ident(c[0]) for c in _columns(con, table))})")
            if sum(map(len, parts)) > limit:
                break
    except sqlite3.Error:
        return ""
    text = "; ".join(parts)
    return text if len(text) <= limit else text[:limit].rsplit(";", 1)[0] + "; …"


# Other engines' date and limit syntax, which SQLite rejects with a bare "syntax error" or
# "no such function" that does not say what to write instead; models trained mostly on MySQL /
# PostgreSQL write these first (measured: Qwen2.5-Coder wrote DATE_SUB(CURDATE(), INTERVAL 1
# MONTH) on the demo database). Each entry: (pattern, what was used, the SQLite way); the
# patterns run on the code of the SQL (:class:`_Scan`: strings are '' there, comments are gone).
_OTHER_DIALECTS: list[tuple[re.Pattern[str], str, str]] = [
    (
        re.compile(r"\b(DATE_SUB|DATE_ADD|DATEADD|DATEDIFF|ADDDATE|SUBDATE)\s*\(|\bINTERVAL\s+('|-?\s*[0-9])", re.I),
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
    (re.compile(r"\bSELECT\s+(ALL\s+|DISTINCT\s+)?TOP\s+\(?\s*[0-9]", re.I), "SELECT TOP n", "ORDER BY ... LIMIT n"),
    (re.compile(r"\bILIKE\b", re.I), "ILIKE", "LIKE (case-insensitive for ASCII in SQLite)"),
]


def dialect_hint(sql: str) -> str:
    """What in ``sql`` is another engine's syntax and the SQLite way to write it, as one
    sentence ("" when nothing is recognised, or the SQL cannot be read). Only code counts: a
    function name inside a string literal, a quoted name or a comment is no hint. Used in SQL
    error messages."""
    scan = _scan(sql)
    if scan is None:
        return ""
    found = [f"{used} → {sqlite}" for pattern, used, sqlite in _OTHER_DIALECTS if pattern.search(scan.code)]
    if not found:
        return ""
    return " This database is SQLite, which has no such syntax: " + "; ".join(found) + "."


#: Characters of a join hint at most (a wide schema has long foreign-key paths).
MAX_HINT_CHARS = 600


def _primary_key(con: sqlite3.Connection, table: str) -> list[str]:
    """The declared primary-key columns of ``table`` in key order ([] for a rowid table)."""
    cols = sorted((c for c in _columns(con, table) if c[3]), key=lambda c: c[3])
    return [c[0] for c in cols]


def _declared_keys(con: sqlite3.Connection, table: str) -> list[tuple[str, list[str], list[str | None]]]:
    """``(parent table, columns, parent columns)`` of each foreign key of ``table``, in key
    order (a composite key is one entry). A key declared without a column list (``REFERENCES
    parent``) refers to the parent's primary key; a parent column that cannot be told is None."""
    keys: dict[int, list[tuple[int, str, str, str | None]]] = {}
    for row in con.execute(f"PRAGMA foreign_key_list({_q(table)})"):
        keys.setdefault(row[0], []).append((row[1], row[2], row[3], row[4]))
    out: list[tuple[str, list[str], list[str | None]]] = []
    for parts in keys.values():
        parts.sort()
        parent = str(parts[0][1])
        dst: list[str | None] = [p[3] for p in parts]
        if any(d is None for d in dst):  # REFERENCES parent: the parent's primary key
            try:
                pk: list[str | None] = list(_primary_key(con, parent))
            except sqlite3.Error:
                pk = []
            dst = pk if len(pk) == len(parts) else [None] * len(parts)
        out.append((parent, [p[2] for p in parts], dst))
    return out


def _foreign_keys(con: sqlite3.Connection, tables: list[str]) -> list[tuple[str, str, str]]:
    """``(table, other table, condition)`` of every declared foreign key between ``tables``:
    ``a.x = b.y`` (``... AND ...`` for a composite key), odd names quoted; a key whose parent
    columns cannot be told is left out (see :func:`_declared_keys`)."""
    by_lower = {t.lower(): t for t in tables}
    edges = []
    for table in tables:
        for parent, src, dst in _declared_keys(con, table):
            other = by_lower.get(parent.lower())
            if other is None or not src or not all(src) or any(d is None for d in dst):
                continue
            cond = " AND ".join(f"{_ref(table, s)} = {_ref(other, str(d))}" for s, d in zip(src, dst))
            edges.append((table, other, cond))
    return edges


def _unjoined_table(con: sqlite3.Connection, column: str) -> str:
    """For an unknown qualified column ``table.col`` whose table exists and has ``col``: that
    table's name (the query uses it without joining it), else ""."""
    if "." not in column:
        return ""
    con.set_authorizer(_schema_authorizer)  # the model's statement is over: introspection only
    table, col = (part.strip().strip("\"`[]'") for part in column.rsplit(".", 1))
    try:
        for name in _table_names(con):
            if name.lower() == table.lower() and any(c[0].lower() == col.lower() for c in _columns(con, name)):
                return name
    except sqlite3.Error:
        return ""
    return ""


def _join_path(
    con: sqlite3.Connection, sql: str, column: str = ""
) -> tuple[list[str], str, list[tuple[str, str, str]]]:
    """``(tables having the column, its bare name, steps)`` for :func:`join_hint`: each step is
    ``(table, table, condition)`` of one foreign key on the shortest paths joining the tables
    ``sql`` names (and up to two tables that have ``column``)."""
    tables = _table_names(con)
    used = _names(sql)
    named = [t for t in tables if t.lower() in used]
    bare = column.rsplit(".", 1)[-1].strip().strip("\"`[]'") if column else ""
    having = [t for t in tables if bare and any(c[0].lower() == bare.lower() for c in _columns(con, t))]
    wanted = list(dict.fromkeys(named + having[:2]))
    if len(wanted) < 2:
        return having, bare, []
    graph: dict[str, list[tuple[str, tuple[str, str, str]]]] = {t: [] for t in tables}
    for edge in _foreign_keys(con, tables):
        a, b, _ = edge
        graph[a].append((b, edge))
        graph[b].append((a, edge))
    joined: set[str] = {wanted[0]}
    steps: list[tuple[str, str, str]] = []
    for target in wanted[1:]:
        if target in joined:
            continue
        # breadth-first from everything joined so far to ``target``
        previous: dict[str, tuple[str, tuple[str, str, str]] | None] = {t: None for t in joined}
        queue = collections.deque(joined)
        while queue and target not in previous:
            node = queue.popleft()
            for nxt, edge in graph[node]:
                if nxt not in previous:
                    previous[nxt] = (node, edge)
                    queue.append(nxt)
        if target not in previous:
            continue
        node, path = target, []
        while (step := previous[node]) is not None:
            path.append(step[1])
            joined.add(node)
            node = step[0]
        steps.extend(reversed(path))
    return having, bare, list(dict.fromkeys(steps))


def join_hint(con: sqlite3.Connection, sql: str, column: str = "") -> str:
    """How the tables ``sql`` names (and, for an unknown ``column``, the tables that do have a
    column of that name) join through the declared foreign keys, as one sentence of at most
    about MAX_HINT_CHARS characters: the join conditions along the shortest paths
    (breadth-first over the foreign-key graph, taken as undirected; a composite key is one
    ``... AND ...`` condition, a key without a column list joins the parent's primary key, odd
    names are quoted). "" when fewer than two tables are involved or no path exists. ``con``
    must allow the schema pragmas. A model that knows the columns still joins two tables
    directly when the link runs through a third (measured: Qwen2.5-Coder-1.5B joined regions to
    order_items on a region_id order_items does not have)."""
    return _join_sentence(*_join_path(con, sql, column))


def _join_sentence(having: list[str], bare: str, steps: list[tuple[str, str, str]]) -> str:
    if not steps:
        return ""
    where = ""
    if having and bare:
        shown = ", ".join(_ident(t) for t in having[:8]) + (", …" if len(having) > 8 else "")
        where = f" Column {bare[:60]!r} is in {shown}."
    conditions: list[str] = []
    for _, _, cond in steps:
        if conditions and len(where) + sum(len(c) + 2 for c in conditions) + len(cond) > MAX_HINT_CHARS:
            conditions.append("…")
            break
        conditions.append(cond[:MAX_HINT_CHARS])
    return f"{where} These tables join on: {'; '.join(conditions)}."


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
            f"statement refused: the database is read-only here ({quote_back(text)}); only SELECT queries run, nothing was written"
        )
    m = re.match(r"no such (table|column|function): (.+)", text)
    if m:
        what, name = m.groups()
        if what == "function":
            return DatabaseError(f"unknown SQL function {quote_back(name)!r} (SQLite dialect)")
        if what == "column" and (unjoined := _unjoined_table(con, name)):
            # "no such column: regions.name" while regions has a name column: the table is
            # used but missing from FROM / JOIN, which SQLite reports as an unknown column
            having, bare, steps = _join_path(con, sql)
            on = [cond for a, b, cond in steps if unjoined in (a, b)]
            add = f"JOIN {_ident(unjoined)} ON {on[0] if on else '...'}"
            return DatabaseError(
                f"table {quote_back(_ident(unjoined))} is used ({quote_back(name)}) but not in the query's FROM or JOIN: "
                f"add {add}.{_join_sentence(having, bare, steps)}"
            )
        hint = _schema_hint(con, sql, only_named=what == "column")
        hint = f" Tables and columns here: {hint}." if hint else ""
        if what == "column":
            try:
                hint += join_hint(con, sql, name)
            except sqlite3.Error:
                pass
        return DatabaseError(
            f"unknown {what} {quote_back(name)!r}: the database has no such {what}.{hint} "
            "Call describe_database to see its tables and columns, then fix the SQL"
        )
    if "ambiguous column" in text:
        return DatabaseError(f"{quote_back(text)}: qualify the column with its table (see describe_database)")
    hint = _schema_hint(con, sql, only_named=True, limit=600) if sql else ""
    hint = f" Tables and columns it names: {hint}." if hint else ""
    return DatabaseError(f"SQL error: {quote_back(text)}.{hint}")


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
    scan = _scan(sql)  # a count( in a string or a comment is no aggregate
    return bool(_AGGREGATE_RE.search(scan.code if scan else sql)) and all(v is None or v == 0 for v in values)


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


def _sample(con: sqlite3.Connection, table: str, column: str) -> list[Any]:
    """Up to DATE_SAMPLE values of the column that are neither NULL nor blank text."""
    col = _q(column)
    rows = con.execute(
        f"SELECT {col} FROM {_q(table)} WHERE {col} IS NOT NULL AND (typeof({col}) <> 'text' "
        f"OR trim({col}, ' ' || char(9, 10, 13)) <> '') LIMIT {DATE_SAMPLE}"
    )
    return [r[0] for r in rows if not (isinstance(r[0], str) and not r[0].strip())]


def _mostly(sample: list[Any], test: Any) -> bool:
    """At least DATE_SHARE of the (non-empty) ``sample`` passes ``test``."""
    return bool(sample) and sum(1 for v in sample if test(v)) >= DATE_SHARE * len(sample)


def _is_epoch(value: Any) -> bool:
    # Unix seconds from 1973-03 on (or milliseconds): smaller numbers in a DATE column are
    # rather day or month numbers such as 20260105 or 202601, which are no timestamps
    return isinstance(value, (int, float)) and not isinstance(value, bool) and abs(value) >= _EPOCH_MIN


def _is_plain_epoch(value: Any) -> bool:
    """A Unix timestamp in seconds or milliseconds of 1973-2286 (a time-named INTEGER column)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return False
    return _EPOCH_SECONDS[0] <= value < _EPOCH_SECONDS[1] or _EPOCH_MILLIS[0] <= value < _EPOCH_MILLIS[1]


def _is_iso(value: Any) -> bool:
    return isinstance(value, str) and bool(_ISO_DATE_RE.match(value.strip()))


def _time_named(column: str) -> bool:
    """The column's name says it holds a point in time: created_at, paid_on, event_time, ts..."""
    snake = re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", column).lower()
    return bool(_TIME_NAME_RE.search(snake))


def date_kind(con: sqlite3.Connection, table: str, column: str, declared: str) -> str | None:
    """``"text"`` (ISO date strings), ``"epoch"`` (Unix seconds/ms: from 1973 on in a
    DATE/TIMESTAMP column; 1e8-1e10 s or 1e11-1e13 ms in a numeric column whose name says it
    is a time, such as created_at, paid_on, event_time, timestamp) or None (not a date column).
    Up to DATE_SAMPLE values are sampled, NULL and blank ones left out; at least DATE_SHARE
    (90 %) of them must be dates, so a stray 'N/A' does not hide a date column. Month text such
    as 'Jan 2026', '2026/01' or '2026-01' is no date (its MIN/MAX are no date range), see
    :func:`period_kind`."""
    declared_date = bool(_DATE_TYPE_RE.search(declared or ""))
    numeric = bool(not declared_date and declared and _NUMERIC_TYPE_RE.search(declared))
    if numeric and not _time_named(column):
        return None
    return _date_kind_of(_sample(con, table, column), declared, column)


def _date_kind_of(sample: list[Any], declared: str, column: str) -> str | None:
    declared_date = bool(_DATE_TYPE_RE.search(declared or ""))
    numeric = bool(not declared_date and declared and _NUMERIC_TYPE_RE.search(declared))
    if not sample:
        return "text" if declared_date else None
    if not numeric and _mostly(sample, _is_iso):
        return "text"
    if declared_date and _mostly(sample, _is_epoch):
        return "epoch"
    if _time_named(column) and _mostly(sample, _is_plain_epoch):
        return "epoch"
    return None


def _period_number(value: Any) -> bool:
    """A year (1900-2100), a YYYYMM or a YYYYMMDD number."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value != int(value):
        return False
    n = int(value)
    if 1900 <= n <= 2100:
        return True
    if 190001 <= n <= 210012:
        return 1 <= n % 100 <= 12
    if 19000101 <= n <= 21001231:
        return 1 <= n // 100 % 100 <= 12 and 1 <= n % 100 <= 31
    return False


def period_kind(con: sqlite3.Connection, table: str, column: str, declared: str) -> str | None:
    """What a condition on this column restricts: ``"text"`` / ``"epoch"`` (a date column, see
    :func:`date_kind`), ``"month-text"`` (every sampled value is a month, quarter, year or date
    in another form: 'Jan 2026', 'January 2026', '2026/01', '2026-01', '01/2026', '2026-Q1',
    '05.01.2026', '2026'), ``"number"`` (years, YYYYMM or YYYYMMDD numbers in a column declared
    DATE or named like year/month/period/date) or None. Samples at most DATE_SAMPLE values,
    NULL and blank ones left out; DATE_SHARE of them must be of the kind."""
    declared_date = bool(_DATE_TYPE_RE.search(declared or ""))
    numeric = bool(not declared_date and declared and _NUMERIC_TYPE_RE.search(declared))
    hinted = declared_date or bool(_PERIOD_NAME_RE.search(column))
    if numeric and not hinted and not _time_named(column):
        return None
    sample = _sample(con, table, column)
    kind = _date_kind_of(sample, declared, column)
    if kind or not sample:
        return kind
    if _mostly(
        sample,
        lambda v: (
            isinstance(v, str)
            and bool(_PERIOD_TEXT_RE.fullmatch(v.strip()) or (hinted and _PERIOD_NUMBER_TEXT_RE.fullmatch(v.strip())))
        ),
    ):
        return "month-text"
    if hinted and _mostly(sample, _period_number):
        return "number"
    return None


def date_range(
    con: sqlite3.Connection, table: str, column: str, kind: str, today: dt.date | None = None
) -> dict[str, Any]:
    """``{min, max, latest_month, latest_full_month}`` of a date-like column: first and last
    day with data, the month of the last one, and the latest calendar month with data that has
    ended before ``today`` (None when there is none). Only values of the kind count: ISO text
    for ``"text"``, timestamps from 1973 on for ``"epoch"``."""
    tab = _q(table)
    epoch = kind == "epoch"
    if epoch:
        col = _q(column)
        # timestamps only: a 0 or -1 standing for "unknown" is no date
        filt = f"typeof({col}) IN ('integer', 'real') AND abs({col}) >= {_EPOCH_MIN:.0f}"
    else:
        # ISO text only (blank, 'N/A' ... are left out: 'N/A' sorts after every date)
        col = f"trim({_q(column)})"
        filt = f"typeof({_q(column)}) = 'text' AND {col} GLOB '[0-9][0-9][0-9][0-9]-[0-9][0-9]-[0-9][0-9]*'"
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


def date_columns_in(con: sqlite3.Connection, sql: str, limit: int = 4) -> list[dict[str, Any]]:
    """Date ranges of the date-like columns that ``sql`` names in its code (of the tables it
    names there; a name in a string or a comment does not count), at most ``limit``. ``con``
    must allow the schema pragmas."""
    used = _names(sql)
    found: list[dict[str, Any]] = []
    for table in _table_names(con):
        if table.lower() not in used:
            continue
        for name, declared, _, _ in _columns(con, table):
            if name.lower() not in used:
                continue
            kind = date_kind(con, table, name, declared)
            if kind:
                found.append({"column": _ref(table, name), **date_range(con, table, name, kind)})
                if len(found) >= limit:
                    return found
    return found


@dataclass(frozen=True)
class Undated:
    """The date and period columns (``table.column`` with its :func:`period_kind`) of the
    tables a query uses, none of which its conditions restrict; ``grouped``: the query groups
    by one of them (a row per month, still of every month)."""

    columns: list[tuple[str, str]]
    grouped: bool = False


def _in_scope(node: exp.Expr) -> Iterator[exp.Expr]:
    """``node`` and what is under it, not entering nested queries (their conditions count on
    their own) — iterative: a deep expression must not exhaust the stack."""
    from sqlglot import exp

    stack = [node]
    while stack:
        current = stack.pop()
        yield current
        stack.extend(child for child in current.iter_expressions() if not isinstance(child, (exp.Query, exp.Subquery)))


def _restricted_columns(tree: exp.Expr) -> list[exp.Column]:
    """The columns compared in a condition of ``tree``: in WHERE, HAVING, JOIN ... ON, CASE WHEN
    / IIF and FILTER (WHERE ...) conditions, an operand of a comparison (=, <>, <, >, <=, >=,
    IS, BETWEEN, IN, LIKE, GLOB, REGEXP, MATCH). ``x IS [NOT] NULL`` restricts no period."""
    from sqlglot import exp

    found: list[exp.Column] = []
    for node in tree.find_all(exp.Where, exp.Having, exp.Join, exp.If):
        cond = node.args.get("on") if isinstance(node, exp.Join) else node.this
        if not isinstance(cond, exp.Expr):
            continue
        for pred in _in_scope(cond):
            if not isinstance(pred, exp.Predicate) or (
                isinstance(pred, exp.Is) and isinstance(pred.expression, exp.Null)
            ):
                continue
            found.extend(c for c in _in_scope(pred) if isinstance(c, exp.Column))
    return found


class _Sources:
    """What the columns of one parsed query can refer to: the database's tables and views it
    uses (by name and alias; the names of its WITH tables shadow them), and the expressions
    behind its column aliases (``SELECT strftime('%Y-%m', d) AS month``, ``WITH m(month) AS``)."""

    def __init__(self, tree: exp.Expr, table_names: list[str]) -> None:
        from sqlglot import exp

        by_lower = {t.lower(): t for t in table_names}
        ctes = {cte.alias_or_name.lower() for cte in tree.find_all(exp.CTE)}
        self.tables: list[str] = []
        self.aliases: dict[str, set[str]] = collections.defaultdict(set)
        for t in tree.find_all(exp.Table):
            name = t.name.lower()
            if not name or name in ctes or name not in by_lower:
                continue
            real = by_lower[name]
            if real not in self.tables:
                self.tables.append(real)
            self.aliases[t.alias_or_name.lower()].add(real)
        #: lower-cased column names of each table used (set by the caller once read)
        self.known: dict[str, set[str]] = {}
        self.exprs: dict[str, list[exp.Expr]] = collections.defaultdict(list)
        for alias in tree.find_all(exp.Alias):
            self.exprs[alias.alias.lower()].append(alias.this)
        for cte in tree.find_all(exp.CTE):
            names = cte.args["alias"].columns if cte.args.get("alias") else []
            body = cte.this
            if names and isinstance(body, exp.Select):
                for ident, expr in zip(names, body.expressions):
                    self.exprs[ident.name.lower()].append(expr)

    def resolve(self, col: exp.Column, depth: int = 0) -> set[tuple[str, str]]:
        """``(table, lower-cased column name)`` pairs ``col`` may be (checked against the real
        columns by the caller): the table its qualifier names, else every table used; through
        an alias, the columns of the aliased expression (three levels deep at most)."""
        from sqlglot import exp

        name, qualifier = col.name.lower(), col.table.lower()
        if qualifier in self.aliases:
            return {(t, name) for t in self.aliases[qualifier]}
        out = {(t, name) for t in self.tables}
        if not qualifier and any(name in self.known.get(t, ()) for t in self.tables):
            return out  # as in SQLite, a column of the tables wins over an alias of that name
        if depth < 3:
            for expr in self.exprs.get(name, []):
                for inner in expr.find_all(exp.Column):
                    out |= self.resolve(inner, depth + 1)
        return out


#: Columns the period check samples at most per query (beside its 2 s deadline).
MAX_PERIOD_SAMPLES = 60


def find_undated(con: sqlite3.Connection, sql: str) -> Undated | None:
    """The period check of generate_report: :class:`Undated` when the tables and views ``sql``
    uses have date or period columns (:func:`period_kind`) and none of its conditions restricts
    one; None when it restricts one, its tables have none, or the check cannot tell (not one
    statement, over MAX_SQL_CHARS, a view is broken or endless: the query itself then reports
    what is wrong). SQL that sqlglot cannot parse but SQLite may run is checked by name only:
    a date or period column its code (not a string or comment) names counts as restricted.

    The rule: only a condition counts — a comparison in WHERE, JOIN ... ON, HAVING, CASE WHEN /
    IIF or FILTER (WHERE ...) with the column, or an expression of it (``strftime('%Y-%m',
    d)``, an alias of one), as an operand. Naming the column in the SELECT list, in GROUP BY or
    ORDER BY, in a comment or in a string does not: a ``GROUP BY strftime('%Y-%m', d)`` gives a
    row per month but of every month, so even for a period of several months it needs a WHERE
    (or HAVING) on the months wanted. ``d IS [NOT] NULL`` restricts nothing. A condition in any
    subquery counts (the check does not follow which rows reach the result). ``con`` must allow
    the schema pragmas; at most MAX_PERIOD_SAMPLES columns are sampled, within 2 s."""
    from sqlglot import exp

    if not isinstance(sql, str):
        return None
    sql = strip_bom(sql)
    scan = _scan(sql)
    if scan is None or len(scan.statements) != 1:
        return None
    tree = _tree(sql)
    try:
        # sampling a view runs it: bounded, and a broken or endless view means "cannot tell"
        with _Deadline(con, 2.0):
            table_names = _table_names(con)
            sources = _Sources(tree, table_names) if tree is not None else None
            # a syntax sqlglot does not parse (SQLite may still run it): the tables its code
            # names, and any of their date columns its code names counts as restricted
            used = sources.tables if sources else [t for t in table_names if t.lower() in scan.names]
            if not used:
                return None
            columns = {t: {c[0].lower(): c for c in _columns(con, t)} for t in used}
            if sources:
                sources.known = {t: set(cols) for t, cols in columns.items()}
            budget = [MAX_PERIOD_SAMPLES]
            kinds: dict[tuple[str, str], str | None] = {}

            def kind_of(table: str, name: str) -> str | None:
                if (table, name) not in kinds:
                    col = columns[table].get(name)
                    if col is None or budget[0] <= 0:
                        kinds[(table, name)] = None
                    else:
                        budget[0] -= 1
                        kinds[(table, name)] = period_kind(con, table, col[0], col[1])
                return kinds[(table, name)]

            if tree is not None and sources is not None:
                restricted = [pair for col in _restricted_columns(tree) for pair in sorted(sources.resolve(col))]
            else:
                restricted = [(t, n) for t in used for n in columns[t] if n in scan.names]
            if any(kind_of(t, n) for t, n in restricted):
                return None
            undated = [
                (t, name, kind) for t in used for name in list(columns[t])[:MAX_COLUMNS] if (kind := kind_of(t, name))
            ]
            if not undated:
                return None
            grouped_by: set[tuple[str, str]] = set()
            if tree is not None and sources is not None:
                for group in tree.find_all(exp.Group):
                    for col in _grouped_columns(group):
                        grouped_by |= sources.resolve(col)
    except sqlite3.Error:
        return None
    return Undated(
        [(_ref(t, columns[t][n][0]), kind) for t, n, kind in undated],
        grouped=any((t, n) in grouped_by for t, n, _ in undated),
    )


def _grouped_columns(group: exp.Expr) -> Iterator[exp.Column]:
    """The columns a GROUP BY groups by, ``GROUP BY 1`` read as the first selected expression."""
    from sqlglot import exp

    select = group.parent
    for expr in group.expressions:
        if isinstance(expr, exp.Literal) and expr.is_int and isinstance(select, exp.Select):
            position = int(expr.this) - 1
            if 0 <= position < len(select.expressions):
                expr = select.expressions[position]
        yield from expr.find_all(exp.Column)


def undated_columns(con: sqlite3.Connection, sql: str) -> list[str]:
    """``table.column`` of every date or period column of the tables ``sql`` uses when no
    condition of ``sql`` restricts any of them — its figures then cover all dates, whatever
    period a report claims; ``[]`` when it restricts one, its tables have none, or the check
    cannot tell. See :func:`find_undated` for what counts as a restriction."""
    found = find_undated(con, sql)
    return [c for c, _ in found.columns] if found else []


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
    foreign keys, row counts, and for date-like columns (see :func:`date_kind`: declared
    DATE/DATETIME/TIMESTAMP, text whose sampled values are mostly ISO dates, Unix timestamps in a
    column named like a time) ``{min, max, latest_month, latest_full_month}``.

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
        fks: dict[str, str] = {}
        if kind != "view":
            for parent, src, dst in _declared_keys(con, name):
                for s, d in zip(src, dst):
                    fks.setdefault(s, f"{parent}.{d}" if d else parent)
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
