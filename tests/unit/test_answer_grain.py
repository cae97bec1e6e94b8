"""A count or average over rows that repeat the thing asked about is no answer for it
(``tools/builtin/database/grain.py``, ``graph/answer_grain.py``; DESIGN §5.5).

Measured (Qwen2.5-Coder-1.5B): Northwind (held out) "How many orders did we ship to France in
2017?" → ``COUNT(*) FROM Invoices`` (a row per order line) → "93" (39 orders); "the average
freight charge per order" → ``AVG(Freight) FROM Invoices`` → 96.20 (78.24); the generated sales
database "how many units are in an order" → ``AVG(quantity)`` over order lines → 2.1 (5.2).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from graph.goal_results import Result
from graph.verification import verify
from tools.builtin.catalog import QUERY_DATABASE
from tools.builtin.database import query_database


def read(db: Path, sql: str) -> Result:
    return Result("query_database", "q1", "data", False, query_database(sql, database=str(db)), "ok", None, "")


def figure(r: Result) -> str:
    return f"{r.data['rows'][0][0]:.1f}"


@pytest.mark.parametrize(
    "request_text, sql",
    [
        ("On average, how many units are in an order? One decimal.", "SELECT AVG(quantity) FROM order_items"),
        ("How many orders contained a laptop?", "SELECT COUNT(*) FROM sales_lines WHERE product LIKE 'Laptop%'"),
        ("How many customers ordered in total?", "SELECT COUNT(*) FROM orders"),
    ],
)
def test_a_figure_over_rows_that_repeat_what_is_counted_is_sent_back(db: Path, request_text: str, sql: str):
    r = read(db, sql)
    assert r.data["grain"]["rows"] > min(r.data["grain"]["distinct"].values()), r.data
    check = verify(f"The answer is {figure(r)}.", request_text, "question", [r], [QUERY_DATABASE])
    assert check.grain and not check.ok, check
    assert "count DISTINCT" in "; ".join(check.problems())


@pytest.mark.parametrize(
    "request_text, sql",
    [
        # one row per order: the average per order
        (
            "On average, how many units are in an order? One decimal.",
            "SELECT AVG(units) FROM (SELECT SUM(quantity) AS units FROM order_items GROUP BY order_id)",
        ),
        (
            "How many orders contained a laptop?",
            "SELECT COUNT(DISTINCT order_id) FROM sales_lines WHERE product LIKE 'Laptop%'",
        ),
        ("How many orders did we get in total?", "SELECT COUNT(*) FROM orders"),  # orders repeat customers, not orders
        # a question about lines: lines are what is counted
        ("On average, how many units does an order line hold?", "SELECT AVG(quantity) FROM order_items"),
    ],
)
def test_a_figure_over_one_row_per_thing_asked_passes(db: Path, request_text: str, sql: str):
    r = read(db, sql)
    assert verify(f"The answer is {figure(r)}.", request_text, "question", [r], [QUERY_DATABASE]).ok


def test_the_tool_says_nothing_of_grouped_or_distinct_reads(db: Path):
    for sql in (
        "SELECT order_id, COUNT(*) FROM order_items GROUP BY order_id",
        "SELECT COUNT(DISTINCT order_id) FROM order_items",
        "SELECT SUM(quantity) FROM order_items",
    ):
        assert "grain" not in query_database(sql, database=str(db)), sql


NOV = "order_date BETWEEN '2025-05-01' AND '2025-05-31'"  # the fixture's data ends 2025-06


@pytest.mark.parametrize(
    "request_text, sql",
    [
        # measured: the customer of the largest order line named as the biggest customer
        (
            "Who was our biggest customer by revenue in May 2025?",
            (
                "SELECT T1.name FROM customers AS T1 JOIN sales_lines AS T2 ON T1.name = T2.customer "
                f"WHERE T2.{NOV} ORDER BY T2.revenue DESC LIMIT 1"
            ),
        ),
        (
            "Which 3 customers spent the most in May 2025?",
            f"SELECT DISTINCT customer FROM sales_lines WHERE {NOV} ORDER BY revenue DESC LIMIT 3",
        ),
    ],
)
def test_a_ranking_of_single_rows_that_repeat_the_thing_ranked_is_sent_back(db: Path, request_text: str, sql: str):
    r = read(db, sql)
    assert r.data["ranked_rows"]["rows"] > r.data["ranked_rows"]["repeated"][0]["distinct"], r.data
    answer = ", ".join(str(row[0]) for row in r.data["rows"])
    check = verify(answer, request_text, "question", [r], [QUERY_DATABASE])
    assert check.grain and not check.ok, check
    assert "GROUP BY" in "; ".join(check.problems()) and "customer" in "; ".join(check.problems())


@pytest.mark.parametrize(
    "request_text, sql",
    [
        # the total per customer ranked: what was asked
        (
            "Who was our biggest customer by revenue in May 2025?",
            (
                f"SELECT customer, SUM(revenue) AS total FROM sales_lines WHERE {NOV} GROUP BY customer "
                "ORDER BY total DESC LIMIT 1"
            ),
        ),
        (
            "Who was our biggest customer by revenue in May 2025?",
            (
                f"SELECT customer, total FROM (SELECT customer, SUM(revenue) AS total FROM sales_lines WHERE {NOV} "
                "GROUP BY customer) ORDER BY total DESC LIMIT 1"
            ),
        ),
        # one row is what was asked
        (
            "Which customer placed the largest single order line in May 2025?",
            f"SELECT customer FROM sales_lines WHERE {NOV} ORDER BY revenue DESC LIMIT 1",
        ),
    ],
)
def test_a_ranking_of_the_thing_asked_passes(db: Path, request_text: str, sql: str):
    r = read(db, sql)
    answer = ", ".join(str(row[0]) for row in r.data["rows"])
    check = verify(answer, request_text, "question", [r], [QUERY_DATABASE])
    assert not check.grain, check.problems()


def test_the_tool_says_nothing_of_rankings_over_one_row_per_value(db: Path):
    for sql in (
        "SELECT name FROM customers ORDER BY customer_id DESC LIMIT 3",
        "SELECT customer, SUM(revenue) AS t FROM sales_lines GROUP BY customer ORDER BY t DESC LIMIT 3",
        "SELECT customer FROM sales_lines ORDER BY revenue DESC",  # no LIMIT: every row listed
    ):
        assert "ranked_rows" not in query_database(sql, database=str(db)), sql


PER_ORDER = "SELECT AVG(quantity) FROM order_items GROUP BY order_id"


def test_one_row_of_many_unlabelled_rows_is_no_figure_over_all(db: Path):
    # measured: "approximately 1.67", the second of 610 per-order averages
    r = read(db, PER_ORDER)
    value = next(
        v for (v,) in r.data["rows"] if round(v, 2) != round(sum(x for (x,) in r.data["rows"]) / len(r.data["rows"]), 2)
    )
    check = verify(
        f"The average is approximately {value:.2f}.",
        "On average, how many units are in an order?",
        "question",
        [r],
        [QUERY_DATABASE],
    )
    assert check.grain and not check.ok and check.needs_read
    assert "one of the" in "; ".join(check.problems())


def test_one_row_is_an_answer_when_the_rows_are_labelled_or_the_request_ranks(db: Path):
    labelled = read(db, "SELECT order_id, AVG(quantity) FROM order_items GROUP BY order_id ORDER BY 2 DESC")
    top = labelled.data["rows"][0][1]
    ranks = "Which order has the highest average units per line?"
    assert not verify(
        f"Order {labelled.data['rows'][0][0]}: {top:.2f}.", ranks, "question", [labelled], [QUERY_DATABASE]
    ).grain
    plain = read(db, PER_ORDER + " ORDER BY 1 DESC")
    assert not verify(
        f"The highest is {plain.data['rows'][0][0]:.2f}.", ranks, "question", [plain], [QUERY_DATABASE]
    ).grain
    # a figure over all of them, read in one row: an answer
    over_all = read(db, f"SELECT AVG(x) FROM ({PER_ORDER.replace('AVG(quantity)', 'AVG(quantity) AS x')})")
    avg = over_all.data["rows"][0][0]
    both = [read(db, PER_ORDER), over_all]
    assert not verify(
        f"About {avg:.2f}.", "On average, how many units per line are in an order?", "question", both, [QUERY_DATABASE]
    ).grain
