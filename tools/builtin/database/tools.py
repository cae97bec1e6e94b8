"""The two data tools: ``describe_database`` and ``query_database``. See the package doc for
which database they read and how."""

from __future__ import annotations

import sqlite3
from typing import Any

from tools.builtin.database.categories import categories
from tools.builtin.database.connection import (
    DESCRIBE_TIME_LIMIT_S,
    Deadline,
    connect_readonly,
    database_file,
    time_limit,
)
from tools.builtin.database.dates import date_kind, date_range, period_kind
from tools.builtin.database.execution import execute_query
from tools.builtin.database.grain import ranked_rows, row_grain
from tools.builtin.database.period_scope import dated_conditions, find_undated
from tools.builtin.database.schema import MAX_COLUMNS, MAX_TABLES, declared_keys, list_tables, table_columns
from tools.builtin.database.statement import names_used, quote_name
from tools.builtin.database.view_columns import reapplied_columns
from tools.database_setting import DatabaseError


def query_database(sql: str, *, database: str = "") -> dict[str, Any]:
    """Run one read-only SELECT on the configured database (see module doc).

    Returns ``{"columns": [str], "rows": [[...]], "row_count": n, "truncated": bool}``, plus
    ``"note"`` (and ``"data_range"``, ``"unexpected_empty"``) when there is no data for it, and
    ``"undated"`` (``["table.column", ...]``) when its tables have date columns and no condition
    restricts one (its figures cover every date: ``period_scope.find_undated``; not set when it
    groups by one, a row per period), ``"dateless": true`` when its tables have no date or
    period column at all (its figures belong to no period), ``"grain"`` (``{"rows": n,
    "distinct": {key: m}}``: a COUNT or AVG without GROUP BY ran over rows that repeat these
    keys, :mod:`.grain`), ``"ranked_rows"`` (``{"rows": n, "repeated": [{"column", "source",
    "distinct"}]}``: an ORDER BY … LIMIT without GROUP BY ranked single rows in which these
    selected columns repeat, :func:`.grain.ranked_rows`), ``"date_conditions"`` (``["table.column",
    …]``: two or more date columns compared with values, :func:`.period_scope.dated_conditions`),
    ``"reapplied"`` (``[sentence]``: a view's computed column combined again with a column it
    is computed from, :mod:`.view_columns`), and ``"categories"`` (``{"table.column": [values]}``: the
    few text values of the categorical columns of its tables, :mod:`.categories`). Raises DatabaseError for a missing/invalid database,
    anything but a single SELECT/WITH statement, unknown tables or columns, and queries over the
    time limit.
    """
    path = database_file(database)
    con = connect_readonly(path, schema=True)
    try:
        result = execute_query(con, sql)
        if not result.get("no_data"):
            undated = find_undated(con, sql)
            if undated is not None and not undated.grouped:
                result["undated"] = [column for column, _ in undated.columns]
            elif undated is None and _dateless(con, result.get("sql_run", sql)):
                result["dateless"] = True
            if grain := row_grain(con, result.get("sql_run", sql)):
                result["grain"] = grain
            elif ranking := ranked_rows(con, result.get("sql_run", sql)):
                result["ranked_rows"] = ranking
            if conditions := dated_conditions(con, result.get("sql_run", sql)):
                result["date_conditions"] = conditions
            if reapplied := reapplied_columns(con, result.get("sql_run", sql)):
                result["reapplied"] = reapplied
            if held := categories(con, path, result.get("sql_run", sql)):
                result["categories"] = held
    finally:
        con.close()
    result.pop("no_data", None)
    return result


def _dateless(con: sqlite3.Connection, sql: str) -> bool:
    """True when no table or view ``sql`` uses has a date or period column (``period_kind``):
    its figures belong to no period (measured, Northwind: "Which 3 products sold the most units
    in 2018?" answered from ``SUM(UnitsInStock) FROM Products``). False when it cannot tell
    (over 2 s, an unreadable view)."""
    used = names_used(sql)
    try:
        with Deadline(con, 2.0):
            for table in list_tables(con):
                if table.lower() in used and any(
                    period_kind(con, table, name, declared) for name, declared, *_ in table_columns(con, table)
                ):
                    return False
    except sqlite3.Error:
        return False
    return bool(used)


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
        with Deadline(con, time_limit(DESCRIBE_TIME_LIMIT_S, 0.7)) as deadline:
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
    con: sqlite3.Connection, name: str, kind: str, deadline: Deadline, notes: list[str]
) -> dict[str, Any]:
    table: dict[str, Any] = {"name": name}
    if kind == "view":
        table["type"] = "view"
    try:
        cols = table_columns(con, name)
        fks: dict[str, str] = {}
        if kind != "view":
            for parent, src, dst in declared_keys(con, name):
                for s, d in zip(src, dst):
                    fks.setdefault(s, f"{parent}.{d}" if d else parent)
    except sqlite3.Error as exc:
        table["error"] = f"cannot read its columns: {exc}"
        return table
    try:
        table["row_count"] = (
            None if deadline.hit else con.execute(f"SELECT COUNT(*) FROM {quote_name(name)}").fetchone()[0]
        )
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


__all__ = ["describe_database", "query_database"]
