"""What the reminders did, for ``hermes reminders history`` and ``list`` (DESIGN §0 "every
month"): the firings of each reminder and period (claimed, done, retry, failed) and the notices
delivered, newest first. Read-only; the rows are written by ``tools.scheduler``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tools.builtin.reminder_store import open_schedule, schedule_exists


def firing_history(
    data_dir: Path | str, reminder_id: int | None = None, *, postgres_url: str | None = None
) -> list[dict[str, Any]]:
    """Rows of ``firings`` (newest first): reminder_id, period, state, attempts, claimed_at,
    finished_at, detail, skipped. ``postgres_url``: where the schedule is
    (:func:`tools.builtin.reminder_store.schedule_url`; None: ``HERMES_POSTGRES_URL``)."""
    con = open_schedule(data_dir, postgres_url)
    try:
        sql = (
            "SELECT reminder_id, period, state, attempts, claimed_at, finished_at, detail, skipped, request_id "
            "FROM firings"
        )
        rows = con.execute(
            sql
            + (" WHERE reminder_id = ?" if reminder_id is not None else "")
            + " ORDER BY claimed_at DESC, reminder_id",
            (() if reminder_id is None else (reminder_id,)),
        ).fetchall()
    finally:
        con.close()
    keys = (
        "reminder_id",
        "period",
        "state",
        "attempts",
        "claimed_at",
        "finished_at",
        "detail",
        "skipped",
        "request_id",
    )
    return [{**dict(zip(keys, r)), "skipped": json.loads(r[7] or "[]")} for r in rows]


def delivery_history(
    data_dir: Path | str, reminder_id: int | None = None, *, postgres_url: str | None = None
) -> list[dict[str, Any]]:
    """Delivered notices, newest first: ``{reminder_id, period, delivered_at, message, action,
    outcome, detail}`` (``[]`` when ``data_dir`` has no reminders file and no PostgreSQL is set)."""
    if not schedule_exists(data_dir, postgres_url):
        return []
    con = open_schedule(data_dir, postgres_url)
    try:
        rows = con.execute(
            "SELECT reminder_id, period, delivered_at, message, action, outcome, detail FROM deliveries"
            + (" WHERE reminder_id = ?" if reminder_id is not None else "")
            + " ORDER BY delivered_at DESC, period DESC, reminder_id",
            (() if reminder_id is None else (reminder_id,)),
        ).fetchall()
    finally:
        con.close()
    keys = ("reminder_id", "period", "delivered_at", "message", "action", "outcome", "detail")
    return [dict(zip(keys, r)) for r in rows]
