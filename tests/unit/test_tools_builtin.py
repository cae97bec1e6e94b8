"""Builtin tools of the flagship task: the generated demo DB, the tool definitions and their
lint, reminders' next run. Through the SubprocessExecutor's worker processes:
tests/integration/test_tools_builtin_executor.py; direct calls of the data tools:
tests/unit/test_database_tools.py."""

from __future__ import annotations

import datetime as dt
import sqlite3
from pathlib import Path

import pytest

from tests.conftest import DEMO_END_MONTH as END
from tools.builtin.catalog import (
    BUILTIN_TOOLS,
    DESCRIBE_DATABASE,
    GENERATE_REPORT,
    QUERY_DATABASE,
)
from tools.builtin.demo_db import ensure_demo_db, generate_sales_db, last_full_month, month_add
from tools.builtin.reminder_periods import next_monthly_run
from tools.spec import lint


def _dump(path: Path) -> list[tuple]:
    con = sqlite3.connect(path)
    try:
        out = []
        for table in ("regions", "customers", "products", "orders", "order_items"):
            out += [(table, *r) for r in con.execute(f"SELECT * FROM {table} ORDER BY 1")]
        return out
    finally:
        con.close()


# -- the demo database -----------------------------------------------------------------------------


@pytest.mark.slow  # generates three databases
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
    orphans = con.execute(
        "SELECT COUNT(*) FROM orders o WHERE NOT EXISTS (SELECT 1 FROM order_items i WHERE i.order_id = o.order_id)"
    ).fetchone()[0]
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


async def test_a_model_supplied_database_argument_is_refused(reg, tmp_path):
    other = generate_sales_db(tmp_path / "elsewhere.db", months=1, end_month="2020-01")
    out = await reg.call("query_database", {"sql": "SELECT 1", "database": str(other)}, "m")
    assert out.status == "error" and out.error_kind == "invalid_arguments"


# -- generate_report ---------------------------------------------------------------------------------


# -- reminders ------------------------------------------------------------------------------------------


def test_next_monthly_run_rolls_over_and_clamps():
    now = dt.datetime(2025, 1, 31, 10, 0)
    assert next_monthly_run(31, "09:00", now) == dt.datetime(2025, 2, 28, 9, 0)
    assert next_monthly_run(31, "11:00", now) == dt.datetime(2025, 1, 31, 11, 0)
    assert next_monthly_run(1, "09:00", dt.datetime(2025, 12, 5)) == dt.datetime(2026, 1, 1, 9, 0)


@pytest.mark.parametrize(
    "args",
    [
        {"text": "x", "day_of_month": 0},
        {"text": "x", "time": "25:00"},
        {"text": "x", "recurrence": "weekly"},
        {"text": ""},
    ],
)
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
