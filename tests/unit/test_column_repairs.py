"""A column its table does not have, where one column is certainly meant, is mended and the
result says so (``tools/builtin/database/repairs.py``; DESIGN §5.5).

Measured (Qwen2.5-Coder-1.5B on Chinook): ``T2.CountryName`` of ``Customer AS T2`` refused with
"Did you mean Country?", written again three times, and the run stopped without an answer.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tools.builtin.database import query_database
from tools.builtin.database.repairs import MAX_REPAIRS
from tools.database_setting import DatabaseError


@pytest.mark.parametrize(
    "sql, mended, run",
    [
        # a word of the name is the column (CamelCase, snake_case), qualified by an alias
        (
            "SELECT c.CustomerName FROM customers c ORDER BY c.customer_id LIMIT 1",
            "c.CustomerName → customers.name",
            "c.name",
        ),
        (
            "SELECT COUNT(*) FROM customers WHERE customer_segment = 'smb'",
            "customer_segment → customers.segment",
            "segment = 'smb'",
        ),
        ("SELECT SUM(o.quantty) FROM order_items o", "o.quantty → order_items.quantity", "SUM(o.quantity)"),  # a letter
        # the name with a qualifier added: the one column of that table that is it (Chinook's
        # Invoice.BillingCountry for "Country"; measured: written three times after "Did you mean")
        ("SELECT COUNT(*) FROM orders WHERE date >= '2026-01-01'", "date → orders.order_date", "order_date >="),
    ],
)
def test_the_one_column_meant_is_run_and_the_result_says_so(db: Path, sql, mended, run):
    r = query_database(sql, database=str(db))
    assert r["repaired"] == [mended] and run in r["sql_run"]
    assert r["note"].startswith(f"Ran with {mended}") and r["rows"], r


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT c.region FROM customers c",  # region_id is not certainly "region"
        "SELECT customer_name FROM customers c JOIN orders o ON o.customer_id = c.customer_id",  # two tables
        "SELECT c.product_name FROM customers c",  # no column of customers is meant
        "SELECT customer FROM orders",  # customer_id adds only a filler: the key, not the customer
        "SELECT name FROM order_items",  # two qualified names or another table's name: not guessed
        "SELECT x.name FROM (SELECT customer_id FROM customers) x",  # a subquery's columns: not guessed
        # 87 % like another column, but a word of it is another word (Chinook's Invoice:
        # BillingDate ran as BillingState and found nothing): a misspelling is a letter or two
        "SELECT COUNT(*) FROM orders WHERE order_state = 'open'",
    ],
)
def test_a_name_not_certainly_one_column_stays_an_error(db: Path, sql):
    with pytest.raises(DatabaseError, match="unknown column"):
        query_database(sql, database=str(db))


def test_at_most_a_few_columns_are_mended_per_query(db: Path):
    cols = ["nme", "segmnt", "customer_idd", "segmentt"][: MAX_REPAIRS + 1]
    with pytest.raises(DatabaseError, match="unknown column"):
        query_database(f"SELECT {', '.join(cols)} FROM customers", database=str(db))
    ok = query_database(f"SELECT {', '.join(cols[:MAX_REPAIRS])} FROM customers LIMIT 1", database=str(db))
    assert len(ok["repaired"]) == MAX_REPAIRS


def test_an_empty_result_after_a_mend_keeps_both_notes(db: Path):
    r = query_database("SELECT COUNT(*) FROM customers WHERE segmnt = 'government'", database=str(db))
    assert r["note"].startswith("Ran with segmnt → customers.segment") and "No data for this query" in r["note"]


def test_a_filler_word_alone_is_no_match(db: Path):
    # a country's name is not a customer's name: "name" is the filler, "country" the meaning
    with pytest.raises(DatabaseError, match="unknown column"):
        query_database("SELECT CountryName FROM customers", database=str(db))


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT SUM(amount) FROM payments",  # amount_cents: a unit, a hundred times the figure
        "SELECT SUM(fee) FROM payments",  # net_fee_eur: two words added, another figure
    ],
)
def test_a_column_that_adds_a_unit_or_two_words_is_not_guessed(tmp_path: Path, sql):
    import sqlite3

    path = tmp_path / "pay.db"
    with sqlite3.connect(path) as con:
        con.execute("CREATE TABLE payments (id INTEGER PRIMARY KEY, amount_cents INTEGER, net_fee_eur REAL)")
        con.execute("INSERT INTO payments VALUES (1, 1250, 0.5)")
    with pytest.raises(DatabaseError, match="unknown column"):
        query_database(sql, database=str(path))


def test_a_report_shows_the_query_that_ran_not_the_one_written(db: Path, tmp_path: Path):
    # a report's "Figures … rest on these queries" must name the SQL whose rows it shows: a
    # mended query's figures are not the written query's
    from tools.builtin.report import generate_report

    out = generate_report(
        "Customers by segment",
        [{"label": "Customers", "sql": "SELECT customer_segment, COUNT(*) FROM customers GROUP BY customer_segment"}],
        database=str(db),
        data_dir=tmp_path,
    )
    (query,) = out["queries"]
    assert query["sql_run"] == "SELECT segment, COUNT(*) FROM customers GROUP BY segment"
    assert query["repaired"] == ["customer_segment → customers.segment"]
    text = Path(out["path"]).read_text()
    assert "_Ran as mended by the tool: customer_segment → customers.segment._" in text
    assert "`SELECT segment, COUNT(*) FROM customers GROUP BY segment`" in text
    assert "customer_segment, COUNT(*)" not in text.split("## Figures in this report rest on these queries")[1]
