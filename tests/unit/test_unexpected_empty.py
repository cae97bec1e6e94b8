"""An empty read is no evidence of "none" when the period it names has data (DESIGN §5.5).

Measured (Qwen2.5-Coder-1.5B, the generated sales database, question "What were our 3
best-selling products by revenue in November 2026?"): ``… JOIN sales_lines sl ON p.product_id
= sl.product WHERE sl.order_date LIKE '2026-11-%'`` returned no rows, and the model answered
"No data for this query" about a month with a full month of sales. The tool now says the rows
were excluded despite the period (``unexpected_empty``), and such a read supports no claim of
none; a query with another condition (a region, a threshold) may rightly find nothing.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from graph.goal_results import Result
from graph.verification import check_answer
from tests.conftest import DEMO_END_MONTH as MONTH
from tools.builtin.database import query_database
from tools.database_setting import DatabaseError


@pytest.fixture
def sales(db: Path) -> Path:
    """The generated sales database (its data ends in ``MONTH``)."""
    return db


@pytest.mark.parametrize(
    "sql",
    [
        # no column of the other table holds either side's values: nothing certain to join on
        "SELECT COUNT(*) FROM customers c JOIN products p ON p.name = c.name WHERE c.segment = 'smb'",
        ("SELECT COUNT(*) FROM customers c JOIN products p ON p.category = c.segment WHERE c.customer_id > 0"),
    ],
)
def test_a_join_no_pair_of_rows_meets_is_named_with_what_each_side_holds(sales, sql):
    # each of these joins a column to one that never holds the same values (an id to a name)
    r = query_database(sql, database=str(sales))
    assert r["unexpected_empty"].startswith("the join ") and "matches no rows" in r["unexpected_empty"], r
    assert r["unexpected_empty"].count(" holds ") == 2 and "do not tell the user there is none" in r["note"]


@pytest.mark.parametrize(
    "sql",
    [
        f"SELECT SUM(quantity) FROM sales_lines WHERE order_date >= '{MONTH}-01' AND order_date < '{MONTH}-01'",
        f"SELECT SUM(quantity) FROM sales_lines WHERE order_date LIKE '{MONTH}%' AND order_date > '{MONTH}-31'",
        (
            f"SELECT COUNT(*) FROM orders o JOIN customers c ON c.customer_id = o.customer_id "
            f"WHERE o.order_date > '{MONTH}-01' AND o.order_date < '{MONTH}'"
        ),
    ],
)
def test_nothing_found_although_the_period_has_data_is_marked(sales, sql):
    r = query_database(sql, database=str(sales))
    assert r["unexpected_empty"].endswith("the period the query names"), r
    assert "do not tell the user there is no data" in r["note"]


@pytest.mark.parametrize(
    "sql, ran",
    [
        # the measured query: a product's id joined to the view's product name
        (
            (
                f"SELECT p.name, SUM(sl.revenue) AS r FROM products p JOIN sales_lines sl ON p.product_id = sl.product "
                f"WHERE sl.order_date LIKE '{MONTH}-%' GROUP BY p.name ORDER BY r DESC"
            ),
            "p.name = sl.product",
        ),
        (
            (
                f"SELECT p.name, SUM(sl.revenue) AS r FROM sales_lines sl JOIN products p ON sl.customer = p.name "
                f"WHERE strftime('%Y-%m', sl.order_date) = '{MONTH}' GROUP BY p.name ORDER BY r DESC"
            ),
            "sl.product = p.name",
        ),
    ],
)
def test_a_join_whose_other_column_is_certain_runs_with_it_and_says_so(sales, sql, ran):
    truth = query_database(
        f"SELECT product, SUM(revenue) AS r FROM sales_lines WHERE order_date LIKE '{MONTH}-%' GROUP BY product ORDER BY r DESC",
        database=str(sales),
    )["rows"]
    r = query_database(sql, database=str(sales))
    assert r["rows"] == truth and "unexpected_empty" not in r
    assert r["repaired"][0].endswith(f"→ {ran}") and ran in r["sql_run"] and r["note"].startswith("Ran with the join")


@pytest.mark.parametrize(
    "sql, elsewhere",
    [
        # "the Central region" compared with a customer's name; the value is a region's
        (
            "SELECT COUNT(*) FROM customers c JOIN regions r ON r.region_id = c.region_id WHERE c.name = 'central'",
            "regions.name holds 'Central'",
        ),
        # (a value held by several columns of the table compared: tests/unit/test_value_repairs.py)
    ],
)
def test_a_value_held_by_another_column_is_named(sales, sql, elsewhere):
    r = query_database(sql, database=str(sales))
    assert elsewhere in r["unexpected_empty"] and "do not tell the user there is none" in r["note"], r


def test_a_value_held_by_one_other_column_of_the_same_table_is_run_there(sales):
    # the one column of sales_lines that holds 'hardware' is category: run with it and say so
    # (tests/unit/test_value_repairs.py has the kind on another schema)
    r = query_database("SELECT SUM(revenue) FROM sales_lines WHERE customer = 'HARDWARE'", database=str(sales))
    truth = query_database("SELECT SUM(revenue) FROM sales_lines WHERE category = 'hardware'", database=str(sales))
    assert r["rows"] == truth["rows"] and r["repaired"][0].endswith("→ category = 'hardware'"), r


@pytest.mark.parametrize(
    "sql",
    [
        f"SELECT COUNT(*) FROM sales_lines WHERE region = 'Atlantis' AND order_date LIKE '{MONTH}-%'",
        f"SELECT SUM(quantity) FROM sales_lines WHERE order_date LIKE '{MONTH}-%' AND quantity > 1000000",
        "SELECT SUM(quantity) FROM sales_lines WHERE order_date >= '2090-01-01'",  # after the data
        "SELECT SUM(quantity) FROM sales_lines WHERE order_date LIKE '1999-01-%'",  # before it
        f"SELECT SUM(quantity) FROM sales_lines WHERE order_date = '{MONTH}-17 03:04'",  # one moment
    ],
)
def test_nothing_found_for_a_reason_of_its_own_is_not_marked(sales, sql):
    r = query_database(sql, database=str(sales))
    assert r["note"] and "unexpected_empty" not in r, r


def test_an_unexpected_empty_read_supports_no_claim_of_none(sales):
    sql = (
        f"SELECT p.name, SUM(sl.revenue) FROM products p JOIN sales_lines sl ON p.product_id = sl.product "
        f"WHERE sl.order_date LIKE '{MONTH}-%' GROUP BY p.name"
    )
    data = query_database(sql, database=str(sales))
    read = Result("query_database", "q1", "data", False, data, "query_database: 0 rows", None, "")
    claim = f"There were no sales in {MONTH}."
    check = check_answer(claim, f"Best-selling products in {MONTH}?", [read], needs_data=True)
    assert check.absences == [claim] and not check.ok
    # the same claim after a read that found nothing for a reason of its own stands
    data = query_database(
        f"SELECT SUM(quantity) FROM sales_lines WHERE region = 'Atlantis' AND order_date LIKE '{MONTH}-%'",
        database=str(sales),
    )
    read = Result("query_database", "q2", "data", False, data, "query_database: 1 row", None, "")
    assert check_answer("There were no sales in Atlantis.", "Sales in Atlantis?", [read], needs_data=True).ok


# --- a value spelt as no row spells it ------------------------------------------------------------


@pytest.mark.parametrize(
    "sql, held",
    [
        ("SELECT COUNT(*) FROM customers WHERE segment = 'Enterprise'", "'enterprise'"),  # case
        ("SELECT COUNT(*) FROM customers WHERE segment = 'enterprize'", "'enterprise'"),  # a letter
        ("SELECT COUNT(*) FROM customers WHERE segment IN ('Consumer ', 'SMB')", "'consumer'"),  # spacing, IN
        (
            f"SELECT SUM(revenue) FROM sales_lines WHERE category = 'Software' AND order_date LIKE '{MONTH}-%'",
            "'software'",
        ),
        ("SELECT COUNT(*) FROM customers c WHERE 'Smb' = c.segment", "'smb'"),  # value on the left
    ],
)
def test_a_value_no_row_holds_but_a_near_one_does_is_named(sales, sql, held):
    r = query_database(sql, database=str(sales))
    assert held in r["unexpected_empty"] and "do not tell the user there is none" in r["note"], r


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT COUNT(*) FROM customers WHERE segment = 'government'",  # nothing near: an answer
        "SELECT COUNT(*) FROM customers WHERE name = 'Nobody Such At All'",
        "SELECT COUNT(*) FROM customers WHERE segment = 'enterprise' AND customer_id < 0",  # exists
    ],
)
def test_a_value_with_no_near_neighbour_is_an_answer(sales, sql):
    r = query_database(sql, database=str(sales))
    assert "unexpected_empty" not in r, r


# --- a "none" found for a value the model made up -------------------------------------------------


def sql_read(db: Path, sql: str) -> Result:
    data = query_database(sql, database=str(db))
    return Result("query_database", "q1", "data", False, data, "query_database: 1 row", None, "", {"sql": sql})


def test_nothing_found_for_a_value_nobody_asked_for_supports_no_claim_of_none(sales):
    """Measured: "What was total revenue in October 2026?" → ``… AND region = 'North America'``
    (no such region) → "There is no data for the period asked." as the final answer."""
    invented = sql_read(
        sales, f"SELECT SUM(revenue) FROM sales_lines WHERE order_date LIKE '{MONTH}-%' AND region = 'North America'"
    )
    question = f"What was total revenue in {MONTH}?"
    check = check_answer(
        "There is no data for the period asked.", question, [invented], needs_data=True, request=question
    )
    assert check.absences and not check.ok


@pytest.mark.parametrize(
    "question, sql",
    [
        ("How many customers in Atlantis?", "SELECT COUNT(*) FROM sales_lines WHERE region = 'Atlantis'"),
        ("Did we sell any hoverboards?", "SELECT COUNT(*) FROM sales_lines WHERE product LIKE '%Hoverboard%'"),
        (
            f"Any orders in {MONTH} over a million units?",
            f"SELECT COUNT(*) FROM sales_lines WHERE order_date LIKE '{MONTH}%' AND quantity > 1000000",
        ),
    ],
)
def test_nothing_found_for_what_the_user_asked_supports_the_claim_of_none(sales, question, sql):
    assert check_answer("There are none.", question, [sql_read(sales, sql)], needs_data=True, request=question).ok


def test_a_value_another_read_of_the_goal_returned_is_no_invention(sales):
    # the model looked the region up first, then filtered on it: a "none" for it stands
    regions = sql_read(sales, "SELECT DISTINCT region FROM sales_lines ORDER BY region LIMIT 1")
    region = regions.data["rows"][0][0]
    empty = sql_read(sales, f"SELECT COUNT(*) FROM sales_lines WHERE region = '{region}' AND quantity > 1000000")
    question = "Did any region order over a million units at once?"
    assert check_answer("No, none.", question, [regions, empty], needs_data=True, request=question).ok


def test_nothing_found_in_a_period_with_data_names_the_other_conditions_not_the_period(sales):
    # measured: an invented region = 'North America' got "Use a period with data" for a month
    # with sales, and the model answered that there was no data for the period
    r = query_database(
        f"SELECT SUM(quantity) FROM orders o JOIN order_items i ON i.order_id = o.order_id "
        f"JOIN customers c ON c.customer_id = o.customer_id WHERE o.order_date LIKE '{MONTH}-%' "
        "AND c.segment = 'Atlantis'",
        database=str(sales),
    )
    assert r["note"] and "unexpected_empty" not in r  # "none in that segment" may be the answer
    assert f"has data in {MONTH}" in r["note"] and "c.segment = 'Atlantis'" in r["note"], r["note"]
    assert "Use a period with data" not in r["note"]


@pytest.mark.parametrize(
    "when",
    ["'now() - interval 1 month'", "'last month'", "'2025-06-01', '-1 mnth'"],
)
def test_a_comparison_with_a_time_string_sqlite_cannot_read_is_an_error_not_none(sales, when):
    # measured (Chinook): strftime('%Y-%m', 'now() - interval 1 month') is NULL, COUNT(*) = 0
    # three times, and "no invoices last month" rested on a comparison with NULL
    sql = f"SELECT COUNT(*) FROM orders WHERE strftime('%Y-%m', order_date) = strftime('%Y-%m', {when})"
    with pytest.raises(DatabaseError, match=r"is NULL: SQLite does not read that time string.*date\('now'"):
        query_database(sql, database=str(sales))
    ok = "SELECT COUNT(*) FROM orders WHERE strftime('%Y-%m', order_date) = strftime('%Y-%m', 'now', '-1 month')"
    assert query_database(ok, database=str(sales))["rows"] == [[0]]  # a readable one: an answer
