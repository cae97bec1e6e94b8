"""``hermes tools list|lint``: the tool registry of a data directory and its definition lint."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import typer
from rich.table import Table

from graph.cli.common import (
    DATA_DIR_OPT,
    MCP_OPT,
    context_or_exit,
    guarded,
    run_sync,
    tools_app,
)
from graph.cli.render import console
from graph.resources import open_toolbox


def with_toolbox(data_dir: str | None, mcp_config: str | None, use: Callable[[Any], None]) -> int:
    """Open the toolbox of ``data_dir`` (builtin tools + MCP servers), call ``use(toolbox)``,
    close it; returns the exit code of ``guarded``."""
    context = context_or_exit(None, None, data_dir, None)
    if mcp_config:
        context = context.model_copy(update={"mcp_config": mcp_config})

    async def go() -> None:
        toolbox = await open_toolbox(context)  # every toolbox setting of the context (database, executor…)
        try:
            use(toolbox)
        finally:
            await toolbox.aclose()

    return run_sync(guarded(go, context))


@tools_app.command("list")
def tools_list(data_dir: str = DATA_DIR_OPT, mcp_config: str = MCP_OPT) -> None:
    """Every registered tool: name, source, timeout, side effect, description."""

    def show(toolbox: Any) -> None:
        table = Table("name", "source", "timeout s", "side effect", "description")
        for spec in toolbox.registry.specs():
            table.add_row(
                spec.name,
                spec.source,
                f"{spec.timeout_s:g}",
                "yes" if spec.side_effect else "",
                spec.description[:90] + ("…" if len(spec.description) > 90 else ""),
            )
        console.print(table)
        for where, problem in toolbox.problems.items():
            console.print(f"[yellow]left out[/yellow] {where}: {problem}")

    raise typer.Exit(with_toolbox(data_dir, mcp_config, show))


@tools_app.command("lint")
def tools_lint(data_dir: str = DATA_DIR_OPT, mcp_config: str = MCP_OPT) -> None:
    """Lint every tool definition (tools.spec.lint: naming, descriptions, schemas, required
    fields; duplicates are refused at registration). Exit 1 if any problem is found."""
    from tools.spec import lint

    found: list[str] = []

    def check(toolbox: Any) -> None:
        for spec in toolbox.registry.specs():
            found.extend(f"{spec.name} ({spec.source}): {p}" for p in lint(spec))
        found.extend(f"{where}: {problem}" for where, problem in toolbox.problems.items())

    code = with_toolbox(data_dir, mcp_config, check)
    for line in found:
        console.print(f"[yellow]•[/yellow] {line}", highlight=False)
    if not code:
        console.print("[green]all tool definitions pass lint[/green]" if not found else f"{len(found)} problem(s)")
    raise typer.Exit(code or (1 if found else 0))
