"""``hermes`` command line: run the agent graph with the SQLite checkpointer.

    hermes run "<task>" [--thread ID] [--model NAME --base-url URL] [--data-dir DIR]
    hermes chat [--thread ID]
    hermes resume --thread ID "<answer>"       (answer a question the agent asked: interrupt)
    hermes tools list | lint
    hermes session show THREAD [--last N] [--json]
    hermes branch list THREAD | show THREAD [CHECKPOINT] [--compact]
    hermes branch rollback THREAD CHECKPOINT | switch THREAD HEAD | fork THREAD CHECKPOINT "<task>"

Progress is printed node by node while the graph runs (LangGraph ``stream_mode="updates"``),
then the answer and a summary: thread id, checkpoint id, tools called, tokens in/out, memory
writes, stop reason. Exit codes: 0 the run finished (answered, or stopped with a stated reason),
1 an error (message says what to do), 2 the model endpoint could not be reached or started,
3 the agent asked a question (missing data, LangGraph ``interrupt``) and no terminal was there
to answer it — answer with ``hermes resume``, 130 interrupted by Ctrl-C (checkpoints kept).
One thread runs in one process at a time (a lock file under ``<data_dir>/locks``).

Every turn is mirrored to ``<data_dir>/mirror/<thread>.jsonl`` (``graph.mirror``); a thread whose
checkpoint cannot be read is rebuilt from that mirror before the turn, with a notice saying what
was lost (``graph.recovery``). Branch commands: ``graph.branches``. CHECKPOINT arguments accept
any unique part of a checkpoint id (the 8-character short ids shown by ``branch show``).
"""

from __future__ import annotations

import asyncio
import fcntl
import json
import logging
import os
import sqlite3
import sys
import threading
import uuid
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import typer
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langgraph.types import Command
from rich.console import Console
from rich.panel import Panel
from rich.table import Table

from graph.branches import BranchError, Branches, BranchTree, CheckpointNode, preview, short_id
from graph.builder import make_graph
from graph.checkpoints import open_checkpointer
from graph.context import Context
from graph.mirror import ThreadMirror
from graph.model import ModelUnavailableError, astop_embedded_server
from graph.recovery import RecoveryReport, ensure_readable, probe
from graph.resources import aclose_resources, drain_background

app = typer.Typer(help="Hermes Agent: a LangGraph agent runtime.", no_args_is_help=True)
branch_app = typer.Typer(help="Branches of a thread: its checkpoints as a tree (rollback, fork, switch).",
                         no_args_is_help=True)
session_app = typer.Typer(help="Sessions (threads) and their workbench state.", no_args_is_help=True)
app.add_typer(branch_app, name="branch")
app.add_typer(session_app, name="session")
tools_app = typer.Typer(help="The tool registry: definitions and their lint.", no_args_is_help=True)
app.add_typer(tools_app, name="tools")
console = Console()
err_console = Console(stderr=True)
EXIT_ASKED = 3


class _Concise(logging.Formatter):
    """One line per warning; tracebacks only with HERMES_DEBUG=1."""

    def format(self, record: logging.LogRecord) -> str:
        message = f"{record.levelname.lower()}: {record.getMessage()}"
        if record.exc_info and os.environ.get("HERMES_DEBUG"):
            message += "\n" + self.formatException(record.exc_info)
        elif record.exc_info and record.exc_info[1] is not None:
            message += f" ({type(record.exc_info[1]).__name__}: {record.exc_info[1]})"
        return message


@app.callback()
def _setup_logging() -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(_Concise())
    logging.basicConfig(level=logging.WARNING, handlers=[handler], force=True)


class ThreadBusyError(RuntimeError):
    """Another process is running a turn on the same thread."""


class NothingToResumeError(RuntimeError):
    """``hermes resume`` on a thread that is not waiting for an answer."""


@asynccontextmanager
async def thread_lock(data_dir: Path, thread_id: str):
    """Hold ``<data_dir>/locks/<thread>.lock`` (``flock``) for a turn: two processes on one thread
    would interleave their messages and lose an answer. Raises :class:`ThreadBusyError`."""
    safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in thread_id)[:100] or "_"
    path = data_dir / "locks" / f"{safe}.lock"

    def acquire() -> int:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise ThreadBusyError(
                f"thread {thread_id!r} is busy: another hermes process is running a turn on it. "
                "Wait for it to finish, or use another --thread.") from None
        return fd

    fd = await asyncio.to_thread(acquire)
    try:
        yield
    finally:
        os.close(fd)  # closing releases the lock


async def ainput(prompt: str) -> str:
    """``input()`` on a daemon thread: Ctrl-C ends the program at once (a worker thread of
    ``asyncio.to_thread`` would keep it alive until a line arrives). Raises EOFError."""
    loop = asyncio.get_running_loop()
    future: asyncio.Future[str] = loop.create_future()

    def read() -> None:
        try:
            line = input(prompt)
            if not sys.stdin.isatty():
                print(line)  # piped input: keep the transcript readable
            loop.call_soon_threadsafe(lambda: future.done() or future.set_result(line))
        except BaseException as exc:  # noqa: BLE001 - EOFError, KeyboardInterrupt: handed over
            # bind now: the name `exc` is deleted when the except block ends
            loop.call_soon_threadsafe(lambda error=exc: future.done() or future.set_exception(error))

    threading.Thread(target=read, daemon=True, name="hermes-input").start()
    return await future


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


def checkpoints_path(data_dir: str | Path) -> Path:
    """The SQLite checkpoint file of a data directory: ``<data_dir>/checkpoints.sqlite``."""
    return Path(data_dir) / "checkpoints.sqlite"


