"""State of the ``reminders`` graph (``graph/scheduler_graph.py``): one check of due reminders.

Shapes:
    now         str          input: ISO-8601 clock for this check ("" = the server's clock;
                             naive = local time). Tests and back-fills inject it.
    checked_at  str          output: the clock the check used
    fired       list[dict]   output: firings done by this check (``tools.scheduler.Firing.as_dict``:
                             reminder_id, text, period, action, request_id, skipped_periods,
                             adjustment, attempt, status, detail, result)
    failed      list[dict]   output: firings that failed (``will_retry`` says if the next check
                             tries again)
    skipped     list[dict]   output: due reminders another runner claimed first
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(kw_only=True)
class ReminderInput:
    """Input of one check: ``now`` (ISO-8601, optional)."""

    now: str = ""


@dataclass(kw_only=True)
class ReminderState(ReminderInput):
    """Input plus what the check did (see module doc)."""

    checked_at: str = ""
    fired: list[dict[str, Any]] = field(default_factory=list)
    failed: list[dict[str, Any]] = field(default_factory=list)
    skipped: list[dict[str, Any]] = field(default_factory=list)
