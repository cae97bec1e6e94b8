"""Empty-result diagnostics (tools/builtin/database/empty_results.py) on hostile SQL, against a
real SQLite file (helper-24).

Found by breaking it: in ``orders o JOIN customers c … WHERE o.name = 'cust5'`` the value was
looked up in the first table having a ``name`` column (customers), so the note told the model
that rows hold 'Cust5' — a value of another table's column — and marked the read
``unexpected_empty``. A qualified column is now its own table's; an unqualified one, or one
qualified by a CTE's name, is looked up as before.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from tools.builtin.database.execution import execute_query


@pytest.fixture
def con(tmp_path: Path):
    path = tmp_path / "shop with spaces ü.db"
    con = sqlite3.connect(path)
    con.executescript(
        """
        CREATE TABLE customers(id INTEGER PRIMARY KEY, name TEXT);
        CREATE TABLE orders(id INTEGER PRIMARY KEY, customer_id INT, name TEXT, status TEXT);
        """
    )
    con.executemany("INSERT INTO customers VALUES (?, ?)", [(i, f"Cust{i}") for i in range(20)])
    con.executemany(
        "INSERT INTO orders VALUES (?, ?, ?, ?)",
        [(i, i % 20, f"Order{i}", ("Urgent", "Open")[i % 2]) for i in range(40)],
    )
    con.commit()
    yield con
    con.close()


JOIN = "SELECT * FROM orders o JOIN customers c ON c.id = o.customer_id WHERE "


@pytest.mark.parametrize(
    "where, spelt",
    [
        # orders' names are Order…: no misspelling of an order's name; the value is a customer's
        ("o.name = 'cust5'", "orders.name = 'cust5', while customers.name holds 'Cust5'"),
        ("orders.name = 'cust5'", "orders.name = 'cust5', while customers.name holds 'Cust5'"),
        ("c.name = 'order5'", "customers.name = 'order5', while orders.name holds 'Order5'"),
        ("o.name = 'nobody'", None),  # held by no column: an answer
        ("o.name = 'order5'", "orders.name = 'order5', while rows hold 'Order5'"),
        ("c.name = 'cust5'", "customers.name = 'cust5', while rows hold 'Cust5'"),
        ("o.status = 'urgent'", "orders.status = 'urgent', while rows hold 'Urgent'"),
    ],
)
def test_a_qualified_column_is_looked_up_in_its_own_table(
    con: sqlite3.Connection, where: str, spelt: str | None
) -> None:
    sql = JOIN + where
    if where.startswith("orders."):
        sql = "SELECT * FROM orders JOIN customers c ON c.id = orders.customer_id WHERE " + where
    result = execute_query(con, sql)
    assert result["row_count"] == 0
    if spelt is None:
        assert "unexpected_empty" not in result
    else:
        assert spelt in result["unexpected_empty"]


def test_a_column_qualified_by_a_cte_is_looked_up_in_the_tables(con: sqlite3.Connection) -> None:
    result = execute_query(con, "WITH x AS (SELECT * FROM orders) SELECT * FROM x WHERE x.status = 'urgent'")
    assert "rows hold 'Urgent'" in result["unexpected_empty"]
