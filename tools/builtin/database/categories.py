"""The categorical text columns of the tables a query reads, with their values: what a request
may name without naming the column ("replies customers sent" → ``ticket_replies.author =
'customer'``).

Measured (Qwen2.5-Coder-1.5B, the generated tickets database): "How many replies did customers
send in October 2026?" → ``SELECT COUNT(ticket_no) FROM ticket_replies WHERE … = '2026-10'``
→ "Customers sent 187 replies" — every reply counted, agents' too (111 were customers'). The
figure is in the result, so no check of figures can see it. ``query_database`` returns these
values (``categories``) so that the answer check (DESIGN §5.5) can see a value the request names
that no read of the goal restricted to or grouped by.

A column is categorical when it holds at most :data:`MAX_VALUES` distinct text values and its
table has at least :data:`MIN_ROWS_PER_VALUE` times as many rows (a lookup table's names are not
categories). Read under a 1 s deadline; cached per database file (path, size, mtime) and table.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

from cachetools import LRUCache

from tools.builtin.database.connection import Deadline
from tools.builtin.database.schema import list_tables, table_columns
from tools.builtin.database.statement import names_used, quote_name

#: Distinct values a categorical column holds at most.
MAX_VALUES = 8
#: Rows per distinct value a table has at least for its column to count as categorical.
MIN_ROWS_PER_VALUE = 3
#: Columns returned per query at most (each costs the model a few tokens).
MAX_COLUMNS = 6
#: Characters kept of a value.
MAX_VALUE_CHARS = 40

_CACHE: LRUCache[tuple[str, int, int, str], dict[str, list[str]]] = LRUCache(maxsize=256)


def _table_categories(con: sqlite3.Connection, table: str) -> dict[str, list[str]]:
    tab = quote_name(table)
    rows = con.execute(f"SELECT COUNT(*) FROM {tab}").fetchone()[0]
    out: dict[str, list[str]] = {}
    for name, declared, *_ in table_columns(con, table):
        kind = str(declared or "").upper()
        if kind and not any(t in kind for t in ("CHAR", "TEXT", "CLOB")):
            continue  # numbers, dates declared as such, blobs
        col = quote_name(name)
        values = con.execute(
            f"SELECT DISTINCT {col} FROM {tab} WHERE {col} IS NOT NULL LIMIT {MAX_VALUES + 1}"
        ).fetchall()
        held = [v[0] for v in values]
        if (
            2 <= len(held) <= MAX_VALUES
            and rows >= MIN_ROWS_PER_VALUE * len(held)
            and all(isinstance(v, str) and v.strip() and not v.strip()[:1].isdigit() for v in held)
        ):
            out[f"{table}.{name}"] = sorted(v[:MAX_VALUE_CHARS] for v in held)
    return out


def categories(con: sqlite3.Connection, path: Path, sql: str) -> dict[str, list[str]]:
    """``{"table.column": [values]}`` for the categorical columns (module docstring) of the
    tables ``sql`` names, at most :data:`MAX_COLUMNS`; {} when there are none or the deadline
    passes. ``con`` must allow reading those tables and the schema pragmas. Never raises."""
    used = names_used(sql)
    try:
        stat = path.stat()
        found: dict[str, list[str]] = {}
        with Deadline(con, 1.0):
            for table in list_tables(con):
                if table.lower() not in used:
                    continue
                key = (str(path), stat.st_size, stat.st_mtime_ns, table)
                if key not in _CACHE:
                    _CACHE[key] = _table_categories(con, table)
                found.update(_CACHE[key])
        return dict(list(found.items())[:MAX_COLUMNS])
    except (sqlite3.Error, OSError):
        return {}