def print_recovery(report: RecoveryReport, quiet: bool = False) -> None:
    """Tell the user that a thread was rebuilt from its mirror (stderr when output is JSON)."""
    target = err_console if quiet else console
    target.print(Panel(report.notice(), title="thread recovered from its mirror", border_style="yellow"),
                 highlight=False)


async def _mirror_head(agent: Any, mirror: ThreadMirror, thread_id: str, op: str, quiet: bool) -> None:
    """Dual write: append the thread's active branch to its plain-text mirror. A failure here
    never fails the turn (the checkpoint is the primary record); the user is warned."""
    try:
        snap = await agent.aget_state({"configurable": {"thread_id": thread_id}})
        if snap.created_at is None:
            return
        await mirror.append_turn(thread_id, list(snap.values.get("messages") or []),
                                 checkpoint_id=snap.config["configurable"].get("checkpoint_id"), op=op)
    except Exception as exc:  # noqa: BLE001 - reported, the turn itself succeeded or failed on its own
        (err_console if quiet else console).print(
            f"[yellow]warning:[/yellow] plain-text mirror not written ({type(exc).__name__}: {exc})")


async def run_turn(
    task: str, context: Context, thread_id: str, quiet: bool = False, callbacks: list | None = None
) -> dict[str, Any]:
    """Run one user turn through the checkpointed graph (SQLite file ``<data_dir>/checkpoints.sqlite``).

    Returns the summary: ``answer``, ``thread_id``, ``checkpoint_id``, ``tools_called``
    ({name: count} this turn), ``tokens_in``/``tokens_out``, ``memory_writes``, ``stop_reason``,
    ``artifacts`` (what the turn's tools produced, e.g. report paths), ``recovery`` (None, or the notice shown when the thread's checkpoint was
    unreadable and the session was rebuilt from its mirror, ``graph.recovery``). ``callbacks``
    are LangChain callback handlers passed to every model call. After the turn the thread's
    active branch is appended to ``<data_dir>/mirror/<thread>.jsonl`` (``graph.mirror``).
    Raises ``graph.recovery.RecoveryError`` if the checkpoint is unreadable and no mirror exists."""
    return await _run_turn(task, context, thread_id, quiet=quiet, callbacks=callbacks)


async def _run_turn(
    task: str, context: Context, thread_id: str, *, quiet: bool = False, callbacks: list | None = None,
    checkpoint_id: str | None = None, op: str = "turn", resume: Any = None,
) -> dict[str, Any]:
    """``run_turn``, optionally starting from an earlier ``checkpoint_id`` of the thread (a fork:
    LangGraph continues from that checkpoint's config and the run becomes a new branch)."""
    data_dir = Path(context.data_dir)
    await asyncio.to_thread(data_dir.mkdir, parents=True, exist_ok=True)
    mirror = ThreadMirror(data_dir)
    recovery: RecoveryReport | None = None
    async with thread_lock(data_dir, thread_id), open_checkpointer(checkpoints_path(data_dir)) as saver:
        agent = make_graph(checkpointer=saver)
        if thread_id:
            recovery = await ensure_readable(agent, mirror, thread_id)
            if recovery is not None:
                print_recovery(recovery, quiet)
        config: dict[str, Any] = {"configurable": {"thread_id": thread_id}}
        if checkpoint_id:
            config["configurable"]["checkpoint_id"] = checkpoint_id
        if callbacks:
            config["callbacks"] = callbacks
        current = await agent.aget_state(config)
        if resume is not None and not current.interrupts:
            raise NothingToResumeError(
                f"thread {thread_id!r} is not waiting for an answer"
                + (" (no such thread)" if current.created_at is None else "")
                + "; start a new turn with: hermes run \"<task>\" --thread " + thread_id)
        before = current.values.get("metrics", {}) if thread_id else {}
        graph_input: Any = Command(resume=resume) if resume is not None else {"messages": [HumanMessage(task)]}
        try:
            while True:
                async for chunk in agent.astream(graph_input, config, context=context, stream_mode="updates"):
                    for node, update in chunk.items():
                        if not quiet and not node.startswith("__"):
                            console.print(f"[cyan]▸ {node}[/cyan] {describe_update(node, update)}", highlight=False)
                snapshot = await agent.aget_state({"configurable": {"thread_id": thread_id}})
                question = snapshot.interrupts[0].value if snapshot.interrupts else None
                if question is None:
                    break
                text = question.get("question") if isinstance(question, dict) else str(question)
                if quiet or not sys.stdin.isatty():
                    break  # nobody to ask here: the summary carries the question (exit 3)
                console.print(f"[bold yellow]? {text}[/bold yellow]")
                graph_input = Command(resume=await ainput("answer> "))
                config = {k: v for k, v in config.items() if k != "configurable"} | {
                    "configurable": {"thread_id": thread_id}}
        finally:
            await drain_background()  # the node's own mirror write lands first, then the head
            await _mirror_head(agent, mirror, thread_id, op, quiet)
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
        "artifacts": values.get("artifacts") or [],
        "recovery": recovery.notice() if recovery else None,
        "question": text if question is not None else None,
    }


def print_summary(summary: dict[str, Any]) -> None:
    style = "yellow" if summary["stop_reason"] else "green"
    console.print(Panel(str(summary["answer"]) or "(no answer)", title="Hermes", border_style=style))
    table = Table(show_header=False, box=None)
    for key in ("thread_id", "checkpoint_id", "tools_called", "tokens_in", "tokens_out",
                "memory_writes", "stop_reason", "artifacts"):
        table.add_row(key, str(summary[key] if summary[key] not in (None, {}, []) else "—"))
    console.print(table)
    if summary.get("question"):
        console.print(f"[bold yellow]The agent is waiting for an answer:[/bold yellow] {summary['question']}\n"
                      f"Answer with: hermes resume --thread {summary['thread_id']} \"<answer>\"")


