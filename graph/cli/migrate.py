"""``hermes migrate --to postgres [--data-dir D] [--postgres-url URL] [--json]``: copy a data
directory's threads (with their branch trees), episodic and semantic memories (with the
memory's branch origins), idempotency ledger and reminders into PostgreSQL (``graph.migration``, which says what is copied, how, and what
stays). Idempotent: a second run copies nothing twice. Exit 0 with the counts; 1 with one line when the database
cannot be reached or a file cannot be read."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import typer

from graph.cli.common import DATA_DIR_OPT, app, context_or_exit, raised, report_error
from graph.cli.render import console

TO_OPT = typer.Option(..., "--to", help="Where to copy the data directory: postgres (the only target).")
URL_OPT = typer.Option(
    None, "--postgres-url", help="PostgreSQL URL to copy into (default: HERMES_POSTGRES_URL).", show_default=False
)
JSON_OPT = typer.Option(False, "--json", help="The counts as JSON.")


@app.command()
def migrate(
    to: str = TO_OPT,
    data_dir: str = DATA_DIR_OPT,
    postgres_url: str = URL_OPT,
    json_out: bool = JSON_OPT,
) -> None:
    """Copy the data directory's threads (every branch), episodic and semantic memories,
    idempotency ledger and reminders into PostgreSQL; run with no other hermes process on the data directory,
    then set HERMES_POSTGRES_URL. Running it again copies nothing twice."""
    if to.strip().lower() not in ("postgres", "postgresql"):
        raise typer.Exit(report_error(None, f"--to {to!r}: the only target is postgres", json_out=json_out))
    context = context_or_exit(None, None, data_dir, None)
    url = postgres_url or context.postgres_url
    if not url:
        raise typer.Exit(
            report_error(None, "no PostgreSQL URL: give --postgres-url or set HERMES_POSTGRES_URL", json_out=json_out)
        )

    async def go() -> dict[str, Any]:
        from graph.migration import migrate_to_postgres
        from graph.resources import aclose_resources

        try:
            return (await migrate_to_postgres(context, url)).as_dict()
        finally:
            await aclose_resources()

    try:
        report = asyncio.run(go())
    except Exception as exc:  # noqa: BLE001 - any failure is one message saying what was copied, and an exit code
        from base.postgres_urls import connection_error, redacted

        if raised(exc, "graph.postgres:PostgresUnavailable", "tools.idempotency:LedgerUnavailable"):
            message = str(exc)  # names the setting, the URL without its password and what to do
        elif raised(exc, "psycopg:OperationalError"):
            message = connection_error(exc, url, "hermes migrate")
        else:
            message = f"migration to {redacted(url)} stopped: {type(exc).__name__}: {' '.join(str(exc).split())}"
        raise typer.Exit(
            report_error(
                exc, f"{message} What was copied stays; run the command again to copy the rest.", json_out=json_out
            )
        ) from None
    if json_out:
        print(json.dumps(report, ensure_ascii=False))
        return
    _print(report, context.data_dir)


def _print(report: dict[str, Any], data_dir: str) -> None:
    console.print(f"migrated {data_dir} to PostgreSQL:", highlight=False)
    console.print(
        f"  threads      {report['threads']} ({report['checkpoints_copied']} checkpoints copied, "
        f"{report['checkpoints_present']} already there; {report['writes_copied']} pending writes copied)",
        highlight=False,
    )
    episodic = report["episodic_note"] or (
        f"{report['episodic_copied']} copied, {report['episodic_present']} already there"
        + (
            f", {report['episodic_expired_left']} expired left out (never recalled)"
            if report["episodic_expired_left"]
            else ""
        )
    )
    console.print(f"  episodic     {episodic}", highlight=False)
    console.print(
        f"  ledger       {report['ledger_copied']} copied, {report['ledger_present']} already there",
        highlight=False,
    )
    semantic = ", ".join(f"{n} {t.removeprefix('semantic_')}" for t, n in report["semantic_copied"].items())
    console.print(f"  semantic     {semantic + ' copied' if semantic else 'nothing to copy'}", highlight=False)
    origins = ", ".join(f"{n} {t.removeprefix('memory_')}" for t, n in report["origins_copied"].items())
    console.print(f"  origins      {origins + ' copied' if origins else 'nothing to copy'}", highlight=False)
    conflicting = report["reminders_conflicting"]
    console.print(
        f"  reminders    {report['reminders_copied']} copied, {report['reminders_present']} already there; "
        f"{report['firings_copied']} firings, {report['deliveries_copied']} notices copied"
        + (f"; NOT copied (the id holds another reminder there): {conflicting}" if conflicting else ""),
        highlight=False,
    )
    for item in report["not_copied"]:
        console.print(f"  not copied   {item}", highlight=False)
