"""The tasks of the ``tasks`` suite (``evals.suites.tasks``): what each asks of which database,
the number it expects (SQL on the same file), and the databases themselves.

Kinds (the checks are ``evals.suites.task_checks``): ``answer``, ``readonly``, ``workflow``
(the flagship sentence, :data:`FLAGSHIP`, on each schema) and ``ask``.
"""

from __future__ import annotations

import calendar
import sqlite3
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

SAMPLE_TASKS = ("tickets-opened", "sales-readonly-report", "sales-ask-reminder")
#: The flagship sentence (report → post → monthly reminder) on each schema.
FLAGSHIP_TASKS = ("sales-flagship", "tickets-workflow", "chinook-flagship")
FLAGSHIP = (
    "Summarise last month's sales into an analysis report, post it to the project group, and remind me every month."
)
#: Each database's date column deciding its latest month with data: (column, table).
DATE_COLUMNS = {
    "sales": ("order_date", "orders"),
    "tickets": ("opened_at", "tickets"),
    "chinook": ("InvoiceDate", "Invoice"),
}


@dataclass(frozen=True)
class Task:
    """One task: ``prompt`` (with ``{month}`` = the database's latest full month, e.g.
    "November 2026"), ``expected`` SQL returning one number (answer/readonly kinds), and
    ``max_tool_rounds`` for the run."""

    id: str
    db: str
    kind: str
    prompt: str
    expected: str = ""
    decimals: int = 0
    max_tool_rounds: int = 4  # a one-number question: the schema, a query, the answer


LAST_SALES_MONTH = "substr(order_date, 1, 7) = (SELECT substr(MAX(order_date), 1, 7) FROM orders)"
LAST_SALES_MONTH_O = "substr(o.order_date, 1, 7) = (SELECT substr(MAX(order_date), 1, 7) FROM orders)"
LAST_TICKET_MONTH = "substr(opened_at, 1, 7) = (SELECT substr(MAX(opened_at), 1, 7) FROM tickets)"

#: Per database one task of each kind first (``--limit 4``: every kind on both databases).
TASKS: list[Task] = [
    Task(
        "sales-orders-count",
        "sales",
        "answer",
        "How many orders were placed in {month}?",
        f"SELECT COUNT(*) FROM orders WHERE {LAST_SALES_MONTH}",
    ),
    Task(
        "sales-readonly-report",
        "sales",
        "readonly",
        "Before I ask for a sales report: how many distinct products were sold in {month}? Just tell me the "
        "number; do not write, post or schedule anything.",
        "SELECT COUNT(DISTINCT i.product_id) FROM orders o JOIN order_items i ON i.order_id = o.order_id "
        f"WHERE {LAST_SALES_MONTH_O}",
    ),
    Task("sales-flagship", "sales", "workflow", FLAGSHIP, max_tool_rounds=8),
    Task("sales-ask-reminder", "sales", "ask", "Set up a reminder for me.", max_tool_rounds=4),
    Task(
        "sales-revenue",
        "sales",
        "answer",
        "What was the total revenue in {month}? Give the amount rounded to whole currency units.",
        "SELECT ROUND(SUM(i.quantity * i.unit_price)) FROM orders o JOIN order_items i ON i.order_id = o.order_id "
        f"WHERE {LAST_SALES_MONTH_O}",
    ),
    Task(
        "sales-north-customers",
        "sales",
        "answer",
        "How many customers do we have in the North region?",
        "SELECT COUNT(*) FROM customers c JOIN regions r ON r.region_id = c.region_id WHERE r.name = 'North'",
    ),
    Task(
        "tickets-opened",
        "tickets",
        "answer",
        "How many support tickets were opened in {month}?",
        f"SELECT COUNT(*) FROM tickets WHERE {LAST_TICKET_MONTH}",
    ),
    Task(
        "tickets-readonly-billing",
        "tickets",
        "readonly",
        "How many billing tickets came in during {month}? Only tell me here; don't post it anywhere and "
        "don't make a report.",
        f"SELECT COUNT(*) FROM tickets WHERE product_area = 'billing' AND {LAST_TICKET_MONTH}",
    ),
    Task(
        "tickets-workflow",
        "tickets",
        "workflow",
        "Summarise last month's support tickets into a report, post it to the support group, and remind me "
        "every month.",
        max_tool_rounds=8,
    ),
    Task("tickets-ask-post", "tickets", "ask", "Send a message to the team.", max_tool_rounds=4),
    Task(
        "tickets-urgent-unsolved",
        "tickets",
        "answer",
        "How many urgent tickets are still unsolved (state open or pending)?",
        "SELECT COUNT(*) FROM tickets WHERE priority = 'urgent' AND state IN ('open', 'pending')",
    ),
    Task(
        "tickets-csat",
        "tickets",
        "answer",
        "What was the average customer satisfaction (csat) of the tickets opened in {month} that have a "
        "rating? Two decimals.",
        f"SELECT ROUND(AVG(csat), 2) FROM tickets WHERE csat IS NOT NULL AND {LAST_TICKET_MONTH}",
        decimals=2,
    ),
    # data that ends in 2011-12: "last month" has none (the question, or the latest month titled so)
    Task("chinook-flagship", "chinook", "workflow", FLAGSHIP, max_tool_rounds=8),
]


def make_databases(root: Path, names: Iterable[str] = ("sales", "tickets")) -> dict[str, Path]:
    """The databases ``names`` under ``root`` (deterministic contents; ``chinook`` is fetched
    from PyPI once and cached, :func:`evals.sample_dbs.chinook_db`)."""
    from evals.sample_dbs import chinook_db
    from evals.tasks_db import generate_tickets_db
    from tools.builtin.demo_db import generate_sales_db

    builders: dict[str, Callable[[Path], Path]] = {
        "sales": generate_sales_db,
        "tickets": generate_tickets_db,
        "chinook": chinook_db,
    }
    return {name: builders[name](root / f"{name}.db") for name in dict.fromkeys(names)}


def latest_month(db: Path, kind: str) -> str:
    """The database's latest month with data as "November 2026"."""
    column, table = DATE_COLUMNS[kind]
    with sqlite3.connect(db) as con:
        ym = con.execute(f"SELECT substr(MAX({column}), 1, 7) FROM {table}").fetchone()[0]
    y, m = (int(x) for x in ym.split("-"))
    return f"{calendar.month_name[m]} {y}"


def expected_value(db: Path, sql: str) -> float:
    with sqlite3.connect(db) as con:
        return float(con.execute(sql).fetchone()[0])
