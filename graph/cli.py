"""``hermes`` command line: run the agent graph with the SQLite checkpointer.

    hermes run "<task>" [--thread ID] [--model NAME --base-url URL] [--data-dir DIR]
    hermes chat [--thread ID]

Progress is printed node by node while the graph runs (LangGraph ``stream_mode="updates"``),
then the answer and a summary: thread id, checkpoint id, tools called, tokens in/out, memory
writes, stop reason. Exit codes: 0 the run finished (answered, or stopped with a stated reason),
1 an error (message says what to do), 2 the model endpoint could not be reached or started.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from pathlib import Path
from typing import Any

import typer
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver
from rich.console import Console
from rich.panel import Panel
from rich.table import Table

from graph.builder import make_graph
from graph.context import Context
from graph.model import ModelUnavailableError, astop_embedded_server
from graph.resources import aclose_resources

app = typer.Typer(help="Hermes Agent: a LangGraph agent runtime.", no_args_is_help=True)
console = Console()


def _context(model: str | None, base_url: str | None, data_dir: str | None, max_tool_rounds: int | None) -> Context:
    overrides: dict[str, Any] = {}
    if model:
        overrides["model"] = model
    if base_url:
        overrides["base_url"] = base_url
    if data_dir:
        overrides["data_dir"] = data_dir
    if max_tool_rounds:
        overrides["max_tool_rounds"] = max_tool_rounds
    return Context(**overrides)


def describe_update(node: str, update: dict[str, Any] | None) -> str:
    """One progress line for a node's state update."""
    update = update or {}
    if node == "assemble_context":
        prompt = update.get("window") or []
        extra = f", intent={update['intent']}" if update.get("intent") else ""
        mems = update.get("memory_context")
        extra += f", {len(mems)} memories" if mems else ""
        return f"prompt: system + {len(prompt)} history messages{extra}"
    if node == "call_model":
        msg = (update.get("messages") or [None])[-1]
        if isinstance(msg, AIMessage) and (msg.tool_calls or msg.invalid_tool_calls):
            calls = [f"{c['name']}({json.dumps(c['args'], ensure_ascii=False)[:80]})" for c in msg.tool_calls]
            calls += [f"{c.get('name')}(<invalid JSON>)" for c in msg.invalid_tool_calls]
            return "model asks for " + ", ".join(calls)
        text = msg.content if isinstance(msg, AIMessage) else ""
        return "model answers: " + (str(text)[:100].replace("\n", " ") or "(empty)")
    if node == "dispatch_tools":
        parts = [f"{r['name']}: {r['status']}" + (f" ({r['error'][:80]})" if r.get("error") else "")
                 for r in update.get("pending_results") or []]
        return "; ".join(parts) or "no calls"
    if node == "compress_results":
        msgs = [m for m in update.get("messages") or [] if isinstance(m, ToolMessage)]
        return f"{len(msgs)} result(s) bounded, {sum(len(str(m.content)) for m in msgs)} chars into history"
    if node == "evaluate_progress":
        if update.get("stop_reason"):
            return f"STOP: {update['stop_reason']}"
        dist = update.get("goal_distance")
        return f"round {update.get('tool_rounds')}, steps left: {dist}" + (
            f" — {update['progress_note']}" if update.get("progress_note") else ""
        )
    if node == "write_memory":
        return f"{(update.get('metrics') or {}).get('memory_writes', 0)} memory record(s) written"
    return ""


async def run_turn(
    task: str, context: Context, thread_id: str, quiet: bool = False, callbacks: list | None = None
) -> dict[str, Any]:
    """Run one user turn through the checkpointed graph (SQLite file ``<data_dir>/checkpoints.sqlite``).

    Returns the summary: ``answer``, ``thread_id``, ``checkpoint_id``, ``tools_called``
    ({name: count} this turn), ``tokens_in``/``tokens_out``, ``memory_writes``, ``stop_reason``,
    ``report_path``. ``callbacks`` are LangChain callback handlers passed to every model call."""
    data_dir = Path(context.data_dir)
    data_dir.mkdir(parents=True, exist_ok=True)
    async with AsyncSqliteSaver.from_conn_string(str(data_dir / "checkpoints.sqlite")) as saver:
        agent = make_graph(checkpointer=saver)
        config: dict[str, Any] = {"configurable": {"thread_id": thread_id}}
        if callbacks:
            config["callbacks"] = callbacks
        before = (await agent.aget_state(config)).values.get("metrics", {}) if thread_id else {}
        async for chunk in agent.astream(
            {"messages": [HumanMessage(task)]}, config, context=context, stream_mode="updates"
        ):
            for node, update in chunk.items():
                if not quiet and not node.startswith("__"):
                    console.print(f"[cyan]▸ {node}[/cyan] {describe_update(node, update)}", highlight=False)
        snapshot = await agent.aget_state({"configurable": {"thread_id": thread_id}})
    values = snapshot.values
    metrics = values.get("metrics", {})
    calls = {k: v - (before.get("tool_calls") or {}).get(k, 0) for k, v in (metrics.get("tool_calls") or {}).items()}
    last = next((m for m in reversed(values.get("messages", [])) if isinstance(m, AIMessage)), None)
    return {
        "answer": last.content if last else "",
        "thread_id": thread_id,
        "checkpoint_id": snapshot.config["configurable"].get("checkpoint_id"),
        "tools_called": {k: v for k, v in calls.items() if v},
        "tokens_in": metrics.get("tokens_in", 0) - before.get("tokens_in", 0),
        "tokens_out": metrics.get("tokens_out", 0) - before.get("tokens_out", 0),
        "memory_writes": metrics.get("memory_writes", 0) - before.get("memory_writes", 0),
        "stop_reason": values.get("stop_reason"),
        "report_path": values.get("report_path"),
    }


