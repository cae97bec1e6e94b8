"""The database's schema as the data tools read it: tables and views, columns, primary and
foreign keys (``PRAGMA table_info`` / ``foreign_key_list``; the connection must allow the schema
pragmas), and the one-line ``table(col, ...)`` summary put in the tools' descriptions and in
error messages."""

from __future__ import annotations

import re
import sqlite3

from tools.builtin.database.connection import connect_readonly, database_file, schema_authorizer
from tools.builtin.database.statement import identifier, names_used, quote_name, sql_ref

#: describe_database lists at most this many tables, and this many columns per table.
MAX_TABLES = 40
MAX_COLUMNS = 40
#: A key's column name, not a figure's: "id", "OrderID", "order_id", "ticket_no", "client_ref"
#: (CamelCase is case-sensitive: "paid" is no key).
KEY_NAME = re.compile(r"(?i:(^|_)(id|no|nr|key|ref)$)|[a-z](Id|ID|No|Key|Ref)$")


def list_tables(con: sqlite3.Connection) -> list[str]:
    return [
        r[0]
        for r in con.execute(
            "SELECT name FROM sqlite_master WHERE type IN ('table', 'view') AND name NOT LIKE 'sqlite_%' ORDER BY name"
        )
    ]


def table_columns(con: sqlite3.Connection, table: str) -> list[tuple[str, str, int, int]]:
    """(name, declared type, notnull, pk position) of each column; [] for a view SQLite cannot
    compile (measured: six of Sakila's views call MySQL's CONCAT, and one of them made every
    schema hint of that database empty). Raises sqlite3.Error when interrupted (a deadline)."""
    try:
        rows = con.execute(f"PRAGMA table_info({quote_name(table)})").fetchall()
    except sqlite3.OperationalError as exc:
        if "interrupt" in str(exc):
            raise
        return []
    return [(r[1], r[2] or "", r[3], r[5]) for r in rows]


def primary_key(con: sqlite3.Connection, table: str) -> list[str]:
    """The declared primary-key columns of ``table`` in key order ([] for a rowid table)."""
    cols = sorted((c for c in table_columns(con, table) if c[3]), key=lambda c: c[3])
    return [c[0] for c in cols]


def declared_keys(con: sqlite3.Connection, table: str) -> list[tuple[str, list[str], list[str | None]]]:
    """``(parent table, columns, parent columns)`` of each foreign key of ``table``, in key
    order (a composite key is one entry). A key declared without a column list (``REFERENCES
    parent``) refers to the parent's primary key; a parent column that cannot be told is None."""
    keys: dict[int, list[tuple[int, str, str, str | None]]] = {}
    for row in con.execute(f"PRAGMA foreign_key_list({quote_name(table)})"):
        keys.setdefault(row[0], []).append((row[1], row[2], row[3], row[4]))
    out: list[tuple[str, list[str], list[str | None]]] = []
    for parts in keys.values():
        parts.sort()
        parent = str(parts[0][1])
        dst: list[str | None] = [p[3] for p in parts]
        if any(d is None for d in dst):  # REFERENCES parent: the parent's primary key
            try:
                pk: list[str | None] = list(primary_key(con, parent))
            except sqlite3.Error:
                pk = []
            dst = pk if len(pk) == len(parts) else [None] * len(parts)
        out.append((parent, [p[2] for p in parts], dst))
    return out


def foreign_keys(con: sqlite3.Connection, tables: list[str]) -> list[tuple[str, str, str]]:
    """``(table, other table, condition)`` of every declared foreign key between ``tables``:
    ``a.x = b.y`` (``... AND ...`` for a composite key), odd names quoted; a key whose parent
    columns cannot be told is left out (see :func:`declared_keys`)."""
    by_lower = {t.lower(): t for t in tables}
    edges = []
    for table in tables:
        for parent, src, dst in declared_keys(con, table):
            other = by_lower.get(parent.lower())
            if other is None or not src or not all(src) or any(d is None for d in dst):
                continue
            cond = " AND ".join(f"{sql_ref(table, s)} = {sql_ref(other, str(d))}" for s, d in zip(src, dst))
            edges.append((table, other, cond))
    return edges


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
        return schema_hint(con, "", only_named=False, limit=limit)
    finally:
        con.close()


def schema_hint(con: sqlite3.Connection, sql: str, only_named: bool, limit: int = 1200) -> str:
    """``table(col, col, ...); ...`` of the tables ``sql`` names (all tables when it names none
    or ``only_named`` is False), at most ``limit`` characters; odd names quoted."""
    con.set_authorizer(schema_authorizer)  # the model's statement is over: introspection only
    try:
        names = list_tables(con)
        used = names_used(sql) if only_named else frozenset()
        named = [t for t in names if t.lower() in used]
        parts = []
        for table in named or names:
            if not (columns := table_columns(con, table)):
                continue  # a view SQLite cannot compile: nothing to query there
            parts.append(f"{identifier(table)}({', '.join(identifier(c[0]) for c in columns)})")
            if sum(map(len, parts)) > limit:
                break
    except sqlite3.Error:
        return ""
    text = "; ".join(parts)
    return text if len(text) <= limit else text[:limit].rsplit(";", 1)[0] + "; …"
