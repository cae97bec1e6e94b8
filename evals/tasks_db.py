"""A second generated database for the ``tasks`` suite, shaped unlike the sales demo database:
a support desk (text keys, a nullable foreign key, timestamps with time of day, states, scores).

Schema (:func:`generate_tickets_db`)::

    agents(agent_id INTEGER PK, full_name TEXT, team TEXT 'tier1'|'tier2'|'billing')
    tickets(ticket_no TEXT PK 'T-00001', opened_at TEXT 'YYYY-MM-DD HH:MM',
            priority TEXT 'low'|'normal'|'high'|'urgent', product_area TEXT,
            agent_id INTEGER -> agents or NULL (unassigned),
            state TEXT 'open'|'pending'|'solved'|'closed', solved_at TEXT or NULL,
            csat INTEGER 1-5 or NULL (only some solved/closed tickets are rated))
    ticket_replies(reply_id INTEGER PK, ticket_no TEXT -> tickets, author TEXT 'agent'|'customer',
                   sent_at TEXT 'YYYY-MM-DD HH:MM', body_chars INTEGER)

``months`` calendar months ending at ``end_month`` (default: the last full month before today,
like the sales database), 60-100 tickets a month. Same arguments → identical contents.
"""

from __future__ import annotations

import calendar
import random
import sqlite3
from pathlib import Path

from tools.builtin.demo_db import last_full_month, month_add

SCHEMA = """
CREATE TABLE agents (agent_id INTEGER PRIMARY KEY, full_name TEXT NOT NULL, team TEXT NOT NULL);
CREATE TABLE tickets (ticket_no TEXT PRIMARY KEY, opened_at TEXT NOT NULL, priority TEXT NOT NULL,
    product_area TEXT NOT NULL, agent_id INTEGER REFERENCES agents(agent_id), state TEXT NOT NULL,
    solved_at TEXT, csat INTEGER CHECK (csat BETWEEN 1 AND 5));
CREATE TABLE ticket_replies (reply_id INTEGER PRIMARY KEY,
    ticket_no TEXT NOT NULL REFERENCES tickets(ticket_no), author TEXT NOT NULL,
    sent_at TEXT NOT NULL, body_chars INTEGER NOT NULL);
CREATE INDEX idx_tickets_opened ON tickets(opened_at);
"""
AGENTS = [
    ("Ana Ruiz", "tier1"),
    ("Bo Chen", "tier1"),
    ("Cleo Park", "tier2"),
    ("Dev Patel", "tier2"),
    ("Eli Novak", "billing"),
    ("Fay Osei", "billing"),
]
AREAS = ["billing", "login", "mobile app", "integrations", "reporting"]
PRIORITIES = ["low", "normal", "normal", "normal", "high", "urgent"]


def generate_tickets_db(path: Path | str, months: int = 4, end_month: str | None = None, seed: int = 5) -> Path:
    """Create (overwrite) the support-desk database at ``path``; return the path."""
    end_month = end_month or last_full_month()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.unlink(missing_ok=True)
    rng = random.Random(seed)
    con = sqlite3.connect(path)
    try:
        con.executescript(SCHEMA)
        con.executemany("INSERT INTO agents VALUES (?, ?, ?)", [(i, n, t) for i, (n, t) in enumerate(AGENTS, 1)])
        number = reply_id = 0
        start = month_add(end_month, -(months - 1))
        for k in range(months):
            month = month_add(start, k)
            y, m = (int(x) for x in month.split("-"))
            ndays = calendar.monthrange(y, m)[1]
            for _ in range(rng.randint(60, 100)):
                number += 1
                day, hour, minute = rng.randint(1, ndays), rng.randint(7, 20), rng.randint(0, 59)
                opened = f"{month}-{day:02d} {hour:02d}:{minute:02d}"
                recent = k == months - 1
                state = rng.choice(
                    ["open", "pending", "solved", "solved", "closed"]
                    if recent
                    else ["solved", "solved", "closed", "closed", "pending"]
                )
                solved = None
                if state in ("solved", "closed"):
                    solved = f"{month}-{min(ndays, day + rng.randint(0, 3)):02d} {rng.randint(7, 20):02d}:00"
                csat = rng.randint(1, 5) if solved and rng.random() < 0.6 else None
                agent = None if state == "open" and rng.random() < 0.5 else rng.randint(1, len(AGENTS))
                ticket = f"T-{number:05d}"
                con.execute(
                    "INSERT INTO tickets VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                    (ticket, opened, rng.choice(PRIORITIES), rng.choice(AREAS), agent, state, solved, csat),
                )
                for r in range(rng.randint(1, 4)):
                    reply_id += 1
                    con.execute(
                        "INSERT INTO ticket_replies VALUES (?, ?, ?, ?, ?)",
                        (reply_id, ticket, "customer" if r % 2 == 0 else "agent", opened, rng.randint(40, 1200)),
                    )
        con.commit()
    finally:
        con.close()
    return path
