"""Periods without data (issue 18 point 4): on a database whose data ends months before today,
generate_report's refusal of "last month" (or of a month without data) carries the resolution —
the latest month with data, the exact period to send and the date condition — so the next call
succeeds; ``period="latest"`` writes that month's report titled as the latest month with data.
A scripted model that only follows the refusal's words gets a report in two calls."""

from __future__ import annotations

import datetime as dt
import re
from pathlib import Path

import pytest

from tools.builtin.database import DatabaseError
from tools.builtin.database.periods import month_before
from tools.builtin.demo_db import generate_invoices_db, month_add
from tools.builtin.report import generate_report

TODAY = dt.date.today()
#: the data ends five months before last month: "last month" has none
END = month_add(month_before(TODAY), -5)
UNDATED = [
    {"label": "Net revenue", "sql": "SELECT SUM(net_amount_cents) AS net FROM invoices"},
    {"label": "Invoices", "sql": "SELECT COUNT(*) AS n FROM invoices"},
]


@pytest.fixture(scope="module")
def old_books(tmp_path_factory) -> str:
    return str(generate_invoices_db(tmp_path_factory.mktemp("old") / "books.db", years=1, end_month=END))


@pytest.mark.parametrize("period", ["last month", "le mois dernier", "上个月"])
def test_last_month_without_data_is_refused_with_the_latest_month_the_period_and_the_condition(
    old_books, tmp_path, period
):
    with pytest.raises(DatabaseError) as err:
        generate_report("Sales report", UNDATED, period=period, database=old_books, data_dir=tmp_path)
    said = str(err.value)
    assert f"({month_before(TODAY)}) has no data" in said
    assert f"latest full month with data is {END}" in said
    assert 'period="latest"' in said
    assert f"WHERE strftime('%Y-%m', issued_on) = '{END}' (the issued_on of invoices" in said
    assert "ask the user" in said
    assert not (tmp_path / "reports").exists()


def test_a_stated_month_without_data_is_refused_before_the_date_condition_is_asked_for(old_books, tmp_path):
    # reported: a 2026-11 report whose queries had no date condition was refused for the
    # condition, then (with it) for having no data: one refusal now says both
    with pytest.raises(DatabaseError) as err:
        generate_report("Sales", UNDATED, period=month_before(TODAY), database=old_books, data_dir=tmp_path)
    said = str(err.value)
    assert said.startswith("no report written") and f"latest full month with data is {END}" in said
    assert f"strftime('%Y-%m', issued_on) = '{END}'" in said


def test_period_latest_writes_the_latest_month_titled_so(old_books, tmp_path):
    dated = [{**q, "sql": q["sql"] + f" WHERE strftime('%Y-%m', issued_on) = '{END}'"} for q in UNDATED]
    out = generate_report("Sales report", dated, period="latest", database=old_books, data_dir=tmp_path)
    assert out["period"] == END
    assert out["title"] == f"Sales report — {END} (latest month with data; last month, {month_before(TODAY)}, has none)"
    text = Path(out["path"]).read_text()
    assert text.startswith(f"# Sales report — {END} (latest month with data") and f"Period: **{END}**" in text
    assert Path(out["path"]).name == f"sales-report-{END}.md"


def test_period_latest_still_gets_the_date_condition(old_books, tmp_path):
    out = generate_report("Sales", UNDATED, period="latest", database=old_books, data_dir=tmp_path)
    assert all(f"= '{END}'" in q["sql_run"] for q in out["queries"]), out["queries"]
    nested = [{**q, "sql": f"SELECT * FROM ({q['sql']})"} for q in UNDATED]  # cannot be added plainly
    with pytest.raises(DatabaseError, match=rf"not the report's period '{END}'.*= '{END}'"):
        generate_report("Sales", nested, period="latest", database=old_books, data_dir=tmp_path / "n")


