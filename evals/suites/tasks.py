"""End-to-end agent tasks through the real graph (graph.runner.run_turn) with checkable outcomes on three databases; pass^k (τ-bench).

Every run is one user turn exactly as ``hermes run`` executes it (``graph.runner.run_turn``:
SQLite checkpoints, the subprocess tool executor, the bundled team-chat MCP server over stdio,
memory), in its own temporary data dir, against one of three databases given as the user's
``database``:

* ``sales`` — the demo sales database (``tools.builtin.demo_db.generate_sales_db``: regions,
  customers, products, orders, order_items);
* ``tickets`` — a support desk shaped differently (``evals.tasks_db.generate_tickets_db``: text
  keys, a nullable foreign key, timestamps, states, ratings);
* ``chinook`` — the public Chinook sample (``evals.sample_dbs.chinook_db``, fetched from PyPI and
  cached; 11 tables, CamelCase names): its invoices end in 2011-12, years before today.

Task kinds and what is checked (the expected numbers are computed here in SQL on the same file):

* ``answer``  — a question with an exact numeric answer: the final answer contains the number
  (thousands separators ignored; a figure with decimals matches to 0.01) and no side effect ran;
* ``readonly`` — a question phrased near side-effect words ("report", "post", "remind") that
  asks only to be told: no side effect at all — the idempotency ledger has no side-effect
  request, the team chat has no message, no reminder, no report file;
* ``workflow`` — report + post + reminder, the flagship sentence (:func:`workflow_problems`): the
  run finished; a report file for the database's latest month with a table of figures; exactly
  one team-chat message about the subject in a channel (not a URL) that carries the report's
  period, two of its figures and its path (:func:`evals.flagship_checks.post_problems`); one
  monthly reminder about the subject. On data that ends before last month ("last month" has
  none: Chinook), the run must either stop at the question naming the latest month with data
  (nothing written, posted or scheduled) or write that month's report titled as the latest
  month with data — never a report for last month (DESIGN §5.6);
* ``ask``     — a request missing what it needs: the run stops at a question to the user
  (LangGraph ``interrupt``, the summary's ``question``) or answers with a question, and no
  side effect ran.

Every kind, besides: **the answer shown claims no effect the ledger does not show**
(:func:`claimed_effect_problems`, issue 27). Each sentence of the final answer that claims an
effect ("I have posted the report to #finance", 已发送到群) is tied to a side-effect tool by
``graph.verification.unbacked_claims`` (the tools' ``requested_by`` words, DESIGN §5.5), and
stands only when the run's idempotency ledger holds a ``done`` record of that tool
(:func:`ledger_done_tools`) — the record of what ran, not the model's word nor the run's own
messages. A stop notice's quote of the model's answer is reported, not claimed, and is left out.

Metrics: pass^j for j = 1..k (τ-bench, Yao et al. 2024: the chance that all j of j runs of a
task pass, estimated per task from c passes in k runs as C(c, j) / C(k, j), averaged over
tasks); per task the tool calls, tokens in/out (the run's ``metrics``) and stop reasons.

    python -m evals tasks [--model ... | --base-url ...] [--k 3] [--limit N] [--sample]

``--case ID`` (repeatable): only those tasks (e.g. ``--case sales-flagship --k 5``);
``--limit N``: the first N tasks of each database; ``--sample``: ``SAMPLE_TASKS`` (3 tasks,
one each of answer, readonly and ask; with ``--limit N`` the first N of them), k = 1 unless
``--k`` says otherwise.
"""

from __future__ import annotations

import asyncio
import calendar
import datetime as dt
import re
import sqlite3
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from math import comb
from pathlib import Path
from typing import TYPE_CHECKING, Any

from evals.harness import EvalConfig, Report

if TYPE_CHECKING:
    from tools.spec import ToolSpec

#: The EvalConfig fields this suite reads (the harness refuses the other options).
OPTIONS = frozenset({"model", "base_url", "api_key_env", "limit", "sample", "k", "cases"})


def option_problems(given: frozenset[str]) -> list[str]:
    """Options that would be ignored in this combination: --case picks the tasks itself."""
    both = sorted(given & {"limit", "sample"}) if "cases" in given else []
    return ["--case picks the tasks itself: drop " + " and ".join(f"--{o}" for o in both)] if both else []


def check_config(cfg: EvalConfig) -> None:
    """Raise ValueError before anything runs or is written: an unknown --case names the tasks."""
    choose(cfg)


