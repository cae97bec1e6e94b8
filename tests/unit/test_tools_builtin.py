"""Builtin tools of the flagship task through the SubprocessExecutor: the generated demo DB,
the data tools reading the user's database (outside the data dir: injected ``database``
argument + read access), read-only query_database, generate_report figures equal to SQL,
reminders. Direct calls of the data tools: tests/unit/test_database_tools.py."""

from __future__ import annotations

import datetime as dt
import sqlite3
from pathlib import Path

import pytest

from tools.builtin.catalog import (
    BUILTIN_TOOLS, DESCRIBE_DATABASE, GENERATE_REPORT, QUERY_DATABASE, register_builtin_tools,
)
from tools.builtin.demo_db import ensure_demo_db, generate_sales_db, last_full_month, month_add
from tools.builtin.reminders import next_monthly_run
from tools.executors.subprocess import SubprocessExecutor
from tools.registry import ToolRegistry
from tools.spec import lint

END = "2025-06"


def _dump(path: Path) -> list[tuple]:
    con = sqlite3.connect(path)
    try:
        out = []
        for table in ("regions", "customers", "products", "orders", "order_items"):
            out += [(table, *r) for r in con.execute(f"SELECT * FROM {table} ORDER BY 1")]
        return out
    finally:
        con.close()


@pytest.fixture
def db(tmp_path: Path) -> Path:
    """The user's database: a generated demo DB outside the data dir."""
    return generate_sales_db(tmp_path / "user" / "sales.db", months=6, end_month=END)


@pytest.fixture
def data(tmp_path: Path) -> Path:
    d = tmp_path / "data"
    d.mkdir()
    return d


@pytest.fixture
def reg(data: Path, db: Path) -> ToolRegistry:
    r = ToolRegistry()
    register_builtin_tools(r, SubprocessExecutor(data, database=str(db)))
    return r


# -- the demo database -----------------------------------------------------------------------------

def test_sales_db_is_deterministic_and_seed_sensitive(tmp_path):
    a = generate_sales_db(tmp_path / "a.db", end_month=END)
    b = generate_sales_db(tmp_path / "b.db", end_month=END)
    c = generate_sales_db(tmp_path / "c.db", end_month=END, seed=8)
    assert _dump(a) == _dump(b)
    assert _dump(a) != _dump(c)


def test_sales_db_covers_the_requested_months_with_hundreds_of_orders(db):
    con = sqlite3.connect(db)
    months = [r[0] for r in con.execute("SELECT DISTINCT substr(order_date,1,7) FROM orders ORDER BY 1")]
    n_orders = con.execute("SELECT COUNT(*) FROM orders").fetchone()[0]
    orphans = con.execute("SELECT COUNT(*) FROM orders o WHERE NOT EXISTS "
                          "(SELECT 1 FROM order_items i WHERE i.order_id = o.order_id)").fetchone()[0]
    con.close()
    assert months == ["2025-01", "2025-02", "2025-03", "2025-04", "2025-05", "2025-06"]
    assert 300 <= n_orders <= 1500
    assert orphans == 0


def test_default_end_month_is_last_full_month():
    assert last_full_month(dt.date(2025, 3, 15)) == "2025-02"
    assert last_full_month(dt.date(2025, 1, 1)) == "2024-12"
    assert month_add("2025-01", -1) == "2024-12" and month_add("2024-12", 2) == "2025-02"


def test_ensure_demo_db_creates_once(tmp_path):
    p = ensure_demo_db(tmp_path / "demo" / "sales.db")
    mtime = p.stat().st_mtime_ns
    assert ensure_demo_db(p) == p and p.stat().st_mtime_ns == mtime


def test_builtin_specs_lint_clean_and_data_tools_state_their_boundaries():
    for spec, entrypoint in BUILTIN_TOOLS:
        assert lint(spec) == [], spec.name
        assert ":" in entrypoint
    # no fixed demo schema in the descriptions: the model learns the user's schema by describing it
    for spec in (DESCRIBE_DATABASE, QUERY_DATABASE, GENERATE_REPORT):
        assert "order_items" not in spec.description and "HERMES_DATABASE" not in spec.parameters
    assert "describe_database" in QUERY_DATABASE.description and "generate_report" in QUERY_DATABASE.description
    assert "describe_database" in GENERATE_REPORT.description and "-v2" in GENERATE_REPORT.description
    assert GENERATE_REPORT.side_effect and GENERATE_REPORT.artifact_field == "path" and GENERATE_REPORT.requested_by
    assert not DESCRIBE_DATABASE.side_effect and not QUERY_DATABASE.side_effect
    assert GENERATE_REPORT.parameters["required"] == ["title", "queries"]


