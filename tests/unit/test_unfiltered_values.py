"""A value the request names that no read restricted to (DESIGN §5.5, ``graph/answer_filters.py``,
``tools/builtin/database/categories.py``).

Measured (Qwen2.5-Coder-1.5B, the tickets database): "How many replies did customers send in
October 2026?" → every reply of the month counted → "Customers sent 187 replies" (111 were
customers'), presented as final: the figure was in the result.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from langchain_core.messages import AIMessage

from graph.answer_filters import unfiltered_values
from graph.goal_results import Result
from graph.verification import check_answer
from tests.conftest import FakeToolbox, tool_call
from tests.unit.test_verified_names import ask
from tools.builtin.catalog import QUERY_DATABASE
from tools.builtin.database import query_database


@pytest.fixture
def desk(tmp_path: Path) -> Path:
    """A small support desk: replies by customers and agents, tickets in four states."""
    path = tmp_path / "desk.db"
    con = sqlite3.connect(path)
    con.executescript(
        """
        CREATE TABLE agents (agent_id INTEGER PRIMARY KEY, full_name TEXT);
        CREATE TABLE tickets (ticket_no TEXT PRIMARY KEY, state TEXT, agent_id INTEGER, area TEXT);
        CREATE TABLE replies (reply_id INTEGER PRIMARY KEY, ticket_no TEXT, author TEXT, sent_at TEXT);
        """
    )
    con.executemany("INSERT INTO agents VALUES (?, ?)", [(1, "Ana Ruiz"), (2, "Bo Chen")])
    states, areas = ["open", "solved", "closed", "pending"], ["billing", "mobile app", "login"]
    con.executemany(
        "INSERT INTO tickets VALUES (?, ?, ?, ?)",
        [(f"T{i}", states[i % 4], 1 + i % 2, areas[i % 3]) for i in range(40)],
    )
    con.executemany(
        "INSERT INTO replies VALUES (?, ?, ?, ?)",
        [(i, f"T{i % 40}", ("customer", "agent", "customer")[i % 3], f"2026-10-{1 + i % 28:02d}") for i in range(90)],
    )
    con.commit()
    con.close()
    return path


def read(db: Path, sql: str) -> Result:
    data = query_database(sql, database=str(db))
    return Result("query_database", "q", "data", False, data, "", None, "", {"sql": sql})


def test_the_tool_lists_the_categorical_values_of_the_tables_it_read(desk):
    data = query_database("SELECT COUNT(*) FROM replies", database=str(desk))
    assert data["categories"] == {"replies.author": ["agent", "customer"]}
    both = query_database("SELECT COUNT(*) FROM tickets JOIN agents USING (agent_id)", database=str(desk))
    # agents' names are no category (a lookup table: as many names as rows)
    assert set(both["categories"]) == {"tickets.state", "tickets.area"}


@pytest.mark.parametrize(
    "request_, sql, missing",
    [
        ("How many replies did customers send in October 2026?", "SELECT COUNT(*) FROM replies", ["'customer'"]),
        ("Wie viele Antworten kamen von Agents?", "SELECT COUNT(*) FROM replies", ["'agent'"]),
        ("How many tickets are solved or closed?", "SELECT COUNT(*) FROM tickets WHERE state = 'solved'", ["'closed'"]),
        (
            "How many mobile app tickets are open?",
            "SELECT COUNT(*) FROM tickets WHERE state = 'open'",
            ["'mobile app'"],
        ),
    ],
)
def test_a_value_the_request_names_and_no_read_compared_with_is_named(desk, request_, sql, missing):
    found = unfiltered_values(request_, [read(desk, sql)])
    assert [f.split(" (")[0] for f in found] == missing
    check = check_answer("There are 12.", request_, [read(desk, sql)], needs_data=True, request=request_)
    assert not check.ok and "no read of this request restricted to it" in "; ".join(check.problems())


@pytest.mark.parametrize(
    "request_, sqls",
    [
        ("How many replies did customers send?", ["SELECT COUNT(*) FROM replies WHERE author = 'customer'"]),
        ("How many replies did customers and agents send?", ["SELECT author, COUNT(*) FROM replies GROUP BY author"]),
        (
            "How many tickets are solved or closed?",
            ["SELECT COUNT(*) FROM tickets WHERE state IN ('Solved', 'closed')"],
        ),
        ("How many replies were sent in October?", ["SELECT COUNT(*) FROM replies"]),  # no value named
        (
            "How many replies did customers send?",  # another read of the goal compared with it
            ["SELECT COUNT(*) FROM replies", "SELECT COUNT(*) FROM replies WHERE author = 'customer'"],
        ),
    ],
)
def test_a_read_restricted_to_or_grouped_by_the_value_answers_it(desk, request_, sqls):
    assert unfiltered_values(request_, [read(desk, s) for s in sqls]) == []


async def test_the_answer_goes_back_with_a_read_required_and_the_filtered_count_passes(scripted, desk):
    box = FakeToolbox()
    box.add_spec(QUERY_DATABASE, lambda sql: query_database(sql, database=str(desk)))
    every = "SELECT COUNT(*) FROM replies"
    theirs = "SELECT COUNT(*) FROM replies WHERE author = 'customer'"
    total, customers = (query_database(s, database=str(desk))["rows"][0][0] for s in (every, theirs))
    ctx = scripted(
        [
            tool_call("query_database", {"sql": every}, "q1"),
            AIMessage(f"Customers sent {total} replies."),
            tool_call("query_database", {"sql": theirs}, "q2"),
            AIMessage(f"Customers sent {customers} replies."),
        ],
        box,
        embeddings="hash",
    )
    out = await ask(ctx, "How many replies did customers send?")
    model = scripted.models[ctx.model]
    assert model.offers[2] == ["query_database"] and "'customer' (replies.author)" in model.seen[2][-1].content
    assert out["stop_reason"] is None and out["messages"][-1].content == f"Customers sent {customers} replies."
