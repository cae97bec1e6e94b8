"""The report period and its date checks as kinds (tools/builtin/report.py, tools/builtin/report_period.py,
tools/builtin/database/): periods in digits other than ASCII 0-9, periods relative to today in
the languages covered (with a hint in the unit the phrase names), date columns with blanks or a
stray 'N/A', Unix timestamps in time-named INTEGER columns, and query_database's messages for
huge names, SQL that is no string and SQL after a byte-order mark."""

from __future__ import annotations

import datetime as dt
import sqlite3
from pathlib import Path

import pytest

from tools.builtin.database import DatabaseError, describe_database, query_database
from tools.builtin.database.connection import connect_readonly
from tools.builtin.database.dates import date_kind
from tools.builtin.database.period_scope import undated_columns
from tools.builtin.report import generate_report
from tools.builtin.report_period import check_period

TODAY = dt.date(2026, 5, 14)  # a Thursday


# -- digits -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("period", "ascii_form"),
    [
        ("２０２６-０３", "2026-03"),
        ("𝟚𝟘𝟚𝟞", "2026"),
        ("٢٠٢٦-٠٣", "2026-03"),
        ("２０２６-０３-０１", "2026-03-01"),
        ("२०२६", "2026"),
        ("2026-01..２０２６-０３", "2026-01..2026-03"),
        ("2026年１月", "2026年1月"),
        ("Q３ 2026", "Q3 2026"),
    ],
)
def test_a_period_in_other_digits_is_refused_with_its_ascii_form(period, ascii_form):
    with pytest.raises(DatabaseError, match="ASCII 0-9") as err:
        check_period(period)
    assert repr(ascii_form) in str(err.value)
    assert "no date of the calendar" not in str(err.value)


def test_the_ascii_forms_still_pass():
    assert check_period("2026-03") == ("2026-03", "month")
    assert check_period("2026") == ("2026", "year")
    assert check_period("2026-03-01") == ("2026-03-01", "day")


# -- relative periods ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("period", "written"),
    [
        # a month
        ("上一个月", "2026-04"),
        ("前月", "2026-04"),
        ("最近一个月", "2026-04"),
        ("last-month", "2026-04"),
        ("last_month", "2026-04"),
        ("Sales of prev month", "2026-04"),
        ("prev.month", "2026-04"),
        ("1 month ago", "2026-04"),
        ("3か月前", "2026-02"),
        ("三个月前", "2026-02"),
        ("il y a 2 mois", "2026-03"),
        ("hace 2 meses", "2026-03"),
        ("vor 3 Monaten", "2026-02"),
        ("recent month", "2026-04"),
        ("this month", "2026-05"),
        ("next month", "2026-06"),
        ("el próximo mes", "2026-06"),
        ("the past 3 months", "2026-02..2026-04"),
        ("過去3か月", "2026-02..2026-04"),
        ("les 3 derniers mois", "2026-02..2026-04"),
        # a year
        ("本年", "2026"),
        ("this year", "2026"),
        ("今年度", "2026"),
        ("昨年", "2025"),
        ("cette année", "2026"),
        ("l'an dernier", "2025"),
        ("este año", "2026"),
        ("Vorjahr", "2025"),
        ("a year ago", "2025"),
        ("next year", "2027"),
        # a day
        ("yesterday", "2026-05-13"),
        ("today", "2026-05-14"),
        ("昨天", "2026-05-13"),
        ("hoy", "2026-05-14"),
        ("gestern", "2026-05-13"),
        ("3 days ago", "2026-05-11"),
        ("近30天", "2026-04-14..2026-05-13"),
        ("últimos 30 días", "2026-04-14..2026-05-13"),
        # a quarter, a week
        ("next quarter", "2026-07..2026-09"),
        ("本季度", "2026-04..2026-06"),
        ("last week", "2026-05-04..2026-05-10"),
        ("3 weeks ago", "2026-04-20..2026-04-26"),
        ("diese Woche", "2026-05-11..2026-05-17"),
        # up to today
        ("year-to-date", "2026-01-01..2026-05-14"),
        ("ytd", "2026-01-01..2026-05-14"),
    ],
)
def test_a_relative_period_is_refused_with_the_period_it_names_today(period, written):
    with pytest.raises(DatabaseError, match="relative to today") as err:
        check_period(period, today=TODAY)
    text = str(err.value)
    assert f"write {written} for " in text, text
    assert "2026-05-14" in text  # today's date is named
    written_back = text.split("covers: ", 1)[1]
    assert check_period(written_back.split()[1], today=TODAY)  # the hint is a period it accepts


@pytest.mark.parametrize("period", ["最近", "直近", "至今", "recently", "up to now"])
def test_a_relative_period_without_a_unit_gets_the_general_hint(period):
    with pytest.raises(DatabaseError, match="relative to today") as err:
        check_period(period, today=TODAY)
    assert "(2026-05-14)" in str(err.value) and "write 2026-04 for last month" in str(err.value)


