"""``hermes run``, ``hermes resume``, ``hermes chat``: turns through ``graph.runner``."""

from __future__ import annotations

import json
import sys
import time
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from graph.cli.common import EXIT_ASKED, app, context_or_exit, guarded, run_sync
from graph.cli.render import ConsoleObserver, console, err_console, print_summary

if TYPE_CHECKING:  # the runner (the graph, the model client) loads inside the commands that run turns
    from graph.context import Context


def _hold_for_tests() -> None:
    """``HERMES_TEST_HOLD_ANSWER``: create that file and wait here (a test kills the process
    between the end of the turn and the print)."""
    from graph.context import MachineSettings

    hold = MachineSettings().test_hold_answer
    if hold:
        Path(hold).write_text("turn finished; answer not printed\n")
        while True:
            time.sleep(3600)


def finish(result: dict[str, Any], json_out: bool, code: int, context: Context | None = None) -> None:
    """Print a turn's summary (JSON with ``--json``) and exit: ``EXIT_ASKED`` when the turn
    stopped at a question nobody answered. With ``context``, the answer is then recorded as
    delivered (``graph.runner.answer_delivered``: the same text again is a new request)."""
    from graph.runner import answer_delivered

    if result:
        if context is not None and result.get("goal_id"):
            _hold_for_tests()
        if json_out:
            print(json.dumps(result, ensure_ascii=False, default=str))
        else:
            print_summary(result)
        sys.stdout.flush()
        if context is not None and result.get("goal_id") and not result.get("question"):
            answer_delivered(context.data_dir, result["thread_id"], result["goal_id"], context.postgres_url)
        if result.get("question") and not code:
            code = EXIT_ASKED
    raise typer.Exit(code)


@app.command()
def run(
    task: str = typer.Argument(..., help="What Hermes should do."),
    thread: str = typer.Option("", help="Thread id (session) to continue; new if empty."),
    model: str = typer.Option(None, help="Model name ('embedded' = bundled llama.cpp)."),
    base_url: str = typer.Option(None, help="OpenAI-compatible endpoint URL."),
    data_dir: str = typer.Option(None, help="Data directory (default .hermes or HERMES_DATA_DIR)."),
    max_tool_rounds: int = typer.Option(None, help="Cap on tool rounds for this goal."),
    json_out: bool = typer.Option(False, "--json", help="Print the summary as JSON only."),
    again: bool = typer.Option(
        False,
        "--again",
        help="Run the task as a new request even if it repeats the thread's last request whose answer "
        "was never shown (by default that one's stored answer is shown and nothing runs again).",
    ),
) -> None:
    """Run one task to its end and print the answer and a summary."""
    if not task.strip():
        err_console.print("[red]error:[/red] the task is empty: say what Hermes should do")
        raise typer.Exit(1)
    context = context_or_exit(model, base_url, data_dir, max_tool_rounds)
    thread_id = thread or f"run-{uuid.uuid4().hex[:8]}"
    result: dict[str, Any] = {}
    if not json_out:
        console.print(f"[dim]thread {thread_id}[/dim]")

    async def go() -> None:
        from graph.runner import execute_turn

        result.update(
            await execute_turn(
                task,
                context,
                thread_id,
                quiet=json_out,
                observer=ConsoleObserver(json_out),
                track_delivery=True,
                new_request=again,
            )
        )
        # printed before the exit drains the turn's memory write (held durably in the memory
        # queue; its embedding finishes after the answer, DESIGN §4.8): raises typer.Exit
        finish(result, json_out, 0, context)

    code = run_sync(guarded(go, context, thread_id, json_out), thread_id)
    finish(result, json_out, code, context)


@app.command()
def resume(
    answer: str = typer.Argument(..., help="Your answer to the agent's question."),
    thread: str = typer.Option(..., help="The thread whose run is waiting for an answer."),
    model: str = typer.Option(None, help="Model name ('embedded' = bundled llama.cpp)."),
    base_url: str = typer.Option(None, help="OpenAI-compatible endpoint URL."),
    data_dir: str = typer.Option(None, help="Data directory (default .hermes or HERMES_DATA_DIR)."),
    json_out: bool = typer.Option(False, "--json", help="Print the summary as JSON only."),
) -> None:
    """Answer the question a run stopped at (LangGraph interrupt) and continue it."""
    context = context_or_exit(model, base_url, data_dir, None)
    result: dict[str, Any] = {}

    async def go() -> None:
        from graph.runner import execute_turn

        result.update(
            await execute_turn(
                "",
                context,
                thread,
                quiet=json_out,
                resume=answer,
                op="resume",
                observer=ConsoleObserver(json_out),
                track_delivery=True,
            )
        )

    code = run_sync(guarded(go, context, thread, json_out), thread)
    finish(result, json_out, code, context)


@app.command()
def chat(
    thread: str = typer.Option("", help="Thread id (session) to continue; new if empty."),
    model: str = typer.Option(None, help="Model name ('embedded' = bundled llama.cpp)."),
    base_url: str = typer.Option(None, help="OpenAI-compatible endpoint URL."),
    data_dir: str = typer.Option(None, help="Data directory."),
) -> None:
    """Interactive session on one thread; an empty line or Ctrl-D ends it."""
    context = context_or_exit(model, base_url, data_dir, None)
    thread_id = thread or f"chat-{uuid.uuid4().hex[:8]}"
    console.print(f"thread {thread_id} — empty line to quit")

    async def go() -> None:
        import asyncio

        from graph.cli.stdin import ainput
        from graph.runner import answer_delivered, execute_turn

        while True:
            try:
                task = await ainput("you> ")
            except EOFError:
                return
            if not task.strip():
                return
            summary = await execute_turn(task, context, thread_id, observer=ConsoleObserver(), track_delivery=True)
            print_summary(summary)
            if summary.get("goal_id") and not summary.get("question"):
                await asyncio.to_thread(
                    answer_delivered, context.data_dir, thread_id, summary["goal_id"], context.postgres_url
                )

    raise typer.Exit(run_sync(guarded(go, context, thread_id), thread_id))
