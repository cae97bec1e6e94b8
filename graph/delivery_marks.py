"""Whether a turn's answer reached the user: the delivery marks of DESIGN §2.4 ("the same
request across processes"). A finished turn's goal is marked *pending* (answered, not shown),
then *delivered* once the caller has shown it (:func:`answer_delivered`); ``graph.runner``
reads the mark to tell a message repeated after a crash (the same request: nothing runs again)
from one repeated after the answer was shown (a new request).

The marks are ``<data_dir>/deliveries.db`` (:data:`DELIVERIES_FILE`), or, with a PostgreSQL URL,
a table of that database (``graph.deliveries``). Every call is blocking (a few ms).
"""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path

from base.sqlite_files import open_sqlite
from graph import deliveries
from graph.context import Context

#: The record of answers shown to the user, inside a data_dir.
DELIVERIES_FILE = "deliveries.db"
_DELIVERIES_SCHEMA = """
CREATE TABLE IF NOT EXISTS answers (
    thread_id  TEXT NOT NULL,
    goal_id    TEXT NOT NULL,
    state      TEXT NOT NULL CHECK (state IN ('pending', 'delivered')),
    finished   REAL NOT NULL,
    PRIMARY KEY (thread_id, goal_id)
);
"""


def _deliveries(data_dir: Path) -> sqlite3.Connection:
    return open_sqlite(data_dir / DELIVERIES_FILE, schema=_DELIVERIES_SCHEMA)


def delivery_state(data_dir: Path, thread_id: str, goal_id: str, postgres_url: str = "") -> str | None:
    """'pending' (answered, not shown), 'delivered', or None (not tracked). Blocking.
    ``postgres_url``: the marks are in that database (``graph.deliveries``)."""
    if postgres_url:
        return deliveries.delivery_state(postgres_url, thread_id, goal_id)
    if not (data_dir / DELIVERIES_FILE).exists():
        return None
    con = _deliveries(data_dir)
    try:
        row = con.execute(
            "SELECT state FROM answers WHERE thread_id = ? AND goal_id = ?", (thread_id, goal_id)
        ).fetchone()
    finally:
        con.close()
    return str(row[0]) if row else None


def set_delivery(data_dir: Path, thread_id: str, goal_id: str, state: str, postgres_url: str = "") -> None:
    """Record ``state`` for the goal (blocking); 'pending' never overwrites 'delivered'.
    ``postgres_url``: the marks are in that database (``graph.deliveries``)."""
    if postgres_url:
        return deliveries.set_delivery(postgres_url, thread_id, goal_id, state)
    con = _deliveries(data_dir)
    try:
        con.execute(
            "INSERT INTO answers (thread_id, goal_id, state, finished) VALUES (?, ?, ?, ?) "
            "ON CONFLICT (thread_id, goal_id) DO UPDATE SET state = excluded.state, finished = excluded.finished "
            "WHERE answers.state != 'delivered'",
            (thread_id, goal_id, state, time.time()),
        )
    finally:
        con.close()


def answer_delivered(data_dir: Path | str, thread_id: str, goal_id: str, postgres_url: str | None = None) -> None:
    """Record that the answer of ``goal_id`` (a summary's ``goal_id``) on ``thread_id`` reached
    the user (printed, returned): the same text sent again is then a new request. Blocking
    (a few ms); call it after the answer was written out. No-op for an empty ``goal_id``.
    ``postgres_url``: the turn's ``Context.postgres_url`` (None: the default Context's)."""
    if thread_id and goal_id:
        url = Context().postgres_url if postgres_url is None else postgres_url
        set_delivery(Path(data_dir), thread_id, goal_id, "delivered", url)
