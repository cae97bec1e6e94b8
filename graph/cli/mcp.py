"""``hermes mcp list | tools SERVER | call SERVER TOOL ARGS_JSON | test``: the MCP servers of a
data directory's config (the user's ``mcpServers`` merged with the bundled team chat).

* ``list``: every server — state, transport, pool (live/min/max), score, latency EMA, success,
  calls, circuit breaker (state, trips, next probe), tool count, skipped tools;
* ``tools SERVER``: its tools as registered (name, side effect, idempotent, answer timeout /
  hard limit, replicas);
* ``call SERVER TOOL ARGS_JSON``: one ``tools/call`` on that server (progress printed), the
  result as JSON;
* ``test``: handshake every server and print protocol version, capabilities, tool count and
  handshake latency; exit 1 when one failed;
* ``auth SERVER``: the OAuth 2.1 authorisation of an HTTP server with an ``auth`` entry, done
  once, interactively: one session is opened with a long start-up bound (``--timeout``, default
  300 s), the authorisation URL is printed (stderr), the loopback redirect received, and the
  tokens stored in ``<data_dir>/mcp_auth/SERVER.json`` (mode 0600) for every later run (which
  then refreshes them without a user). Exit 1 when it fails.
"""

from __future__ import annotations

import json
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import typer
from rich.markup import escape
from rich.table import Table

from graph.cli.common import DATA_DIR_OPT, MCP_OPT, app, context_or_exit, guarded, report_error, run_sync
from graph.cli.render import console, print_table

mcp_app = typer.Typer(
    help="MCP servers: pools, scores, circuit breakers, tools; call one, test all.", no_args_is_help=True
)
app.add_typer(mcp_app, name="mcp")
JSON_OPT = typer.Option(False, "--json", help="Print JSON instead of a table.")
LIST_JSON_OPT = typer.Option(
    False,
    "--json",
    help="Print JSON: a list of servers, each {name, state, transport, pool {live, min, max}, score, "
    "latency_ema_s, success, calls, breaker {state, trips, next_probe_in_s}, tools, ...}.",
)


def _with_toolbox(data_dir: str | None, mcp_config: str | None, use: Callable[[Any], Awaitable[int | None]]) -> int:
    context = context_or_exit(None, None, data_dir, None)
    if mcp_config:
        context = context.model_copy(update={"mcp_config": mcp_config})
    code = [0]

    async def go() -> None:
        from graph.resources import open_toolbox  # the MCP client: loaded by the commands that use it

        t0 = time.perf_counter()
        toolbox = await open_toolbox(context)  # every toolbox setting of the context (database, executor…)
        toolbox.opened_in_s = time.perf_counter() - t0  # type: ignore[attr-defined]
        try:
            code[0] = (await use(toolbox)) or 0
        finally:
            await toolbox.aclose()

    result = run_sync(guarded(go, context))
    return result or code[0]


def _fmt(v: Any, nd: int = 3) -> str:
    return "" if v is None else (f"{v:.{nd}f}" if isinstance(v, float) else str(v))


@mcp_app.command("list")
def mcp_list(data_dir: str = DATA_DIR_OPT, mcp_config: str = MCP_OPT, json_out: bool = LIST_JSON_OPT) -> None:
    """Every MCP server: state, transport, pool, score, latency, circuit breaker, tools (one
    block per server on a narrow terminal)."""

    async def show(tb: Any) -> int:
        status = tb.mcp_status()
        if json_out:
            print(json.dumps(status, indent=2, default=str))
            return 0
        table = Table(
            "server",
            "state",
            "transport",
            "pool live/min/max",
            "score",
            "latency ema s",
            "success",
            "calls",
            "breaker",
            "tools",
        )
        table.columns[0].no_wrap = True
        for s in status:
            pool = s.get("pool") or {}
            br = s.get("breaker") or {}
            breaker = br.get("state", "")
            if br.get("trips"):
                breaker += f" ({br['trips']} trips)"
            if br.get("next_probe_in_s") is not None:
                breaker += f", probe in {br['next_probe_in_s']:.1f} s"
            table.add_row(
                escape(str(s["name"])),
                s.get("state", ""),
                s.get("transport", ""),
                f"{pool.get('live', '')}/{pool.get('min', '')}/{pool.get('max', '')}" if pool else "",
                _fmt(s.get("score")),
                _fmt(s.get("latency_ema_s"), 4),
                _fmt(s.get("success")),
                _fmt(s.get("calls")),
                breaker,
                _fmt(s.get("tools")),
            )
        print_table(table)
        for where, problem in tb.problems.items():
            console.print(f"[yellow]left out[/yellow] {escape(str(where))}: {escape(str(problem))}")
        return 0

    raise typer.Exit(_with_toolbox(data_dir, mcp_config, show))


