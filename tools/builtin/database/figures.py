"""Where the figures are, for an unknown column the query sums or averages.

Measured (Qwen2.5-Coder-1.5B, the generated sales database, "What was the average order value in
November 2026?"): ``SELECT AVG(order_value) FROM orders …`` was refused with "Did you mean
order_date or order_id?" — the nearest names by spelling, a date and a key, neither of which can
be averaged — and the model wrote the same SQL again, then answered a figure no read held. The
orders table holds no figure at all: the money is in its lines (``order_items``) and in the
reporting view built on them.

A column inside ``SUM``/``AVG`` must be a number, so :func:`summed_column` tells the error to
offer only numeric columns, and :func:`figure_hint` names where numbers are: the numeric columns
of the tables the query names or, when those hold none but their keys, of the tables that
reference them (with the join condition) and of the views built on them — and that a total per
row of the named table is a SUM over its referencing rows. Generic: it reads declared types,
foreign keys and view definitions, never table or column names it expects.
"""

from __future__ import annotations

import re
import sqlite3

from tools.builtin.database.connection import schema_authorizer
from tools.builtin.database.schema import KEY_NAME, declared_keys, foreign_keys, list_tables, table_columns
from tools.builtin.database.statement import identifier, names_used, parse_tree, quote_name

#: Characters of the hint at most.
MAX_FIGURE_HINT_CHARS = 500
# SQLite's numeric type affinity rules (https://www.sqlite.org/datatype3.html §3.1), and the
# names of money / decimal types that get NUMERIC affinity
# ("ENUM" and "POINT" hold the letters but not numbers: Sakila's film.rating is ENUM 'PG-13')
_NUMERIC_TYPE = re.compile(r"(?i)(?<!PO)INT|REAL|FLOA|DOUB|(?<!E)NUM|DEC|MONEY")


def summed_column(sql: str, column: str) -> bool:
    """Whether ``sql`` uses the column ``column`` (bare or qualified name) inside ``SUM`` or ``AVG``
    (sqlglot's tree; False when the SQL cannot be parsed)."""
    from sqlglot import exp

    tree = parse_tree(sql)
    if tree is None:
        return False
    bare = column.rsplit(".", 1)[-1].strip().strip("\"`[]'").lower()
    for agg in tree.find_all(exp.Sum, exp.Avg):
        if any(col.name.lower() == bare for col in agg.find_all(exp.Column)):
            return True
    return False


def numeric_columns(con: sqlite3.Connection, table: str) -> list[str]:
    """The columns of ``table`` that hold figures: a numeric declared type, or (a view's computed
    column has none) numbers in its first non-NULL value; keys left out (a primary or foreign
    key, or a key's name). Raises sqlite3.Error when the schema cannot be read."""
    fk = {src.lower() for _, cols, _ in declared_keys(con, table) for src in cols}
    out = []
    for name, declared, _, pk in table_columns(con, table):
        if pk or name.lower() in fk or KEY_NAME.search(name):
            continue
        if declared:
            if _NUMERIC_TYPE.search(declared):
                out.append(name)
            continue
        row = con.execute(
            f"SELECT typeof({quote_name(name)}) FROM {quote_name(table)} WHERE {quote_name(name)} IS NOT NULL LIMIT 1"
        ).fetchone()
        if row and row[0] in ("integer", "real"):
            out.append(name)
    return out


def figure_hint(con: sqlite3.Connection, sql: str) -> str:
    """For a query that sums or averages a column its table lacks: one sentence naming where the
    figures are (module docstring), or "" when the query names no table or they cannot be read.
    ``con`` must allow the schema pragmas and a one-row SELECT. Never raises."""
    con.set_authorizer(schema_authorizer)  # the model's statement is over: introspection only
    try:
        return _figure_hint(con, sql)
    except sqlite3.Error:
        return ""


def _figure_hint(con: sqlite3.Connection, sql: str) -> str:
    tables = list_tables(con)
    used = names_used(sql)
    named = [t for t in tables if t.lower() in used]
    if not named:
        return ""
    own = {t: numeric_columns(con, t) for t in named}
    if any(own.values()):
        listed = "; ".join(f"{identifier(t)}: {', '.join(map(identifier, cols))}" for t, cols in own.items() if cols)
        return f" A summed or averaged column is a number; the numeric columns of these tables are {listed}."
    parts: list[str] = []
    children = 0
    lowered = {t.lower() for t in named}
    for edge in foreign_keys(con, tables):
        child, parent, cond = edge
        if parent.lower() in lowered and child.lower() not in lowered and (cols := numeric_columns(con, child)):
            parts.append(f"{identifier(child)}({', '.join(map(identifier, cols))}) JOIN {identifier(child)} ON {cond}")
            children += 1
    for name, definition in con.execute("SELECT name, sql FROM sqlite_master WHERE type = 'view'"):
        if name.lower() in lowered or not definition:
            continue
        built_on = any(re.search(rf"(?i)(?<![\w]){re.escape(t)}(?![\w])", definition) for t in named)
        if built_on and (cols := numeric_columns(con, name)):
            parts.append(f"view {identifier(name)}({', '.join(map(identifier, cols))})")
    shown = ", ".join(map(identifier, named))
    if not parts:
        return f" {shown} holds no numeric column but its keys: nothing there can be summed or averaged."
    text = f" {shown} holds no numeric column but its keys; the figures are in {'; '.join(parts)}."
    if children:
        text += f" A total per {identifier(named[0])} row is a SUM over the rows that reference it, grouped by its key."

    return text if len(text) <= MAX_FIGURE_HINT_CHARS else text[:MAX_FIGURE_HINT_CHARS].rsplit(";", 1)[0] + "; …"
