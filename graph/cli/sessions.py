"""``hermes session list|show`` and ``hermes branch list|show|rollback|switch|fork``: a thread's
workbench and its checkpoints as a tree (``graph.branches``). Read-only commands never write:
an unreadable checkpoint is reported, not rebuilt."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import typer
from rich.panel import Panel
from rich.table import Table

from graph.cli.common import (
    OpenAgent,
    branch_app,
    context_or_exit,
    guarded,
    read_checkpoints,
    require_db,
    resolve_data_dir,
    run_command,
    run_sync,
    session_app,
)
from graph.cli.render import (
    ConsoleObserver,
    console,
    err_console,
    flat_metrics,
    preview_markup,
    print_messages,
    print_op,
    print_summary,
    print_table,
    render_tree,
)

# The checkpointer, the agent graph and the runner are imported inside each command (`hermes
# --help` and the other commands do not load them). The read-only commands (session list|show,
# branch list|show) read the saver alone (graph.checkpoint_reader): no graph is built.


@branch_app.command("list")
def branch_list(
    thread: str = typer.Argument(..., help="Thread id."),
    data_dir: str = typer.Option(None, help="Data directory (default .hermes or HERMES_DATA_DIR)."),
    json_out: bool = typer.Option(False, "--json", help="Print the heads as JSON."),
) -> None:
    """List the branches (heads = leaf checkpoints) of a thread; ● marks the active head."""
    from graph.checkpoint_tree import short_id

    path_dir = resolve_data_dir(data_dir)
    checkpoints_file = require_db(path_dir)

    async def go() -> None:
        async with read_checkpoints(path_dir) as reader:
            tree = await reader.tree(thread)
        if not tree.nodes:
            raise LookupError(
                f"no checkpoints for thread {thread!r} in {checkpoints_file} (its threads: `hermes session list`)"
            )
        rows: list[dict[str, Any]] = []
        for head in reversed(tree.heads):
            node = tree.nodes[head]
            point = tree.fork_point(head)
            rows.append(
                {
                    "head": head,
                    "active": head == tree.active,
                    "step": node.step,
                    "created_at": node.created_at,
                    "messages": node.messages,
                    "fork_point": point,
                    "branch_checkpoints": tree.branch_length(head),
                    "last_message": node.preview,
                    "readable": node.readable,
                }
            )
        if json_out:
            print(
                json.dumps(
                    {"thread_id": thread, "active": tree.active, "checkpoints": len(tree), "heads": rows},
                    ensure_ascii=False,
                    default=str,
                )
            )
            return
        table = Table(title=f"thread {thread}: {len(tree.heads)} branch(es), {len(tree)} checkpoints")
        for col in ("", "head", "step", "created", "msgs", "forks from", "last message"):
            table.add_column(col)
        for row in rows:
            table.add_row(
                "●" if row["active"] else "",
                short_id(row["head"]),
                str(row["step"]),
                str(row["created_at"] or "")[:19],
                str(row["messages"]),
                "—" if row["active"] else (short_id(row["fork_point"]) or "(separate root)"),
                preview_markup(row["last_message"]),
            )
        print_table(table, key=1)  # narrow: one block per head, "●" beside the active one

    run_command(go, path_dir)


@branch_app.command("show")
def branch_show(
    thread: str = typer.Argument(..., help="Thread id."),
    checkpoint: str = typer.Argument(None, help="A checkpoint to show in detail (any unique part of its id)."),
    data_dir: str = typer.Option(None, help="Data directory."),
    compact: bool = typer.Option(False, help="Only turn boundaries, forks, heads and branch operations."),
    last: int = typer.Option(8, help="Messages to show for a checkpoint."),
) -> None:
    """Show a thread's checkpoint tree (parent links, heads, the active head), or one checkpoint."""
    from graph.checkpoint_tree import short_id

    path_dir = resolve_data_dir(data_dir)
    checkpoints_file = require_db(path_dir)

    async def go() -> None:
        async with read_checkpoints(path_dir) as reader:
            tree = await reader.tree(thread)
            if not tree.nodes:
                raise LookupError(
                    f"no checkpoints for thread {thread!r} in {checkpoints_file} (its threads: `hermes session list`)"
                )
            if not checkpoint:
                console.print(render_tree(tree, compact=compact), highlight=False)
                return
            cid = tree.resolve(checkpoint)
            node = tree.nodes[cid]
            snap = await reader.state(thread, cid) if node.readable else None
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
            print_messages(list(snap.values.get("messages") or [])[-last:])

    run_command(go, path_dir)


