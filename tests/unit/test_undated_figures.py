"""A figure asked for a period rests on a read restricted to that period (DESIGN §5.5).

Measured (Qwen2.5-Coder-1.5B, the generated support desk): "How many replies did customers
send in October 2026?" → a count over every date → "Customers sent 187 replies in October
2026." (truth 111), presented as final. ``query_database`` now marks a read whose figures cover
every date (``undated``: its tables' date columns, none restricted), and a figure only such a
read supports is not one for the period asked.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from graph.answer_figures import names_period
from graph.goal_results import Result
from graph.verification import check_answer, verify
from tests.conftest import DEMO_END_MONTH as MONTH
from tools.builtin.catalog import QUERY_DATABASE
from tools.builtin.database import query_database


def read(db: Path, sql: str) -> Result:
    data = query_database(sql, database=str(db))
    return Result("query_database", "q1", "data", False, data, "query_database: ok", None, "")


def test_the_database_tool_marks_a_read_over_every_date(db):
    assert query_database("SELECT SUM(revenue) FROM sales_lines", database=str(db))["undated"] == [
        "sales_lines.order_date"
    ]
    dated = query_database(f"SELECT SUM(revenue) FROM sales_lines WHERE order_date LIKE '{MONTH}%'", database=str(db))
    assert "undated" not in dated
    per_month = query_database(
        "SELECT strftime('%Y-%m', order_date) AS m, SUM(revenue) FROM sales_lines GROUP BY m", database=str(db)
    )
    assert "undated" not in per_month  # a row per month: each figure is one month's
    assert "undated" not in query_database("SELECT COUNT(*) FROM products", database=str(db))  # no dates


@pytest.mark.parametrize(
    "request_text",
    [
        f"What was total revenue in {MONTH}?",
        "What was total revenue last month?",
        "Quel a été le chiffre d'affaires le mois dernier ?",
        "Wie hoch war der Umsatz letzten Monat?",
        "¿Cuánto vendimos el mes pasado?",
        "上个月的收入是多少？",
        "先月の売上は？",
        "Revenue in 2025, please.",
    ],
)
def test_a_figure_over_every_date_is_no_figure_for_the_period_asked(db, request_text):
    assert names_period(request_text)
    every = read(db, "SELECT ROUND(SUM(revenue), 2) FROM sales_lines")
    total = every.data["rows"][0][0]
    check = verify(f"Revenue was {total:,.2f}.", request_text, "question", [every], [QUERY_DATABASE])
    assert check.undated == [f"{total:,.2f}"] and not check.ok
    assert "not the period asked" in "; ".join(check.problems())


def test_a_figure_of_a_read_restricted_to_the_period_passes(db):
    month = read(db, f"SELECT ROUND(SUM(revenue), 2) FROM sales_lines WHERE order_date LIKE '{MONTH}%'")
    total = month.data["rows"][0][0]
    assert verify(
        f"Revenue was {total:,.2f}.", f"What was revenue in {MONTH}?", "question", [month], [QUERY_DATABASE]
    ).ok


@pytest.mark.parametrize("request_text", ["What is our revenue so far, in total?", "How many products do we sell?"])
def test_without_a_period_asked_a_figure_over_every_date_is_the_answer(db, request_text):
    assert not names_period(request_text)
    every = read(db, "SELECT ROUND(SUM(revenue), 2) FROM sales_lines")
    total = every.data["rows"][0][0]
    assert check_answer(f"Revenue is {total:,.2f}.", request_text, [every], needs_data=True).ok


# names: a ranking of all time given for the period asked (the sibling of the figure kind).
# Measured (Qwen2.5-Coder-1.5B, Chinook): "Which 5 countries brought in the most invoice revenue
# in 2011?" → GROUP BY Country ORDER BY SUM(Total) DESC LIMIT 5, no date condition → the
# all-time five answered "in 2011", one of them not among 2011's five.
RANKING_ALL_TIME = "SELECT region FROM sales_lines GROUP BY region ORDER BY SUM(revenue) DESC LIMIT 3"


@pytest.mark.parametrize(
    "request_text", [f"Which 3 regions sold the most in {MONTH}?", "Which 3 regions sold the most last month?"]
)
def test_names_ranked_over_every_date_are_no_ranking_for_the_period_asked(db, request_text):
    every = read(db, RANKING_ALL_TIME)
    assert every.undated
    names = [row[0] for row in every.data["rows"]]
    check = verify(
        f"The top regions were {names[0]}, {names[1]} and {names[2]}.",
        request_text,
        "question",
        [every],
        [QUERY_DATABASE],
    )
    assert set(check.undated) == set(names) and not check.ok
    assert "not the period asked" in "; ".join(check.problems())


def test_names_ranked_within_the_period_pass_and_without_a_period_all_time_is_the_answer(db):
    month = read(
        db,
        f"SELECT region FROM sales_lines WHERE order_date LIKE '{MONTH}%' GROUP BY region ORDER BY SUM(revenue) DESC LIMIT 3",
    )
    names = [row[0] for row in month.data["rows"]]
    answer = f"The top regions were {names[0]}, {names[1]} and {names[2]}."
    assert verify(answer, f"Which 3 regions sold the most in {MONTH}?", "question", [month], [QUERY_DATABASE]).ok
    every = read(db, RANKING_ALL_TIME)
    names = [row[0] for row in every.data["rows"]]
    answer = f"The top regions were {names[0]}, {names[1]} and {names[2]}."
    assert verify(answer, "Which 3 regions sold the most overall?", "question", [every], [QUERY_DATABASE]).ok


def test_a_read_of_tables_without_dates_answers_no_period(db, tmp_path):
    # measured (Northwind, held out): "Which 3 products sold the most units in 2018?" answered
    # from SUM(UnitsInStock) FROM Products — a table with no date at all
    stock = read(db, "SELECT name FROM products ORDER BY unit_price DESC LIMIT 3")
    assert stock.data["dateless"] is True and stock.undated
    names = [row[0] for row in stock.data["rows"]]
    answer = f"The top products in {MONTH} were {names[0]}, {names[1]} and {names[2]}."
    check = verify(answer, f"Which 3 products sold best in {MONTH}?", "question", [stock], [QUERY_DATABASE])
    assert set(names) & set(check.undated) and not check.ok
    assert "tables that hold none" in "; ".join(check.problems())
    # without a period asked, the same read is the answer
    assert verify(
        f"The priciest are {names[0]}, {names[1]} and {names[2]}.",
        "Which 3 products cost the most?",
        "question",
        [stock],
        [QUERY_DATABASE],
    ).ok
    # a read joining a dated table is not dateless, restricted or not
    assert "dateless" not in query_database("SELECT COUNT(*) FROM orders", database=str(db))
