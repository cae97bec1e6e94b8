"""A read that found nothing because it compared a text in the wrong column of its table, and a
comparison with a subquery of several rows, run as meant and say so
(``tools/builtin/database/repairs.py``: ``repair_compared_column``, ``repair_scalar_subquery``;
DESIGN §5.5).

Measured (Qwen2.5-Coder-1.5B, the generated support desk, "the average CSAT of tickets handled
by the billing team"): ``agent_id = (SELECT agent_id FROM agents WHERE full_name = 'billing')``
found nothing; the note "agents.team holds 'billing'" was read and the same SQL sent again. With
the column mended, ``=`` would still compare with the first of the team's agents only — a wrong
figure no check can tell from a right one — so the subquery becomes ``IN``.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from tools.builtin.database import query_database


@pytest.fixture
def desk(tmp_path: Path) -> Path:
    """A schema of another shape than the demo's: staff in departments, cases they closed."""
    path = tmp_path / "desk.db"
    con = sqlite3.connect(path)
    con.executescript(
        """
        CREATE TABLE staff (staff_id INTEGER PRIMARY KEY, display_name TEXT, department TEXT, city TEXT);
        CREATE TABLE cases (case_id INTEGER PRIMARY KEY, staff_id INTEGER REFERENCES staff(staff_id),
            score REAL, topic TEXT);
        INSERT INTO staff VALUES (1, 'Ana Ruiz', 'Refunds', 'Lyon'), (2, 'Bo Lee', 'Refunds', 'Oslo'),
            (3, 'Cy Diaz', 'Hardware', 'Oslo'), (4, 'Oslo', 'Hardware', 'Rome');
        INSERT INTO cases VALUES (1, 1, 4.0, 'refunds'), (2, 1, 2.0, 'refunds'), (3, 2, 5.0, 'login'),
            (4, 3, 1.0, 'hardware'), (5, 4, 3.0, 'login');
        """
    )
    con.commit()
    con.close()
    return path


def run(desk: Path, sql: str) -> dict:
    return query_database(sql, database=str(desk))


def test_a_text_compared_in_the_wrong_column_of_its_table_runs_with_the_one_that_holds_it(desk: Path):
    r = run(
        desk,
        "SELECT AVG(c.score) FROM cases c JOIN staff s ON s.staff_id = c.staff_id WHERE s.display_name = 'refunds'",
    )
    assert r["rows"] == [[11.0 / 3]]  # Ana's two cases and Bo's one
    assert r["repaired"] == ["s.display_name = 'refunds' (no staff row holds it there) → s.department = 'Refunds'"]
    assert "s.department = 'Refunds'" in r["sql_run"] and r["note"].startswith("Ran with")


def test_with_a_subquery_of_several_rows_equality_becomes_membership(desk: Path):
    # the measured shape: the column mended, then "=" would take the first refunds agent only
    r = run(
        desk,
        "SELECT AVG(score) FROM cases WHERE staff_id = (SELECT staff_id FROM staff WHERE display_name = 'refunds')",
    )
    assert r["rows"] == [[11.0 / 3]], r
    assert len(r["repaired"]) == 2 and r["repaired"][1].endswith("→ IN")
    assert "staff_id IN (SELECT" in r["sql_run"]
    # the sibling without the wrong column: a subquery of several rows as written
    r = run(
        desk, "SELECT COUNT(*) FROM cases WHERE staff_id = (SELECT staff_id FROM staff WHERE department = 'Hardware')"
    )
    assert r["rows"] == [[2]] and "IN (SELECT" in r["sql_run"]


@pytest.mark.parametrize(
    "sql, rows",
    [
        # one row: "=" is what was meant
        ("SELECT COUNT(*) FROM cases WHERE score = (SELECT MAX(score) FROM cases)", [[1]]),
        # correlated: cannot run alone, left as written
        (
            "SELECT COUNT(*) FROM cases c WHERE c.staff_id = (SELECT s.staff_id FROM staff s WHERE s.staff_id = c.staff_id)",
            [[5]],
        ),
    ],
)
def test_a_subquery_of_one_row_or_a_correlated_one_is_left_as_written(desk: Path, sql: str, rows):
    r = run(desk, sql)
    assert r["rows"] == rows and "repaired" not in r


@pytest.mark.parametrize(
    "sql",
    [
        # 'Oslo' is held by two other columns of staff (city, display_name): not certain
        "SELECT COUNT(*) FROM staff WHERE department = 'Oslo'",
        # 'login' is held only by another table's column (cases.topic): not this table's attribute
        "SELECT COUNT(*) FROM staff WHERE department = 'login'",
        # the value is in the compared column: the emptiness is the other condition's
        "SELECT COUNT(*) FROM staff WHERE department = 'Refunds' AND city = 'Rome'",
    ],
)
def test_no_certain_column_is_no_repair(desk: Path, sql: str):
    r = run(desk, sql)
    assert r["rows"] == [[0]] and "repaired" not in r


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT AVG(c.score) FROM cases c JOIN staff s ON s.staff_id = c.staff_id WHERE s.display_name = 'refunds'",
        "SELECT COUNT(*) FROM cases WHERE staff_id = (SELECT staff_id FROM staff WHERE department = 'Hardware')",
        "SELECT COUNT(*) FROM staff WHERE departmnt = 'Hardware'",  # an unknown column's repair (a letter)
    ],
)
def test_the_same_sql_sent_again_is_repaired_again(desk: Path, sql: str):
    # models resend a query word for word; a repair that edited the shared parse of the SQL made
    # the second call find nothing to mend (and fail or count nothing) where the first ran
    first, second = run(desk, sql), run(desk, sql)
    assert first["rows"] == second["rows"] and first.get("repaired") == second.get("repaired"), (first, second)


def test_an_in_subquery_of_values_the_column_never_holds_is_no_answer_of_none(desk: Path):
    # measured (tickets): author IN (SELECT agent_id FROM agents) — a text role compared with ids
    # — found nothing and "… is None" was answered
    r = run(
        desk, "SELECT SUM(score) FROM cases WHERE topic IN (SELECT staff_id FROM staff WHERE department = 'Refunds')"
    )
    assert r["unexpected_empty"].startswith("cases.topic never holds a value of staff.staff_id (topic holds 'refunds'")
    assert "do not tell the user there is none" in r["note"]
    # the sibling that does meet: membership in the right column finds rows, nothing is marked
    ok = run(
        desk, "SELECT SUM(score) FROM cases WHERE staff_id IN (SELECT staff_id FROM staff WHERE department = 'Refunds')"
    )
    assert ok["rows"] == [[11.0]] and "unexpected_empty" not in ok
    # an IN that meets in general but not under the subquery's own condition is an answer of none
    none = run(desk, "SELECT COUNT(*) FROM cases WHERE staff_id IN (SELECT staff_id FROM staff WHERE city = 'Paris')")
    assert none["rows"] == [[0]] and "unexpected_empty" not in none