async def _guarded(coro_factory, context: Context | None = None, thread_id: str = "", json_out: bool = False) -> int:
    """Run ``coro_factory()``; map failures to an exit code and a message that says what to do
    (as JSON on stdout with ``--json``). Always closes MCP sessions and the embedded server."""
    code, message = 0, ""
    try:
        await coro_factory()
    except ModelUnavailableError as exc:
        code, message = 2, f"model unavailable: {exc}"
    except (ThreadBusyError, NothingToResumeError) as exc:
        code, message = 1, str(exc)
    except sqlite3.DatabaseError as exc:
        db = checkpoints_path(context.data_dir) if context else "checkpoints.sqlite"
        code, message = 1, (
            f"the checkpoint database {db} cannot be used ({exc}). Move it aside "
            f"(mv {db} {db}.broken) and rerun with the same --thread: the session is rebuilt from "
            "its plain-text mirror in the data directory's mirror/ folder.")
    except asyncio.CancelledError:
        raise
    except Exception as exc:  # a clear message instead of a traceback; details with HERMES_DEBUG=1
        if os.environ.get("HERMES_DEBUG"):
            raise
        code, message = 1, (f"{type(exc).__name__}: {exc}\nThe thread's checkpoints are kept"
                            + (f" (--thread {thread_id})" if thread_id else "")
                            + "; rerun with HERMES_DEBUG=1 for a traceback.")
    finally:
        await aclose_resources()
        await astop_embedded_server()
    if code:
        if json_out:
            print(json.dumps({"error": message, "exit_code": code, "thread_id": thread_id or None}))
        else:
            err_console.print(f"[red]error:[/red] {message}", highlight=False)
    return code


def _run_sync(main, thread_id: str = "") -> int:
    """``asyncio.run(main)``; Ctrl-C ends with exit 130 and says how to continue."""
    try:
        return asyncio.run(main)
    except KeyboardInterrupt:
        err_console.print("[yellow]interrupted; the last checkpoint is kept[/yellow]"
                          + (f" — continue with --thread {thread_id}" if thread_id else ""))
        return 130


def _context_or_exit(*args: Any) -> Context:
    try:
        return _context(*args)
    except ValueError as exc:  # a bad HERMES_* value
        err_console.print(f"[red]error:[/red] {exc}")
        raise typer.Exit(1) from None


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
    if not task.strip():
        err_console.print("[red]error:[/red] the task is empty: say what Hermes should do")
        raise typer.Exit(1)
    context = _context_or_exit(model, base_url, data_dir, max_tool_rounds)
    thread_id = thread or f"run-{uuid.uuid4().hex[:8]}"
    result: dict[str, Any] = {}
    if not json_out:
        console.print(f"[dim]thread {thread_id}[/dim]")

    async def go() -> None:
        result.update(await run_turn(task, context, thread_id, quiet=json_out))

    code = _run_sync(_guarded(go, context, thread_id, json_out), thread_id)
    _finish(result, json_out, code)


def _finish(result: dict[str, Any], json_out: bool, code: int) -> None:
    if result:
        if json_out:
            print(json.dumps(result, ensure_ascii=False, default=str))
        else:
            print_summary(result)
        if result.get("question") and not code:
            code = EXIT_ASKED
    raise typer.Exit(code)


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
    context = _context_or_exit(model, base_url, data_dir, None)
    result: dict[str, Any] = {}

    async def go() -> None:
        result.update(await _run_turn("", context, thread, quiet=json_out, resume=answer, op="resume"))

    code = _run_sync(_guarded(go, context, thread, json_out), thread)
    _finish(result, json_out, code)


@app.command()
def chat(
    thread: str = typer.Option("", help="Thread id (session) to continue; new if empty."),
    model: str = typer.Option(None, help="Model name ('embedded' = bundled llama.cpp)."),
    base_url: str = typer.Option(None, help="OpenAI-compatible endpoint URL."),
    data_dir: str = typer.Option(None, help="Data directory."),
) -> None:
    """Interactive session on one thread; an empty line or Ctrl-D ends it."""
    context = _context_or_exit(model, base_url, data_dir, None)
    thread_id = thread or f"chat-{uuid.uuid4().hex[:8]}"
    console.print(f"thread {thread_id} — empty line to quit")

    async def go() -> None:
        while True:
            try:
                task = await ainput("you> ")
            except EOFError:
                return
            if not task.strip():
                return
            print_summary(await run_turn(task, context, thread_id))

    raise typer.Exit(_run_sync(_guarded(go, context, thread_id), thread_id))


# --- sessions and branches ------------------------------------------------------------------

def _data_dir(data_dir: str | None) -> Path:
    return Path(_context(None, None, data_dir, None).data_dir)


def _require_db(data_dir: Path) -> Path:
    path = checkpoints_path(data_dir)
    if not path.exists():
        console.print(f"[red]error:[/red] no checkpoints at {path} (wrong --data-dir, or no run yet)")
        raise typer.Exit(1)
    return path


def _run_command(coro_factory) -> None:
    """Run a branch/session command: clear messages for expected errors, exit code 1."""
    async def go() -> int:
        try:
            await coro_factory()
            return 0
        except (BranchError, LookupError) as exc:
            console.print(f"[red]error:[/red] {exc}")
            return 1
    code = asyncio.run(go())
    if code:
        raise typer.Exit(code)


