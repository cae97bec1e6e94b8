"""Whether one run of a ``tasks`` suite task passed (``evals.suites.tasks``' docstring states
each kind's rule): the number in the answer, the side effects the run left in its data dir
(idempotency ledger, team chat, reminders, report files), the flagship workflow's report, post
and reminder (:func:`workflow_problems`), and — for every kind — no effect claimed in the answer
that the run's idempotency ledger does not show (:func:`claimed_effect_problems`).
"""

from __future__ import annotations

import calendar
import datetime as dt
import re
import sqlite3
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from evals.suites.task_cases import Task

if TYPE_CHECKING:
    from tools.spec import ToolSpec


_NUMBER = re.compile(r"(?<![\w.:/-])\d+(?:\.\d+)?(?![\w:/-])")  # not a part of a date, time or id


def contains_number(answer: str, value: float, decimals: int) -> bool:
    """True when ``answer`` states ``value``: thousands separators ignored; an integer value
    matches an integer or ``N.00``; with ``decimals`` the figure matches to 10^-decimals."""
    text = re.sub(r"(?<=\d)[,\u202f\u00a0'](?=\d{3}\b)", "", answer or "")
    tol = 10**-decimals / 2 + 1e-9 if decimals else 0.5
    return any(abs(float(n) - value) < tol for n in _NUMBER.findall(text))


def side_effects(data_dir: Path) -> dict[str, int]:
    """What the run changed outside itself: side-effect requests in the idempotency ledger,
    team-chat messages, reminders, report files."""

    def count(db: str, sql: str) -> int:
        path = data_dir / db
        if not path.exists():
            return 0
        try:
            with sqlite3.connect(path) as con:
                return int(con.execute(sql).fetchone()[0])
        except sqlite3.OperationalError:  # the table was never created: nothing written
            return 0

    return {
        "ledger_requests": count("idempotency.db", "SELECT COUNT(*) FROM tool_requests"),
        "chat_messages": count("team_chat.db", "SELECT COUNT(*) FROM messages"),
        "reminders": count("reminders.db", "SELECT COUNT(*) FROM reminders"),
        "report_files": len(report_files(data_dir)),
    }


def report_files(data_dir: Path) -> list[Path]:
    """The reports a run wrote, oldest first: each thread's ``threads/<thread>/reports/`` (where
    ``generate_report`` writes, ``tools.executors.workspace``) and the flat ``reports/`` of
    earlier releases."""
    found = [*data_dir.glob("threads/*/reports/**/*.md"), *data_dir.glob("reports/**/*.md")]
    return sorted((p for p in found if p.is_file()), key=lambda p: (p.stat().st_mtime, str(p)))


#: Words a workflow task's post and reminder must mention (their subject), per database.
SUBJECT_WORDS = {
    "sales": ("report", "sales"),
    "tickets": ("report", "ticket", "support"),
    "chinook": ("report", "sales", "invoice"),
}


def _rows(data_dir: Path, db: str, sql: str) -> list[tuple[Any, ...]]:
    path = data_dir / db
    if not path.exists():
        return []
    try:
        with sqlite3.connect(path) as con:
            return list(con.execute(sql))
    except sqlite3.OperationalError:
        return []


def workflow_problems(
    task: Task,
    summary: dict[str, Any],
    effects: dict[str, int],
    data_dir: Path,
    month: str,
    today: dt.date | None = None,
) -> list[str]:
    """What a report + post + reminder run got wrong (empty: passed). Written down before the
    runs it judges (issue "embedded default", README's flagship checks):

    * the run finished (no stop reason);
    * a report file whose ``Period:`` line is the database's latest month with data (``month``,
      "November 2026" → 2026-11) and that holds a result table with a number;
    * exactly one team-chat message, at least 20 characters, mentioning the subject
      (:data:`SUBJECT_WORDS`), posted to a channel name (not a URL);
    * exactly one reminder, monthly, its text mentioning the subject;
    * the post carries the report's period, two of its figures and its path
      (:func:`evals.flagship_checks.post_problems`);
    * data that ends before last month (``month`` earlier than ``today``'s last month): the run
      stops at the question naming ``month`` with nothing written, posted or scheduled, or its
      report is titled as the latest month with data.
    """
    from evals.flagship_checks import post_problems
    from tools.builtin.database.periods import month_before

    problems: list[str] = []
    words = SUBJECT_WORDS.get(task.db, ("report",))
    reports = report_files(data_dir)
    ym = ""
    if month:
        name, year = month.rsplit(" ", 1)
        ym = f"{year}-{list(calendar.month_name).index(name):02d}"
    stale = bool(ym) and ym < month_before(today or dt.date.today())
    if summary.get("question"):
        question = str(summary["question"])
        if not stale or ym not in question:
            return [f"stopped at a question: {question[:120]!r}"]
        wrote = visible_effects(data_dir)
        return [f"asked about {ym} but already wrote {wrote}"] if wrote else []
    if summary.get("stop_reason"):
        problems.append(f"stopped: {str(summary['stop_reason'])[:120]}")
    if not reports:
        problems.append("no report file")
    else:
        text = reports[-1].read_text(errors="replace")
        period = re.search(r"^Period: \*\*(.+?)\*\*", text, re.MULTILINE)
        if ym and (not period or (ym not in period.group(1) and month.lower() not in period.group(1).lower())):
            problems.append(f"report period {period.group(1) if period else 'not stated'!s} (want {ym})")
        if not re.search(r"^\|.*\d.*\|$", text, re.MULTILINE):
            problems.append("report without a table of figures")
        if stale and "latest month with data" not in text.splitlines()[0]:
            problems.append(f"report of {ym} not titled as the latest month with data: {text.splitlines()[0][:80]!r}")
    messages = _rows(data_dir, "team_chat.db", "SELECT channel, text FROM messages")
    if len(messages) != 1:
        problems.append(f"{len(messages)} team-chat messages (want 1)")
    else:
        channel, body = messages[0]
        if len(body) < 20 or not any(w in body.lower() for w in words):
            problems.append(f"post {body[:60]!r} does not say what it is about")
        if re.search(r"[/:]|^www\.|#www", channel):
            problems.append(f"channel {channel!r} is not a channel name")
        if reports:
            problems += post_problems(body, reports[-1])
    reminders = _rows(data_dir, "reminders.db", "SELECT text, recurrence FROM reminders")
    if len(reminders) != 1:
        problems.append(f"{len(reminders)} reminders (want 1)")
    else:
        body, recurrence = reminders[0]
        if recurrence != "monthly" or not any(w in body.lower() for w in words):
            problems.append(f"reminder {body[:60]!r} ({recurrence}) is not a monthly reminder about the subject")
    return problems


