"""Hints that turn a bare SQLite error into what to write instead: another engine's date and
limit syntax (:func:`dialect_hint`) and the join path between tables through the declared foreign
keys (:func:`join_hint`)."""

from __future__ import annotations

import collections
import re
import sqlite3

from tools.builtin.database.connection import schema_authorizer
from tools.builtin.database.schema import foreign_keys, list_tables, table_columns
from tools.builtin.database.statement import identifier, names_used, read_sql_or_none

# Other engines' date and limit syntax, which SQLite rejects with a bare "syntax error" or
# "no such function" that does not say what to write instead; models trained mostly on MySQL /
# PostgreSQL write these first (measured: Qwen2.5-Coder wrote DATE_SUB(CURDATE(), INTERVAL 1
# MONTH) on the demo database). Each entry: (pattern, what was used, the SQLite way); the
# patterns run on the code of the SQL (:class:`SqlScan`: strings are '' there, comments are gone).
_OTHER_DIALECTS: list[tuple[re.Pattern[str], str, str]] = [
    (
        re.compile(
            r"\b(DATE_SUB|DATE_ADD|DATEADD|DATEDIFF|ADDDATE|SUBDATE)\s*\(|\bINTERVAL\s+('|-?\s*[0-9])", re.IGNORECASE
        ),
        "date arithmetic (DATE_SUB / DATE_ADD / INTERVAL)",
        "date(col, '-1 month'), date('now', 'start of month', '-1 month')",
    ),
    (
        re.compile(r"\b(CURDATE|NOW|GETDATE|SYSDATE)\s*\(\s*\)", re.IGNORECASE),
        "the current date (CURDATE() / NOW())",
        "date('now') or datetime('now')",
    ),
    (
        re.compile(r"\b(YEAR|MONTH|DAY|EXTRACT|DATE_FORMAT|DATE_TRUNC|TO_CHAR)\s*\(", re.IGNORECASE),
        "date parts (YEAR() / MONTH() / EXTRACT / DATE_FORMAT / DATE_TRUNC)",
        "strftime('%Y-%m', col) = 'YYYY-MM' for a month, strftime('%Y', col) for a year",
    ),
    (
        re.compile(r"\bSELECT\s+(ALL\s+|DISTINCT\s+)?TOP\s+\(?\s*[0-9]", re.IGNORECASE),
        "SELECT TOP n",
        "ORDER BY ... LIMIT n",
    ),
    (re.compile(r"\bILIKE\b", re.IGNORECASE), "ILIKE", "LIKE (case-insensitive for ASCII in SQLite)"),
]


def dialect_hint(sql: str) -> str:
    """What in ``sql`` is another engine's syntax and the SQLite way to write it, as one
    sentence ("" when nothing is recognised, or the SQL cannot be read). Only code counts: a
    function name inside a string literal, a quoted name or a comment is no hint. Used in SQL
    error messages."""
    scan = read_sql_or_none(sql)
    if scan is None:
        return ""
    found = [f"{used} → {sqlite}" for pattern, used, sqlite in _OTHER_DIALECTS if pattern.search(scan.code)]
    if not found:
        return ""
    return " This database is SQLite, which has no such syntax: " + "; ".join(found) + "."


#: Characters of a join hint at most (a wide schema has long foreign-key paths).
MAX_HINT_CHARS = 600


def unjoined_table(con: sqlite3.Connection, column: str) -> str:
    """For an unknown qualified column ``table.col`` whose table exists and has ``col``: that
    table's name (the query uses it without joining it), else ""."""
    if "." not in column:
        return ""
    con.set_authorizer(schema_authorizer)  # the model's statement is over: introspection only
    table, col = (part.strip().strip("\"`[]'") for part in column.rsplit(".", 1))
    try:
        for name in list_tables(con):
            if name.lower() == table.lower() and any(c[0].lower() == col.lower() for c in table_columns(con, name)):
                return name
    except sqlite3.Error:
        return ""
    return ""


def join_path(con: sqlite3.Connection, sql: str, column: str = "") -> tuple[list[str], str, list[tuple[str, str, str]]]:
    """``(tables having the column, its bare name, steps)`` for :func:`join_hint`: each step is
    ``(table, table, condition)`` of one foreign key on the shortest paths joining the tables
    ``sql`` names (and up to two tables that have ``column``)."""
    tables = list_tables(con)
    used = names_used(sql)
    named = [t for t in tables if t.lower() in used]
    bare = column.rsplit(".", 1)[-1].strip().strip("\"`[]'") if column else ""
    having = [t for t in tables if bare and any(c[0].lower() == bare.lower() for c in table_columns(con, t))]
    wanted = list(dict.fromkeys(named + having[:2]))
    if len(wanted) < 2:
        return having, bare, []
    graph: dict[str, list[tuple[str, tuple[str, str, str]]]] = {t: [] for t in tables}
    for edge in foreign_keys(con, tables):
        a, b, _ = edge
        graph[a].append((b, edge))
        graph[b].append((a, edge))
    joined: set[str] = {wanted[0]}
    steps: list[tuple[str, str, str]] = []
    for target in wanted[1:]:
        if target in joined:
            continue
        # breadth-first from everything joined so far to ``target``
        previous: dict[str, tuple[str, tuple[str, str, str]] | None] = dict.fromkeys(joined)
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
    return join_sentence(*join_path(con, sql, column))


def join_sentence(having: list[str], bare: str, steps: list[tuple[str, str, str]]) -> str:
    if not steps:
        return ""
    where = ""
    if having and bare:
        shown = ", ".join(identifier(t) for t in having[:8]) + (", …" if len(having) > 8 else "")
        where = f" Column {bare[:60]!r} is in {shown}."
    conditions: list[str] = []
    for _, _, cond in steps:
        if conditions and len(where) + sum(len(c) + 2 for c in conditions) + len(cond) > MAX_HINT_CHARS:
            conditions.append("…")
            break
        conditions.append(cond[:MAX_HINT_CHARS])
    return f"{where} These tables join on: {'; '.join(conditions)}."


# a date function of SQLite called on string literals only: a constant the query compares with
_CONSTANT_TIME = re.compile(
    r"\b(strftime|date|datetime|julianday|unixepoch|time)\s*\(\s*('(?:[^']|'')*'(?:\s*,\s*'(?:[^']|'')*')*)\s*\)",
    re.IGNORECASE,
)


def null_time_strings(con: sqlite3.Connection, sql: str) -> str:
    """For a query that found nothing: its date functions of constants that SQLite evaluates to
    NULL — a time string it does not read (``strftime('%Y-%m', 'now() - interval 1 month')``),
    so every comparison with it matched no row — as one sentence with the SQLite way, or "".
    Measured (Qwen2.5-Coder-1.5B, Chinook, "How many invoices did we issue last month?"): that
    query returned ``COUNT(*) = 0`` three times, and "none" rested on a comparison with NULL.
    ``con`` must allow a SELECT of constants. Never raises."""
    null: list[str] = []
    for m in _CONSTANT_TIME.finditer(sql):
        try:
            if con.execute(f"SELECT {m[0]}").fetchone()[0] is None:
                null.append(m[0])
        except sqlite3.Error:
            continue
    if not null:
        return ""
    return (
        f"{'; '.join(null[:3])} is NULL: SQLite does not read that time string, so no row can match a "
        "comparison with it. Write dates the SQLite way: date('now', 'start of month', '-1 month'), "
        "strftime('%Y-%m', 'now', '-1 month'), date(col, '-7 days')."
    )
