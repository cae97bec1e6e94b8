"""The periods that have data: for the date columns a set of queries reads, the latest full month
with data, whether a stated period has any rows, and the condition that restricts a query to a
month. A refusal about a period without data carries these (:func:`period_resolution`), so the
next call can succeed: the latest month with data, the exact ``period`` to send and the WHERE
condition the queries need — never a silent substitute (DESIGN §5.6)."""

from __future__ import annotations

import datetime as dt
import sqlite3
from dataclasses import dataclass

from tools.builtin.database.connection import Deadline
from tools.builtin.database.dates import date_kind, date_range
from tools.builtin.database.schema import list_tables, table_columns
from tools.builtin.database.statement import identifier, names_used, quote_name, sql_ref

#: Date columns looked at per call at most (each costs a sample and a MIN/MAX).
MAX_DATA_COLUMNS = 6
#: The ``period`` value that asks generate_report for the latest full month with data.
LATEST = "latest"


@dataclass(frozen=True)
class DataMonths:
    """One date column and the months it has data for: ``column`` as SQL (``table.column``),
    ``kind`` (``"text"`` ISO dates, ``"epoch"`` Unix seconds; ``millis`` for milliseconds),
    first and last day with data, the latest month with data that has ended before today."""

    table: str
    name: str
    kind: str
    millis: bool
    first: str | None
    last: str | None
    latest_full_month: str | None

    @property
    def column(self) -> str:
        return sql_ref(self.table, self.name)

    def month_expr(self) -> str:
        """SQL giving the ``YYYY-MM`` of this column's value."""
        col = quote_name(self.name)
        if self.kind == "epoch":
            return f"strftime('%Y-%m', {col}{' / 1000' if self.millis else ''}, 'unixepoch')"
        return f"strftime('%Y-%m', {col})"

    def condition(self, lo: str, hi: str | None = None) -> str:
        """``WHERE`` condition (without the keyword) restricting this column to the months
        ``lo``..``hi`` (``YYYY-MM``; one month when ``hi`` is None). The column is bare: a query
        that gives its table an alias (``FROM orders o``) can no longer name it ``orders.x``."""
        expr = self.month_expr().replace(quote_name(self.name), identifier(self.name), 1)
        if hi is None or hi == lo:
            return f"{expr} = '{lo}'"
        return f"{expr} BETWEEN '{lo}' AND '{hi}'"

    def describe(self) -> str:
        if self.last is None:
            return f"{self.column} holds no dates"
        return f"{self.column} has data from {self.first} to {self.last}"


def data_columns(
    con: sqlite3.Connection, sqls: list[str], today: dt.date | None = None, *, named_only: bool = False
) -> list[DataMonths]:
    """The date columns (ISO text or Unix timestamps, :func:`tools.builtin.database.dates.date_kind`)
    of the tables ``sqls`` name in their code: first the columns the SQL names, then the other
    date columns of those tables (not with ``named_only``); at most MAX_DATA_COLUMNS, within 2 s. ``con`` must allow the
    schema pragmas. ``[]`` when there is none or the schema cannot be read."""
    used: set[str] = set()
    for sql in sqls:
        used |= names_used(sql)
    named: list[DataMonths] = []
    other: list[DataMonths] = []
    try:
        with Deadline(con, 2.0):
            for table in list_tables(con):
                if table.lower() not in used:
                    continue
                for name, declared, _, _ in table_columns(con, table):
                    if len(named) + len(other) >= MAX_DATA_COLUMNS:
                        break
                    kind = date_kind(con, table, name, declared)
                    if not kind:
                        continue
                    found = date_range(con, table, name, kind, today)
                    millis = False
                    if kind == "epoch":
                        top = con.execute(f"SELECT MAX(abs({quote_name(name)})) FROM {quote_name(table)}").fetchone()
                        millis = bool(top and top[0] and float(top[0]) > 1e11)
                    entry = DataMonths(
                        table, name, kind, millis, found["min"], found["max"], found["latest_full_month"]
                    )
                    (named if name.lower() in used else other).append(entry)
    except sqlite3.Error:
        pass
    return [*named, *([] if named_only else other)][:MAX_DATA_COLUMNS]


