"""Date and period columns: which columns hold dates (ISO text, Unix timestamps) or periods in
another form (month text, YYYYMM numbers), decided on a sample of their values; the range of
dates a column holds, with the latest (full) month that has data; and the note a result without
data carries."""

from __future__ import annotations

import datetime as dt
import re
import sqlite3
from typing import Any

from tools.builtin.database.connection import Deadline
from tools.builtin.database.schema import list_tables, table_columns
from tools.builtin.database.statement import identifier, names_used, quote_name, sql_ref

#: Non-NULL, non-blank values sampled from a column to decide whether it holds dates.
DATE_SAMPLE = 20
#: Share of the sampled values that must be dates (or periods) for a column to count as one:
#: a stray 'N/A' or '-' among ISO dates must not switch the period check off for that column.
DATE_SHARE = 0.9


_ISO_DATE_RE = re.compile(
    r"^\d{4}-(0[1-9]|1[0-2])-(0[1-9]|[12]\d|3[01])"
    r"([ T]([01]\d|2[0-3]):[0-5]\d(:[0-5]\d(\.\d+)?)?(Z|[+-]\d{2}:?\d{2})?)?$",
    re.ASCII,  # ISO dates are written in 0-9: SQLite's date functions read no other digits
)
_DATE_TYPE_RE = re.compile(r"DATE|TIMESTAMP", re.IGNORECASE)
_NUMERIC_TYPE_RE = re.compile(r"INT|REAL|FLOA|DOUB|NUM|DEC|BOOL|BLOB", re.IGNORECASE)


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
    r"|\d{4}[ \-]?Q[1-4]|Q[1-4][ \-]?\d{4}"
    # a date in another order or separator, with a time of day or not ('05/11/2026 14:30')
    r"|(\d{4}[-/.]\d{1,2}[-/.]\d{1,2}|\d{1,2}[-/.]\d{1,2}[-/.]\d{2,4})([ T]\d{1,2}:\d{2}(:\d{2})?(\s?[AP]M)?)?"
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
    col = quote_name(column)
    rows = con.execute(
        f"SELECT {col} FROM {quote_name(table)} WHERE {col} IS NOT NULL AND (typeof({col}) <> 'text' "
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
    tab = quote_name(table)
    epoch = kind == "epoch"
    if epoch:
        col = quote_name(column)
        # timestamps only: a 0 or -1 standing for "unknown" is no date
        filt = f"typeof({col}) IN ('integer', 'real') AND abs({col}) >= {_EPOCH_MIN:.0f}"
    else:
        # ISO text only (blank, 'N/A' ... are left out: 'N/A' sorts after every date)
        col = f"trim({quote_name(column)})"
        filt = f"typeof({quote_name(column)}) = 'text' AND {col} GLOB '[0-9][0-9][0-9][0-9]-[0-9][0-9]-[0-9][0-9]*'"
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


def date_columns_in(con: sqlite3.Connection, sql: str, limit: int = 4) -> list[dict[str, Any]]:
    """Date ranges of the date-like columns that ``sql`` names in its code (of the tables it
    names there; a name in a string or a comment does not count), at most ``limit``; a column
    of Unix timestamps also has ``month_sql``, the SQL of its month. ``con`` must allow the
    schema pragmas."""
    used = names_used(sql)
    found: list[dict[str, Any]] = []
    for table in list_tables(con):
        if table.lower() not in used:
            continue
        for name, declared, _, _ in table_columns(con, table):
            if name.lower() not in used:
                continue
            kind = date_kind(con, table, name, declared)
            if kind:
                found.append({"column": sql_ref(table, name), **date_range(con, table, name, kind)})
                if kind == "epoch":
                    # Unix time: the month as SQL, since strftime on the bare number reads a
                    # Julian day (measured: strftime('%Y-%m', created_at) = '2026-11' found nothing)
                    col = quote_name(name)
                    top = con.execute(f"SELECT MAX(abs({col})) FROM {quote_name(table)}").fetchone()[0] or 0
                    shown = identifier(name)
                    scaled = f"{shown} / 1000" if float(top) > 1e11 else shown
                    found[-1]["month_sql"] = f"strftime('%Y-%m', {scaled}, 'unixepoch')"
                if len(found) >= limit:
                    return found
    return found


def no_data_note(
    con: sqlite3.Connection, sql: str, why: str = "it returned no rows"
) -> tuple[str, list[dict[str, Any]]]:
    """The note for a result without data: says so (``why``), and for each date-like column the
    SQL names, the dates present and the latest full month with data. ``con`` must allow the
    schema pragmas. Returns ``(note, ranges)``."""
    note = f"No data for this query: {why}."
    try:
        with Deadline(con, 2.0):
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