# -- the data tools through the executor ------------------------------------------------------------

async def test_describe_database_through_the_executor(reg, db):
    out = await reg.call("describe_database", {}, "d1")
    assert out.status == "ok", out.error
    tables = {t["name"]: t for t in out.content["tables"]}
    assert set(tables) == {"regions", "customers", "products", "orders", "order_items"}
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


@pytest.mark.parametrize("sql", [
    "INSERT INTO regions VALUES (99, 'Mars')",
    "DROP TABLE orders",
    "ATTACH DATABASE 'other.db' AS other",
    "DELETE FROM orders",
    "PRAGMA query_only=OFF",
    "SELECT 1; DROP TABLE orders",
    "WITH x AS (SELECT 1) INSERT INTO regions SELECT 98, 'Venus' FROM x",
    "  -- sneaky\n UPDATE products SET unit_price = 0",
    "/* ; */ DELETE FROM orders",
])
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


async def test_a_model_supplied_database_argument_is_refused(reg, tmp_path):
    other = generate_sales_db(tmp_path / "elsewhere.db", months=1, end_month="2020-01")
    out = await reg.call("query_database", {"sql": "SELECT 1", "database": str(other)}, "m")
    assert out.status == "error" and out.error_kind == "invalid_arguments"


# -- generate_report ---------------------------------------------------------------------------------

REPORT_QUERIES = [
    {"label": "Totals", "sql": "SELECT ROUND(SUM(i.quantity*i.unit_price), 2) AS revenue, COUNT(DISTINCT o.order_id) AS orders "
                               "FROM orders o JOIN order_items i ON i.order_id = o.order_id WHERE o.order_date LIKE '2025-05-%'"},
    {"label": "Revenue by region", "sql": "SELECT r.name AS region, ROUND(SUM(i.quantity*i.unit_price), 2) AS revenue "
                                          "FROM orders o JOIN order_items i ON i.order_id = o.order_id "
                                          "JOIN customers c ON c.customer_id = o.customer_id JOIN regions r ON r.region_id = c.region_id "
                                          "WHERE o.order_date LIKE '2025-05-%' GROUP BY r.name ORDER BY revenue DESC"},
]


async def test_report_numbers_match_sql(reg, data, db):
    out = await reg.call("generate_report", {"title": "Sales report 2025-05", "period": "2025-05",
                                             "queries": REPORT_QUERIES}, "rep1")
    assert out.status == "ok", out.error
    rep = out.content
    con = sqlite3.connect(db)
    revenue, orders = con.execute(
        "SELECT SUM(i.quantity*i.unit_price), COUNT(DISTINCT o.order_id) FROM orders o "
        "JOIN order_items i ON i.order_id=o.order_id WHERE substr(o.order_date, 1, 7) = '2025-05'").fetchone()
    north = con.execute(
        "SELECT SUM(i.quantity*i.unit_price) FROM orders o JOIN order_items i ON i.order_id=o.order_id "
        "JOIN customers c ON c.customer_id=o.customer_id JOIN regions r ON r.region_id=c.region_id "
        "WHERE o.order_date BETWEEN '2025-05-01' AND '2025-05-31' AND r.name='North'").fetchone()[0]
    con.close()
    totals, by_region = rep["queries"]
    assert totals["columns"] == ["revenue", "orders"]
    assert totals["rows"][0][0] == pytest.approx(revenue, abs=0.005) and totals["rows"][0][1] == orders
    assert dict(map(tuple, by_region["rows"]))["North"] == pytest.approx(north, abs=0.005)
    path = Path(rep["path"])
    assert path == data / "reports" / "sales-report-2025-05.md" and rep["version"] == 1
    text = path.read_text()
    assert "# Sales report 2025-05" in text and "2025-05" in text
    assert f"{round(revenue, 2):,.2f}" in text and "| North |" in text
    assert "Figures in this report rest on these queries" in text and REPORT_QUERIES[1]["sql"] in text


