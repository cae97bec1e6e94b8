"""A view's computed column combined again with a column it is computed from applies that
column twice (``tools/builtin/database/view_columns.py``, ``graph/answer_grain.py:
reapplied_figures``; DESIGN §5.5).

Measured (Qwen2.5-Coder-1.5B, Northwind held out): "total sales in May 2018, after discounts" →
``SUM(ExtendedPrice * (1 - Discount)) FROM Invoices`` (the view's ExtendedPrice already takes
the discount off).
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from graph.goal_results import Result
from graph.verification import verify
from tools.builtin.catalog import QUERY_DATABASE
from tools.builtin.database import query_database


@pytest.fixture
def invoices_db(tmp_path: Path) -> Path:
    path = tmp_path / "invoices.db"
    con = sqlite3.connect(path)
    con.executescript(
        """
        CREATE TABLE "Order Details" (OrderID INTEGER, UnitPrice REAL, Quantity INTEGER, Discount REAL);
        INSERT INTO "Order Details" VALUES (1, 10.0, 3, 0.1), (1, 20.0, 1, 0.0), (2, 5.0, 10, 0.25);
        CREATE VIEW Invoices AS SELECT OrderID, UnitPrice, Quantity, Discount,
            (UnitPrice * Quantity * (1 - Discount)) AS ExtendedPrice FROM "Order Details";
        """
    )
    con.close()
    return path


def read(db: Path, sql: str) -> Result:
    return Result("query_database", "q1", "data", False, query_database(sql, database=str(db)), "ok", None, "")


def verify_total(r: Result):
    answer = f"Sales after discounts were {r.data['rows'][0][0]:.2f}."
    return verify(answer, "Total sales after discounts?", "question", [r], [QUERY_DATABASE])


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT SUM(ExtendedPrice * (1 - Discount)) AS total FROM Invoices",
        "SELECT SUM(i.ExtendedPrice * (1 - i.Discount)) FROM Invoices AS i",
        "SELECT total FROM (SELECT SUM(ExtendedPrice - ExtendedPrice * Discount) AS total FROM Invoices)",
    ],
)
def test_a_figure_that_applies_a_column_twice_is_sent_back(invoices_db: Path, sql: str):
    r = read(invoices_db, sql)
    assert any("Discount is already applied" in n for n in r.data["reapplied"]), r.data
    check = verify_total(r)
    assert check.reapplied and check.needs_read and not check.ok
    assert "Invoices.ExtendedPrice" in "; ".join(check.problems())


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT SUM(ExtendedPrice) FROM Invoices",
        "SELECT SUM(UnitPrice * Quantity * (1 - Discount)) FROM Invoices",
        'SELECT SUM(UnitPrice * Quantity * (1 - Discount)) FROM "Order Details"',
        "SELECT SUM(ExtendedPrice), AVG(Discount) FROM Invoices",  # side by side, not combined
    ],
)
def test_a_column_applied_once_passes(invoices_db: Path, sql: str):
    r = read(invoices_db, sql)
    assert "reapplied" not in r.data, r.data
    check = verify_total(r)
    assert not check.reapplied


def test_the_generated_sales_view_revenue_times_quantity_is_caught(db: Path):
    r = read(db, "SELECT SUM(revenue * quantity) FROM sales_lines")
    assert r.data["reapplied"] == [
        "sales_lines.revenue is i.quantity * i.unit_price: quantity is already applied in it"
    ]
