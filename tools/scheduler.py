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

Which periods are due is :mod:`tools.reminder_due`; the claim and the outcome records are
:mod:`tools.reminder_claims` (both re-exported here); this module fires them.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import json
from collections.abc import Awaitable, Callable
from dataclasses import asdict, dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

from tools.builtin.reminder_store import process_owner
from tools.deferred_calls import binding_for, deferred_refusal
from tools.destinations import Rules
from tools.reminder_claims import (
    MAX_ATTEMPTS,
    STALE_CLAIM_S,
    mark_fired,
    record_delivery,
    record_outcome,
    request_id_for,
)
from tools.reminder_due import THREAD_PREFIX, Due, due_reminders, stored_reminders
from tools.results import cut_text


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
    "THREAD_PREFIX",
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
    "stored_reminders",
]