@branch_app.command("rollback")
def branch_rollback(
    thread: str = typer.Argument(..., help="Thread id."),
    checkpoint: str = typer.Argument(..., help="Earlier checkpoint on the active branch (unique part of its id)."),
    data_dir: str = typer.Option(None, help="Data directory."),
) -> None:
    """Make an earlier checkpoint the active head; the abandoned steps stay as a branch."""
    from graph.checkpoint_tree import short_id

    path_dir = resolve_data_dir(data_dir)
    require_db(path_dir)

    async def go() -> None:
        async with OpenAgent(path_dir) as (_, branches):
            before = await branches.branch_tree(thread)
            op = await branches.rollback(thread, checkpoint)
        print_op(op)
        if op.mechanism != "none" and before.active:
            console.print(
                f"the previous head {short_id(before.active)} stays as a branch: "
                f"`hermes branch switch {thread} {short_id(before.active)}` returns to it"
            )

    run_command(go, path_dir)


@branch_app.command("switch")
def branch_switch(
    thread: str = typer.Argument(..., help="Thread id."),
    head: str = typer.Argument(..., help="Head checkpoint of another branch (see `hermes branch list`)."),
    data_dir: str = typer.Option(None, help="Data directory."),
) -> None:
    """Make another branch's head the active head."""
    path_dir = resolve_data_dir(data_dir)
    require_db(path_dir)

    async def go() -> None:
        async with OpenAgent(path_dir) as (_, branches):
            op = await branches.switch(thread, head)
        print_op(op)

    run_command(go, path_dir)


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
    from graph.checkpoint_tree import short_id
    from graph.runner import execute_turn

    if not task.strip():
        err_console.print("[red]error:[/red] the message is empty: say what the new branch should do")
        raise typer.Exit(1)
    context = context_or_exit(model, base_url, data_dir, max_tool_rounds)
    path_dir = Path(context.data_dir)
    require_db(path_dir)
    result: dict[str, Any] = {}

    async def go() -> None:
        async with OpenAgent(path_dir) as (_, branches):
            base = await branches.fork_base(thread, checkpoint)
            start = (await branches.resume_config(thread, base))["configurable"].get("checkpoint_id")
        if not json_out:
            console.print(
                f"forking thread {thread} at {short_id(base)}"
                + ("" if start else " (the active head: an ordinary turn)")
            )
        result.update(
            await execute_turn(
                task,
                context,
                thread,
                quiet=json_out,
                checkpoint_id=start,
                op="fork",
                observer=ConsoleObserver(json_out),
            )
        )
        result["forked_from"] = base

    code = run_sync(guarded(go, context, thread, json_out), thread)
    if result:
        if json_out:
            print(json.dumps(result, ensure_ascii=False, default=str))
        else:
            print_summary(result)
    raise typer.Exit(code)


async def probe(reader: Any, thread_id: str) -> tuple[Any, BaseException | None]:
    """``(snapshot, None)`` when the thread's active head loads (``snapshot`` None for an
    unknown thread), ``(None, error)`` when its data cannot be read (as
    ``graph.recovery.probe``: SQLite, connection and OS errors propagate)."""
    import sqlite3

    try:
        return await reader.state(thread_id), None
    except (sqlite3.Error, ConnectionError, OSError):
        raise
    except Exception as exc:  # noqa: BLE001 - reported with the way back
        return None, exc


_SHOWN = {
    "goal",
    "intent",
    "stop_reason",
    "pending_actions",
    "references",
    "blocked_tools",
    "tool_rounds",
    "goal_distance",
    "progress_note",
    "artifacts",
    "memory_context",
    "metrics",
    "pending_results",
    "must_call_tool",
    "stalled_rounds",
}


@session_app.command("list")
def session_list(
    data_dir: str = typer.Option(None, help="Data directory (default .hermes or HERMES_DATA_DIR)."),
    limit: int = typer.Option(50, min=1, help="At most this many threads, most recent first."),
    json_out: bool = typer.Option(False, "--json", help="Print the threads as JSON lines."),
) -> None:
    """The threads of the data directory, most recently updated first: id, checkpoints, last
    update, goal, stop reason (`hermes session show THREAD` for one)."""
    path_dir = resolve_data_dir(data_dir)
    checkpoints_file = require_db(path_dir)

    async def go() -> None:
        async with read_checkpoints(path_dir) as reader:
            threads = await reader.threads(limit)
        if json_out:
            for t in threads:
                print(json.dumps(dataclasses.asdict(t), ensure_ascii=False))
            return
        if not threads:
            console.print(f"no threads in {checkpoints_file}")
            return
        table = Table("thread", "checkpoints", "updated (UTC)", "goal", "stop reason")
        for t in threads:
            table.add_row(
                t.thread_id,
                str(t.checkpoints),
                (t.updated_at or "—")[:19],
                preview_markup(t.goal[:60] or "—"),
                f"[red]unreadable: {preview_markup(t.error[:60])}[/red]"
                if t.error
                else preview_markup(t.stop_reason[:50] or "—"),
            )
        print_table(table)

    run_command(go, path_dir)


