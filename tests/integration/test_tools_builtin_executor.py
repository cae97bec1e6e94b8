"""Builtin tools of the flagship task through the real SubprocessExecutor (worker processes): the
data tools reading the user's database (outside the data dir: injected ``database`` argument +
read access), read-only query_database, generate_report figures equal to SQL, reminders. The
demo DB and the specs: tests/unit/test_tools_builtin.py; direct calls of the data tools:
tests/unit/test_database_tools.py."""

from __future__ import annotations

import datetime as dt
import sqlite3
from pathlib import Path

import pytest

from tests.conftest import DEMO_END_MONTH as END
from tests.unit.test_tools_builtin import _dump
from tools.executors.workspace import workspace_for

pytestmark = pytest.mark.slow  # real worker processes


# -- the demo database -----------------------------------------------------------------------------


# -- the data tools through the executor ------------------------------------------------------------


async def test_describe_database_through_the_executor(reg, db):
    out = await reg.call("describe_database", {}, "d1")
    assert out.status == "ok", out.error
    tables = {t["name"]: t for t in out.content["tables"]}
    assert set(tables) == {"regions", "customers", "products", "orders", "order_items", "sales_lines"}  # + the view
    dates = {c["name"]: c.get("dates") for c in tables["orders"]["columns"]}["order_date"]
    assert dates == {"min": "2025-01-01", "max": dates["max"], "latest_month": END, "latest_full_month": END}
    assert out.content["database"] == str(db)


async def test_query_database_returns_columns_rows_count(reg, data):
    out = await reg.call("query_database", {"sql": "SELECT region_id, name FROM regions ORDER BY region_id;"}, "q1")
    assert out.status == "ok", out.error
    assert out.content["columns"] == ["region_id", "name"]
    assert out.content["rows"][0] == [1, "North"] and out.content["row_count"] == 5
    assert not (data / "sales.db").exists()  # nothing generated in the data dir


async def test_query_database_caps_rows_but_reports_total(reg, db):
    out = await reg.call("query_database", {"sql": "SELECT order_item_id FROM order_items"}, "q2")
    con = sqlite3.connect(db)
    total = con.execute("SELECT COUNT(*) FROM order_items").fetchone()[0]
    con.close()
    assert out.content["row_count"] == total > 500
    assert len(out.content["rows"]) == 500 and out.content["truncated"] is True


@pytest.mark.parametrize(
    "sql",
    [
        "INSERT INTO regions VALUES (99, 'Mars')",
        "DROP TABLE orders",
        "ATTACH DATABASE 'other.db' AS other",
        "DELETE FROM orders",
        "PRAGMA query_only=OFF",
        "SELECT 1; DROP TABLE orders",
        "WITH x AS (SELECT 1) INSERT INTO regions SELECT 98, 'Venus' FROM x",
        "  -- sneaky\n UPDATE products SET unit_price = 0",
        "/* ; */ DELETE FROM orders",
    ],
)
async def test_query_database_refuses_writes(reg, data, db, sql):
    before = _dump(db)
    out = await reg.call("query_database", {"sql": sql}, "w")
    assert out.status == "error" and out.error_kind == "tool_error"
    assert any(w in out.error for w in ("only", "read-only", "readonly", "not authorized", "refused")), out.error
    assert _dump(db) == before
    assert not (data / "other.db").exists() and not (db.parent / "other.db").exists()


async def test_query_database_allows_a_semicolon_inside_a_comment(reg):
    out = await reg.call("query_database", {"sql": "SELECT 1 /* ; */"}, "c")
    assert out.status == "ok", out.error
    assert out.content["rows"] == [[1]]


async def test_query_database_unknown_column_says_to_describe(reg):
    out = await reg.call("query_database", {"sql": "SELECT nope FROM orders"}, "b")
    assert out.status == "error" and "unknown column" in out.error and "describe_database" in out.error


# -- generate_report ---------------------------------------------------------------------------------

