"""``hermes reminders list|due|run|history`` and ``hermes serve``: due reminders fired from the
CLI, once per period (``tools.scheduler``; docs/DESIGN.md §5.4). A firing delivers the reminder's
notice (recorded; ``list`` and ``history`` show it) and runs the action the user asked for, if
any; the reminder's text is never run as a request."""

from __future__ import annotations

import datetime as dt
import json
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer
from rich.table import Table

from graph.cli.common import (
    DATA_DIR_OPT,
    NOW_OPT,
    app,
    context_or_exit,
    guarded,
    reminders_app,
    report_error,
    resolve_data_dir,
    run_sync,
)
from graph.cli.render import (
    ConsoleObserver,
    console,
    err_console,
    preview_markup,
    print_firings,
    print_table,
)

if TYPE_CHECKING:  # the scheduler, the toolbox and the runner load inside the commands that use them
    from graph.context import Context
    from tools.scheduler import Due, Firing


def parse_now_or_exit(value: str | None) -> dt.datetime:
    """The ``--now`` clock (default: now, read once here), or exit 1 when it is not ISO-8601."""
    if not value:
        return dt.datetime.now().astimezone()
    try:
        return dt.datetime.fromisoformat(value)
    except ValueError:
        report_error(None, f"--now must be ISO-8601 (e.g. 2026-12-01T09:30:00), got {value!r}")
        raise typer.Exit(1) from None


async def fire_reminder_action(due: Due, context: Context, verbose: bool = False) -> dict[str, Any]:
    """What firing an action means from the CLI (``fire_due`` delivers the notice and calls this
    only for an action): a "tool" action is checked again against the request that created it,
    then calls the tool through the toolbox's registry (request id ``reminder:<id>:<period>``:
    the ledger replays a repeat); a "task" action runs the agent turn on the action's thread
    (default ``reminder-<id>``) with ``graph.runner`` (checkpoints, mirror, per-thread lock), on
    behalf of that request (``Context.for_firing``: no scheduling, its destinations)."""
    import asyncio

    from graph.resources import get_toolbox
    from graph.runner import execute_turn
    from tools.scheduler import bound_request, call_tool_action

    if due.action["kind"] == "tool":
        registry = (await get_toolbox(context)).registry
        return await call_tool_action(registry, due, data_dir=context.data_dir, rules=context.destination_rules())
    thread_id = due.thread_id or f"reminder-{due.reminder_id}"  # task actions always name one
    context = context.for_firing(due.request_id, await asyncio.to_thread(bound_request, context.data_dir, due))
    summary = await execute_turn(
        due.action.get("task") or due.text,
        context,
        thread_id,
        quiet=not verbose,
        observer=ConsoleObserver(quiet=not verbose),
    )
    detail = f"turn ran on thread {due.thread_id}"
    if summary.get("question"):
        detail += f'; it is waiting for an answer: hermes resume --thread {due.thread_id} "<answer>"'
    elif summary.get("stop_reason"):
        detail += f"; stopped: {summary['stop_reason']}"
    else:
        detail += f": {str(summary.get('answer') or '')[:160]}"
    return {
        "ok": True,
        "detail": detail,
        "thread_id": due.thread_id,
        "answer": summary.get("answer"),
        "question": summary.get("question"),
        "stop_reason": summary.get("stop_reason"),
        "checkpoint_id": summary.get("checkpoint_id"),
        "tools_called": summary.get("tools_called"),
    }


def _print_nothing_due(path_dir: Path, now: dt.datetime) -> None:
    from tools.scheduler import stored_reminders

    listed = stored_reminders(path_dir)
    upcoming = sorted((r["next_run"], r["id"]) for r in listed)
    console.print(
        f"nothing due at {now.isoformat(timespec='minutes')} ({len(listed)} reminder(s)"
        + (f"; next: reminder {upcoming[0][1]} at {upcoming[0][0]}" if upcoming else "")
        + ")",
        highlight=False,
    )


