"""A figure read under a second date condition nobody asked for is no answer for the period
asked (``tools/builtin/database/period_scope.py: dated_conditions``,
``graph/answer_filters.py: extra_date_conditions``; DESIGN §5.5).

Measured (Qwen2.5-Coder-1.5B, Northwind held out): "What were our total sales in May 2018?" →
``WHERE OrderDate LIKE '2018-05-%' AND RequiredDate > '2018-05-31'`` → 11,879 (18,334): the
figure is in the result, so no check of figures could tell.
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
def orders_db(tmp_path: Path) -> Path:
    path = tmp_path / "orders.db"
    con = sqlite3.connect(path)
    con.execute(
        "CREATE TABLE orders (order_id INTEGER PRIMARY KEY, order_date TEXT, required_date TEXT, "
        "shipped_date TEXT, amount REAL)"
    )
    con.executemany(
        "INSERT INTO orders (order_date, required_date, shipped_date, amount) VALUES (?, ?, ?, ?)",
        [
            ("2018-05-02", "2018-05-20", "2018-05-09", 100.0),
            ("2018-05-10", "2018-06-07", "2018-06-02", 250.0),
            ("2018-05-28", "2018-06-25", "2018-06-04", 40.0),
            ("2018-06-03", "2018-07-01", "2018-06-10", 75.0),
        ],
    )
    con.commit()
    con.close()
    return path


def read(db: Path, sql: str) -> Result:
    data = query_database(sql, database=str(db))
    return Result("query_database", "q1", "data", False, data, "ok", None, "", {"sql": sql})


def test_a_figure_under_a_date_condition_not_asked_for_is_sent_back(orders_db: Path):
    r = read(
        orders_db,
        "SELECT SUM(amount) FROM orders WHERE order_date LIKE '2018-05-%' AND required_date > '2018-05-31'",
    )
    assert sorted(r.data["date_conditions"]) == ["orders.order_date", "orders.required_date"]
    for request in ("What were our total sales in May 2018?", "How much did the orders of May 2018 bring in?"):
        check = verify(f"The total was {r.data['rows'][0][0]:.0f}.", request, "question", [r], [QUERY_DATABASE])
        assert check.conditions and check.needs_read and not check.ok, request
        assert "orders.required_date" in "; ".join(check.problems())


def test_two_dates_the_request_names_pass(orders_db: Path):
    r = read(
        orders_db,
        "SELECT COUNT(*) FROM orders WHERE order_date LIKE '2018-05-%' AND shipped_date >= '2018-06-01'",
    )
    request = "How many orders were placed in May 2018 and shipped in June or later?"
    check = verify(f"{r.data['rows'][0][0]} orders.", request, "question", [r], [QUERY_DATABASE])
    assert not check.conditions, check.problems()


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT SUM(amount) FROM orders WHERE order_date LIKE '2018-05-%'",
        "SELECT SUM(amount) FROM orders WHERE strftime('%Y-%m', order_date) = '2018-05' AND shipped_date < required_date",
        "SELECT SUM(amount) FROM orders WHERE order_date BETWEEN '2018-05-01' AND '2018-05-31' AND shipped_date IS NOT NULL",
    ],
)
def test_one_date_compared_with_values_is_no_extra_condition(orders_db: Path, sql: str):
    r = read(orders_db, sql)
    assert "date_conditions" not in r.data
    check = verify(
        f"The total was {r.data['rows'][0][0]:.0f}.", "Total sales in May 2018?", "question", [r], [QUERY_DATABASE]
    )
    assert not check.conditions


def test_a_figure_read_under_a_filter_value_nobody_asked_for_is_sent_back(db: Path):
    # measured (tickets): "How many replies did customers send in October 2026?" → COUNT over
    # tickets WHERE priority = 'high' → "Customers sent 13 high priority tickets …"
    sql = "SELECT COUNT(*) FROM sales_lines WHERE segment = 'enterprise' AND order_date LIKE '2025-05%'"
    r = read(db, sql)
    n = r.data["rows"][0][0]
    check = verify(
        f"We got {n} orders in May 2025.",
        "How many order lines did we get in May 2025?",
        "question",
        [r],
        [QUERY_DATABASE],
    )
    assert check.conditions and not check.ok and "'enterprise'" in "; ".join(check.problems())
    # the request names it: the answer to it
    asked = "How many enterprise order lines did we get in May 2025?"
    assert not verify(f"We got {n} enterprise order lines.", asked, "question", [r], [QUERY_DATABASE]).conditions
    # a name stated from such a read, the same
    top = read(
        db,
        "SELECT customer FROM sales_lines WHERE segment = 'enterprise' GROUP BY customer ORDER BY SUM(revenue) DESC LIMIT 1",
    )
    name = top.data["rows"][0][0]
    assert verify(f"{name}.", "Who is our biggest customer?", "question", [top], [QUERY_DATABASE]).conditions


def test_the_same_read_sent_twice_is_no_support_for_its_own_filter(db: Path):
    # measured (HEAD, data suite): sent back once, the model sent the same query again and
    # its second answer passed: the first read's category list held 'enterprise'
    sql = "SELECT COUNT(*) FROM sales_lines WHERE segment = 'enterprise' AND order_date LIKE '2025-05%'"
    first, again = read(db, sql), read(db, sql)
    n = first.data["rows"][0][0]
    check = verify(
        f"We got {n} order lines.",
        "How many order lines did we get in May 2025?",
        "question",
        [first, again],
        [QUERY_DATABASE],
    )
    assert check.conditions == [
        "the read it comes from filtered on 'enterprise', which the request does not name: it answers another question — read again with only the conditions asked"
    ]
    # a value another read returned in its rows (listed first, then filtered on) is known
    listed = read(db, "SELECT segment, COUNT(*) FROM customers GROUP BY segment")
    asked = "How many order lines did that segment get in May 2025?"
    assert not verify(f"{n} order lines.", asked, "question", [listed, first], [QUERY_DATABASE]).conditions
