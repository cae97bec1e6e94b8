"""Which reminders are due at a time: each new period once (missed periods caught up in one
firing, ``skipped_periods``), plus periods left in ``retry`` or claimed by a dead runner. Read-only;
knows nothing of the graph. Claiming a due period is :mod:`tools.reminder_claims`; firing it is
:mod:`tools.scheduler` (whose docstring states the rules).
"""

from __future__ import annotations

import datetime as dt
import json
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tools.builtin.reminder_periods import adjustment_for, local_now, month_add, parse_period, period_of, scheduled_at
from tools.builtin.reminder_store import open_schedule, schedule_exists
from tools.builtin.reminders import _COLUMNS, row_to_reminder
from tools.reminder_claims import claim_is_stale, request_id_for

log = logging.getLogger(__name__)

#: Default thread of a "task" action: ``reminder-<id>``.
THREAD_PREFIX = "reminder-"


@dataclass
class Due:
    """One firing to do: reminder ``reminder_id`` for ``period`` ("YYYY-MM").

    ``scheduled_for``  ISO-8601 local time of the period's run (day clamped to the month)
    ``action``         ``{"kind": "notify"}`` | ``{"kind": "task", "task", "thread_id"?}`` |
                       ``{"kind": "tool", "tool", "args"}``
    ``thread_id``      for task actions: the action's thread or ``reminder-<id>``
    ``request_id``     ``reminder:<id>:<period>``
    ``skipped_periods`` missed periods caught up by this one firing (oldest first)
    ``adjustment``     None, or how an impossible date was handled (day 31 in November → 30th)
    ``attempt``        1 for a new period; n for a retry or a takeover of a dead runner's claim
    """

    reminder_id: int
    text: str
    period: str
    scheduled_for: str
    action: dict[str, Any]
    thread_id: str | None
    request_id: str
    skipped_periods: list[str] = field(default_factory=list)
    adjustment: str | None = None
    attempt: int = 1

    def describe(self) -> str:
        kind = self.action["kind"]
        what = {"tool": f"notice + tool {self.action.get('tool')}", "task": f"notice + task on thread {self.thread_id}"}
        return f"reminder {self.reminder_id} ({self.text[:60]}) for {self.period}: {what.get(kind, 'notice')}"

    def notice(self) -> str:
        """The notice this firing delivers to the user."""
        return f"Reminder ({self.period}): {self.text}"


def _latest_period(reminder: dict[str, Any], now: dt.datetime) -> tuple[int, int]:
    y, m = now.year, now.month
    if scheduled_at(reminder["day_of_month"], reminder["time"], y, m) > now:
        y, m = month_add(y, m, -1)
    return y, m


def _first_period(reminder: dict[str, Any]) -> tuple[int, int]:
    """The first period whose run is after the reminder's creation."""
    created = dt.datetime.fromisoformat(reminder["created_at"]).astimezone()
    y, m = created.year, created.month
    if scheduled_at(reminder["day_of_month"], reminder["time"], y, m) <= created:
        y, m = month_add(y, m, 1)
    return y, m


def _periods_between(start: tuple[int, int], end: tuple[int, int]) -> list[str]:
    """Periods from ``start`` (inclusive) to ``end`` (exclusive)."""
    out: list[str] = []
    y, m = start
    while (y, m) < end:
        out.append(period_of(y, m))
        y, m = month_add(y, m, 1)
    return out


def _due(reminder: dict[str, Any], y: int, m: int, skipped: list[str], attempt: int = 1) -> Due:
    action = reminder["action"]
    thread = (action.get("thread_id") or f"{THREAD_PREFIX}{reminder['id']}") if action["kind"] == "task" else None
    period = period_of(y, m)
    return Due(
        reminder_id=reminder["id"],
        text=reminder["text"],
        period=period,
        scheduled_for=scheduled_at(reminder["day_of_month"], reminder["time"], y, m).isoformat(timespec="minutes"),
        action=action,
        thread_id=thread,
        request_id=request_id_for(reminder["id"], period),
        skipped_periods=skipped,
        adjustment=adjustment_for(reminder["day_of_month"], y, m),
        attempt=attempt,
    )


def stored_reminders(data_dir: Path | str, *, postgres_url: str | None = None) -> list[dict[str, Any]]:
    """Every stored reminder, oldest first (``[]`` when ``data_dir`` has no reminders file):
    the rows :func:`due_reminders` works from, for listings (the CLI). ``postgres_url``: see
    :func:`tools.builtin.reminder_store.schedule_url` (None: ``HERMES_POSTGRES_URL``)."""
    if not schedule_exists(data_dir, postgres_url):
        return []
    with open_schedule(data_dir, postgres_url) as con:
        rows = con.execute(f"SELECT {', '.join(_COLUMNS)} FROM reminders ORDER BY id").fetchall()
    return [row_to_reminder(r) for r in rows]


def due_reminders(data_dir: Path | str, now: dt.datetime, *, postgres_url: str | None = None) -> list[Due]:
    """Reminders of the schedule (``data_dir/reminders.db``, or PostgreSQL: ``postgres_url``,
    None = ``HERMES_POSTGRES_URL``) due at ``now`` (read-only; see module doc): each new period
    once, plus periods left in ``retry`` or claimed by a dead runner."""
    now = local_now(now)
    con = open_schedule(data_dir, postgres_url)
    try:
        reminders = [
            row_to_reminder(r) for r in con.execute(f"SELECT {', '.join(_COLUMNS)} FROM reminders ORDER BY id")
        ]
        open_firings = {
            (r[0], r[1]): r
            for r in con.execute(
                "SELECT reminder_id, period, state, owner, claimed_at, attempts, skipped FROM firings "
                "WHERE state IN ('claimed', 'retry')"
            )
        }
        # whose claims are dead: decided while the connection is open (PostgreSQL asks the server)
        dead = {k for k, r in open_firings.items() if r[2] == "claimed" and claim_is_stale(con, r[4], r[3], now)}
    finally:
        con.close()
    out: list[Due] = []
    for reminder in reminders:
        if reminder["recurrence"] != "monthly":
            continue  # only monthly exists; a future kind is not guessed at
        if reminder.get("damaged"):
            log.warning("reminder %s not fired: %s", reminder["id"], reminder["damaged"])
            continue
        try:
            due = _due_of(reminder, open_firings, dead, now)
        except (ValueError, TypeError, KeyError) as exc:  # one corrupt row must not stop the others
            log.warning(
                "reminder %s not fired: its record cannot be read (%s: %s)", reminder["id"], type(exc).__name__, exc
            )
            continue
        if due is not None:
            out.append(due)
    return out


def _due_of(
    reminder: dict[str, Any], open_firings: dict[tuple[Any, Any], Any], dead: set[Any], now: dt.datetime
) -> Due | None:
    """The firing of ``reminder`` due at ``now``, if any (see :func:`due_reminders`)."""
    latest = _latest_period(reminder, now)
    first = _first_period(reminder)
    last = reminder["last_fired_period"]
    if latest < first:
        return None  # its first run is still ahead
    if last is None or period_of(*latest) > last:
        start = max(first, month_add(*parse_period(last), 1)) if last else first
        return _due(reminder, *latest, _periods_between(start, latest))
    pending = open_firings.get((reminder["id"], last))
    if pending is None:
        return None  # this period is done (or given up)
    _, period, state, _owner, _claimed_at, attempts, skipped = pending
    if state == "retry" or (reminder["id"], last) in dead:
        return _due(reminder, *parse_period(period), json.loads(skipped or "[]"), attempt=attempts + 1)
    return None