@reminders_app.command("list")
def reminders_list(
    now: str = NOW_OPT,
    data_dir: str = DATA_DIR_OPT,
    json_out: bool = typer.Option(False, "--json", help="Print JSON."),
) -> None:
    """Every reminder: schedule, action, next run (the next period to fire; "overdue" when its
    time has passed: the next check fires it), last fired period and its outcome, and the
    notices delivered (how many, the last one)."""
    from tools.builtin.reminder_store import schedule_exists
    from tools.reminder_history import delivery_history, firing_history
    from tools.scheduler import stored_reminders

    clock = parse_now_or_exit(now).astimezone()
    path_dir = resolve_data_dir(data_dir)
    if not schedule_exists(path_dir):
        if json_out:
            print("[]")
        else:
            console.print(f"no reminders in {path_dir}")
        return
    listed = stored_reminders(path_dir)
    last: dict[Any, dict[str, Any]] = {}
    for row in firing_history(path_dir):
        last.setdefault(row["reminder_id"], row)
    delivered: dict[Any, list[dict[str, Any]]] = {}
    for row in delivery_history(path_dir):
        delivered.setdefault(row["reminder_id"], []).append(row)
    if json_out:
        print(
            json.dumps(
                [{**r, "last_firing": last.get(r["id"]), "deliveries": delivered.get(r["id"], [])} for r in listed],
                ensure_ascii=False,
                default=str,
            )
        )
        return
    table = Table("id", "text", "day", "time", "action", "next run", "last fired", "outcome", "delivered")
    for r in listed:
        a = r["action"]
        action = {
            "tool": f"tool {a.get('tool')}",
            "task": f"task ({a.get('thread_id') or 'reminder-' + str(r['id'])})",
        }.get(a["kind"], "notice only" if a["kind"] == "notify" else a["kind"])
        notices = delivered.get(r["id"], [])
        fired = last.get(r["id"])
        overdue = dt.datetime.fromisoformat(r["next_run"]).astimezone() <= clock
        table.add_row(
            str(r["id"]),
            preview_markup(r["text"][:50]),
            str(r["day_of_month"]),
            r["time"],
            action,
            r["next_run"] + (" (overdue)" if overdue else ""),
            r["last_fired_period"] or "—",
            f"{fired['state']} ({fired['attempts']} attempt(s))" if fired else "—",
            f"{len(notices)} (last {notices[0]['period']})" if notices else "—",
        )
    print_table(table)


@reminders_app.command("history")
def reminders_history(
    reminder_id: int = typer.Argument(None, help="Only this reminder."),
    data_dir: str = DATA_DIR_OPT,
    json_out: bool = typer.Option(False, "--json", help="Print JSON."),
) -> None:
    """The notices delivered by firings, newest first: when, which period, the notice, and what
    the reminder's action did (delivered = notice only; done, failed, retry)."""
    from tools.reminder_history import delivery_history

    rows = delivery_history(resolve_data_dir(data_dir), reminder_id)
    if json_out:
        print(json.dumps(rows, ensure_ascii=False, default=str))
        return
    if not rows:
        console.print("no reminder has been delivered yet")
        return
    table = Table("reminder", "period", "delivered at", "notice", "action", "outcome")
    for row in rows:
        table.add_row(
            str(row["reminder_id"]),
            row["period"],
            row["delivered_at"],
            preview_markup(row["message"][:80]),
            row["action"],
            preview_markup(row["outcome"] + (f": {row['detail'][:100]}" if row["outcome"] == "failed" else "")),
        )
    print_table(table)


@reminders_app.command("due")
def reminders_due(
    now: str = NOW_OPT,
    data_dir: str = DATA_DIR_OPT,
    json_out: bool = typer.Option(False, "--json", help="Print JSON."),
) -> None:
    """What `hermes reminders run` would fire at --now (nothing is fired)."""
    from tools.builtin.reminder_store import schedule_exists
    from tools.scheduler import due_reminders

    clock = parse_now_or_exit(now)
    path_dir = resolve_data_dir(data_dir)
    due = due_reminders(path_dir, clock) if schedule_exists(path_dir) else []
    if json_out:
        print(json.dumps([asdict(d) for d in due], ensure_ascii=False, default=str))
        return
    if not due:
        _print_nothing_due(path_dir, clock)
    for d in due:
        console.print(
            f"due: {preview_markup(d.describe())} (scheduled {d.scheduled_for}, request id {d.request_id})",
            highlight=False,
        )
        if d.skipped_periods:
            console.print(f"  missed {', '.join(d.skipped_periods)}: caught up by this one firing", highlight=False)
        if d.adjustment:
            console.print(f"  adjustment: {d.adjustment}", highlight=False)


async def check_once(context: Context, clock: dt.datetime, verbose: bool) -> list[Firing]:
    """Fire what is due at ``clock`` in the context's data directory (nothing when it has no
    reminders database; the schedule is on PostgreSQL when ``context.postgres_url`` is set)."""
    import asyncio

    from tools.builtin.reminder_store import schedule_exists
    from tools.scheduler import fire_due

    path_dir = Path(context.data_dir)
    if not await asyncio.to_thread(schedule_exists, path_dir, context.postgres_url):
        return []
    return await fire_due(
        path_dir, clock, lambda due: fire_reminder_action(due, context, verbose), postgres_url=context.postgres_url
    )


