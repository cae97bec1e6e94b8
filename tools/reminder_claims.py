"""The claim and outcome records of a reminder firing, on the schedule (``reminders.db`` or
PostgreSQL, :mod:`tools.builtin.reminder_store`). Knows nothing of the graph.

* :func:`mark_fired` — the **atomic claim** of one period (one write transaction; of two
  runners racing exactly one gets True); a claim whose owner died, or older than
  :data:`STALE_CLAIM_S`, is taken over (:func:`claim_is_stale`);
* :func:`record_outcome` — ``done``, ``retry`` (due again, bounded by :data:`MAX_ATTEMPTS`) or
  ``failed``;
* :func:`record_delivery` — the notice delivered for the period, with what its action did.

Which periods are due is :mod:`tools.reminder_due`; firing them is :mod:`tools.scheduler`.
"""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Any, Protocol

from tools.builtin.reminder_periods import local_now, month_add, parse_period, scheduled_at
from tools.builtin.reminder_store import ScheduleDb, open_schedule, process_owner


class Firing(Protocol):
    """What :func:`record_delivery` reads of a firing (``tools.reminder_due.Due``; a protocol,
    so that this module does not import the one that imports it)."""

    reminder_id: int
    period: str
    action: dict[str, Any]

    def notice(self) -> str: ...


#: Attempts per period before a failing action is given up (state ``failed``).
MAX_ATTEMPTS = 3
#: A ``claimed`` firing older than this (seconds) is taken over even if its owner looks alive.
STALE_CLAIM_S = 3600.0


def request_id_for(reminder_id: int, period: str) -> str:
    """``reminder:<id>:<period>``: the firing's request id (tool ledger, run metadata)."""
    return f"reminder:{reminder_id}:{period}"


def claim_is_stale(db: ScheduleDb, claimed_at: str, owner: str, now: dt.datetime) -> bool:
    """True when the claim of ``owner`` at ``claimed_at`` (ISO-8601) may be taken over: its owner
    is dead (``db.owner_alive``), its time cannot be read, or it is older than
    :data:`STALE_CLAIM_S` at ``now``."""
    if not db.owner_alive(owner):
        return True
    try:
        age = (now - dt.datetime.fromisoformat(claimed_at).astimezone()).total_seconds()
    except ValueError:
        return True
    return age > STALE_CLAIM_S


def mark_fired(
    data_dir: Path | str,
    reminder_id: int,
    period: str,
    *,
    now: dt.datetime | None = None,
    owner: str | None = None,
    skipped: list[str] | None = None,
    postgres_url: str | None = None,
) -> bool:
    """Claim the firing of ``reminder_id`` for ``period``, atomically; True when this caller
    won and must fire it now (then :func:`record_outcome`), False when the period is already
    fired, being fired by a live runner, or older than the reminder's last fired period.
    Sets ``last_fired_period``, ``last_fired_at`` and ``next_run``. On PostgreSQL the claim is
    made under ``owner``'s lease (:func:`tools.builtin.reminder_store.hold_lease`), so that it
    is taken over when this process dies, on any host."""
    now = local_now(now)
    owner = owner or process_owner(postgres_url)
    stamp = now.isoformat(timespec="seconds")
    rid = request_id_for(reminder_id, period)
    con = open_schedule(data_dir, postgres_url)
    try:
        con.claim_as(owner)  # before the claim can commit
        con.begin()
        try:
            row = con.execute(
                "SELECT day_of_month, time, last_fired_period FROM reminders WHERE id = ?", (reminder_id,)
            ).fetchone()
            if row is None:
                con.rollback()
                return False
            day, time, last = row
            firing = con.execute(
                "SELECT state, owner, claimed_at FROM firings WHERE reminder_id = ? AND period = ?",
                (reminder_id, period),
            ).fetchone()
            won = False
            if firing is None:
                if last is None or period > last:
                    con.execute(
                        "INSERT INTO firings (reminder_id, period, state, owner, request_id, attempts, "
                        "claimed_at, skipped) VALUES (?, ?, 'claimed', ?, ?, 1, ?, ?)",
                        (reminder_id, period, owner, rid, stamp, json.dumps(skipped or [])),
                    )
                    # an unfinished older period is superseded by this one
                    con.execute(
                        "UPDATE firings SET state = 'failed', finished_at = ?, detail = "
                        "COALESCE(detail, '') || ' (superseded by ' || ? || ')' WHERE reminder_id = ? "
                        "AND period < ? AND state IN ('claimed', 'retry')",
                        (stamp, period, reminder_id, period),
                    )
                    won = True
            elif firing[0] == "retry" or (firing[0] == "claimed" and claim_is_stale(con, firing[2], firing[1], now)):
                con.execute(
                    "UPDATE firings SET state = 'claimed', owner = ?, attempts = attempts + 1, "
                    "claimed_at = ? WHERE reminder_id = ? AND period = ?",
                    (owner, stamp, reminder_id, period),
                )
                won = True
            if won:
                nxt = scheduled_at(day, time, *month_add(*parse_period(period), 1))
                con.execute(
                    "UPDATE reminders SET last_fired_period = ?, last_fired_at = ?, next_run = ? WHERE id = ?",
                    (max(period, last or period), stamp, nxt.isoformat(timespec="minutes"), reminder_id),
                )
            con.commit()
            return won
        except BaseException:
            con.rollback()
            raise
    finally:
        con.close()


