"""A read that found nothing because its dates are stored otherwise than ISO is no evidence of
none, and its note says how the column is written (``tools/builtin/database/empty_results.py:
foreign_date_text``, ``dates.py: date_columns_in`` ``month_sql``; DESIGN §5.5).

The kind: a database from a spreadsheet or another locale stores '05.11.2026' or
'11/05/2026 14:30', or Unix seconds; ``strftime('%Y-%m', col) = '2026-11'`` or ``col LIKE
'2026-11%'`` then matches no row whatever the data, and "there were none in November" would be
a false answer that an empty read seems to support.
"""

from __future__ import annotations

import datetime as dt
import sqlite3
from pathlib import Path

import pytest

from tools.builtin.database import query_database

ISO_READS = [
    "SELECT COUNT(*) FROM bookings WHERE strftime('%Y-%m', booked) = '2026-11'",
    "SELECT SUM(price) FROM bookings WHERE booked LIKE '2026-11%'",
    "SELECT COUNT(*) FROM bookings WHERE booked BETWEEN '2026-11-01' AND '2026-11-30'",
    "SELECT COUNT(*) FROM bookings b WHERE date(b.booked) >= date('2026-11-01')",
]


def bookings(tmp_path: Path, layout: str, epoch: bool = False) -> Path:
    path = tmp_path / "bookings.db"
    con = sqlite3.connect(path)
    column = "booked_at INTEGER" if epoch else "booked TEXT"
    con.execute(f"CREATE TABLE bookings (id INTEGER PRIMARY KEY, {column}, guest TEXT, price REAL)")
    start = dt.datetime(2026, 9, 1, tzinfo=dt.UTC)
    for i in range(200):
        when = start + dt.timedelta(hours=11 * i)
        value = int(when.timestamp()) if epoch else when.strftime(layout)
        con.execute("INSERT INTO bookings VALUES (?, ?, ?, ?)", (i, value, f"g{i % 7}", 10.0 + i))
    con.commit()
    con.close()
    return path


@pytest.mark.parametrize("layout", ["%d.%m.%Y", "%m/%d/%Y", "%d/%m/%Y %H:%M", "%Y/%m/%d"])
@pytest.mark.parametrize("sql", ISO_READS)
def test_an_iso_comparison_on_dates_written_otherwise_is_no_none(tmp_path: Path, layout: str, sql: str):
    r = query_database(sql, database=str(bookings(tmp_path, layout)))
    assert r["unexpected_empty"].startswith("bookings.booked holds dates written like '"), r
    assert "(not YYYY-MM-DD)" in r["note"] and "do not tell the user there is none" in r["note"]


def test_a_read_emptied_by_another_condition_stays_an_answer_of_none(tmp_path: Path):
    r = query_database(
        "SELECT COUNT(*) FROM bookings WHERE guest = 'nobody'", database=str(bookings(tmp_path, "%d.%m.%Y"))
    )
    assert "unexpected_empty" not in r and r["note"].startswith("No data for this query")


def test_the_text_compared_as_written_reads_the_rows(tmp_path: Path):
    r = query_database(
        "SELECT COUNT(*) FROM bookings WHERE booked LIKE '%.11.2026'", database=str(bookings(tmp_path, "%d.%m.%Y"))
    )
    assert r["rows"][0][0] > 0 and "unexpected_empty" not in r


def test_unix_timestamps_name_the_sql_of_their_month(tmp_path: Path):
    # an INTEGER column counts as Unix time when its name says it is a time (booked_at)
    db = bookings(tmp_path, "", epoch=True)
    r = query_database(ISO_READS[0].replace("booked", "booked_at"), database=str(db))
    assert "strftime('%Y-%m', booked_at, 'unixepoch') gives a row's month" in r["unexpected_empty"], r
    fixed = query_database(
        "SELECT COUNT(*) FROM bookings WHERE strftime('%Y-%m', booked_at, 'unixepoch') = '2026-11'", database=str(db)
    )
    assert fixed["rows"][0][0] > 0
