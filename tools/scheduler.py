"""Reminder firing: which reminders are due, exactly once per period (DESIGN §0: "every month"
means the reminder fires every month, through a scheduler). Knows nothing of the graph: the
caller says what firing an action means (``fire`` callback of :func:`fire_due`).

    due = due_reminders(data_dir, now)          # read-only: list[Due]
    if mark_fired(data_dir, d.reminder_id, d.period, now=now):   # the claim; False = not ours
        ...fire d.action with request_id d.request_id...
        record_outcome(data_dir, d.reminder_id, d.period, ok=True, detail="...", now=now)

or all of it in one call: ``await fire_due(data_dir, now, fire)``.

Rules:

* **Once per period.** A reminder is due for the *latest* period (month) whose scheduled time
  is <= ``now``, is after the reminder was created, and is later than ``last_fired_period``.
  Missed periods are caught up once, not N times: last fired in August, checked in December →
  one firing for December, ``skipped_periods`` = Sep, Oct, Nov.
* **Atomic claim.** :func:`mark_fired` is one write transaction on the schedule
  (:mod:`tools.builtin.reminder_store`: ``BEGIN IMMEDIATE`` on ``reminders.db``, WAL, 30 s busy
  timeout; or, with ``HERMES_POSTGRES_URL``, a PostgreSQL transaction under one advisory lock):
  it inserts ``firings(reminder_id, period)`` (the primary key is the claim) and moves
  ``last_fired_period``. Of two schedulers racing — threads, processes, the CLI and the server,
  on one machine or, on PostgreSQL, on many — exactly one gets True.
* **Request id** ``reminder:<id>:<period>``: a "tool" action called with it through
  ``ToolRegistry.call(..., request_id=...)`` is recorded in the idempotency ledger, so even a
  replay of the same period (a takeover after a crash) cannot post twice.
* **Failures retry, bounded.** :func:`record_outcome` with ``ok=False`` leaves the period in
  state ``retry`` (due again at the next check, same request id) until ``MAX_ATTEMPTS``, then
  ``failed``. A claim whose owner process died (SQLite: same host, by pid; PostgreSQL: its
  lease, a session advisory lock, is free — any host), or older than ``STALE_CLAIM_S``, is
  taken over. A newer period supersedes an unfinished older one.
* **A firing reminds.** Every claimed firing delivers the reminder's text to the user as a
  notice (:func:`record_delivery`: table ``deliveries``, one row per reminder and period, with
  the action's outcome; :func:`tools.reminder_history.delivery_history`); the action runs
  besides only when there is one (``notify`` has none, and ``fire`` is not called for it). Nothing here runs the
  reminder's text as a request.
* **The action is bound to the request that created it.** A "tool" action is checked again
  when it fires (:func:`call_tool_action` with ``data_dir``: its destinations against the
  request recorded with it, :func:`tools.deferred_calls.deferred_refusal`); a refused action does
  not run, is not retried, and the firing says why. A "task" action runs as a turn on behalf of
  that request (:func:`bound_request`).
* **Injected clock.** Every function takes ``now``; naive datetimes are local time.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import logging
from collections.abc import Awaitable, Callable
from dataclasses import asdict, dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

from tools.builtin.reminder_periods import adjustment_for, local_now, month_add, parse_period, period_of, scheduled_at
from tools.builtin.reminder_store import ScheduleDb, open_schedule, process_owner, schedule_exists
from tools.builtin.reminders import _COLUMNS, row_to_reminder
from tools.deferred_calls import binding_for, deferred_refusal
from tools.destinations import Rules
from tools.results import cut_text

log = logging.getLogger(__name__)

#: Attempts per period before a failing action is given up (state ``failed``).
MAX_ATTEMPTS = 3
#: A ``claimed`` firing older than this (seconds) is taken over even if its owner looks alive.
STALE_CLAIM_S = 3600.0
#: Default thread of a "task" action: ``reminder-<id>``.
THREAD_PREFIX = "reminder-"


def request_id_for(reminder_id: int, period: str) -> str:
    """``reminder:<id>:<period>``: the firing's request id (tool ledger, run metadata)."""
    return f"reminder:{reminder_id}:{period}"


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