@mcp_app.command("tools")
def mcp_tools(
    server: str,
    data_dir: str = DATA_DIR_OPT,
    mcp_config: str = MCP_OPT,
    json_out: bool = typer.Option(
        False,
        "--json",
        help="Print JSON: {server, tools: [{name, server_name, side_effect, idempotent, timeout_s, "
        "max_timeout_s, replicas, description}], skipped: {tool: reason}}.",
    ),
) -> None:
    """The tools of SERVER as registered: side effect, idempotent, timeouts, replicas."""

    async def show(tb: Any) -> int:
        if server not in tb.mcp.servers:
            return report_error(
                None, f"no MCP server {server!r}; configured: {', '.join(tb.mcp.servers)}", json_out=json_out
            )
        if json_out:
            rows = []
            for name, replicas in sorted(tb.mcp_replicas.items()):
                mine = [r for r in replicas if r.server.name == server]
                if mine:
                    spec = tb.registry.get(name)
                    rows.append(
                        {
                            "name": name,
                            "server_name": mine[0].tool,
                            "side_effect": spec.side_effect,
                            "idempotent": spec.idempotent,
                            "timeout_s": mine[0].timeout_s,
                            "max_timeout_s": mine[0].max_timeout_s,
                            "replicas": [r.server.name for r in replicas],
                            "description": spec.description,
                        }
                    )
            skipped = {str(k): str(v) for k, v in tb.mcp.servers[server].skipped.items()}
            print(json.dumps({"server": server, "tools": rows, "skipped": skipped}, ensure_ascii=False, default=str))
            return 0
        table = Table(
            "registered name",
            "server's name",
            "side effect",
            "idempotent",
            "answer / hard s",
            "replicas",
            "description",
        )
        table.columns[0].no_wrap = True
        for name, replicas in sorted(tb.mcp_replicas.items()):
            mine = [r for r in replicas if r.server.name == server]
            if not mine:
                continue
            spec = tb.registry.get(name)
            table.add_row(
                escape(name),
                escape(mine[0].tool),
                "yes" if spec.side_effect else "",
                "yes" if spec.idempotent else "",
                f"{mine[0].timeout_s:g} / {mine[0].max_timeout_s:g}",
                ", ".join(r.server.name for r in replicas) if len(replicas) > 1 else "",
                escape(spec.description[:70] + ("…" if len(spec.description) > 70 else "")),
            )
        print_table(table)
        for name, reason in tb.mcp.servers[server].skipped.items():
            console.print(f"[yellow]skipped[/yellow] {escape(str(name))}: {escape(str(reason))}")
        return 0

    raise typer.Exit(_with_toolbox(data_dir, mcp_config, show))


@mcp_app.command("call")
def mcp_call(
    server: str,
    tool: str,
    args_json: str = typer.Argument("{}", help="Arguments, a JSON object."),
    data_dir: str = DATA_DIR_OPT,
    mcp_config: str = MCP_OPT,
    timeout: float = typer.Option(None, help="Answer timeout, seconds (default: the server's)."),
) -> None:
    """One tools/call of TOOL on SERVER (its name there), straight to the server; prints the result."""
    try:
        args = json.loads(args_json)
        assert isinstance(args, dict)
    except (json.JSONDecodeError, AssertionError):
        raise typer.Exit(report_error(None, 'ARGS_JSON must be a JSON object, e.g. \'{"channel": "x"}\'')) from None

    async def call(tb: Any) -> int:
        srv = tb.mcp.servers.get(server)
        if srv is None:
            return report_error(None, f"no MCP server {server!r}; configured: {', '.join(tb.mcp.servers)}")
        answer = timeout or srv.settings.timeout_s or 10.0

        def progress(value: float, total: float | None, message: str | None) -> None:
            console.print(f"[dim]progress {value:g}{f'/{total:g}' if total else ''} {message or ''}[/dim]")

        t0 = time.perf_counter()
        result = await srv.call_tool(
            tool, args, timeout_s=answer, max_timeout_s=max(answer, 30.0), on_progress=progress
        )
        print(json.dumps(result, indent=2, ensure_ascii=False, default=str))
        console.print(f"[dim]{(time.perf_counter() - t0) * 1000:.1f} ms[/dim]")
        return 0

    raise typer.Exit(_with_toolbox(data_dir, mcp_config, call))