async def test_report_for_a_period_without_data_is_an_error_naming_the_latest_month(reg, data):
    out = await reg.call("generate_report", {"title": "Sales 2019-01", "queries": [
        {"label": "Revenue", "sql": "SELECT SUM(unit_price) FROM orders o JOIN order_items i USING (order_id) "
                                    "WHERE substr(o.order_date, 1, 7) = '2019-01'"}]}, "rep3")
    assert out.status == "error" and "no data" in out.error.lower() and END in out.error
    assert list((data / "reports").glob("*.md")) == []
    bad = await reg.call("generate_report", {"title": "x", "queries": []}, "rep4")
    assert bad.error_kind == "invalid_arguments"


# -- reminders ------------------------------------------------------------------------------------------

def test_next_monthly_run_rolls_over_and_clamps():
    now = dt.datetime(2025, 1, 31, 10, 0)
    assert next_monthly_run(31, "09:00", now) == dt.datetime(2025, 2, 28, 9, 0)
    assert next_monthly_run(31, "11:00", now) == dt.datetime(2025, 1, 31, 11, 0)
    assert next_monthly_run(1, "09:00", dt.datetime(2025, 12, 5)) == dt.datetime(2026, 1, 1, 9, 0)


async def test_schedule_and_list_reminders_persist(reg, data):
    out = await reg.call("schedule_reminder", {"text": "Send the monthly sales report", "day_of_month": 3,
                                               "time": "08:30"}, "rem1")
    assert out.status == "ok", out.error
    r = out.content
    assert r["id"] == 1 and r["recurrence"] == "monthly" and r["day_of_month"] == 3
    nxt = dt.datetime.fromisoformat(r["next_run"])
    assert nxt.day == 3 and (nxt.hour, nxt.minute) == (8, 30) and nxt > dt.datetime.now().astimezone()
    assert (data / "reminders.db").exists()
    # same request_id again (a model retry): no second reminder
    again = await reg.call("schedule_reminder", {"text": "Send the monthly sales report", "day_of_month": 3,
                                                 "time": "08:30"}, "rem1")
    assert again.replayed
    listed = await reg.call("list_reminders", {}, "l1")
    assert listed.content["count"] == 1 and listed.content["reminders"][0]["text"] == "Send the monthly sales report"


@pytest.mark.parametrize("args", [{"text": "x", "day_of_month": 0}, {"text": "x", "time": "25:00"},
                                  {"text": "x", "recurrence": "weekly"}, {"text": ""}])
async def test_schedule_reminder_rejects_bad_input(reg, args):
    out = await reg.call("schedule_reminder", args, "bad")
    assert out.status == "error" and out.error_kind == "invalid_arguments"


def test_the_same_reminder_is_not_scheduled_twice(tmp_path):
    from tools.builtin.reminders import list_reminders, schedule_reminder

    first = schedule_reminder("Send the  monthly sales report", 1, "09:00", data_dir=tmp_path)
    again = schedule_reminder("send the monthly sales report", 1, "09:00", data_dir=tmp_path)
    other = schedule_reminder("send the monthly sales report", 2, "09:00", data_dir=tmp_path)
    assert not first["already_existed"] and again["already_existed"] and again["id"] == first["id"]
    assert not other["already_existed"]
    assert list_reminders(data_dir=tmp_path)["count"] == 2


def test_read_result_pages_through_a_stored_payload_and_nothing_else(tmp_path):
    import json as _json

    import pytest as _pytest

    from tools.builtin.payloads import read_result

    stored = tmp_path / "payloads" / "t1" / "c1.json"
    stored.parent.mkdir(parents=True)
    stored.write_text(_json.dumps({"columns": ["id"], "rows": [[i] for i in range(10_000)], "row_count": 10_000}))
    page = read_result("payloads/t1/c1.json", offset=9_990, limit=20, data_dir=tmp_path)
    assert page["total"] == 10_000 and page["items"] == [[i] for i in range(9_990, 10_000)]
    assert page["field"] == "rows" and page["row_count"] == 10_000
    (tmp_path / "secret.json").write_text("{}")
    for bad in ("payloads/../secret.json", "/etc/passwd", "payloads/t1/missing.json"):
        with _pytest.raises(ValueError):
            read_result(bad, data_dir=tmp_path)