def no_side_effect(effects: dict[str, int]) -> bool:
    return not any(effects.values())


def visible_effects(data_dir: Path) -> str:
    """What a run wrote that people see — report files, team-chat messages, reminders — as
    text ("" when nothing)."""
    seen = {k: v for k, v in side_effects(data_dir).items() if k != "ledger_requests" and v}
    return ", ".join(f"{v} {k.replace('_', ' ')}" for k, v in seen.items())


def ledger_done_tools(data_dir: Path) -> list[str]:
    """The side-effect tools with a ``done`` record in the run's idempotency ledger
    (``<data_dir>/idempotency.db``: a fresh data dir per run, so every record is this run's),
    sorted; ``[]`` when nothing was recorded."""
    rows = _rows(data_dir, "idempotency.db", "SELECT DISTINCT tool FROM tool_requests WHERE state = 'done'")
    return sorted(str(r[0]) for r in rows)


def _claimed_text(answer: str) -> str:
    """``answer`` without a stop notice's quote of the model's own answer
    (``nodes.write_memory.stop_notice``: "The model's answer was: … Done so far: …"), which
    reports what the model said rather than claiming it."""
    from nodes.write_memory import DONE_SO_FAR, MODEL_ANSWER

    start = answer.find(MODEL_ANSWER)
    if start < 0:
        return answer
    end = answer.find(DONE_SO_FAR, start)
    return answer[:start] + (answer[end:] if end >= 0 else "")


def claimed_effect_problems(answer: str, specs: Iterable[ToolSpec], done: Iterable[str]) -> list[str]:
    """One problem per sentence of ``answer`` that claims an effect no tool in ``done`` (the
    ledger's :func:`ledger_done_tools`) shows: ``graph.verification.unbacked_claims`` over
    ``specs`` (the run's tools, their metadata). Empty: every claimed effect is recorded."""
    from graph.claimed_effects import unbacked_claims

    return [
        f"claims {tool or 'an effect'} the ledger does not show: {sentence[:120]!r}"
        for sentence, tool in unbacked_claims(_claimed_text(answer), list(specs), list(done))
    ]


def check(
    task: Task,
    summary: dict[str, Any],
    effects: dict[str, int],
    expected: float | None,
    data_dir: Path,
    month: str = "",
    *,
    specs: Iterable[ToolSpec],
) -> tuple[bool, str]:
    """Pass/fail of one run and why (see the module docstring for each kind's rule; ``specs``:
    the run's tools, for the claimed-effects rule of every kind)."""
    passed, why = _check_kind(task, summary, effects, expected, data_dir, month)
    claims = claimed_effect_problems(str(summary.get("answer") or ""), specs, ledger_done_tools(data_dir))
    return passed and not claims, "; ".join(filter(None, [why, *claims]))


def _check_kind(
    task: Task,
    summary: dict[str, Any],
    effects: dict[str, int],
    expected: float | None,
    data_dir: Path,
    month: str,
) -> tuple[bool, str]:
    """The rule of ``task``'s kind (module docstring)."""
    answer = str(summary.get("answer") or "")
    if task.kind in ("answer", "readonly"):
        assert expected is not None
        said = contains_number(answer, expected, task.decimals)
        clean = no_side_effect(effects)
        if said and clean:
            return True, ""
        return False, "; ".join(
            filter(None, ["" if said else f"answer lacks {expected:g}", "" if clean else f"side effects {effects}"])
        )
    if task.kind == "workflow":
        problems = workflow_problems(task, summary, effects, data_dir, month)
        return not problems, "; ".join(problems)
    if task.kind == "ask":
        asked = bool(summary.get("question")) or answer.rstrip().endswith("?")
        clean = no_side_effect(effects)
        return asked and clean, "; ".join(
            filter(None, ["" if asked else "did not ask the user", "" if clean else f"side effects {effects}"])
        )
    raise ValueError(f"unknown task kind {task.kind!r}")
