"""Month periods of monthly reminders (``"2026-12"``) and their local run times: a day beyond a
month's length runs on that month's last day, a stated adjustment (:func:`adjustment_for`). The
real clock is read only in :func:`local_now`. Used by the reminder tools
(``tools.builtin.reminders``) and the scheduler (``tools.scheduler``).
"""

from __future__ import annotations

import calendar
import datetime as dt


def local_now(now: dt.datetime | None = None) -> dt.datetime:
    """``now`` as an aware datetime in the machine's local time zone (naive = local time);
    the real clock when None. The only place the real clock is read."""
    return (now or dt.datetime.now()).astimezone()


def period_of(year: int, month: int) -> str:
    return f"{year:04d}-{month:02d}"


def parse_period(period: str) -> tuple[int, int]:
    y, m = period.split("-")
    return int(y), int(m)


def month_add(year: int, month: int, n: int) -> tuple[int, int]:
    i = year * 12 + (month - 1) + n
    return i // 12, i % 12 + 1


def scheduled_at(day_of_month: int, time: str, year: int, month: int) -> dt.datetime:
    """Local (aware) datetime of the month's run: ``day_of_month`` clamped to the month's length."""
    hh, mm = (int(x) for x in time.split(":"))
    day = min(day_of_month, calendar.monthrange(year, month)[1])
    return dt.datetime(year, month, day, hh, mm).astimezone()


def adjustment_for(day_of_month: int, year: int, month: int) -> str | None:
    """The stated adjustment when ``day_of_month`` does not exist in that month, else None."""
    last = calendar.monthrange(year, month)[1]
    if day_of_month <= last:
        return None
    return (
        f"day {day_of_month} does not exist in {calendar.month_name[month]} {year} "
        f"({last} days): it runs on {year:04d}-{month:02d}-{last:02d}, the month's last day"
    )


def next_monthly_run(day_of_month: int, time: str, now: dt.datetime) -> dt.datetime:
    """First ``day_of_month`` at ``time`` strictly after ``now`` (day clamped to month length).
    Naive ``now`` gives a naive result (wall-clock arithmetic only)."""
    hh, mm = (int(x) for x in time.split(":"))
    y, m = now.year, now.month
    for _ in range(3):
        day = min(day_of_month, calendar.monthrange(y, m)[1])
        candidate = now.replace(year=y, month=m, day=day, hour=hh, minute=mm, second=0, microsecond=0)
        if candidate > now:
            return candidate
        y, m = month_add(y, m, 1)
    raise AssertionError("unreachable")  # pragma: no cover