def latest_month(columns: list[DataMonths]) -> DataMonths | None:
    """The column whose latest full month with data is the report's: the first one with a full
    month, in :func:`data_columns` order (a column the SQL names, else the table's first date
    column — an invoice's issue date, not its later payment date); None when none has one."""
    return next((col for col in columns if col.latest_full_month), None)


def rows_in(con: sqlite3.Connection, col: DataMonths, lo: str, hi: str | None = None) -> int | None:
    """Rows of ``col``'s table whose date falls in the months ``lo``..``hi``; None when it
    cannot be told in 2 s."""
    expr = col.month_expr()
    cond = f"{expr} = ?" if hi is None else f"{expr} BETWEEN ? AND ?"
    args = (lo,) if hi is None else (lo, hi)
    try:
        with Deadline(con, 2.0):
            row = con.execute(f"SELECT COUNT(*) FROM {quote_name(col.table)} WHERE {cond}", args).fetchone()
    except sqlite3.Error:
        return None
    return int(row[0]) if row else None


def month_before(today: dt.date) -> str:
    """``YYYY-MM`` of the calendar month before ``today``'s ("last month")."""
    return (today.replace(day=1) - dt.timedelta(days=1)).strftime("%Y-%m")


def latest_title(title: str, month: str, today: dt.date) -> str:
    """``title`` marked as the report of the latest month with data, so nobody reads it as last
    month's: ``"<title> — <month> (latest month with data; last month, <YYYY-MM>, has none)"``
    (the month is not repeated when the title names it; no remark when it is last month)."""
    previous = month_before(today)
    remark = "latest month with data" + (f"; last month, {previous}, has none" if month < previous else "")
    head = title if month in title else f"{title} — {month}"
    return f"{head} ({remark})"


def period_resolution(
    con: sqlite3.Connection,
    sqls: list[str],
    asked: str,
    months: tuple[str, str] | None,
    today: dt.date | None = None,
    *,
    named_only: bool = False,
) -> str:
    """What to send instead of a period without data, as sentences for an error message:
    ``asked`` (the period as the caller wrote it; ``months`` its first and last month when
    known) has no rows in the queries' date columns, the range those have, the latest month with
    data, the exact ``period`` to send, the condition each query needs, and that the user is to
    be asked (or the report titled as the latest month with data). "" when the period has data,
    the queries read no date column (``named_only``: name none), or nothing can be told."""
    today = today or dt.date.today()
    columns = data_columns(con, sqls, today, named_only=named_only)
    best = latest_month(columns)
    if best is None or best.latest_full_month is None:
        return ""
    if months is not None and any((rows_in(con, c, *months) or 0) > 0 for c in columns):
        return ""
    month = best.latest_full_month
    where = months and (months[0] if months[0] == months[1] else f"{months[0]}..{months[1]}")
    said = f"{asked!r}" + (f" ({where})" if where and where != asked else "")
    ranges = "; ".join(c.describe() for c in columns[:3])
    return (
        f"{said} has no data: {ranges}. The latest full month with data is {month}. "
        f'To report it, call again with period="{LATEST}" (or "{month}") and restrict every query to '
        f"that month: WHERE {best.condition(month)} (the {best.name} of {identifier(best.table)}; in a join, "
        f"put the alias of {identifier(best.table)} before it); the report is then titled "
        f"{latest_title('<title>', month, today)!r}, so it never passes for the month asked. "
        f"Before a message or reminder goes out with it, ask the user whether {month} is the period they want."
    )


__all__ = [
    "LATEST",
    "DataMonths",
    "data_columns",
    "latest_month",
    "latest_title",
    "month_before",
    "period_resolution",
    "rows_in",
]
