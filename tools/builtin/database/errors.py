"""SQLite errors rendered for the model: what was refused or unknown, the tables and columns
that do exist, and the hints of :mod:`tools.builtin.database.hints` — each error says how to fix
the SQL, never only that it failed."""

from __future__ import annotations

import contextlib
import difflib
import re
import sqlite3

from tools.builtin.database.figures import figure_hint, numeric_columns, summed_column
from tools.builtin.database.hints import dialect_hint, join_hint, join_path, join_sentence, unjoined_table
from tools.builtin.database.schema import schema_hint
from tools.builtin.database.statement import identifier, quote_back
from tools.database_setting import DatabaseError


def sql_error(exc: sqlite3.Error, con: sqlite3.Connection, sql: str = "") -> DatabaseError:
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
        if what == "column" and (unjoined := unjoined_table(con, name)):
            # "no such column: regions.name" while regions has a name column: the table is
            # used but missing from FROM / JOIN, which SQLite reports as an unknown column
            having, bare, steps = join_path(con, sql)
            on = [cond for a, b, cond in steps if unjoined in (a, b)]
            add = f"JOIN {identifier(unjoined)} ON {on[0] if on else '...'}"
            return DatabaseError(
                f"table {quote_back(identifier(unjoined))} is used ({quote_back(name)}) but not in the query's FROM or JOIN: "
                f"add {add}.{join_sentence(having, bare, steps)}"
            )
        hint = schema_hint(con, sql, only_named=what == "column")
        hint = f" Tables and columns here: {hint}." if hint else ""
        summed = what == "column" and summed_column(sql, name)
        if what == "column":
            with contextlib.suppress(sqlite3.Error):
                hint += join_hint(con, sql, name)
            if summed:
                hint += figure_hint(con, sql)
        closest = _closest(con, sql, what, name, numeric=summed)
        near = f" Did you mean {' or '.join(quote_back(n) for n in closest)}?" if closest else ""
        return DatabaseError(
            f"unknown {what} {quote_back(name)!r}: the database has no such {what}.{near}{hint} "
            "Call describe_database to see its tables and columns, then fix the SQL"
        )
    if "syntax error" in text and (unquoted := _unquoted_names(con, sql)):
        # "near "Order": syntax error" for FROM Order Details: the name, not the SQL, is the fix
        # (measured, Northwind: written unquoted twice, then the round cap)
        names = ", ".join(quote_back(n) for n in unquoted)
        return DatabaseError(
            f"SQL error: {quote_back(text)}: {names} must be written in double quotes, as "
            f"{', '.join(identifier(n) for n in unquoted)}, since the name holds a space or a symbol"
        )
    if "ambiguous column" in text:
        return DatabaseError(f"{quote_back(text)}: qualify the column with its table (see describe_database)")
    hint = schema_hint(con, sql, only_named=True, limit=600) if sql else ""
    hint = f" Tables and columns it names: {hint}." if hint else ""
    return DatabaseError(f"SQL error: {quote_back(text)}.{hint}")


def _closest(
    con: sqlite3.Connection, sql: str, what: str, name: str, limit: int = 2, numeric: bool = False
) -> list[str]:
    """The existing tables (``what`` "table") or columns most like ``name``, best first, at most
    ``limit`` ([] when none is close); ``numeric``: only columns that hold figures (the name is
    summed or averaged: a date or a key named like it is no fix, :mod:`.figures`). Measured, Qwen2.5-Coder-1.5B wrote ``product_category``
    for ``category`` three times with the column list in view, and small models follow one
    named fix more readily than a list."""
    try:
        tables = [r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type IN ('table', 'view')")]
        if what == "table":
            candidates = tables
        else:
            # the columns of the tables the query names, else of every table
            named = [t for t in tables if re.search(rf"(?i)(?<![\w]){re.escape(t)}(?![\w])", sql)] or tables
            candidates = list(
                dict.fromkeys(c[1] for t in named[:20] for c in con.execute(f"PRAGMA table_info({identifier(t)})"))
            )
            if numeric:
                figures = {c for t in named[:20] for c in numeric_columns(con, t)}
                candidates = [c for c in candidates if c in figures]
    except sqlite3.Error:
        return []
    bare = name.rsplit(".", 1)[-1].strip('"`[]').lower()
    lowered = {c.lower(): c for c in candidates}
    # a word of the name that is a column ("customer_name" → name), its last word (the noun) first
    words = [w for w in reversed(re.split(r"[_\W]+", bare)) if w in lowered and w != bare]
    similar = difflib.get_close_matches(bare, list(lowered), n=limit, cutoff=0.6)
    return [lowered[m] for m in dict.fromkeys([*words, *similar])][:limit]


def _unquoted_names(con: sqlite3.Connection, sql: str) -> list[str]:
    """Tables and views whose names need quoting (a space, a symbol) written bare in ``sql``
    (``FROM Order Details``), at most 3. Never raises."""
    try:
        tables = [r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type IN ('table', 'view')")]
    except sqlite3.Error:
        return []
    out = []
    for name in tables:
        if identifier(name) == name:
            continue  # a plain word: bare is fine
        bare = re.compile(rf"(?<![\w\"`\[]){re.escape(name)}(?![\w\"`\]])", re.IGNORECASE)
        if bare.search(sql):
            out.append(name)
    return out[:3]