@reminders_app.command("run")
def reminders_run(
    now: str = NOW_OPT,
    model: str = typer.Option(None, help="Model name for task actions ('embedded' = bundled llama.cpp)."),
    base_url: str = typer.Option(None, help="OpenAI-compatible endpoint URL."),
    data_dir: str = DATA_DIR_OPT,
    verbose: bool = typer.Option(False, help="Print the agent's progress for task actions."),
    json_out: bool = typer.Option(False, "--json", help="Print the firings as JSON only."),
) -> None:
    """Fire every reminder due at --now, once per period: each delivers its notice; task actions
    run an agent turn on the reminder's thread, tool actions call the tool (both bound to the
    request that created the reminder). Exit 1 if a firing failed (it is retried at the next
    check, up to 3 attempts, unless its action was refused)."""
    clock = parse_now_or_exit(now)
    context = context_or_exit(model, base_url, data_dir, None)
    firings: list[Firing] = []

    async def go() -> None:
        firings.extend(await check_once(context, clock, verbose and not json_out))

    code = run_sync(guarded(go, context, json_out=json_out))
    if json_out:
        print(
            json.dumps(
                {"now": clock.isoformat(), "firings": [f.as_dict() for f in firings]}, ensure_ascii=False, default=str
            )
        )
    else:
        print_firings(firings)
        if not firings and not code:
            _print_nothing_due(Path(context.data_dir), clock)
    raise typer.Exit(code or (1 if any(f.status == "failed" for f in firings) else 0))


@app.command()
def serve(
    interval: float = typer.Option(60.0, help="Seconds between checks of due reminders."),
    checks: int = typer.Option(0, help="Stop after this many checks (0 = until Ctrl-C)."),
    model: str = typer.Option(None, help="Model name for task actions ('embedded' = bundled llama.cpp)."),
    base_url: str = typer.Option(None, help="OpenAI-compatible endpoint URL."),
    data_dir: str = DATA_DIR_OPT,
    verbose: bool = typer.Option(False, help="Print the agent's progress for task actions."),
) -> None:
    """Keep firing due reminders: check every --interval seconds until Ctrl-C. Safe beside
    other runners (`hermes reminders run`, the server's `reminders` cron): each period fires once."""
    if interval < 0:
        err_console.print("[red]error:[/red] --interval must be >= 0 seconds")
        raise typer.Exit(1)
    context = context_or_exit(model, base_url, data_dir, None)
    import asyncio  # not at the top: `hermes --help` runs nothing

    async def go() -> None:
        from tools.builtin.reminder_store import where

        _stop_on_ctrl_c(asyncio.current_task())
        console.print(
            f"hermes serve: checking {where(context.data_dir, context.postgres_url)} every {interval:g} s (Ctrl-C stops)",
            highlight=False,
        )
        done = 0
        while True:
            clock = dt.datetime.now().astimezone()  # this check's clock, read once
            firings = await check_once(context, clock, verbose)
            if firings:
                console.print(f"[dim]{clock.isoformat(timespec='seconds')}[/dim]", highlight=False)
                print_firings(firings)
            done += 1
            if checks and done >= checks:
                return
            await asyncio.sleep(interval)

    try:
        code = asyncio.run(guarded(go, context))
    except (KeyboardInterrupt, asyncio.CancelledError):
        console.print(STOPPED)
        code = 0
    raise typer.Exit(code)


STOPPED = "hermes serve stopped (Ctrl-C); what was due has fired or will be retried"
#: Seconds `hermes serve` may take to close after Ctrl-C before it exits anyway. Every firing
#: is committed before its effect and a held memory write is replayed by the next process, so
#: cutting the close short loses nothing; measured: twice in CI (load ~20) the process was still
#: closing 30 s after Ctrl-C, once right after a check had started a tool server.
STOP_GRACE_S = 10.0


def _stop_on_ctrl_c(main: Any) -> None:
    """Ctrl-C (SIGINT) cancels ``main`` (the serve loop: its close runs as usual) and arms a
    daemon timer that ends the process with exit 0 if the close takes over STOP_GRACE_S."""
    import asyncio
    import contextlib
    import os
    import signal
    import sys
    import threading

    def force() -> None:
        sys.stdout.write(f"{STOPPED} (closing took over {STOP_GRACE_S:g} s: cut short)\n")
        sys.stdout.flush()
        os._exit(0)

    def on_sigint() -> None:
        timer = threading.Timer(STOP_GRACE_S, force)
        timer.daemon = True
        timer.start()
        main.cancel()

    with contextlib.suppress(NotImplementedError, RuntimeError):  # no signal handlers here (Windows, a thread)
        asyncio.get_running_loop().add_signal_handler(signal.SIGINT, on_sigint)
