"""``schedule_reminder`` and ``list_reminders`` (seed §5.1 "remind me every month"), persisted in
``data_dir/reminders.db`` (SQLite). Run inside the executor's worker process.

Table: ``reminders(id INTEGER PK, text TEXT, day_of_month INTEGER 1-31, time TEXT 'HH:MM',
recurrence TEXT 'monthly', created_at TEXT ISO-8601, next_run TEXT ISO-8601 local time)``.
A day beyond a month's length runs on that month's last day.
"""

from __future__ import annotations

import calendar
import datetime as dt
import re
import sqlite3
from pathlib import Path
from typing import Any

TIME_RE = re.compile(r"^([01]\d|2[0-3]):([0-5]\d)$")
RECURRENCES = ("monthly",)
_COLUMNS = ("id", "text", "day_of_month", "time", "recurrence", "created_at", "next_run")


def _connect(data_dir: Path) -> sqlite3.Connection:
    con = sqlite3.connect(Path(data_dir) / "reminders.db")
    con.execute("""CREATE TABLE IF NOT EXISTS reminders (
        id INTEGER PRIMARY KEY AUTOINCREMENT, text TEXT NOT NULL, day_of_month INTEGER NOT NULL,
        time TEXT NOT NULL, recurrence TEXT NOT NULL, created_at TEXT NOT NULL, next_run TEXT NOT NULL)""")
    return con


def next_monthly_run(day_of_month: int, time: str, now: dt.datetime) -> dt.datetime:
    """First ``day_of_month`` at ``time`` strictly after ``now`` (day clamped to month length)."""
    hh, mm = (int(x) for x in time.split(":"))
    y, m = now.year, now.month
    for _ in range(3):
        day = min(day_of_month, calendar.monthrange(y, m)[1])
        candidate = now.replace(year=y, month=m, day=day, hour=hh, minute=mm, second=0, microsecond=0)
        if candidate > now:
            return candidate
        y, m = (y + 1, 1) if m == 12 else (y, m + 1)
    raise AssertionError("unreachable")  # pragma: no cover


def schedule_reminder(text: str, day_of_month: int = 1, time: str = "09:00", recurrence: str = "monthly",
                      *, data_dir: Path) -> dict[str, Any]:
    """Persist a recurring reminder; return it as ``{"id", "text", "day_of_month", "time",
    "recurrence", "created_at", "next_run", "already_existed"}``. A reminder identical in text
    (case and spacing ignored), day, time and recurrence is not created twice: the existing one
    is returned with ``already_existed: true`` (asking twice must not remind twice). Raises
    ValueError for empty text, a day outside 1-31, a time not ``HH:MM`` (24 h) or a recurrence
    other than ``monthly``."""
    text = (text or "").strip()
    if not text:
        raise ValueError("text is empty; say what to remind about")
    if not isinstance(day_of_month, int) or not 1 <= day_of_month <= 31:
        raise ValueError(f"day_of_month must be 1-31, got {day_of_month!r}")
    if not TIME_RE.match(time or ""):
        raise ValueError(f"time must be HH:MM (24 h), got {time!r}")
    if recurrence not in RECURRENCES:
        raise ValueError(f"recurrence must be one of {RECURRENCES}, got {recurrence!r}")
    now = dt.datetime.now().astimezone()
    nxt = next_monthly_run(day_of_month, time, now)
    con = _connect(data_dir)
    try:
        with con:
            same = " ".join(text.lower().split())
            for row in con.execute(f"SELECT {', '.join(_COLUMNS)} FROM reminders WHERE day_of_month = ? "
                                   "AND time = ? AND recurrence = ?", (day_of_month, time, recurrence)):
                if " ".join(str(row[1]).lower().split()) == same:
                    return {**dict(zip(_COLUMNS, row)), "already_existed": True}
            cur = con.execute(
                "INSERT INTO reminders (text, day_of_month, time, recurrence, created_at, next_run) "
                "VALUES (?, ?, ?, ?, ?, ?)",
                (text, day_of_month, time, recurrence, now.isoformat(timespec="seconds"),
                 nxt.isoformat(timespec="minutes")))
            rid = cur.lastrowid
        row = con.execute(f"SELECT {', '.join(_COLUMNS)} FROM reminders WHERE id = ?", (rid,)).fetchone()
    finally:
        con.close()
    return {**dict(zip(_COLUMNS, row)), "already_existed": False}


def list_reminders(*, data_dir: Path) -> dict[str, Any]:
    """All reminders, oldest first: ``{"reminders": [reminder, ...], "count": n}``."""
    con = _connect(data_dir)
    try:
        rows = con.execute(f"SELECT {', '.join(_COLUMNS)} FROM reminders ORDER BY id").fetchall()
    finally:
        con.close()
    return {"reminders": [dict(zip(_COLUMNS, r)) for r in rows], "count": len(rows)}