RUN_TIMEOUT_S = 900  # one turn on a loaded 2-core machine: a hung run is a failure, not a hang
SAMPLE_TASKS = ("tickets-opened", "sales-readonly-report", "sales-ask-reminder")
#: The flagship sentence (report → post → monthly reminder) on each schema.
FLAGSHIP_TASKS = ("sales-flagship", "tickets-workflow", "chinook-flagship")
FLAGSHIP = (
    "Summarise last month's sales into an analysis report, post it to the project group, and remind me every month."
)
#: Each database's date column deciding its latest month with data: (column, table).
DATE_COLUMNS = {
    "sales": ("order_date", "orders"),
    "tickets": ("opened_at", "tickets"),
    "chinook": ("InvoiceDate", "Invoice"),
}


@dataclass(frozen=True)
class Task:
    """One task: ``prompt`` (with ``{month}`` = the database's latest full month, e.g.
    "November 2026"), ``expected`` SQL returning one number (answer/readonly kinds), and
    ``max_tool_rounds`` for the run."""

    id: str
    db: str
    kind: str
    prompt: str
    expected: str = ""
    decimals: int = 0
    max_tool_rounds: int = 4  # a one-number question: the schema, a query, the answer


LAST_SALES_MONTH = "substr(order_date, 1, 7) = (SELECT substr(MAX(order_date), 1, 7) FROM orders)"
LAST_SALES_MONTH_O = "substr(o.order_date, 1, 7) = (SELECT substr(MAX(order_date), 1, 7) FROM orders)"
LAST_TICKET_MONTH = "substr(opened_at, 1, 7) = (SELECT substr(MAX(opened_at), 1, 7) FROM tickets)"

#: Per database one task of each kind first (``--limit 4``: every kind on both databases).
TASKS: list[Task] = [
    Task(
        "sales-orders-count",
        "sales",
        "answer",
        "How many orders were placed in {month}?",
        f"SELECT COUNT(*) FROM orders WHERE {LAST_SALES_MONTH}",
    ),
    Task(
        "sales-readonly-report",
        "sales",
        "readonly",
        "Before I ask for a sales report: how many distinct products were sold in {month}? Just tell me the "
        "number; do not write, post or schedule anything.",
        "SELECT COUNT(DISTINCT i.product_id) FROM orders o JOIN order_items i ON i.order_id = o.order_id "
        f"WHERE {LAST_SALES_MONTH_O}",
    ),
    Task("sales-flagship", "sales", "workflow", FLAGSHIP, max_tool_rounds=8),
    Task("sales-ask-reminder", "sales", "ask", "Set up a reminder for me.", max_tool_rounds=4),
    Task(
        "sales-revenue",
        "sales",
        "answer",
        "What was the total revenue in {month}? Give the amount rounded to whole currency units.",
        "SELECT ROUND(SUM(i.quantity * i.unit_price)) FROM orders o JOIN order_items i ON i.order_id = o.order_id "
        f"WHERE {LAST_SALES_MONTH_O}",
    ),
    Task(
        "sales-north-customers",
        "sales",
        "answer",
        "How many customers do we have in the North region?",
        "SELECT COUNT(*) FROM customers c JOIN regions r ON r.region_id = c.region_id WHERE r.name = 'North'",
    ),
    Task(
        "tickets-opened",
        "tickets",
        "answer",
        "How many support tickets were opened in {month}?",
        f"SELECT COUNT(*) FROM tickets WHERE {LAST_TICKET_MONTH}",
    ),
    Task(
        "tickets-readonly-billing",
        "tickets",
        "readonly",
        "How many billing tickets came in during {month}? Only tell me here; don't post it anywhere and "
        "don't make a report.",
        f"SELECT COUNT(*) FROM tickets WHERE product_area = 'billing' AND {LAST_TICKET_MONTH}",
    ),
    Task(
        "tickets-workflow",
        "tickets",
        "workflow",
        "Summarise last month's support tickets into a report, post it to the support group, and remind me "
        "every month.",
        max_tool_rounds=8,
    ),
    Task("tickets-ask-post", "tickets", "ask", "Send a message to the team.", max_tool_rounds=4),
    Task(
        "tickets-urgent-unsolved",
        "tickets",
        "answer",
        "How many urgent tickets are still unsolved (state open or pending)?",
        "SELECT COUNT(*) FROM tickets WHERE priority = 'urgent' AND state IN ('open', 'pending')",
    ),
    Task(
        "tickets-csat",
        "tickets",
        "answer",
        "What was the average customer satisfaction (csat) of the tickets opened in {month} that have a "
        "rating? Two decimals.",
        f"SELECT ROUND(AVG(csat), 2) FROM tickets WHERE csat IS NOT NULL AND {LAST_TICKET_MONTH}",
        decimals=2,
    ),
    # data that ends in 2011-12: "last month" has none (the question, or the latest month titled so)
    Task("chinook-flagship", "chinook", "workflow", FLAGSHIP, max_tool_rounds=8),
]