class _Open:
    """``async with _Open(data_dir) as (agent, branches):`` the SQLite-checkpointed agent graph."""

    def __init__(self, data_dir: Path) -> None:
        self.data_dir = data_dir
        self._cm = open_checkpointer(checkpoints_path(data_dir))

    async def __aenter__(self):
        saver = await self._cm.__aenter__()
        agent = make_graph(checkpointer=saver)
        return agent, Branches(agent, mirror=ThreadMirror(self.data_dir))

    async def __aexit__(self, *exc: Any) -> None:
        await self._cm.__aexit__(*exc)


def _node_label(tree: BranchTree, node: CheckpointNode) -> str:
    marks = []
    if node.checkpoint_id == tree.active:
        marks.append("[bold green]● ACTIVE[/bold green]")
    elif node.checkpoint_id in tree.heads:
        marks.append("[cyan]○ head[/cyan]")
    if not node.readable:
        marks.append(f"[red]UNREADABLE ({node.error})[/red]")
    nxt = f" → {','.join(node.next)}" if node.next else ""
    source = node.node
    if source in ("rollback", "switch", "recovered"):
        source = f"[magenta]{source}[/magenta]"
    text = preview_markup(node.preview)
    return (f"[bold]{node.short_id}[/bold] step {node.step:>3} {source}{nxt}  [dim]{text}[/dim] "
            + " ".join(marks)).rstrip()


def preview_markup(text: str) -> str:
    from rich.markup import escape

    return escape(text)


def _compact_keep(tree: BranchTree, node: CheckpointNode) -> bool:
    """Checkpoints worth a line in ``--compact``: inputs, turn ends, heads, fork points, roots,
    Hermes operations, unreadable ones."""
    return (node.source == "input" or not node.next or len(node.children) != 1
            or node.parent_id not in tree.nodes or node.node in ("rollback", "switch", "recovered", "copy")
            or not node.readable or node.checkpoint_id == tree.active)


def render_tree(tree: BranchTree, compact: bool = False):
    """A rich Tree of the thread's checkpoints: a linear run of checkpoints stays on one level,
    each fork opens one nested level per branch (oldest branch first)."""
    from rich.tree import Tree

    root = Tree(f"thread [bold]{tree.thread_id}[/bold] — {len(tree)} checkpoints, {len(tree.heads)} "
                f"branch{'es' if len(tree.heads) != 1 else ''}, active head "
                f"[green]{short_id(tree.active)}[/green]")

    def add_chain(parent, cid: str, nested: bool) -> None:
        # a branch (nested) hangs under its first checkpoint; a root chain stays flat
        container, shown = parent, None
        while True:
            node = tree.nodes[cid]
            if not compact or _compact_keep(tree, node):
                shown = container.add(_node_label(tree, node))
                if nested and container is parent:
                    container = shown
            kids = node.children
            if len(kids) == 1:
                cid = kids[0]
                continue
            for kid in kids:
                add_chain(shown if shown is not None else container, kid, True)
            return

    for r in tree.roots:
        add_chain(root, r, False)
    return root


@branch_app.command("list")
def branch_list(
    thread: str = typer.Argument(..., help="Thread id."),
    data_dir: str = typer.Option(None, help="Data directory (default .hermes or HERMES_DATA_DIR)."),
    json_out: bool = typer.Option(False, "--json", help="Print the heads as JSON."),
) -> None:
    """List the branches (heads = leaf checkpoints) of a thread; ● marks the active head."""
    path_dir = _data_dir(data_dir)
    _require_db(path_dir)

    async def go() -> None:
        async with _Open(path_dir) as (_, branches):
            tree = await branches.branch_tree(thread)
        if not tree.nodes:
            raise LookupError(f"no checkpoints for thread {thread!r} in {checkpoints_path(path_dir)}")
        rows = []
        for head in reversed(tree.heads):
            node = tree.nodes[head]
            point = tree.fork_point(head)
            rows.append({"head": head, "active": head == tree.active, "step": node.step,
                         "created_at": node.created_at, "messages": node.messages,
                         "fork_point": point, "branch_checkpoints": tree.branch_length(head),
                         "last_message": node.preview, "readable": node.readable})
        if json_out:
            print(json.dumps({"thread_id": thread, "active": tree.active, "checkpoints": len(tree),
                              "heads": rows}, ensure_ascii=False, default=str))
            return
        table = Table(title=f"thread {thread}: {len(tree.heads)} branch(es), {len(tree)} checkpoints")
        for col in ("", "head", "step", "created", "msgs", "forks from", "last message"):
            table.add_column(col)
        for row in rows:
            table.add_row("●" if row["active"] else "", short_id(row["head"]), str(row["step"]),
                          str(row["created_at"] or "")[:19], str(row["messages"]),
                          "—" if row["active"] else (short_id(row["fork_point"]) or "(separate root)"),
                          preview_markup(row["last_message"]))
        console.print(table)

    _run_command(go)