REPORT_QUERIES = [
    {
        "label": "Totals",
        "sql": "SELECT ROUND(SUM(i.quantity*i.unit_price), 2) AS revenue, COUNT(DISTINCT o.order_id) AS orders "
        "FROM orders o JOIN order_items i ON i.order_id = o.order_id WHERE o.order_date LIKE '2025-05-%'",
    },
    {
        "label": "Revenue by region",
        "sql": "SELECT r.name AS region, ROUND(SUM(i.quantity*i.unit_price), 2) AS revenue "
        "FROM orders o JOIN order_items i ON i.order_id = o.order_id "
        "JOIN customers c ON c.customer_id = o.customer_id JOIN regions r ON r.region_id = c.region_id "
        "WHERE o.order_date LIKE '2025-05-%' GROUP BY r.name ORDER BY revenue DESC",
    },
]


async def test_report_numbers_match_sql(reg, data, db):
    out = await reg.call(
        "generate_report", {"title": "Sales report 2025-05", "period": "2025-05", "queries": REPORT_QUERIES}, "rep1"
    )
    assert out.status == "ok", out.error
    rep = out.content
    con = sqlite3.connect(db)
    revenue, orders = con.execute(
        "SELECT SUM(i.quantity*i.unit_price), COUNT(DISTINCT o.order_id) FROM orders o "
        "JOIN order_items i ON i.order_id=o.order_id WHERE substr(o.order_date, 1, 7) = '2025-05'"
    ).fetchone()
    north = con.execute(
        "SELECT SUM(i.quantity*i.unit_price) FROM orders o JOIN order_items i ON i.order_id=o.order_id "
        "JOIN customers c ON c.customer_id=o.customer_id JOIN regions r ON r.region_id=c.region_id "
        "WHERE o.order_date BETWEEN '2025-05-01' AND '2025-05-31' AND r.name='North'"
    ).fetchone()[0]
    con.close()
    totals, by_region = rep["queries"]
    assert totals["columns"] == ["revenue", "orders"]
    assert totals["rows"][0][0] == pytest.approx(revenue, abs=0.005) and totals["rows"][0][1] == orders
    assert dict(map(tuple, by_region["rows"]))["North"] == pytest.approx(north, abs=0.005)
    path = Path(rep["path"])
    # in the run's own workspace (request "rep1" names no thread: a folder of its own)
    assert path == workspace_for(data, "rep1") / "reports" / "sales-report-2025-05.md" and rep["version"] == 1
    text = path.read_text()
    assert "# Sales report 2025-05" in text and "2025-05" in text
    assert f"{round(revenue, 2):,.2f}" in text and "| North |" in text
    assert "Figures in this report rest on these queries" in text and REPORT_QUERIES[1]["sql"] in text


async def test_report_for_a_period_without_data_is_an_error_naming_the_latest_month(reg, data):
    out = await reg.call(
        "generate_report",
        {
            "title": "Sales 2019-01",
            "queries": [
                {
                    "label": "Revenue",
                    "sql": "SELECT SUM(unit_price) FROM orders o JOIN order_items i USING (order_id) "
                    "WHERE substr(o.order_date, 1, 7) = '2019-01'",
                }
            ],
        },
        "rep3",
    )
    assert out.status == "error" and "no data" in out.error.lower() and END in out.error
    assert list(data.glob("threads/*/reports/*.md")) == list(data.glob("reports/*.md")) == []
    bad = await reg.call("generate_report", {"title": "x", "queries": []}, "rep4")
    assert bad.error_kind == "invalid_arguments"


# -- reminders ------------------------------------------------------------------------------------------


async def test_schedule_and_list_reminders_persist(reg, data):
    out = await reg.call(
        "schedule_reminder", {"text": "Send the monthly sales report", "day_of_month": 3, "time": "08:30"}, "rem1"
    )
    assert out.status == "ok", out.error
    r = out.content
    assert r["id"] == 1 and r["recurrence"] == "monthly" and r["day_of_month"] == 3
    nxt = dt.datetime.fromisoformat(r["next_run"])
    assert nxt.day == 3 and (nxt.hour, nxt.minute) == (8, 30) and nxt > dt.datetime.now().astimezone()
    assert (data / "reminders.db").exists()
    # same request_id again (a model retry): no second reminder
    again = await reg.call(
        "schedule_reminder", {"text": "Send the monthly sales report", "day_of_month": 3, "time": "08:30"}, "rem1"
    )
    assert again.replayed
    listed = await reg.call("list_reminders", {}, "l1")
    assert listed.content["count"] == 1 and listed.content["reminders"][0]["text"] == "Send the monthly sales report"