def make_databases(root: Path, names: Iterable[str] = ("sales", "tickets")) -> dict[str, Path]:
    """The databases ``names`` under ``root`` (deterministic contents; ``chinook`` is fetched
    from PyPI once and cached, :func:`evals.sample_dbs.chinook_db`)."""
    from evals.sample_dbs import chinook_db
    from evals.tasks_db import generate_tickets_db
    from tools.builtin.demo_db import generate_sales_db

    builders: dict[str, Callable[[Path], Path]] = {
        "sales": generate_sales_db,
        "tickets": generate_tickets_db,
        "chinook": chinook_db,
    }
    return {name: builders[name](root / f"{name}.db") for name in dict.fromkeys(names)}


def latest_month(db: Path, kind: str) -> str:
    """The database's latest month with data as "November 2026"."""
    column, table = DATE_COLUMNS[kind]
    with sqlite3.connect(db) as con:
        ym = con.execute(f"SELECT substr(MAX({column}), 1, 7) FROM {table}").fetchone()[0]
    y, m = (int(x) for x in ym.split("-"))
    return f"{calendar.month_name[m]} {y}"


def expected_value(db: Path, sql: str) -> float:
    with sqlite3.connect(db) as con:
        return float(con.execute(sql).fetchone()[0])


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
        period = re.search(r"^Period: \*\*(.+?)\*\*", text, re.M)
        if ym and (not period or (ym not in period.group(1) and month.lower() not in period.group(1).lower())):
            problems.append(f"report period {period.group(1) if period else 'not stated'!s} (want {ym})")
        if not re.search(r"^\|.*\d.*\|$", text, re.M):
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


def choose(cfg: EvalConfig) -> list[Task]:
    if cfg.cases:
        by_id = {t.id: t for t in TASKS}
        unknown = [c for c in cfg.cases if c not in by_id]
        if unknown:
            raise ValueError(f"unknown task(s) {', '.join(unknown)}; tasks: {', '.join(by_id)}")
        return [by_id[c] for c in dict.fromkeys(cfg.cases)]  # a repeated id runs once (use --k)
    if cfg.sample:
        by_id = {t.id: t for t in TASKS}
        return [by_id[i] for i in SAMPLE_TASKS][: cfg.limit or None]
    if cfg.limit:
        out: list[Task] = []
        for db in DATE_COLUMNS:
            out += [t for t in TASKS if t.db == db][: cfg.limit]
        return out
    return list(TASKS)


async def run_once(task: Task, attempt: int, cfg: EvalConfig, db: Path, month: str, root: Path) -> dict[str, Any]:
    """One run of ``task`` in a fresh data dir; the result row."""
    from graph import resources
    from graph.context import Context
    from graph.model import ModelUnavailableError
    from graph.runner import run_turn

    data_dir = root / f"{task.id}-{attempt}"
    context = Context(
        **cfg.context_overrides(), data_dir=str(data_dir), database=str(db), max_tool_rounds=task.max_tool_rounds
    )
    prompt = task.prompt.format(month=month)
    expected = expected_value(db, task.expected) if task.expected else None
    start = time.perf_counter()
    error = ""
    summary: dict[str, Any] = {}
    specs: list[ToolSpec] = []
    try:
        summary = await asyncio.wait_for(
            run_turn(prompt, context, f"eval-{task.id}-{attempt}", quiet=True), RUN_TIMEOUT_S
        )
        # the run's own tools (the toolbox it opened): what its answer's claims are tied to
        specs = (await resources.get_toolbox(context)).registry.specs()
    except TimeoutError:
        error = f"timeout after {RUN_TIMEOUT_S} s"
    except ModelUnavailableError:
        raise  # nothing answers: the run cannot go on
    except Exception as exc:  # the product raised: a failed run, recorded with its message
        error = f"{type(exc).__name__}: {exc}"[:300]
    finally:
        await resources.aclose_resources()  # stops the team-chat server, closes memory
    effects = side_effects(data_dir)
    passed, why = (False, error) if error else check(task, summary, effects, expected, data_dir, month, specs=specs)
    return {
        "id": f"{task.id}#{attempt}",
        "task": task.id,
        "db": task.db,
        "kind": task.kind,
        "attempt": attempt,
        "prompt": prompt,
        "expected": expected,
        "passed": passed,
        "why": why,
        "answer": str(summary.get("answer") or "")[:400],
        "question": summary.get("question"),
        "stop_reason": summary.get("stop_reason") or ("error" if error else "answered"),
        "tools_called": summary.get("tools_called") or {},
        "tool_calls": sum((summary.get("tools_called") or {}).values()),
        "tokens_in": summary.get("tokens_in", 0),
        "tokens_out": summary.get("tokens_out", 0),
        "side_effects": effects,
        "ledger_done": ledger_done_tools(data_dir),
        "latency_s": round(time.perf_counter() - start, 1),
    }