def scripted_model(error: str, queries: list[dict[str, str]]) -> dict[str, object]:
    """The next call a model makes that does only what the refusal says: the period it names
    and the condition it gives, added to every query."""
    period = re.search(r'period="([^"]+)"', error)
    where = re.search(r"WHERE (.+?) \(the ", error)
    assert period and where, error
    return {
        "period": period[1],
        "queries": [{**q, "sql": f"{q['sql']} WHERE {where[1]}"} for q in queries],
    }


def test_a_scripted_model_following_the_refusal_gets_the_report_in_two_calls(old_books, tmp_path):
    calls = 0
    args: dict[str, object] = {"period": "last month", "queries": UNDATED}
    while True:
        calls += 1
        try:
            out = generate_report("Sales report", database=old_books, data_dir=tmp_path, **args)  # type: ignore[arg-type]
            break
        except DatabaseError as exc:
            assert calls < 2, f"the refusal did not carry the resolution: {exc}"
            args = scripted_model(str(exc), UNDATED)
    assert calls == 2 and out["period"] == END and "latest month with data" in out["title"]
    assert out["queries"][0]["rows"][0][0] > 0


@pytest.fixture(scope="module")
def fresh_books(tmp_path_factory) -> str:
    return str(generate_invoices_db(tmp_path_factory.mktemp("fresh") / "fresh.db", years=1))  # ends last month


@pytest.mark.parametrize(
    "period", ["last month", "上个月", "le mois dernier", "el mes pasado", "letzten Monat", "先月"]
)
def test_a_relative_period_with_data_is_written_as_the_period_it_names_today(fresh_books, tmp_path, period):
    """Demo regression: the refusal of "last month" cost a round, and the 1.5B model sent
    "last month" again (3 of 4 times). The tool knows today: the report covers the month the
    phrase names, and says so in its title and period — never "last month" in a saved file."""
    last = month_before(TODAY)
    dated = [{**q, "sql": q["sql"] + f" WHERE strftime('%Y-%m', issued_on) = '{last}'"} for q in UNDATED]
    out = generate_report("Sales report", dated, period=period, database=fresh_books, data_dir=tmp_path)
    assert out["period"] == last and out["title"] == f"Sales report — {last}"
    text = Path(out["path"]).read_text()
    assert f"Period: **{last}**" in text and period not in text


def test_a_resolved_relative_period_still_gets_the_date_condition(fresh_books, tmp_path):
    last = month_before(TODAY)
    out = generate_report("Sales", UNDATED, period="last month", database=fresh_books, data_dir=tmp_path)
    assert out["period"] == last and all(f"= '{last}'" in q["sql_run"] for q in out["queries"])
    nested = [{**q, "sql": f"SELECT * FROM ({q['sql']})"} for q in UNDATED]
    with pytest.raises(DatabaseError, match=rf"not the report's period '{last}'"):
        generate_report("Sales", nested, period="last month", database=fresh_books, data_dir=tmp_path / "n")
    assert not (tmp_path / "n" / "reports").exists()


@pytest.mark.parametrize("period", ["recently", "最近", "up to now"])
def test_a_relative_period_naming_no_unit_is_still_refused(fresh_books, tmp_path, period):
    with pytest.raises(DatabaseError, match="relative to today"):
        generate_report("Sales", UNDATED, period=period, database=fresh_books, data_dir=tmp_path)


def test_a_title_naming_a_relative_period_makes_it_the_reports_period(fresh_books, tmp_path):
    # measured (tickets flagship): "Support tickets report last month" written with no period,
    # and the post about it named none
    last = month_before(TODAY)
    dated = [{**q, "sql": q["sql"] + f" WHERE strftime('%Y-%m', issued_on) = '{last}'"} for q in UNDATED]
    out = generate_report("Invoices report last month", dated, database=fresh_books, data_dir=tmp_path)
    assert out["period"] == last and out["title"] == f"Invoices report last month — {last}"
    checked = generate_report("Invoices report last month", UNDATED, database=fresh_books, data_dir=tmp_path / "x")
    assert all(f"= '{last}'" in q["sql_run"] for q in checked["queries"])  # and is held to it
    assert generate_report("Invoices report", UNDATED, database=fresh_books, data_dir=tmp_path)["period"] == ""
