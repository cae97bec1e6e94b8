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

The tasks and their databases are ``evals.suites.task_cases``; the pass/fail checks are
``evals.suites.task_checks`` (both re-exported here); this module runs and summarises.
"""

from __future__ import annotations

import asyncio
import tempfile
import time
from collections import Counter
from math import comb
from pathlib import Path
from typing import TYPE_CHECKING, Any

from evals.harness import EvalConfig, Report
from evals.suites.task_cases import (
    DATE_COLUMNS,
    FLAGSHIP,
    FLAGSHIP_TASKS,
    SAMPLE_TASKS,
    TASKS,
    Task,
    expected_value,
    latest_month,
    make_databases,
)
from evals.suites.task_checks import (
    check,
    claimed_effect_problems,
    contains_number,
    ledger_done_tools,
    side_effects,
    visible_effects,
    workflow_problems,
)

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
    except Exception as exc:  # noqa: BLE001 - the product raised: a failed run, recorded with its message
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


__all__ = [
    "FLAGSHIP",
    "FLAGSHIP_TASKS",
    "OPTIONS",
    "SAMPLE_TASKS",
    "TASKS",
    "Task",
    "check",
    "check_config",
    "choose",
    "claimed_effect_problems",
    "contains_number",
    "expected_value",
    "latest_month",
    "ledger_done_tools",
    "make_databases",
    "option_problems",
    "pass_hat",
    "run",
    "run_once",
    "side_effects",
    "summarise",
    "visible_effects",
    "workflow_problems",
]