def pass_hat(successes: list[int], k: int, j: int) -> float:
    """τ-bench's pass^j over tasks: mean of C(c, j) / C(k, j) (c successes of k runs)."""
    return sum(comb(c, j) / comb(k, j) for c in successes) / len(successes) if successes else 0.0


async def run(cfg: EvalConfig, report: Report) -> None:
    """Run the chosen tasks k times each (see the module docstring) and write the report."""
    from graph.model import astop_embedded_server

    tasks = choose(cfg)
    with tempfile.TemporaryDirectory(prefix="hermes-tasks-") as tmp:
        root = Path(tmp)
        dbs = make_databases(root / "databases", [t.db for t in tasks])
        months = {name: latest_month(path, name) for name, path in dbs.items()}
        try:
            with report.progress(len(tasks) * cfg.k, "tasks") as advance:
                for task in tasks:
                    for attempt in range(1, cfg.k + 1):
                        report.add(await run_once(task, attempt, cfg, dbs[task.db], months[task.db], root / "runs"))
                        advance()
        finally:
            await astop_embedded_server()
    summarise(report, tasks, cfg.k)


def summarise(report: Report, tasks: list[Task], k: int) -> None:
    """pass^1..pass^k, the per-task table, stop reasons and the plot."""
    rows = report.rows
    by_task = {t.id: [r for r in rows if r["task"] == t.id] for t in tasks}
    successes = [sum(r["passed"] for r in rs) for rs in by_task.values() if rs]
    curve = [pass_hat(successes, k, j) for j in range(1, k + 1)]
    for j, value in enumerate(curve, 1):
        report.metric(f"pass^{j}", round(value, 4))
    kinds = sorted({t.kind for t in tasks})
    for kind in kinds:
        ks = [sum(r["passed"] for r in by_task[t.id]) for t in tasks if t.kind == kind and by_task[t.id]]
        report.metric(f"pass^{k}_{kind}", round(pass_hat(ks, k, k), 4))
    report.metric("tasks", len(successes))
    report.metric("runs", len(rows))
    report.table(
        f"pass^j over k = {k} runs per task (τ-bench)",
        ["j", "pass^j"],
        [[j, f"{v:.1%}"] for j, v in enumerate(curve, 1)],
    )
    table = []
    for t in tasks:
        rs = by_task[t.id]
        if not rs:
            continue
        table.append(
            [
                t.id,
                t.db,
                t.kind,
                f"{sum(r['passed'] for r in rs)}/{len(rs)}",
                round(sum(r["tool_calls"] for r in rs) / len(rs), 1),
                round(sum(r["tokens_in"] for r in rs) / len(rs)),
                round(sum(r["tokens_out"] for r in rs) / len(rs)),
                ", ".join(f"{s} ×{n}" for s, n in Counter(str(r["stop_reason"]) for r in rs).items()),
                round(sum(r["latency_s"] for r in rs) / len(rs)),
                "; ".join(sorted({r["why"] for r in rs if r["why"]}))[:200],
            ]
        )
    report.table(
        "Tasks",
        [
            "task",
            "db",
            "kind",
            "passed",
            "tool calls/run",
            "tokens in/run",
            "tokens out/run",
            "stop reasons",
            "s/run",
            "why not",
        ],
        table,
    )
    stops = Counter(str(r["stop_reason"]) for r in rows)
    report.table("Stop reasons (all runs)", ["stop reason", "runs"], [[s, n] for s, n in stops.most_common()])
    report.text(
        "Checks: `answer`/`readonly` — the answer contains the number computed in SQL and nothing was "
        "written (ledger, team chat, reminders, reports); `workflow` — the run finished, a report for the "
        "latest month with a table of figures, exactly one team-chat message about the subject in a "
        "channel (not a URL) carrying the report's period, two of its figures and its path, one monthly reminder "
        "about the subject (on data ending before last month: the question naming the latest month with data, "
        "nothing written, or that month's report titled as the latest month with data); `ask` — the run asked the user (interrupt or a question) "
        "and wrote nothing. Stop reason `answered`: the run ended with a normal answer."
    )
    with report.figure("pass_hat", title="pass^j and per-kind pass^k") as (_fig, ax):
        if ax is not None and curve:
            ax.plot(range(1, k + 1), curve, marker="o", label="all tasks")
            for kind in kinds:
                ks = [sum(r["passed"] for r in by_task[t.id]) for t in tasks if t.kind == kind and by_task[t.id]]
                ax.plot(range(1, k + 1), [pass_hat(ks, k, j) for j in range(1, k + 1)], marker=".", label=kind)
            ax.set_xlabel("j (runs that must all pass)")
            ax.set_ylabel("pass^j")
            ax.set_ylim(-0.05, 1.05)
            ax.set_xticks(range(1, k + 1))
            ax.legend(fontsize=8)
