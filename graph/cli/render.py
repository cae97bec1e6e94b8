"""What the ``hermes`` command prints (rich): progress lines, summaries, recovery notices, the
checkpoint tree, messages, reminder firings — and :class:`ConsoleObserver`, through which a
turn run by ``graph.runner`` reaches the terminal. No command logic here."""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.markup import escape
from rich.measure import Measurement
from rich.padding import Padding
from rich.panel import Panel
from rich.status import Status
from rich.table import Table
from rich.tree import Tree

if TYPE_CHECKING:  # the commands that print these have loaded them; `hermes --help` need not
    from langchain_core.messages import AnyMessage

    from graph.branches import BranchOp
    from graph.checkpoint_tree import BranchTree, CheckpointNode
    from graph.recovery import RecoveryReport

console = Console()
err_console = Console(stderr=True)


def print_table(table: Table, key: int = 0, target: Console | None = None) -> None:
    """Print ``table`` without cutting a word to "…", at any terminal width (``COLUMNS``).

    When every column fits at its narrowest (as wide as its longest word, its header's
    included) it is printed as a table: each column first gets that much, then the width left
    is shared out (a column never wider than its longest line), cells wrapping at spaces.
    Otherwise (a narrow terminal, many columns) each row is printed as a block: the cell of
    column ``key`` (and of any column with an empty header, e.g. a marker) as its heading, then
    one ``header  value`` line per non-empty cell, values wrapping under themselves. ``--json``
    gives the same rows whole."""
    out = target or console
    options = out.options
    columns = table.columns
    # rich shrinks the widest wrapping columns first, below their longest word (which it then
    # cuts): the widths are chosen here instead, from each column's narrowest and widest
    narrowest, widest = [], []
    for column in columns:
        sizes = [Measurement.get(out, options, cell) for cell in [column.header, *column.cells]]
        narrowest.append(max(m.minimum for m in sizes) if not column.no_wrap else max(m.maximum for m in sizes))
        widest.append(max(m.maximum for m in sizes))
    _, right, _, left = table.padding
    frame = (len(columns) + 1 if table.box and table.show_edge else len(columns) - 1 if table.box else 0) + len(
        columns
    ) * (left + right)
    room = out.width - frame
    if sum(narrowest) <= room:
        widths = list(narrowest)
        spare = room - sum(widths)
        wanting = sorted(range(len(columns)), key=lambda i: widest[i] - narrowest[i])
        for done, i in enumerate(wanting):  # water-filling: the modest columns whole, the rest share
            give = min(widest[i] - narrowest[i], spare // (len(columns) - done))
            widths[i] += give
            spare -= give
        for column, width in zip(columns, widths):
            column.width = width
            column.overflow = "fold"
        out.print(table)
        return
    if table.title:
        out.print(table.title, style="italic", highlight=False)
    cells = [(str(c.header), list(c.cells)) for c in columns]
    for row in range(table.row_count):
        marks = [str(values[row]) for header, values in cells if not header and str(values[row])]
        heading = " ".join([*marks, f"[bold]{cells[key][1][row]}[/bold]"])
        block = Table.grid(padding=(0, 2))
        block.add_column(style="dim", no_wrap=True)
        block.add_column(overflow="fold")
        for i, (header, values) in enumerate(cells):
            value = values[row]
            if i != key and header and str(value).strip():
                block.add_row(header, value)
        out.print(heading, highlight=False)
        out.print(Padding(block, (0, 0, 0, 2)))


def preview_markup(text: str) -> str:
    """``text`` with rich markup escaped (user and model text is printed literally)."""
    return escape(text)


def clip(text: str, limit: int) -> str:
    """``text`` on one line, at most ``limit`` characters, ``…`` when cut."""
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def describe_update(node: str, update: dict[str, Any] | None) -> str:
    """One progress line for a node's state update."""
    from langchain_core.messages import AIMessage, ToolMessage  # a turn has loaded them

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
            calls = [f"{c['name']}({clip(json.dumps(c['args'], ensure_ascii=False), 80)})" for c in msg.tool_calls]
            calls += [f"{c.get('name')}(<invalid JSON>)" for c in msg.invalid_tool_calls]
            return "model asks for " + ", ".join(calls)
        text = msg.content if isinstance(msg, AIMessage) else ""
        return "model answers: " + (clip(str(text), 100) or "(empty)")
    if node == "dispatch_tools":
        parts = [
            f"{r['name']}: {r['status']}" + (f" ({clip(r['error'], 200)})" if r.get("error") else "")
            for r in update.get("pending_results") or []
        ]
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


def print_recovery(report: RecoveryReport, quiet: bool = False) -> None:
    """Tell the user that a thread was rebuilt from its mirror (stderr when output is JSON)."""
    target = err_console if quiet else console
    target.print(
        Panel(report.notice(), title="thread recovered from its mirror", border_style="yellow"), highlight=False
    )


_LIVE: list[Status] = []  # live lines on screen (stop_live takes them down)


def stop_live() -> None:
    """Take down every live line (restores the cursor): before a message after Ctrl-C."""
    while _LIVE:
        _LIVE.pop().stop()


class _Elapsed:
    """A renderable that recomputes its text at each redraw (the elapsed seconds advance)."""

    def __init__(self, text: Callable[[], str]) -> None:
        self.text = text

    def __rich__(self) -> str:
        return f"[dim]⋯ {escape(self.text())}[/dim]"


class ConsoleObserver:
    """A turn (``graph.runner.TurnObserver``) on the terminal: a line per node, the recovery
    panel, warnings, and questions asked at the terminal (none when stdin is not a terminal).
    ``quiet`` (``--json``): no progress lines; notices and warnings go to stderr."""

    def __init__(self, quiet: bool = False) -> None:
        self.quiet = quiet
        self._running: dict[str, float] = {}  # node → monotonic start
        self._tokens: dict[str, int] = {}
        self._status: Status | None = None

    def _status_text(self) -> str:
        now = time.monotonic()
        return " · ".join(
            f"{node} {now - start:.0f} s" + (f", {self._tokens[node]} tokens" if self._tokens.get(node) else "")
            for node, start in self._running.items()
        )

    def _refresh(self) -> None:
        """The one live line ("⋯ call_model 12 s, 40 tokens") while nodes run, on a terminal
        only (rich redraws it on its own thread, so the seconds advance while a slow model is
        still reading the prompt); gone once they finish."""
        if not console.is_terminal or self.quiet:
            return
        if not self._running:
            if self._status is not None:
                self._status.stop()
                if self._status in _LIVE:
                    _LIVE.remove(self._status)
                self._status = None
            return
        text = _Elapsed(self._status_text)
        if self._status is None:
            self._status = console.status(text, spinner="dots")
            _LIVE.append(self._status)
            self._status.start()
        else:
            self._status.update(text)

    def on_node_start(self, node: str) -> None:
        self._running[node] = time.monotonic()
        self._tokens[node] = 0
        self._refresh()

    def on_tokens(self, node: str, count: int) -> None:
        if node in self._running:
            self._tokens[node] = self._tokens.get(node, 0) + count
            self._refresh()

    def on_update(self, node: str, update: dict[str, Any] | None) -> None:
        start = self._running.pop(node, None)
        tokens = self._tokens.pop(node, 0)
        self._refresh()
        took = (
            f" [dim]({time.monotonic() - start:.1f} s" + (f", {tokens} tokens" if tokens else "") + ")[/dim]"
            if start
            else ""
        )
        console.print(f"[cyan]▸ {node}[/cyan] {escape(describe_update(node, update))}{took}", highlight=False)

    def on_event(self, event: dict[str, Any]) -> None:
        """A custom-stream event: MCP progress as ``⋯ server/tool 3/10 message``."""
        if event.get("type") != "mcp_progress":
            return
        total = event.get("total")
        amount = f"{event.get('progress', 0):g}" + (f"/{total:g}" if isinstance(total, int | float) else "")
        message = f" {event['message']}" if event.get("message") else ""
        # the server's message is its text, not rich markup
        console.print(
            f"  ⋯ {event.get('server')}/{event.get('tool')} {amount}{message}",
            style="dim",
            highlight=False,
            markup=False,
        )

    def on_recovery(self, report: RecoveryReport) -> None:
        print_recovery(report, self.quiet)

    def on_warning(self, text: str) -> None:
        (err_console if self.quiet else console).print(f"[yellow]warning:[/yellow] {text}")

    async def ask(self, question: str) -> str | None:
        if not sys.stdin.isatty():
            return None  # nobody to ask here: the summary carries the question (exit 3)
        console.print(f"[bold yellow]? {question}[/bold yellow]")
        from graph.cli.stdin import ainput

        return await ainput("answer> ")


def print_summary(summary: dict[str, Any]) -> None:
    """The answer panel and the summary table of a turn (``graph.runner.run_turn``'s result)."""
    style = "yellow" if summary["stop_reason"] else "green"
    console.print(Panel(str(summary["answer"]) or "(no answer)", title="Hermes", border_style=style))
    table = Table(show_header=False, box=None)
    for key in (
        "thread_id",
        "checkpoint_id",
        "tools_called",
        "tokens_in",
        "tokens_out",
        "memory_writes",
        "stop_reason",
        "artifacts",
    ):
        table.add_row(key, str(summary[key] if summary[key] not in (None, {}, []) else "—"))
    console.print(table)
    if summary.get("question"):
        console.print(
            f"[bold yellow]The agent is waiting for an answer:[/bold yellow] {summary['question']}\n"
            f'Answer with: hermes resume --thread {summary["thread_id"]} "<answer>"'
        )


# --- checkpoints and messages -------------------------------------------------------------------


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
    return (
        f"[bold]{node.short_id}[/bold] step {node.step:>3} {source}{nxt}  [dim]{text}[/dim] " + " ".join(marks)
    ).rstrip()


def _compact_keep(tree: BranchTree, node: CheckpointNode) -> bool:
    """Checkpoints worth a line in ``--compact``: inputs, turn ends, heads, fork points, roots,
    Hermes operations, unreadable ones."""
    return (
        node.source == "input"
        or not node.next
        or len(node.children) != 1
        or node.parent_id not in tree.nodes
        or node.node in ("rollback", "switch", "recovered", "copy")
        or not node.readable
        or node.checkpoint_id == tree.active
    )


def render_tree(tree: BranchTree, compact: bool = False) -> Tree:
    """A rich Tree of the thread's checkpoints: a linear run of checkpoints stays on one level,
    each fork opens one nested level per branch (oldest branch first)."""
    from graph.checkpoint_tree import short_id  # loaded with the tree

    root = Tree(
        f"thread [bold]{tree.thread_id}[/bold] — {len(tree)} checkpoints, {len(tree.heads)} "
        f"branch{'es' if len(tree.heads) != 1 else ''}, active head "
        f"[green]{short_id(tree.active)}[/green]"
    )

    def add_chain(parent: Tree, cid: str, nested: bool) -> None:
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


def print_messages(messages: list[AnyMessage]) -> None:
    """A table of messages: role (and name), a one-line preview."""
    from graph.checkpoint_tree import preview  # loaded with the messages

    table = Table(title="last messages", show_lines=False)
    table.add_column("role")
    table.add_column("content")
    for m in messages:
        table.add_row(m.type + (f" ({m.name})" if m.name else ""), preview_markup(preview(m, 200).split(": ", 1)[-1]))
    console.print(table)


def print_op(op: BranchOp) -> None:
    """What a rollback or switch did."""
    from graph.checkpoint_tree import short_id  # loaded with the operation

    if op.mechanism == "none":
        console.print(f"{op.op}: {short_id(op.target)} is already the active head; nothing changed")
        return
    console.print(
        f"[green]{op.op}[/green]: active head is now [bold]{short_id(op.head)}[/bold] "
        f"(same state as {short_id(op.target)}; full id {op.head})"
    )


def flat_metrics(metrics: dict[str, Any], prefix: str = "") -> list[tuple[str, str]]:
    """Nested metrics as ``(dotted.key, text)`` rows."""
    rows: list[tuple[str, str]] = []
    for key in sorted(metrics):
        value = metrics[key]
        if isinstance(value, dict):
            rows.extend(flat_metrics(value, f"{prefix}{key}.") or [(f"{prefix}{key}", "—")])
        else:
            rows.append((f"{prefix}{key}", f"{value:.3f}" if isinstance(value, float) else str(value)))
    return rows


# --- reminders ----------------------------------------------------------------------------------


def print_firings(firings: list[Any]) -> None:
    """One block per firing of ``tools.scheduler.fire_due``: fired / failed / skipped, catch-ups,
    adjustments, attempts."""
    for f in firings:
        d = f.due
        what = {"tool": f"tool {d.action.get('tool')}", "task": f"task on thread {d.thread_id}"}.get(
            d.action["kind"], "notice"
        )
        head = preview_markup(f"reminder {d.reminder_id} ({d.text[:60]}) for {d.period} [{what}]")
        if f.status != "skipped":  # every claimed firing delivers its notice (tools.scheduler)
            console.print(f"[bold]notice[/bold] {preview_markup(d.notice())}", highlight=False)
        if f.status == "fired":
            console.print(f"[green]fired[/green] {head}: {preview_markup(f.detail)}", highlight=False)
        elif f.status == "failed":
            console.print(
                f"[red]failed[/red] {head}: {preview_markup(f.detail)} — "
                + ("retried at the next check" if f.will_retry else "given up for this period"),
                highlight=False,
            )
        else:
            console.print(f"[yellow]skipped[/yellow] {head}: {preview_markup(f.detail)}", highlight=False)
        if d.skipped_periods and f.status != "skipped":
            console.print(
                f"  caught up once: missed {', '.join(d.skipped_periods)} skipped (not fired separately)",
                highlight=False,
            )
        if d.adjustment:
            console.print(f"  adjustment: {preview_markup(d.adjustment)}", highlight=False)
        if d.attempt > 1:
            console.print(f"  attempt {d.attempt} (same request id {d.request_id})", highlight=False)
