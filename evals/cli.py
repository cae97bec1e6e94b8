"""``python -m evals SUITE`` / ``hermes eval SUITE``: run one evaluation suite, write its report.

Exit codes (those of ``hermes run`` where they mean the same): 0 the suite ran (its figures are
in the report, whatever they are); 1 it could not run — an unknown suite or case, an option the
suite does not use (refused, never silently ignored), missing data, an unwritable ``--out``;
2 the model endpoint could not be used (nothing answers at ``--base-url`` / ``HERMES_BASE_URL``,
it refused the key, or the model is unavailable). Every message is one line saying what to do;
``HERMES_DEBUG`` set adds the traceback.

``--model`` and ``--base-url`` default to ``HERMES_MODEL`` and ``HERMES_BASE_URL`` (as for
``hermes run``), so the report names the model and endpoint the suite really used. An endpoint
is asked once before the suite starts (``evals.harness.endpoint_problem``), so a dead one is
reported at once, not after minutes of set-up, and no report directory is left behind.
"""

from __future__ import annotations

import asyncio
import os
import sys
import traceback
from pathlib import Path
from typing import Annotated, NoReturn

import typer

from evals.harness import (
    SUITES,
    EvalConfig,
    Report,
    default_out,
    endpoint_problem,
    option_problems,
    run_suite,
    suite_options,
)

DEFAULT_KEY_ENV = "OPENAI_API_KEY"
EXIT_ENDPOINT = 2


def fail(message: str, code: int = 1, exc: BaseException | None = None) -> NoReturn:
    """``error: <message>`` on stderr (after the traceback of ``exc`` with ``HERMES_DEBUG``); exit ``code``."""
    if exc is not None and os.environ.get("HERMES_DEBUG"):
        sys.stderr.write("".join(traceback.format_exception(exc)))
    typer.echo(f"error: {message}", err=True)
    raise typer.Exit(code)


def eval_command(
    suite: Annotated[str, typer.Argument(help=f"One of: {', '.join(SUITES)}.")],
    model: Annotated[
        str | None,
        typer.Option(
            help="HERMES_MODEL spec: embedded, embedded:<name>, or a model "
            "name served at --base-url (default: HERMES_MODEL, "
            "else embedded)."
        ),
    ] = None,
    base_url: Annotated[str, typer.Option(help="OpenAI-compatible endpoint (…/v1; default: HERMES_BASE_URL).")] = "",
    api_key_env: Annotated[
        str, typer.Option(help="Environment variable holding the endpoint's key.")
    ] = DEFAULT_KEY_ENV,
    limit: Annotated[int | None, typer.Option(help="At most N cases per category (default: all).", min=1)] = None,
    k: Annotated[int, typer.Option(help="Runs per case (pass^k; the tasks suite).", min=1)] = 1,
    seed: Annotated[int, typer.Option(help="Seed of sampling and generated data.")] = 0,
    sample: Annotated[bool, typer.Option(help="The small fixed sample CI runs.")] = False,
    out: Annotated[
        Path | None, typer.Option(help="Report directory (default evals/out/<suite>/<timestamp>, ignored by git).")
    ] = None,
    case: Annotated[list[str] | None, typer.Option(help="Only this case id (repeatable; the tasks suite).")] = None,
    database: Annotated[
        Path | None, typer.Option(help="Your own SQLite database (the data suite, with --questions).")
    ] = None,
    questions: Annotated[
        Path | None,
        typer.Option(help="Your questions about --database, JSON or YAML (the data suite; evals/README.md)."),
    ] = None,
) -> None:
    """Run an evaluation suite against the embedded model or any OpenAI-compatible endpoint.
    An option the suite does not use is refused (exit 1), a dead endpoint reported (exit 2)."""
    if suite not in SUITES:
        fail(f"unknown suite {suite!r}; choose one of: {', '.join(SUITES)}")
    raw = {
        "model": model,
        "base_url": base_url,
        "api_key_env": "" if api_key_env == DEFAULT_KEY_ENV else api_key_env,
        "limit": limit,
        "k": None if k == 1 else k,
        "seed": seed or None,
        "sample": sample or None,
        "cases": case or None,
        "database": database,
        "questions": questions,
    }
    given = {name for name, value in raw.items() if value not in (None, "")}
    takes = suite_options(suite)
    if "model" in takes or "base_url" in takes:
        from graph.context import Context  # the HERMES_* settings, as `hermes run` reads them

        try:
            settings = Context()
        except ValueError as exc:
            fail(str(exc), exc=exc)
        model = model or settings.model
        base_url = base_url or settings.base_url
    problems = option_problems(suite, given | ({"base_url"} if base_url else set()))
    if problems:
        fail("; ".join(problems) + " (see `python -m evals --help`)")
    if base_url and "base_url" in takes:
        problem = asyncio.run(endpoint_problem(base_url, api_key_env))
        if problem:
            fail(problem, EXIT_ENDPOINT)
    cfg = EvalConfig(
        suite=suite,
        model=model or "embedded",
        base_url=base_url,
        api_key_env=api_key_env,
        limit=limit,
        k=k,
        seed=seed,
        sample=sample,
        out=out or default_out(suite),
        cases=tuple(case or ()),
        database=database,
        questions=questions,
    )
    report = _run(cfg)
    typer.echo(f"report: {report.out / 'report.md'}")
    for name, value in report.summary.items():
        typer.echo(f"  {name}: {value}")


def _run(cfg: EvalConfig) -> Report:
    """``run_suite(cfg)``; each failure as one line and its exit code (see the module docstring)."""
    import httpx

    from graph.embedded.errors import ModelUnavailableError

    partial = f"; the rows measured so far are in {cfg.out / 'results.jsonl'}"
    try:
        return asyncio.run(run_suite(cfg))
    except ModelUnavailableError as exc:
        fail(f"model unavailable: {exc}", EXIT_ENDPOINT, exc)
    except httpx.HTTPError as exc:  # an endpoint the suite asks itself (memory's answer F1) failed
        where = cfg.base_url or "the model endpoint"
        fail(
            f"the model endpoint {where} failed during the run ({type(exc).__name__}: {exc}){partial}",
            EXIT_ENDPOINT,
            exc,
        )
    except (OSError, ConnectionError, RuntimeError, ValueError, KeyError) as exc:
        # missing or malformed data, an unwritable --out, an unknown case: one line
        what = f"{type(exc).__name__}: {exc}" if isinstance(exc, KeyError | OSError) else str(exc)
        fail(what, 1, exc)
    except Exception as exc:  # noqa: BLE001 - a bug: one line here too; the traceback with HERMES_DEBUG
        fail(f"{type(exc).__name__}: {exc}; rerun with HERMES_DEBUG=1 for a traceback", 1, exc)


def main() -> None:
    typer.run(eval_command)


if __name__ == "__main__":
    main()