@branch_app.command("show")
def branch_show(
    thread: str = typer.Argument(..., help="Thread id."),
    checkpoint: str = typer.Argument(None, help="A checkpoint to show in detail (any unique part of its id)."),
    data_dir: str = typer.Option(None, help="Data directory."),
    compact: bool = typer.Option(False, help="Only turn boundaries, forks, heads and branch operations."),
    last: int = typer.Option(8, help="Messages to show for a checkpoint."),
) -> None:
    """Show a thread's checkpoint tree (parent links, heads, the active head), or one checkpoint."""
    path_dir = _data_dir(data_dir)
    _require_db(path_dir)

    async def go() -> None:
        async with _Open(path_dir) as (agent, branches):
            tree = await branches.branch_tree(thread)
            if not tree.nodes:
                raise LookupError(f"no checkpoints for thread {thread!r} in {checkpoints_path(path_dir)}")
            if not checkpoint:
                console.print(render_tree(tree, compact=compact), highlight=False)
                return
            cid = tree.resolve(checkpoint)
            node = tree.nodes[cid]
            snap = await agent.aget_state(Branches.config(thread, cid)) if node.readable else None
        info = Table(show_header=False, box=None)
        info.add_row("checkpoint", cid)
        info.add_row("parent", node.parent_id or "—")
        info.add_row("children", ", ".join(short_id(c) for c in node.children) or "— (a head)")
        info.add_row("step / source", f"{node.step} / {node.source} ({node.node})")
        info.add_row("next", ", ".join(node.next) or "— (turn finished)")
        info.add_row("created", str(node.created_at or "—"))
        info.add_row("on active branch", "yes" if tree.active and tree.is_ancestor(cid, tree.active) else "no")
        console.print(Panel(info, title=f"checkpoint {short_id(cid)}"))
        if snap is not None:
            _print_messages(list(snap.values.get("messages") or [])[-last:])

    _run_command(go)


def _print_messages(messages: list[Any]) -> None:
    table = Table(title="last messages", show_lines=False)
    table.add_column("role")
    table.add_column("content")
    for m in messages:
        table.add_row(m.type + (f" ({m.name})" if m.name else ""), preview_markup(preview(m, 200).split(": ", 1)[-1]))
    console.print(table)


def _print_op(op) -> None:
    if op.mechanism == "none":
        console.print(f"{op.op}: {short_id(op.target)} is already the active head; nothing changed")
        return
    console.print(f"[green]{op.op}[/green]: active head is now [bold]{short_id(op.head)}[/bold] "
                  f"(same state as {short_id(op.target)}; full id {op.head})")


@branch_app.command("rollback")
def branch_rollback(
    thread: str = typer.Argument(..., help="Thread id."),
    checkpoint: str = typer.Argument(..., help="Earlier checkpoint on the active branch (unique part of its id)."),
    data_dir: str = typer.Option(None, help="Data directory."),
) -> None:
    """Make an earlier checkpoint the active head; the abandoned steps stay as a branch."""
    path_dir = _data_dir(data_dir)
    _require_db(path_dir)

    async def go() -> None:
        async with _Open(path_dir) as (_, branches):
            before = await branches.branch_tree(thread)
            op = await branches.rollback(thread, checkpoint)
        _print_op(op)
        if op.mechanism != "none" and before.active:
            console.print(f"the previous head {short_id(before.active)} stays as a branch: "
                          f"`hermes branch switch {thread} {short_id(before.active)}` returns to it")

    _run_command(go)


@branch_app.command("switch")
def branch_switch(
    thread: str = typer.Argument(..., help="Thread id."),
    head: str = typer.Argument(..., help="Head checkpoint of another branch (see `hermes branch list`)."),
    data_dir: str = typer.Option(None, help="Data directory."),
) -> None:
    """Make another branch's head the active head."""
    path_dir = _data_dir(data_dir)
    _require_db(path_dir)

    async def go() -> None:
        async with _Open(path_dir) as (_, branches):
            op = await branches.switch(thread, head)
        _print_op(op)

    _run_command(go)


@branch_app.command("fork")
def branch_fork(
    thread: str = typer.Argument(..., help="Thread id."),
    checkpoint: str = typer.Argument(..., help="Checkpoint to continue from (unique part of its id)."),
    task: str = typer.Argument(..., help="The new user message for the new branch."),
    model: str = typer.Option(None, help="Model name ('embedded' = bundled llama.cpp)."),
    base_url: str = typer.Option(None, help="OpenAI-compatible endpoint URL."),
    data_dir: str = typer.Option(None, help="Data directory."),
    max_tool_rounds: int = typer.Option(None, help="Cap on tool rounds for this goal."),
    json_out: bool = typer.Option(False, "--json", help="Print the summary as JSON only."),
) -> None:
    """Continue from an earlier checkpoint with a new message, as a new branch (it becomes active)."""
    context = _context(model, base_url, data_dir, max_tool_rounds)
    path_dir = Path(context.data_dir)
    _require_db(path_dir)
    result: dict[str, Any] = {}

    async def go() -> None:
        async with _Open(path_dir) as (_, branches):
            base = await branches.fork_base(thread, checkpoint)
            start = (await branches.resume_config(thread, base))["configurable"].get("checkpoint_id")
        if not json_out:
            console.print(f"forking thread {thread} at {short_id(base)}"
                          + ("" if start else " (the active head: an ordinary turn)"))
        result.update(await _run_turn(task, context, thread, quiet=json_out, checkpoint_id=start, op="fork"))
        result["forked_from"] = base

    code = asyncio.run(_guarded(go))
    if result:
        if json_out:
            print(json.dumps(result, ensure_ascii=False, default=str))
        else:
            print_summary(result)
    raise typer.Exit(code)


def _flat_metrics(metrics: dict[str, Any], prefix: str = "") -> list[tuple[str, str]]:
    rows: list[tuple[str, str]] = []
    for key in sorted(metrics):
        value = metrics[key]
        if isinstance(value, dict):
            rows.extend(_flat_metrics(value, f"{prefix}{key}.") or [(f"{prefix}{key}", "—")])
        else:
            rows.append((f"{prefix}{key}", f"{value:.3f}" if isinstance(value, float) else str(value)))
    return rows