@mcp_app.command("test")
def mcp_test(data_dir: str = DATA_DIR_OPT, mcp_config: str = MCP_OPT, json_out: bool = JSON_OPT) -> None:
    """Handshake every server: protocol version, capabilities, tool count, latency."""

    async def test(tb: Any) -> int:
        rows = []
        for name, srv in tb.mcp.servers.items():
            ok = srv.tools_version > 0
            ping_ms = None
            if ok:
                session = next((s for s in srv.sessions if s.alive), None)
                if session is not None:
                    t0 = time.perf_counter()
                    ok = await session.ping(5.0)
                    ping_ms = (time.perf_counter() - t0) * 1000
            rows.append(
                {
                    "server": name,
                    "ok": ok,
                    "transport": srv.transport,
                    "protocol": srv.protocol_version,
                    "server_info": srv.server_info,
                    "capabilities": sorted(srv.capabilities),
                    "tools": len(srv.tools),
                    "handshake_ms": None if srv.handshake_s is None else round(srv.handshake_s * 1000, 1),
                    "ping_ms": None if ping_ms is None else round(ping_ms, 1),
                    "error": None if ok else srv.error,
                }
            )
        for name, reason in tb.mcp.failed.items():
            if name not in tb.mcp.servers:
                rows.append({"server": name, "ok": False, "error": reason})
        if json_out:
            print(json.dumps(rows, indent=2, default=str))
        else:
            table = Table(
                "server", "ok", "transport", "protocol", "capabilities", "tools", "handshake ms", "ping ms", "error"
            )
            table.columns[0].no_wrap = True
            for r in rows:
                table.add_row(
                    r["server"],
                    "yes" if r["ok"] else "[red]no[/red]",
                    r.get("transport") or "",
                    r.get("protocol") or "",
                    ", ".join(r.get("capabilities") or []),
                    _fmt(r.get("tools")),
                    _fmt(r.get("handshake_ms"), 1),
                    _fmt(r.get("ping_ms"), 1),
                    escape((r.get("error") or "")[:60]),
                )
            print_table(table)
        return 0 if all(r["ok"] for r in rows) else 1

    raise typer.Exit(_with_toolbox(data_dir, mcp_config, test))


@mcp_app.command("auth")
def mcp_auth(
    server: str,
    data_dir: str = DATA_DIR_OPT,
    mcp_config: str = MCP_OPT,
    timeout: float = typer.Option(300.0, help="Seconds to wait for the authorisation, in all."),
) -> None:
    """Authorise Hermes with SERVER (OAuth 2.1, browser flow); tokens stored for later runs."""
    from tools.mcp.auth import token_path
    from tools.mcp.client import MCPServer
    from tools.mcp.config import MCPConfigError, load_config

    context = context_or_exit(None, None, data_dir, None)
    source = mcp_config or context.mcp_config
    try:
        entries = load_config(Path(source)) if source else {}
    except MCPConfigError as exc:
        raise typer.Exit(report_error(exc, str(exc))) from None
    entry = entries.get(server)
    if entry is None or not entry.get("auth") or not entry.get("url"):
        where = f"in {source}" if source else "(no MCP config: set --mcp-config or HERMES_MCP_CONFIG)"
        raise typer.Exit(report_error(None, f"no HTTP MCP server {server!r} with an 'auth' entry {where}"))

    async def go() -> int:
        srv = MCPServer(
            server, {**entry, "pool": {"min": 1, "max": 1}}, startup_timeout_s=timeout, data_dir=Path(context.data_dir)
        )
        try:
            await srv.start()
        except Exception as exc:  # noqa: BLE001 - reported, exit 1
            return report_error(exc, f"{server}: not authorised: {exc}")
        finally:
            await srv.aclose()
        console.print(
            f"[green]authorised[/green] {server}: {len(srv.tools)} tools; tokens in "
            f"{token_path(Path(context.data_dir), server)}"
        )
        return 0

    raise typer.Exit(run_sync(go()))
