"""The evaluation harness: one entry point for every suite, one report layout.

    python -m evals SUITE [--model SPEC] [--base-url URL] [--limit N] [--k K] [--seed S] [--out DIR]
    hermes eval SUITE ...                                   (the same command)

A suite is a module ``evals.suites.<name>`` exposing ``async def run(cfg: EvalConfig,
report: Report) -> None``: it reads ``cfg`` (model, endpoint, sample size), appends one row per
case with :meth:`Report.add` (written to ``results.jsonl`` at once, so an interrupted run keeps
what it measured), states its figures with :meth:`Report.table` / :meth:`Report.text` and draws
its plots with :meth:`Report.figure`. The harness writes ``report.md`` with a header naming the
model, endpoint, package versions, seed and machine, into ``evals/out/<suite>/<UTC timestamp>/``
(ignored by git: a local run never lands in the source tree) unless ``--out`` says otherwise.
A run a README cites is kept under ``evals/reports/<suite>/<UTC timestamp>/`` (copied there
with the README line that cites it; the folder holds only cited runs).

When ``LANGSMITH_API_KEY`` is set the rows are also uploaded as a LangSmith dataset +
experiment (optional; never required, a failed upload is reported, not raised).
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.metadata
import inspect
import json
import os
import platform
import sys
import time
from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

ROOT = Path(__file__).resolve().parents[1]
#: The cited runs (tracked, not part of the package).
REPORTS = ROOT / "evals" / "reports"
#: Where runs go by default (``.gitignore``: ``evals/out/``).
RUNS = ROOT / "evals" / "out"

#: Suite name → module. Each module has ``async def run(cfg, report)`` and a docstring whose
#: first line is the suite's one-line description (``python -m evals --help`` lists them).
SUITES: dict[str, str] = {
    "tools": "evals.suites.tools",
    "memory": "evals.suites.memory",
    "tasks": "evals.suites.tasks",
    "mcp": "evals.suites.mcp",
    "sessions": "evals.suites.sessions",
    "data": "evals.suites.data",
}

#: The options of ``python -m evals`` that set an :class:`EvalConfig` field, by field. A suite
#: module's ``OPTIONS`` names the fields it reads; any other option given is refused
#: (:func:`option_problems`) rather than silently ignored. ``--out`` applies to every suite.
OPTION_FLAGS: dict[str, str] = {
    "model": "--model",
    "base_url": "--base-url",
    "api_key_env": "--api-key-env",
    "limit": "--limit",
    "k": "--k",
    "seed": "--seed",
    "sample": "--sample",
    "cases": "--case",
    "database": "--database",
    "questions": "--questions",
}

#: Packages whose versions go in every report header.
VERSIONED = ("langgraph", "langchain-core", "langchain-openai", "mcp", "xllamacpp", "lancedb", "bfcl-eval")


@dataclass(frozen=True)
class EvalConfig:
    """What one suite run is asked to do.

    ``model`` is a ``HERMES_MODEL`` spec (``embedded``, ``embedded:<name>``, or an
    OpenAI-compatible model name with ``base_url``); ``limit`` caps the cases per category
    (``None``: the whole suite); ``k`` repeats each case (pass^k); ``sample`` is the small
    fixed sample CI runs (each suite documents what it keeps); ``out`` is the report directory.
    """

    suite: str
    model: str = "embedded"
    base_url: str = ""
    api_key_env: str = "OPENAI_API_KEY"
    limit: int | None = None
    k: int = 1
    seed: int = 0
    sample: bool = False
    out: Path = field(default_factory=Path)
    cases: tuple[str, ...] = ()  # only these case ids (suites that support it: tasks)
    database: Path | None = None  # the user's own SQLite database (the data suite)
    questions: Path | None = None  # the user's questions about it, JSON or YAML (the data suite)

    def context_overrides(self) -> dict[str, Any]:
        """The ``graph.context.Context`` fields this config sets (model and endpoint)."""
        over: dict[str, Any] = {"model": self.model, "api_key_env": self.api_key_env}
        if self.base_url:
            over["base_url"] = self.base_url
        return over


class Report:
    """One suite run's outputs in ``cfg.out``: ``results.jsonl``, ``report.md``, ``*.png``."""

    def __init__(self, cfg: EvalConfig) -> None:
        self.cfg = cfg
        self.out = cfg.out
        self.out.mkdir(parents=True, exist_ok=True)
        self._rows_path = self.out / "results.jsonl"
        self._rows_path.write_text("")
        self._sections: list[str] = []
        self.rows: list[dict[str, Any]] = []
        self.summary: dict[str, Any] = {}
        self.started = time.time()
        self._progress: Progress | None = None

    # -- results -----------------------------------------------------------------------------

    def add(self, row: dict[str, Any]) -> None:
        """Append one case's result (JSON-serialisable dict) to ``results.jsonl`` now."""
        self.rows.append(row)
        with self._rows_path.open("a", encoding="utf-8") as f:
            f.write(json.dumps(row, ensure_ascii=False, default=str) + "\n")

    def text(self, markdown: str) -> None:
        """A paragraph or section of ``report.md`` (markdown)."""
        self._sections.append(markdown.strip())

    def table(self, title: str, header: list[str], rows: list[list[Any]]) -> None:
        """A markdown table under a ``##`` title."""
        lines = [f"## {title}", "", "| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
        lines += ["| " + " | ".join(_cell(c) for c in r) + " |" for r in rows]
        self._sections.append("\n".join(lines))

    def metric(self, name: str, value: Any) -> None:
        """A headline figure (kept in ``summary.json``; the README table is built from these)."""
        self.summary[name] = value

    @contextlib.contextmanager
    def figure(self, name: str, title: str = "", **subplots: Any) -> Iterator[Any]:
        """``with report.figure("accuracy") as (fig, ax): ...`` → ``<out>/<name>.png``, linked
        in ``report.md``. Skipped with a note when matplotlib is not installed (evals extra)."""
        try:
            import matplotlib as mpl

            mpl.use("Agg")
            import matplotlib.pyplot as plt
        except ImportError:
            self.text(f"(plot `{name}` not drawn: matplotlib is not installed; `pip install .[evals]`)")
            yield None, None
            return
        fig, ax = plt.subplots(**({"figsize": (7, 4)} | subplots))
        try:
            yield fig, ax
            if title:
                fig.suptitle(title)
            fig.tight_layout()
            path = self.out / f"{name}.png"
            fig.savefig(path, dpi=110)
            self._sections.append(f"![{name}]({path.name})")
        finally:
            plt.close(fig)

    # -- progress ----------------------------------------------------------------------------

    @contextlib.contextmanager
    def progress(self, total: int, description: str) -> Iterator[Any]:
        """A progress bar on stderr: ``with report.progress(n, "bfcl simple") as advance: advance()``."""
        with Progress(
            TextColumn("[bold]{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            transient=False,
            disable=not sys.stderr.isatty(),
        ) as bar:
            task = bar.add_task(description, total=total)

            def advance(n: int = 1) -> None:
                bar.advance(task, n)

            yield advance
            if not sys.stderr.isatty():
                print(f"{description}: {total} done", file=sys.stderr)

    # -- writing -----------------------------------------------------------------------------

    def header(self) -> str:
        versions = []
        for pkg in VERSIONED:
            try:
                versions.append(f"{pkg} {importlib.metadata.version(pkg)}")
            except importlib.metadata.PackageNotFoundError:
                continue
        load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
        cfg = self.cfg
        return "\n".join(
            [
                f"# Hermes eval: {cfg.suite}",
                "",
                f"- model: `{cfg.model}`"
                + (
                    f" at `{cfg.base_url}`"
                    if cfg.base_url
                    else " (embedded, llama.cpp)"
                    if cfg.model.startswith("embedded")
                    else ""
                ),
                (
                    f"- run: {datetime.fromtimestamp(self.started, UTC).isoformat(timespec='seconds')}, "
                    f"{time.time() - self.started:.0f} s; seed {cfg.seed}; k {cfg.k}; limit {cfg.limit}; "
                    f"sample {cfg.sample}"
                ),
                f"- machine: {platform.platform()}, {os.cpu_count()} cores, load average {load}",
                f"- python {platform.python_version()}; " + "; ".join(versions),
            ]
        )

    def close(self) -> Path:
        """Write ``report.md`` and ``summary.json``; returns the report path."""
        (self.out / "summary.json").write_text(
            json.dumps(
                {
                    "suite": self.cfg.suite,
                    "config": asdict(self.cfg) | {"out": str(self.cfg.out)},
                    "summary": self.summary,
                    "cases": len(self.rows),
                },
                indent=2,
                default=str,
            )
        )
        path = self.out / "report.md"
        path.write_text(self.header() + "\n\n" + "\n\n".join(self._sections) + "\n", encoding="utf-8")
        return path


def _cell(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.3g}" if abs(value) < 1000 else f"{value:,.0f}"
    return str(value).replace("|", "\\|").replace("\n", " ")


def default_out(suite: str) -> Path:
    """``evals/out/<suite>/<UTC timestamp>/`` (ignored by git)."""
    return RUNS / suite / datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")


def describe(suite: str) -> str:
    """First docstring line of a suite module (without importing heavy dependencies twice)."""
    module = importlib.import_module(SUITES[suite])
    return (module.__doc__ or suite).strip().splitlines()[0]


def suite_options(suite: str) -> frozenset[str]:
    """The :class:`EvalConfig` fields ``suite`` reads (its module's ``OPTIONS``; every option
    when a suite does not say)."""
    return frozenset(getattr(importlib.import_module(SUITES[suite]), "OPTIONS", OPTION_FLAGS))


def option_problems(suite: str, given: Iterable[str]) -> list[str]:
    """Why the options ``given`` (EvalConfig field names, see :data:`OPTION_FLAGS`) cannot be
    given to ``suite``: one line for those it does not read, then the combinations its module
    refuses (its optional ``option_problems(given)``: options that would be ignored together).
    Empty when they fit."""
    module = importlib.import_module(SUITES[suite])
    takes = suite_options(suite)
    asked = frozenset(given)
    problems: list[str] = []
    ignored = [OPTION_FLAGS[f] for f in OPTION_FLAGS if f in asked - takes]
    if ignored:
        accepted = ", ".join(OPTION_FLAGS[f] for f in OPTION_FLAGS if f in takes) or "none of the others"
        problems.append(
            f"the {suite} suite does not use {', '.join(ignored)}: "
            + ("it" if len(ignored) == 1 else "they")
            + f" would be ignored (this suite takes "
            f"{accepted}; every suite takes --out)"
        )
    combination = getattr(module, "option_problems", None)
    if combination is not None:
        problems += combination(asked & takes)
    return problems


async def endpoint_problem(
    base_url: str, api_key_env: str = "OPENAI_API_KEY", *, timeout_s: float = 10.0, transport: Any = None
) -> str:
    """``""`` when something answers at the OpenAI-compatible ``base_url``: any HTTP answer to
    ``GET <base_url>/models`` but 401/403 (a server without that route still answers). Else
    one line naming the endpoint, what failed and what to do. ``transport``: an
    ``httpx.AsyncBaseTransport`` for tests. Never raises for network failures."""
    import httpx

    key = os.environ.get(api_key_env, "")
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    try:
        async with httpx.AsyncClient(timeout=timeout_s, transport=transport) as client:
            answer = await client.get(base_url.rstrip("/") + "/models", headers=headers)
    except (httpx.HTTPError, httpx.InvalidURL) as exc:
        return (
            f"nothing answers at the model endpoint {base_url} ({type(exc).__name__}: {str(exc) or 'no answer'}): "
            "start that server or correct --base-url / HERMES_BASE_URL, or leave both unset to use the "
            "embedded model"
        )
    if answer.status_code in (401, 403):
        return (
            f"the model endpoint {base_url} refused the key (HTTP {answer.status_code}): put a valid key in "
            f"${api_key_env}" + ("" if key else " (it is not set)") + ", or name another variable with --api-key-env"
        )
    return ""


async def run_suite(cfg: EvalConfig) -> Report:
    """Run one suite and write its report. Raises ``KeyError`` for an unknown suite name, and
    whatever the suite's optional ``check_config(cfg)`` raises (``ValueError``: e.g. an unknown
    case) before anything is written."""
    if cfg.suite not in SUITES:
        raise KeyError(f"unknown suite {cfg.suite!r}; choose one of {', '.join(SUITES)}")
    module = importlib.import_module(SUITES[cfg.suite])
    check_config = getattr(module, "check_config", None)
    if check_config is not None:
        check_config(cfg)
    report = Report(cfg)
    try:
        result = module.run(cfg, report)
        if inspect.isawaitable(result):
            await result
    finally:
        report.close()
        _maybe_upload(report)
    return report


def _maybe_upload(report: Report) -> None:
    """LangSmith upload of the rows as dataset + experiment when ``LANGSMITH_API_KEY`` is set."""
    if not os.environ.get("LANGSMITH_API_KEY") or not report.rows:
        return
    try:
        from langsmith import Client

        client = Client()
        name = f"hermes-{report.cfg.suite}-{report.out.name}"
        dataset = client.create_dataset(name, description=f"Hermes eval {report.cfg.suite}")
        client.create_examples(
            dataset_id=dataset.id,
            inputs=[{"case": r.get("id", i)} for i, r in enumerate(report.rows)],
            outputs=list(report.rows),
        )
        print(f"LangSmith: dataset {name} uploaded ({len(report.rows)} rows)", file=sys.stderr)
    except Exception as exc:  # noqa: BLE001 - optional upload: say what failed, keep the local report
        print(f"LangSmith upload skipped: {type(exc).__name__}: {exc}", file=sys.stderr)