@dataclass
class Firing:
    """What happened to one :class:`Due`: ``status`` "fired" | "failed" (``will_retry`` says
    whether the next check tries again) | "skipped" (another runner claimed it first)."""

    due: Due
    status: str
    detail: str = ""
    will_retry: bool = False
    result: dict[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return {
            **asdict(self.due),
            "status": self.status,
            "detail": self.detail,
            "will_retry": self.will_retry,
            "result": self.result,
        }


def _stale(db: ScheduleDb, claimed_at: str, owner: str, now: dt.datetime) -> bool:
    if not db.owner_alive(owner):
        return True
    try:
        age = (now - dt.datetime.fromisoformat(claimed_at).astimezone()).total_seconds()
    except ValueError:
        return True
    return age > STALE_CLAIM_S


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
        dead = {k for k, r in open_firings.items() if r[2] == "claimed" and _stale(con, r[4], r[3], now)}
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
            elif firing[0] == "retry" or (firing[0] == "claimed" and _stale(con, firing[2], firing[1], now)):
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
    due: Due,
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


def bound_request(data_dir: Path | str, due: Due) -> str:
    """The words of the request that created ``due``'s action (recorded when the agent
    scheduled it, :func:`tools.deferred_calls.record_binding`); "" when none is recorded."""
    binding = binding_for(data_dir, due.action)
    return "\n".join(binding["request"]) if binding else ""


FireFn = Callable[[Due], Awaitable[dict[str, Any]]]


async def call_tool_action(
    registry: Any, due: Due, *, data_dir: Path | str | None = None, rules: Rules | None = None
) -> dict[str, Any]:
    """Fire a "tool" action through ``registry`` (a :class:`tools.registry.ToolRegistry`) with
    ``request_id = due.request_id``: a side-effect tool runs at most once per period (the
    registry's idempotency ledger replays a repeated id). Returns ``{"ok", "detail", "tool",
    "replayed", "content"}`` for :func:`fire_due`.

    With ``data_dir`` the action is checked first against the request that created it and the
    user's ``rules`` (:func:`tools.deferred_calls.deferred_refusal`): refused, it does not run and
    the result is ``{"ok": False, "retry": False, "detail": <why>}``. Without ``data_dir`` (a
    caller that checked already) it is not checked."""
    tool = due.action["tool"]
    if data_dir is not None:
        why = await asyncio.to_thread(
            deferred_refusal,
            registry.get(tool),
            due.action,
            data_dir=data_dir,
            rules=rules or Rules(),
            label=f"reminder {due.reminder_id}",
        )
        if why is not None:
            return {"ok": False, "retry": False, "detail": f"action refused: {why}", "tool": tool, "content": None}
    outcome = await registry.call(tool, due.action.get("args") or {}, request_id=due.request_id)
    if outcome.status != "ok":
        return {
            "ok": False,
            "detail": f"tool {tool} failed ({outcome.error_kind}): {outcome.error}",
            "tool": tool,
            "replayed": False,
            "content": None,
        }
    text = json.dumps(outcome.content, ensure_ascii=False, default=str)
    return {
        "ok": True,
        "tool": tool,
        "replayed": outcome.replayed,
        "detail": f"tool {tool} called" + (" (replayed: already done for this period)" if outcome.replayed else ""),
        "content": outcome.content if len(text) <= 2000 else cut_text(text, 2000),
    }


async def fire_due(
    data_dir: Path | str,
    now: dt.datetime,
    fire: FireFn,
    *,
    owner: str | None = None,
    postgres_url: str | None = None,
) -> list[Firing]:
    """Fire every reminder due at ``now``: claim it (:func:`mark_fired`), deliver its notice,
    ``await fire(due)`` when it has an action (not for ``notify``), record the outcome and the
    delivery (:func:`record_delivery`). ``fire`` returns ``{"ok": bool, "detail": str,
    "retry"?: bool, ...}`` (``retry: False``: a refusal, not retried; anything else it returns
    is kept in :attr:`Firing.result`); an exception counts as ``ok: False``. Database work runs
    in a thread (safe inside ``langgraph dev``'s event loop). Reminders fire one after another,
    in id order. ``postgres_url``: where the schedule is (None: ``HERMES_POSTGRES_URL``; see
    :mod:`tools.builtin.reminder_store`)."""
    owner = owner or process_owner(postgres_url)
    out: list[Firing] = []
    for due in await asyncio.to_thread(due_reminders, data_dir, now, postgres_url=postgres_url):
        won = await asyncio.to_thread(
            partial(mark_fired, now=now, owner=owner, skipped=due.skipped_periods, postgres_url=postgres_url),
            data_dir,
            due.reminder_id,
            due.period,
        )
        if not won:
            out.append(Firing(due, "skipped", "already fired (or being fired) by another runner"))
            continue
        retry = True
        try:
            if due.action.get("kind") == "notify":
                result, ok, detail = {}, True, "reminder delivered"
            else:
                result = dict(await fire(due) or {})
                ok, detail = bool(result.pop("ok", True)), str(result.pop("detail", ""))
                retry = bool(result.pop("retry", True))
        except asyncio.CancelledError:
            await asyncio.shield(
                asyncio.to_thread(
                    partial(record_outcome, ok=False, detail="cancelled", now=now, postgres_url=postgres_url),
                    data_dir,
                    due.reminder_id,
                    due.period,
                )
            )
            raise
        except Exception as exc:  # noqa: BLE001 - reported in the Firing, retried at the next check
            result, ok, detail = {}, False, f"{type(exc).__name__}: {exc}"
        again = await asyncio.to_thread(
            partial(record_outcome, ok=ok, detail=detail, now=now, retry=retry, postgres_url=postgres_url),
            data_dir,
            due.reminder_id,
            due.period,
        )
        outcome = (
            ("delivered" if due.action.get("kind") == "notify" else "done") if ok else ("retry" if again else "failed")
        )
        await asyncio.to_thread(
            partial(record_delivery, outcome=outcome, detail=detail, now=now, postgres_url=postgres_url), data_dir, due
        )
        result.setdefault("notice", due.notice())
        out.append(Firing(due, "fired" if ok else "failed", detail, will_retry=again, result=result))
    return out


__all__ = [
    "MAX_ATTEMPTS",
    "STALE_CLAIM_S",
    "Due",
    "Firing",
    "bound_request",
    "call_tool_action",
    "due_reminders",
    "fire_due",
    "mark_fired",
    "record_delivery",
    "record_outcome",
    "request_id_for",
]