@session_app.command("show")
def session_show(
    thread: str = typer.Argument(..., help="Thread id."),
    data_dir: str = typer.Option(None, help="Data directory (default .hermes or HERMES_DATA_DIR)."),
    last: int = typer.Option(6, help="How many of the last messages to show."),
    json_out: bool = typer.Option(False, "--json", help="Print the workbench as JSON."),
) -> None:
    """The workbench state of a thread's active head: goal, intent, derived state, metrics,
    stop reason, branches and the last messages."""
    path_dir = _data_dir(data_dir)
    _require_db(path_dir)

    async def go() -> None:
        mirror = ThreadMirror(path_dir)
        async with _Open(path_dir) as (agent, branches):
            snap, error = await probe(agent, thread)
            if error is not None:
                mirrored = await mirror.read(thread)
                console.print(f"[red]the active checkpoint of {thread!r} cannot be read[/red] "
                              f"({type(error).__name__}: {str(error)[:160]})")
                if mirrored.messages:
                    console.print(f"its plain-text mirror {mirrored.path} holds {len(mirrored.messages)} messages; "
                                  f"`hermes run --thread {thread} \"...\"` rebuilds the session from it")
                    _print_messages(mirrored.messages[-last:])
                else:
                    console.print(f"and it has no mirror at {mirrored.path}")
                raise typer.Exit(1)
            if snap is None or snap.created_at is None:
                raise LookupError(f"no checkpoints for thread {thread!r} in {checkpoints_path(path_dir)}")
            tree = await branches.branch_tree(thread)
        values = snap.values
        messages = list(values.get("messages") or [])
        workbench = {k: v for k, v in values.items() if k not in ("messages", "window", "system_prompt")}
        if json_out:
            print(json.dumps({"thread_id": thread, "checkpoint_id": snap.config["configurable"]["checkpoint_id"],
                              "next": list(snap.next), "branches": len(tree.heads), "checkpoints": len(tree),
                              "messages": len(messages), **workbench,
                              "last_messages": [{"role": m.type, "name": m.name, "content": m.content}
                                                for m in messages[-last:]]},
                             ensure_ascii=False, default=str))
            return
        state = Table(show_header=False, box=None)
        state.add_row("goal", preview_markup(str(values.get("goal") or "—")))
        state.add_row("intent", str(values.get("intent") or "—"))
        stop = values.get("stop_reason")
        state.add_row("stop reason", f"[yellow]{preview_markup(stop)}[/yellow]" if stop else "— (not stopped)")
        for key in ("pending_actions", "references", "blocked_tools"):
            state.add_row(key.replace("_", " "), preview_markup(", ".join(map(str, values.get(key) or [])) or "—"))
        state.add_row("tool rounds", str(values.get("tool_rounds", 0)))
        state.add_row("goal distance", str(values.get("goal_distance") if values.get("goal_distance") is not None else "—"))
        if values.get("progress_note"):
            state.add_row("progress note", preview_markup(str(values["progress_note"])[:200]))
        state.add_row("artifacts", ", ".join(values.get("artifacts") or []) or "—")
        state.add_row("memories in prompt", str(len(values.get("memory_context") or [])))
        extra = [k for k in workbench if k not in {
            "goal", "intent", "stop_reason", "pending_actions", "references", "blocked_tools", "tool_rounds",
            "goal_distance", "progress_note", "artifacts", "memory_context", "metrics", "pending_results",
            "must_call_tool", "stalled_rounds"}]
        for key in extra:  # fields other modules add to the workbench later
            state.add_row(key.replace("_", " "), preview_markup(json.dumps(workbench[key], ensure_ascii=False, default=str)[:200]))
        console.print(Panel(state, title=f"session {thread} — workbench", border_style="cyan"))
        metrics = Table(title="metrics (cumulative per thread)", show_header=False)
        for key, value in _flat_metrics(values.get("metrics") or {}):
            metrics.add_row(key, value)
        console.print(metrics)
        console.print(f"head [bold]{short_id(snap.config['configurable']['checkpoint_id'])}[/bold] "
                      f"step {snap.metadata.get('step')}, next: {', '.join(snap.next) or '— (turn finished)'}; "
                      f"{len(tree)} checkpoints, {len(tree.heads)} branch(es) — `hermes branch show {thread}`",
                      highlight=False)
        _print_messages(messages[-last:])

    _run_command(go)


if __name__ == "__main__":
    app()


# --- tools ------------------------------------------------------------------------------------

def _with_toolbox(data_dir: str | None, mcp_config: str | None, use) -> int:
    """Open the toolbox of ``data_dir`` (builtin tools + MCP servers), call ``use(toolbox)``,
    close it; returns the exit code of ``_guarded``."""
    from tools.toolbox import Toolbox

    context = _context_or_exit(None, None, data_dir, None)
    config = mcp_config or context.mcp_config

    async def go() -> None:
        toolbox = await Toolbox.open(Path(context.data_dir), Path(config) if config else None,
                                     timeout_s=context.tool_timeout_s)
        try:
            use(toolbox)
        finally:
            await toolbox.aclose()

    return _run_sync(_guarded(go, context))


_DATA_DIR_OPT = typer.Option(None, help="Data directory.")
_MCP_OPT = typer.Option(None, help="mcpServers JSON (default: HERMES_MCP_CONFIG or the bundled team chat).")


@tools_app.command("list")
def tools_list(data_dir: str = _DATA_DIR_OPT, mcp_config: str = _MCP_OPT) -> None:
    """Every registered tool: name, source, timeout, side effect, description."""
    def show(toolbox) -> None:
        table = Table("name", "source", "timeout s", "side effect", "description")
        for spec in toolbox.registry.specs():
            table.add_row(spec.name, spec.source, f"{spec.timeout_s:g}", "yes" if spec.side_effect else "",
                          spec.description[:90] + ("…" if len(spec.description) > 90 else ""))
        console.print(table)
        for where, problem in toolbox.problems.items():
            console.print(f"[yellow]left out[/yellow] {where}: {problem}")

    raise typer.Exit(_with_toolbox(data_dir, mcp_config, show))