@session_app.command("show")
def session_show(
    thread: str = typer.Argument(..., help="Thread id."),
    data_dir: str = typer.Option(None, help="Data directory (default .hermes or HERMES_DATA_DIR)."),
    last: int = typer.Option(6, help="How many of the last messages to show."),
    json_out: bool = typer.Option(False, "--json", help="Print the workbench as JSON."),
) -> None:
    """The workbench state of a thread's active head: goal, intent, derived state, metrics,
    stop reason, branches and the last messages."""
    from graph.checkpoint_tree import short_id
    from graph.mirror import ThreadMirror

    path_dir = resolve_data_dir(data_dir)
    checkpoints_file = require_db(path_dir)

    async def go() -> None:
        mirror = ThreadMirror(path_dir)
        async with read_checkpoints(path_dir) as reader:
            snap, error = await probe(reader, thread)
            if error is not None:
                mirrored = await mirror.read(thread)
                console.print(
                    f"[red]the active checkpoint of {thread!r} cannot be read[/red] "
                    f"({type(error).__name__}: {str(error)[:160]})"
                )
                if mirrored.messages:
                    console.print(
                        f"its plain-text mirror {mirrored.path} holds {len(mirrored.messages)} messages; "
                        f'`hermes run --thread {thread} "..."` rebuilds the session from it'
                    )
                    print_messages(mirrored.messages[-last:])
                else:
                    console.print(f"and it has no mirror at {mirrored.path}")
                raise typer.Exit(1)
            if snap is None:
                raise LookupError(
                    f"no checkpoints for thread {thread!r} in {checkpoints_file} (its threads: `hermes session list`)"
                )
            checkpoints, heads = await reader.counts(thread)
        values = snap.values
        messages = list(values.get("messages") or [])
        workbench = {k: v for k, v in values.items() if k not in ("messages", "window", "system_prompt")}
        if json_out:
            print(
                json.dumps(
                    {
                        "thread_id": thread,
                        "checkpoint_id": snap.checkpoint_id,
                        "next": list(snap.next),
                        "branches": heads,
                        "checkpoints": checkpoints,
                        "messages": len(messages),
                        **workbench,
                        "last_messages": [
                            {"role": m.type, "name": m.name, "content": m.content} for m in messages[-last:]
                        ],
                    },
                    ensure_ascii=False,
                    default=str,
                )
            )
            return
        state = Table(show_header=False, box=None)
        state.add_row("goal", preview_markup(str(values.get("goal") or "—")))
        state.add_row("intent", str(values.get("intent") or "—"))
        stop = values.get("stop_reason")
        state.add_row("stop reason", f"[yellow]{preview_markup(stop)}[/yellow]" if stop else "— (not stopped)")
        for key in ("pending_actions", "references", "blocked_tools"):
            state.add_row(key.replace("_", " "), preview_markup(", ".join(map(str, values.get(key) or [])) or "—"))
        state.add_row("tool rounds", str(values.get("tool_rounds", 0)))
        distance = values.get("goal_distance")
        state.add_row("goal distance", str(distance if distance is not None else "—"))
        if values.get("progress_note"):
            state.add_row("progress note", preview_markup(str(values["progress_note"])[:200]))
        state.add_row("artifacts", ", ".join(values.get("artifacts") or []) or "—")
        state.add_row("memories in prompt", str(len(values.get("memory_context") or [])))
        for key in [k for k in workbench if k not in _SHOWN]:  # fields other modules add to the workbench later
            state.add_row(
                key.replace("_", " "),
                preview_markup(json.dumps(workbench[key], ensure_ascii=False, default=str)[:200]),
            )
        console.print(Panel(state, title=f"session {thread} — workbench", border_style="cyan"))
        metrics = Table(title="metrics (cumulative per thread)", show_header=False)
        for key, value in flat_metrics(values.get("metrics") or {}):
            metrics.add_row(key, value)
        console.print(metrics)
        step = snap.metadata.get("step")
        console.print(
            f"head [bold]{short_id(snap.checkpoint_id)}[/bold] "
            f"step {step}, next: {', '.join(snap.next) or '— (turn finished)'}; "
            f"{checkpoints} checkpoints, {heads} branch(es) — `hermes branch show {thread}`",
            highlight=False,
        )
        print_messages(messages[-last:])

    run_command(go, path_dir)