@pytest.mark.parametrize(
    "period",
    [
        "Q3 2026",
        "November 2026",
        "2026年1月",
        "FY2026",
        "last quarter of 2026",
        "dernier trimestre de 2026",
        "2026年第一季度",
        "2026年前三季度",
        "2026 上半年",
        "2026年3月前",
        "H1 2026",
        "calendar year 2026",
        "année 2026",
        "mes de marzo 2026",
        "Monatsbericht März 2026",
    ],
)
def test_a_fixed_phrase_is_accepted(period):
    assert check_period(period, today=TODAY) == (period, "text")


def test_the_relative_hint_follows_the_real_date_by_default(tmp_path):
    with pytest.raises(DatabaseError) as err:
        check_period("this year")
    assert f"write {dt.date.today().year} for 'this year'" in str(err.value)


# -- date columns with gaps, epoch timestamps ---------------------------------------------------

GAPS = """
CREATE TABLE blanks (id INTEGER PRIMARY KEY, created_at TEXT, amount REAL);
CREATE TABLE stray (id INTEGER PRIMARY KEY, created_at TEXT, amount REAL);
CREATE TABLE messy (id INTEGER PRIMARY KEY, created_at TEXT, amount REAL);
CREATE TABLE events (id INTEGER PRIMARY KEY, created_at INTEGER, paidOn INTEGER, sent_at_ms INTEGER,
    qty INTEGER, amount REAL);
CREATE TABLE labels (id INTEGER PRIMARY KEY, month_label TEXT, amount REAL);
"""


def _gaps_db(path: Path) -> str:
    con = sqlite3.connect(path)
    con.executescript(GAPS)
    days = [f"2026-0{m}-{d:02d}" for m in (1, 2, 3) for d in (3, 9, 15, 21, 27)]
    # blank values come first (what a LIMIT sample sees), then ISO dates
    con.executemany("INSERT INTO blanks (created_at, amount) VALUES (?, 1)", [("",), ("  ",), ("\t",)])
    con.executemany("INSERT INTO blanks (created_at, amount) VALUES (?, 1)", [(d,) for d in days])
    con.execute("INSERT INTO stray (created_at, amount) VALUES ('N/A', 1)")
    con.executemany("INSERT INTO stray (created_at, amount) VALUES (?, 1)", [(d,) for d in days])
    # half the values are no dates: no date column
    con.executemany("INSERT INTO messy (created_at, amount) VALUES (?, 1)", [(f"x{i}",) for i in range(10)])
    con.executemany("INSERT INTO messy (created_at, amount) VALUES (?, 1)", [(d,) for d in days[:10]])
    stamps = [int(dt.datetime(2026, m, d, tzinfo=dt.UTC).timestamp()) for m in (1, 2, 3) for d in (10, 12, 14, 16)]
    con.executemany(
        "INSERT INTO events (created_at, paidOn, sent_at_ms, qty, amount) VALUES (?, ?, ?, ?, 1)",
        [(s, s, None, 1_700_000_000) for s in stamps],
    )
    con.execute("UPDATE events SET sent_at_ms = created_at * 1000")
    # one 0 for "unknown" among 12 timestamps: still a date column, and no date of its range
    con.execute("INSERT INTO events (created_at, qty, amount) VALUES (0, 5, 1)")
    con.executemany("INSERT INTO labels (month_label, amount) VALUES (?, 1)", [("N/A",), ("Jan 2026",)])
    con.executemany("INSERT INTO labels (month_label, amount) VALUES (?, 1)", [("Feb 2026",)] * 12)
    con.commit()
    con.close()
    return str(path)


@pytest.fixture(scope="module")
def gaps(tmp_path_factory) -> str:
    return _gaps_db(tmp_path_factory.mktemp("gaps") / "gaps.db")


def _kinds(db: str) -> dict[tuple[str, str], str | None]:
    con = connect_readonly(Path(db), schema=True)
    try:
        return {
            (t, c): date_kind(con, t, c, decl)
            for t, c, decl in [
                ("blanks", "created_at", "TEXT"),
                ("stray", "created_at", "TEXT"),
                ("messy", "created_at", "TEXT"),
                ("events", "created_at", "INTEGER"),
                ("events", "paidOn", "INTEGER"),
                ("events", "sent_at_ms", "INTEGER"),
                ("events", "qty", "INTEGER"),
            ]
        }
    finally:
        con.close()


def test_blank_and_stray_values_do_not_hide_a_date_column(gaps):
    kinds = _kinds(gaps)
    assert kinds[("blanks", "created_at")] == "text"
    assert kinds[("stray", "created_at")] == "text"
    assert kinds[("messy", "created_at")] is None  # 50 % dates is no date column


