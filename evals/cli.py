"""``python -m evals SUITE`` / ``hermes eval SUITE``: run one evaluation suite, write its report.

Exit codes: 0 the suite ran (its figures are in the report, whatever they are), 1 it could not
run (unknown suite, missing data, unreachable endpoint: the message says what to do).
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Annotated

import typer

from evals.harness import SUITES, EvalConfig, default_out, run_suite


def eval_command(
    suite: Annotated[str, typer.Argument(help=f"One of: {', '.join(SUITES)}.")],
    model: Annotated[str, typer.Option(help="HERMES_MODEL spec: embedded, embedded:<name>, or a model "
                                            "name served at --base-url.")] = "embedded",
    base_url: Annotated[str, typer.Option(help="OpenAI-compatible endpoint (…/v1).")] = "",
    api_key_env: Annotated[str, typer.Option(help="Environment variable holding the endpoint's key.")] = "OPENAI_API_KEY",
    limit: Annotated[int | None, typer.Option(help="At most N cases per category (default: all).", min=1)] = None,
    k: Annotated[int, typer.Option(help="Runs per case (pass^k).", min=1)] = 1,
    seed: Annotated[int, typer.Option(help="Seed of sampling and generated data.")] = 0,
    sample: Annotated[bool, typer.Option(help="The small fixed sample CI runs.")] = False,
    out: Annotated[Path | None, typer.Option(help="Report directory (default evals/reports/<suite>/<timestamp>).")] = None,
    case: Annotated[list[str] | None, typer.Option(help="Only this case id (repeatable; the tasks suite).")] = None,
) -> None:
    """Run an evaluation suite against the embedded model or any OpenAI-compatible endpoint."""
    if suite not in SUITES:
        typer.echo(f"error: unknown suite {suite!r}; choose one of: {', '.join(SUITES)}", err=True)
        raise typer.Exit(1)
    cfg = EvalConfig(suite=suite, model=model, base_url=base_url, api_key_env=api_key_env, limit=limit,
                     k=k, seed=seed, sample=sample, out=out or default_out(suite), cases=tuple(case or ()))
    try:
        report = asyncio.run(run_suite(cfg))
    except (OSError, ConnectionError, RuntimeError, ValueError, KeyError) as exc:
        # missing or malformed data, an unwritable --out, an unreachable endpoint: one line
        what = f"{type(exc).__name__}: {exc}" if isinstance(exc, KeyError | OSError) else str(exc)
        typer.echo(f"error: {what}", err=True)
        raise typer.Exit(1) from exc
    typer.echo(f"report: {report.out / 'report.md'}")
    for name, value in report.summary.items():
        typer.echo(f"  {name}: {value}")


def main() -> None:
    typer.run(eval_command)


if __name__ == "__main__":
    main()