def record_outcome(
    data_dir: Path | str,
    reminder_id: int,
    period: str,
    *,
    ok: bool,
    detail: str = "",
    now: dt.datetime | None = None,
    retry: bool = True,
    postgres_url: str | None = None,
) -> bool:
    """Finish a claimed firing: ``done`` when ``ok``; otherwise ``retry`` (due again at the next
    check) or, after ``MAX_ATTEMPTS`` or when ``retry`` is False (a refusal that a retry would
    meet again), ``failed``. Returns True when it will be retried."""
    stamp = local_now(now).isoformat(timespec="seconds")
    con = open_schedule(data_dir, postgres_url)
    try:
        con.begin()
        try:
            row = con.execute(
                "SELECT attempts FROM firings WHERE reminder_id = ? AND period = ?", (reminder_id, period)
            ).fetchone()
            again = retry and (not ok) and row is not None and row[0] < MAX_ATTEMPTS
            state = "done" if ok else ("retry" if again else "failed")
            con.execute(
                "UPDATE firings SET state = ?, finished_at = ?, detail = ? WHERE reminder_id = ? AND period = ?",
                (state, stamp, detail[:2000], reminder_id, period),
            )
            con.commit()
            return again
        except BaseException:
            con.rollback()
            raise
    finally:
        con.close()


def record_delivery(
    data_dir: Path | str,
    due: Firing,
    *,
    outcome: str,
    detail: str = "",
    now: dt.datetime | None = None,
    postgres_url: str | None = None,
) -> None:
    """Record that ``due``'s notice was delivered (:meth:`Due.notice`), with what its action did:
    ``outcome`` "delivered" (no action), "done", "failed" or "retry". One row per reminder and
    period: a retry of the period updates it."""
    stamp = local_now(now).isoformat(timespec="seconds")
    con = open_schedule(data_dir, postgres_url)
    try:
        con.execute(
            "INSERT INTO deliveries (reminder_id, period, delivered_at, message, action, outcome, detail) "
            "VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT (reminder_id, period) DO UPDATE SET "
            "delivered_at = excluded.delivered_at, message = excluded.message, action = excluded.action, "
            "outcome = excluded.outcome, detail = excluded.detail",
            (due.reminder_id, due.period, stamp, due.notice(), due.action["kind"], outcome, detail[:2000]),
        )
    finally:
        con.close()