def test_epoch_integers_in_a_time_named_column_are_dates(gaps):
    kinds = _kinds(gaps)
    assert kinds[("events", "created_at")] == "epoch"
    assert kinds[("events", "paidOn")] == "epoch"
    assert kinds[("events", "sent_at_ms")] == "epoch"  # milliseconds
    assert kinds[("events", "qty")] is None  # epoch-sized numbers, but not named as a time


@pytest.mark.parametrize("table", ["blanks", "stray", "events"])
def test_a_report_on_such_a_column_gets_or_needs_a_date_condition(gaps, tmp_path, table):
    sql = f"SELECT SUM(amount) FROM {table}"
    con = connect_readonly(Path(gaps), schema=True)
    try:
        assert f"{table}.created_at" in undated_columns(con, sql)
    finally:
        con.close()
    query = {"label": "x", "sql": sql}
    if table == "events":  # Unix times: no plain condition to add, refused with how to write one
        with pytest.raises(DatabaseError, match=r"no condition on a date.*unixepoch"):
            generate_report("Sales", [query], period="2026-02", database=gaps, data_dir=tmp_path)
        assert not (tmp_path / "reports").exists()
        return
    out = generate_report("Sales", [query], period="2026-02", database=gaps, data_dir=tmp_path)
    assert f"STRFTIME('%Y-%m', {table}.created_at) = '2026-02'" in out["queries"][0]["sql_run"]


def test_month_text_with_a_stray_value_is_still_a_period_column(gaps):
    con = connect_readonly(Path(gaps), schema=True)
    try:
        assert undated_columns(con, "SELECT SUM(amount) FROM labels") == ["labels.month_label"]
    finally:
        con.close()


def test_describe_gives_the_range_of_the_dates_only(gaps):
    tables = {t["name"]: {c["name"]: c for c in t["columns"]} for t in describe_database(database=gaps)["tables"]}
    for table in ("blanks", "stray"):
        assert tables[table]["created_at"]["dates"] == {
            "min": "2026-01-03",
            "max": "2026-03-27",
            "latest_month": "2026-03",
            "latest_full_month": "2026-03",
        }
    assert "dates" not in tables["messy"]["created_at"]
    for col in ("created_at", "paidOn", "sent_at_ms"):
        assert tables["events"][col]["dates"]["min"] == "2026-01-10", col  # the 0 is left out
        assert tables["events"][col]["dates"]["max"] == "2026-03-16", col
    assert "dates" not in tables["events"]["qty"]


def test_the_no_data_note_names_the_range_of_the_dates(gaps):
    out = query_database("SELECT amount FROM stray WHERE created_at = '2030-01-01'", database=gaps)
    assert "stray.created_at has data from 2026-01-03 to 2026-03-27" in out["note"]
    out = query_database("SELECT amount FROM events WHERE created_at = 1", database=gaps)
    assert "events.created_at has data from 2026-01-10 to 2026-03-16" in out["note"]


# -- query_database messages --------------------------------------------------------------------


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT {name} FROM stray",
        "SELECT stray.{name} FROM stray",
        "SELECT * FROM {name}",
        "SELECT {name}(1)",
    ],
)
def test_a_huge_unknown_name_is_not_quoted_back_whole(gaps, sql):
    name = "x" * 99_000
    with pytest.raises(DatabaseError) as err:
        query_database(sql.format(name=name), database=gaps)
    text = str(err.value)
    assert len(text) < 3000 and "…" in text
    assert "x" * 190 in text and "x" * 201 not in text


@pytest.mark.parametrize(("sql", "type_name"), [(123, "int"), (["SELECT 1"], "list"), (b"SELECT 1", "bytes")])
def test_sql_that_is_no_string_says_its_type(gaps, sql, type_name):
    with pytest.raises(DatabaseError, match=f"must be a string.*got {type_name}") as err:
        query_database(sql, database=gaps)  # type: ignore[arg-type]
    assert "empty" not in str(err.value)


@pytest.mark.parametrize("sql", ["\ufeffSELECT 1 AS one", " \ufeff SELECT 1 AS one", "\ufeff\ufeffSELECT 1 AS one"])
def test_sql_after_a_byte_order_mark_runs(gaps, sql):
    assert query_database(sql, database=gaps)["rows"] == [[1]]


def test_a_report_query_after_a_byte_order_mark_is_checked_for_its_period(gaps, tmp_path):
    query = {"label": "x", "sql": "\ufeffSELECT SUM(amount) FROM stray"}
    mended = generate_report("Sales", [query], period="2026-02", database=gaps, data_dir=tmp_path)
    assert "created_at) = '2026-02'" in mended["queries"][0]["sql_run"]
    dated = {"label": "x", "sql": "\ufeffSELECT SUM(amount) FROM stray WHERE created_at LIKE '2026-02%'"}
    out = generate_report("Sales", [dated], period="2026-02", database=gaps, data_dir=tmp_path)
    assert "\ufeff" not in Path(out["path"]).read_text()
