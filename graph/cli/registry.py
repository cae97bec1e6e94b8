"""``hermes tools list|lint``: the tool registry of a data directory and its definition lint."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import typer
from rich.markup import escape
from rich.table import Table

from graph.cli.common import (
    DATA_DIR_OPT,
    MCP_OPT,
    context_or_exit,
    guarded,
    run_sync,
    tools_app,
)
from graph.cli.render import console, print_table


def with_toolbox(data_dir: str | None, mcp_config: str | None, use: Callable[[Any], None]) -> int:
    """Open the toolbox of ``data_dir`` (builtin tools + MCP servers), call ``use(toolbox)``,
    close it; returns the exit code of ``guarded``."""
    context = context_or_exit(None, None, data_dir, None)
    if mcp_config:
        context = context.model_copy(update={"mcp_config": mcp_config})

    async def go() -> None:
        from graph.resources import open_toolbox  # the tool registry and MCP: loaded by the commands that use them

        toolbox = await open_toolbox(context)  # every toolbox setting of the context (database, executor…)
        try:
            use(toolbox)
        finally:
            await toolbox.aclose()

    return run_sync(guarded(go, context))


def tool_json(spec: Any) -> dict[str, Any]:
    """One tool as ``tools list --json`` prints it: name, source, timeout_s (seconds),
    side_effect, idempotent, description, parameters (JSON Schema)."""
    return {
        "name": spec.name,
        "source": spec.source,
        "timeout_s": spec.timeout_s,
        "side_effect": spec.side_effect,
        "idempotent": spec.idempotent,
        "description": spec.description,
        "parameters": spec.parameters,
    }


@tools_app.command("list")
def tools_list(
    data_dir: str = DATA_DIR_OPT,
    mcp_config: str = MCP_OPT,
    json_out: bool = typer.Option(
        False,
        "--json",
        help="Print JSON: {tools: [{name, source, timeout_s, side_effect, idempotent, description, "
        "parameters}], left_out: {where: problem}}.",
    ),
) -> None:
    """Every registered tool: name, source, timeout, side effect, description (the first 90
    characters; --json gives it whole)."""

    def show(toolbox: Any) -> None:
        specs = toolbox.registry.specs()
        if json_out:
            tools = [tool_json(spec) for spec in specs]
            print(json.dumps({"tools": tools, "left_out": dict(toolbox.problems)}, ensure_ascii=False, default=str))
            return
        table = Table("name", "source", "timeout s", "side effect", "description")
        table.columns[0].no_wrap = True  # a tool's name is what the model calls: never cut or broken
        for spec in specs:
            table.add_row(
                escape(spec.name),
                escape(spec.source),
                f"{spec.timeout_s:g}",
                "yes" if spec.side_effect else "",
                escape(spec.description[:90] + ("…" if len(spec.description) > 90 else "")),
            )
        print_table(table)
        for where, problem in toolbox.problems.items():
            console.print(f"[yellow]left out[/yellow] {escape(str(where))}: {escape(str(problem))}")

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
