"""Delivery marks on PostgreSQL (issue 22; DESIGN §2.4 "the same request across processes").

A caller that shows answers to a person marks each finished turn's goal *pending* (answered,
not shown) and then *delivered* (``graph.runner``: ``track_delivery``, ``answer_delivered``).
Without ``HERMES_POSTGRES_URL`` the marks are ``<data_dir>/deliveries.db`` (the runner's own
SQLite code). With it they are the table :data:`TABLE` of that database, beside the thread's
checkpoints: a thread is one thread for every machine on the database, so whether its latest
answer was shown must be too — a command repeated on another machine after the first was killed
between the end of the turn and the print is then the same request (nothing runs again).

* One row per ``(thread_id, goal_id)``; the write is one ``INSERT ... ON CONFLICT DO UPDATE
  ... WHERE state <> 'delivered'``: *pending* never overwrites *delivered*, whatever the order
  in which two machines write. ``finished`` is the server's clock (epoch seconds).
* The table is created on first use under the transaction advisory lock
  :data:`SCHEMA_LOCK_KEY` (concurrent ``CREATE TABLE IF NOT EXISTS`` can fail on ``pg_type``).
* Each call opens and closes its own connection (as the SQLite marks do): they are two writes
  per turn. A server that cannot be reached raises ``psycopg.OperationalError``.
"""

from __future__ import annotations

import threading

import psycopg

from base.postgres_urls import connection_error

#: The table of delivery marks (prefixed: the database holds the checkpoints and other tables).
TABLE = "hermes_answers"
#: Transaction advisory lock serialising the table's creation ("HERMESAN").
SCHEMA_LOCK_KEY = 0x4845524D4553414E
CONNECT_TIMEOUT_S = 10
STATES = ("pending", "delivered")

_SCHEMA = f"""
CREATE TABLE IF NOT EXISTS {TABLE} (
    thread_id  TEXT NOT NULL,
    goal_id    TEXT NOT NULL,
    state      TEXT NOT NULL CHECK (state IN ('pending', 'delivered')),
    finished   DOUBLE PRECISION NOT NULL,
    PRIMARY KEY (thread_id, goal_id)
)
"""
_ready: set[str] = set()
_ready_lock = threading.Lock()


def _connect(url: str) -> psycopg.Connection:
    try:
        con = psycopg.connect(url, autocommit=True, connect_timeout=CONNECT_TIMEOUT_S, prepare_threshold=None)
    except psycopg.Error as exc:  # one line naming the setting, never the password
        raise ConnectionError(connection_error(exc, url, "the record of answers shown")) from None
    try:
        with _ready_lock:
            if url not in _ready:
                with con.transaction():
                    con.execute("SELECT pg_advisory_xact_lock(%s)", (SCHEMA_LOCK_KEY,))
                    con.execute(_SCHEMA)
                _ready.add(url)
    except BaseException:
        con.close()
        raise
    return con


def delivery_state(url: str, thread_id: str, goal_id: str) -> str | None:
    """'pending' (answered, not shown), 'delivered', or None (not tracked). Blocking."""
    with _connect(url) as con:
        row = con.execute(
            f"SELECT state FROM {TABLE} WHERE thread_id = %s AND goal_id = %s", (thread_id, goal_id)
        ).fetchone()
    return str(row[0]) if row else None


def set_delivery(url: str, thread_id: str, goal_id: str, state: str) -> None:
    """Record ``state`` ('pending' | 'delivered') for the goal; 'pending' never overwrites
    'delivered'. Blocking. Raises ValueError for another state."""
    if state not in STATES:
        raise ValueError(f"state must be one of {STATES}, got {state!r}")
    with _connect(url) as con:
        con.execute(
            f"INSERT INTO {TABLE} (thread_id, goal_id, state, finished) "
            "VALUES (%s, %s, %s, extract(epoch from clock_timestamp())) "
            "ON CONFLICT (thread_id, goal_id) DO UPDATE SET state = excluded.state, finished = excluded.finished "
            f"WHERE {TABLE}.state <> 'delivered'",
            (thread_id, goal_id, state),
        )


__all__ = ["TABLE", "delivery_state", "set_delivery"]