@tools_app.command("lint")
def tools_lint(data_dir: str = _DATA_DIR_OPT, mcp_config: str = _MCP_OPT) -> None:
    """Lint every tool definition (tools.spec.lint: naming, descriptions, schemas, required
    fields; duplicates are refused at registration). Exit 1 if any problem is found."""
    from tools.spec import lint

    found: list[str] = []

    def check(toolbox) -> None:
        for spec in toolbox.registry.specs():
            found.extend(f"{spec.name} ({spec.source}): {p}" for p in lint(spec))
        found.extend(f"{where}: {problem}" for where, problem in toolbox.problems.items())

    code = _with_toolbox(data_dir, mcp_config, check)
    for line in found:
        console.print(f"[yellow]•[/yellow] {line}", highlight=False)
    if not code:
        console.print("[green]all tool definitions pass lint[/green]" if not found else f"{len(found)} problem(s)")
    raise typer.Exit(code or (1 if found else 0))


# --- reminders --------------------------------------------------------------------------------

reminders_app = typer.Typer(help="Reminders: list them, see what is due, fire what is due "
                            "(once per period; `hermes serve` keeps checking).", no_args_is_help=True)
app.add_typer(reminders_app, name="reminders")
_NOW_OPT = typer.Option(None, "--now", help="The clock, ISO-8601 (e.g. 2026-12-01T09:30; naive = local "
                        "time). Default: now.")


def _parse_now_or_exit(value: str | None):
    import datetime as dt

    if not value:
        return dt.datetime.now().astimezone()  # the command's clock, read once here
    try:
        return dt.datetime.fromisoformat(value)
    except ValueError:
        err_console.print(f"[red]error:[/red] --now must be ISO-8601 (e.g. 2026-12-01T09:30:00), got {value!r}")
        raise typer.Exit(1) from None


async def fire_reminder_action(due, context: Context, verbose: bool = False) -> dict[str, Any]:
    """What firing means from the CLI: a "tool" action calls the tool through the toolbox's
    registry (request id ``reminder:<id>:<period>``: the ledger replays a repeat); a "task"
    action runs the agent turn on the action's thread (default ``reminder-<id>``) with
    :func:`run_turn` (checkpoints, mirror, per-thread lock)."""
    from graph.resources import get_toolbox
    from tools.scheduler import call_tool_action

    if due.action["kind"] == "tool":
        return await call_tool_action((await get_toolbox(context)).registry, due)
    summary = await run_turn(due.action.get("task") or due.text, context, due.thread_id, quiet=not verbose)
    detail = f"turn ran on thread {due.thread_id}"
    if summary.get("question"):
        detail += f"; it is waiting for an answer: hermes resume --thread {due.thread_id} \"<answer>\""
    elif summary.get("stop_reason"):
        detail += f"; stopped: {summary['stop_reason']}"
    else:
        detail += f": {str(summary.get('answer') or '')[:160]}"
    return {"ok": True, "detail": detail, "thread_id": due.thread_id, "answer": summary.get("answer"),
            "question": summary.get("question"), "stop_reason": summary.get("stop_reason"),
            "checkpoint_id": summary.get("checkpoint_id"), "tools_called": summary.get("tools_called")}


def _print_firings(firings: list, now) -> None:
    for f in firings:
        d = f.due
        what = f"tool {d.action['tool']}" if d.action["kind"] == "tool" else f"task on thread {d.thread_id}"
        head = preview_markup(f"reminder {d.reminder_id} ({d.text[:60]}) for {d.period} [{what}]")
        if f.status == "fired":
            console.print(f"[green]fired[/green] {head}: {preview_markup(f.detail)}", highlight=False)
        elif f.status == "failed":
            console.print(f"[red]failed[/red] {head}: {preview_markup(f.detail)} — "
                          + ("retried at the next check" if f.will_retry else "given up for this period"),
                          highlight=False)
        else:
            console.print(f"[yellow]skipped[/yellow] {head}: {preview_markup(f.detail)}", highlight=False)
        if d.skipped_periods and f.status != "skipped":
            console.print(f"  caught up once: missed {', '.join(d.skipped_periods)} skipped "
                          f"(not fired separately)", highlight=False)
        if d.adjustment:
            console.print(f"  adjustment: {preview_markup(d.adjustment)}", highlight=False)
        if d.attempt > 1:
            console.print(f"  attempt {d.attempt} (same request id {d.request_id})", highlight=False)


def _print_nothing_due(path_dir: Path, now) -> None:
    from tools.scheduler import stored_reminders

    listed = stored_reminders(path_dir)
    upcoming = sorted((r["next_run"], r["id"]) for r in listed)
    console.print(f"nothing due at {now.isoformat(timespec='minutes')} ({len(listed)} reminder(s)"
                  + (f"; next: reminder {upcoming[0][1]} at {upcoming[0][0]}" if upcoming else "") + ")",
                  highlight=False)


