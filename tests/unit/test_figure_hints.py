"""An unknown column that the query sums or averages gets where the figures are, not the nearest
names by spelling (``tools/builtin/database/figures.py``; DESIGN §5.5).

Measured (Qwen2.5-Coder-1.5B, the generated sales database): ``AVG(order_value) FROM orders``
was refused with "Did you mean order_date or order_id?" — a date and a key — and the model wrote
the same SQL again, then answered a figure no read held.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from tools.builtin.database import query_database
from tools.builtin.database.figures import numeric_columns, summed_column
from tools.database_setting import DatabaseError


def error_of(sql: str, db: Path) -> str:
    with pytest.raises(DatabaseError) as caught:
        query_database(sql, database=str(db))
    return str(caught.value)


def test_a_figure_its_table_lacks_points_at_the_lines_and_views_that_hold_figures(db: Path):
    text = error_of("SELECT AVG(order_value) FROM orders WHERE strftime('%Y-%m', order_date) = '2026-11'", db)
    # not a date or a key offered as the figure
    assert "Did you mean" not in text, text
    assert "orders holds no numeric column but its keys" in text
    assert "order_items(quantity, unit_price) JOIN order_items ON order_items.order_id = orders.order_id" in text
    # the reporting view's computed column (no declared type) is found by its values
    assert "view sales_lines(quantity, unit_price, revenue)" in text
    assert "A total per orders row is a SUM over the rows that reference it" in text


def test_a_summed_name_is_offered_only_numeric_columns(db: Path):
    # "quantty" is a letter off quantity: mended by repairs.py; "pricey" is no certain repair
    text = error_of("SELECT SUM(pricey) FROM order_items", db)
    assert "numeric columns of these tables are order_items: quantity, unit_price" in text
    assert "order_item_id" not in text.split("numeric columns")[1]


def test_a_name_not_summed_keeps_the_nearest_names_by_spelling(db: Path):
    # the sibling: a selected (not summed) column still gets "Did you mean" and no figure hint
    text = error_of("SELECT order_valu FROM orders", db)
    assert "Did you mean order_date or order_id?" in text
    assert "numeric" not in text


def test_other_schemas_text_keys_and_declared_money_types(tmp_path: Path):
    # a schema of another shape: text primary key, DECIMAL money, a key named "...No"
    path = tmp_path / "shop.db"
    con = sqlite3.connect(path)
    con.executescript(
        """
        CREATE TABLE accounts (account_ref TEXT PRIMARY KEY, opened DATE);
        CREATE TABLE payments (PaymentNo INTEGER PRIMARY KEY, account_ref TEXT REFERENCES accounts(account_ref),
            paid DECIMAL(10,2), fee MONEY, note TEXT, rating ENUM);
        INSERT INTO accounts VALUES ('A1', '2026-01-01');
        INSERT INTO payments VALUES (1, 'A1', 10.5, 0.2, 'x', 'PG-13');
        """
    )
    con.commit()
    assert numeric_columns(con, "payments") == ["paid", "fee"]  # not the ENUM (Sakila's film.rating)
    con.close()
    text = error_of("SELECT SUM(balance) FROM accounts", path)
    assert "payments(paid, fee) JOIN payments ON payments.account_ref = accounts.account_ref" in text


@pytest.mark.parametrize(
    "sql, column, summed",
    [
        ("SELECT AVG(o.order_value) FROM orders o", "o.order_value", True),
        ("SELECT SUM(DISTINCT x) FROM t", "x", True),
        ("SELECT SUM(a * order_value) FROM t", "order_value", True),
        ("SELECT order_value FROM t", "order_value", False),
        ("SELECT MAX(order_value) FROM t", "order_value", False),  # a date can be a MAX: no number implied
        ("SELECT AVG(", "x", False),  # unparsable
    ],
)
def test_summed_column_reads_the_syntax_tree(sql: str, column: str, summed: bool):
    assert summed_column(sql, column) is summed


def test_a_table_name_with_a_space_written_bare_is_told_to_be_quoted(tmp_path: Path):
    # measured (Northwind, held out): FROM Order Details got only 'near "Order": syntax error',
    # was written bare again, and the run hit the round cap
    path = tmp_path / "nw.db"
    con = sqlite3.connect(path)
    con.executescript(
        'CREATE TABLE "Order Details" (OrderID INTEGER, Quantity INTEGER); INSERT INTO "Order Details" VALUES (1, 2);'
    )
    con.commit()
    con.close()
    text = error_of("SELECT SUM(Quantity) FROM Order Details", path)
    assert 'must be written in double quotes, as "Order Details"' in text, text
    assert query_database('SELECT SUM(Quantity) FROM "Order Details"', database=str(path))["rows"] == [[2]]
    # another syntax error on the same database gets no quoting advice
    assert "double quotes" not in error_of('SELECT SUM(Quantity) FROM "Order Details" WHERE', path)


def test_a_view_sqlite_cannot_compile_leaves_the_other_tables_hints_intact(tmp_path: Path):
    # measured (Sakila, held out): six views call MySQL's CONCAT; one of them made every schema
    # hint of the database empty ("unknown table 'westerns'" with no tables named)
    path = tmp_path / "ported.db"
    con = sqlite3.connect(path)
    con.executescript(
        """
        CREATE TABLE film (film_id INTEGER PRIMARY KEY, title TEXT, length INTEGER);
        CREATE VIEW film_list AS SELECT CONCAT(title, '!') AS t FROM film;
        INSERT INTO film VALUES (1, 'A', 90);
        """
    )
    con.commit()
    con.close()
    text = error_of("SELECT COUNT(*) FROM westerns", path)
    assert "Tables and columns here: film(film_id, title, length)" in text and "film_list" not in text, text
    assert "numeric columns of these tables are film: length" in error_of("SELECT AVG(duration) FROM film", path)