def print_summary(summary: dict[str, Any]) -> None:
    style = "yellow" if summary["stop_reason"] else "green"
    console.print(Panel(str(summary["answer"]) or "(no answer)", title="Hermes", border_style=style))
    table = Table(show_header=False, box=None)
    for key in ("thread_id", "checkpoint_id", "tools_called", "tokens_in", "tokens_out",
                "memory_writes", "stop_reason", "report_path"):
        table.add_row(key, str(summary[key] if summary[key] not in (None, {}) else "—"))
    console.print(table)


async def _guarded(coro_factory) -> int:
    try:
        await coro_factory()
        return 0
    except ModelUnavailableError as exc:
        console.print(f"[red]model unavailable:[/red] {exc}")
        return 2
    except KeyboardInterrupt:
        console.print("[yellow]interrupted; the last checkpoint is kept (resume with --thread)[/yellow]")
        return 1
    except Exception as exc:  # a clear message instead of a traceback; details with HERMES_DEBUG=1
        import os

        if os.environ.get("HERMES_DEBUG"):
            raise
        console.print(f"[red]error:[/red] {type(exc).__name__}: {exc}\n"
                      "The thread's checkpoints are kept; rerun with HERMES_DEBUG=1 for a traceback.")
        return 1
    finally:
        await aclose_resources()
        await astop_embedded_server()


@app.command()
def run(
    task: str = typer.Argument(..., help="What Hermes should do."),
    thread: str = typer.Option("", help="Thread id (session) to continue; new if empty."),
    model: str = typer.Option(None, help="Model name ('embedded' = bundled llama.cpp)."),
    base_url: str = typer.Option(None, help="OpenAI-compatible endpoint URL."),
    data_dir: str = typer.Option(None, help="Data directory (default .hermes or HERMES_DATA_DIR)."),
    max_tool_rounds: int = typer.Option(None, help="Cap on tool rounds for this goal."),
    json_out: bool = typer.Option(False, "--json", help="Print the summary as JSON only."),
) -> None:
    """Run one task to its end and print the answer and a summary."""
    context = _context(model, base_url, data_dir, max_tool_rounds)
    thread_id = thread or f"run-{uuid.uuid4().hex[:8]}"
    result: dict[str, Any] = {}

    async def go() -> None:
        result.update(await run_turn(task, context, thread_id, quiet=json_out))

    code = asyncio.run(_guarded(go))
    if result:
        if json_out:
            print(json.dumps(result, ensure_ascii=False, default=str))
        else:
            print_summary(result)
    raise typer.Exit(code)


@app.command()
def chat(
    thread: str = typer.Option("", help="Thread id (session) to continue; new if empty."),
    model: str = typer.Option(None, help="Model name ('embedded' = bundled llama.cpp)."),
    base_url: str = typer.Option(None, help="OpenAI-compatible endpoint URL."),
    data_dir: str = typer.Option(None, help="Data directory."),
) -> None:
    """Interactive session on one thread; an empty line or Ctrl-D ends it."""
    context = _context(model, base_url, data_dir, None)
    thread_id = thread or f"chat-{uuid.uuid4().hex[:8]}"
    console.print(f"thread {thread_id} — empty line to quit")

    async def go() -> None:
        while True:
            try:
                task = await asyncio.to_thread(input, "you> ")
            except EOFError:
                return
            if not task.strip():
                return
            print_summary(await run_turn(task, context, thread_id))

    raise typer.Exit(asyncio.run(_guarded(go)))


if __name__ == "__main__":
    app()