@reminders_app.command("list")
def reminders_list(now: str = _NOW_OPT, data_dir: str = _DATA_DIR_OPT,
                   json_out: bool = typer.Option(False, "--json", help="Print JSON.")) -> None:
    """Every reminder: schedule, action, next run (the next period to fire; "overdue" when its
    time has passed: the next check fires it), last fired period and its outcome."""
    import datetime as dt

    from tools.scheduler import firing_history, stored_reminders

    clock = _parse_now_or_exit(now).astimezone()
    path_dir = _data_dir(data_dir)
    if not (path_dir / "reminders.db").exists():
        if json_out:
            print("[]")
        else:
            console.print(f"no reminders in {path_dir}")
        return
    listed = stored_reminders(path_dir)
    last = {}
    for row in firing_history(path_dir):
        last.setdefault(row["reminder_id"], row)
    if json_out:
        print(json.dumps([{**r, "last_firing": last.get(r["id"])} for r in listed], ensure_ascii=False, default=str))
        return
    table = Table("id", "text", "day", "time", "action", "next run", "last fired", "outcome")
    for r in listed:
        a = r["action"]
        action = f"tool {a['tool']}" if a["kind"] == "tool" else f"task ({a.get('thread_id') or 'reminder-' + str(r['id'])})"
        fired = last.get(r["id"])
        overdue = dt.datetime.fromisoformat(r["next_run"]).astimezone() <= clock
        table.add_row(str(r["id"]), preview_markup(r["text"][:50]), str(r["day_of_month"]), r["time"], action,
                      r["next_run"] + (" (overdue)" if overdue else ""), r["last_fired_period"] or "—",
                      f"{fired['state']} ({fired['attempts']} attempt(s))" if fired else "—")
    console.print(table)


@reminders_app.command("due")
def reminders_due(now: str = _NOW_OPT, data_dir: str = _DATA_DIR_OPT,
                  json_out: bool = typer.Option(False, "--json", help="Print JSON.")) -> None:
    """What `hermes reminders run` would fire at --now (nothing is fired)."""
    from dataclasses import asdict

    from tools.scheduler import due_reminders

    clock = _parse_now_or_exit(now)
    path_dir = _data_dir(data_dir)
    due = due_reminders(path_dir, clock) if (path_dir / "reminders.db").exists() else []
    if json_out:
        print(json.dumps([asdict(d) for d in due], ensure_ascii=False, default=str))
        return
    if not due:
        _print_nothing_due(path_dir, clock)
    for d in due:
        console.print(f"due: {preview_markup(d.describe())} (scheduled {d.scheduled_for}, request id {d.request_id})",
                      highlight=False)
        if d.skipped_periods:
            console.print(f"  missed {', '.join(d.skipped_periods)}: caught up by this one firing", highlight=False)
        if d.adjustment:
            console.print(f"  adjustment: {d.adjustment}", highlight=False)


async def _check_once(context: Context, clock, verbose: bool) -> list:
    from tools.scheduler import fire_due

    path_dir = Path(context.data_dir)
    if not await asyncio.to_thread((path_dir / "reminders.db").exists):
        return []
    return await fire_due(path_dir, clock, lambda due: fire_reminder_action(due, context, verbose))


@reminders_app.command("run")
def reminders_run(
    now: str = _NOW_OPT,
    model: str = typer.Option(None, help="Model name for task actions ('embedded' = bundled llama.cpp)."),
    base_url: str = typer.Option(None, help="OpenAI-compatible endpoint URL."),
    data_dir: str = _DATA_DIR_OPT,
    verbose: bool = typer.Option(False, help="Print the agent's progress for task actions."),
    json_out: bool = typer.Option(False, "--json", help="Print the firings as JSON only."),
) -> None:
    """Fire every reminder due at --now, once per period: task actions run an agent turn on
    the reminder's thread, tool actions call the tool. Exit 1 if a firing failed (it is retried
    at the next check, up to 3 attempts)."""
    clock = _parse_now_or_exit(now)
    context = _context_or_exit(model, base_url, data_dir, None)
    firings: list = []

    async def go() -> None:
        firings.extend(await _check_once(context, clock, verbose and not json_out))

    code = _run_sync(_guarded(go, context, json_out=json_out))
    if json_out:
        print(json.dumps({"now": clock.isoformat(), "firings": [f.as_dict() for f in firings]},
                         ensure_ascii=False, default=str))
    else:
        _print_firings(firings, clock)
        if not firings and not code:
            _print_nothing_due(Path(context.data_dir), clock)
    raise typer.Exit(code or (1 if any(f.status == "failed" for f in firings) else 0))


@app.command()
def serve(
    interval: float = typer.Option(60.0, help="Seconds between checks of due reminders."),
    checks: int = typer.Option(0, help="Stop after this many checks (0 = until Ctrl-C)."),
    model: str = typer.Option(None, help="Model name for task actions ('embedded' = bundled llama.cpp)."),
    base_url: str = typer.Option(None, help="OpenAI-compatible endpoint URL."),
    data_dir: str = _DATA_DIR_OPT,
    verbose: bool = typer.Option(False, help="Print the agent's progress for task actions."),
) -> None:
    """Keep firing due reminders: check every --interval seconds until Ctrl-C. Safe beside
    other runners (`hermes reminders run`, the server's `reminders` cron): each period fires once."""
    import datetime as dt

    if interval < 0:
        err_console.print("[red]error:[/red] --interval must be >= 0 seconds")
        raise typer.Exit(1)
    context = _context_or_exit(model, base_url, data_dir, None)

    async def go() -> None:
        console.print(f"hermes serve: checking {Path(context.data_dir) / 'reminders.db'} every {interval:g} s "
                      "(Ctrl-C stops)", highlight=False)
        done = 0
        while True:
            clock = dt.datetime.now().astimezone()  # this check's clock, read once
            firings = await _check_once(context, clock, verbose)
            if firings:
                console.print(f"[dim]{clock.isoformat(timespec='seconds')}[/dim]", highlight=False)
                _print_firings(firings, clock)
            done += 1
            if checks and done >= checks:
                return
            await asyncio.sleep(interval)

    try:
        code = asyncio.run(_guarded(go, context))
    except KeyboardInterrupt:
        console.print("hermes serve stopped (Ctrl-C); what was due has fired or will be retried")
        code = 0
    raise typer.Exit(code)
