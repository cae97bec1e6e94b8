"""The MCP server registry: the usual ``{"mcpServers": {...}}`` JSON (DESIGN §3), translated
into ``langchain_mcp_adapters`` connection dicts.

Entry shapes::

    {"command": "python", "args": ["-m", "srv"], "env": {"K": "V"}, "cwd": "/dir"}   → stdio
    {"url": "http://127.0.0.1:8000/mcp", "transport": "streamable_http"|"http"|"sse",
     "headers": {...}}                                                               → HTTP/SSE

A URL without ``transport`` is streamable HTTP unless it ends in ``/sse``.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any

SERVER_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
_PROJECT_ROOT = Path(__file__).resolve().parents[2]


class MCPConfigError(ValueError):
    """A malformed ``mcpServers`` config or entry (the message names the server)."""


def load_config(source: Path | str | dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Read the config (a path to JSON, or an already-parsed dict) → ``{name: entry}``.
    Raises MCPConfigError when the file is not JSON or has no ``mcpServers`` object."""
    if isinstance(source, dict):
        data = source
    else:
        try:
            data = json.loads(Path(source).read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError) as exc:
            raise MCPConfigError(f"cannot read MCP config {source}: {exc}") from exc
    servers = data.get("mcpServers") if isinstance(data, dict) else None
    if not isinstance(servers, dict):
        raise MCPConfigError('MCP config needs an object "mcpServers": {name: {...}}')
    return servers


def to_connection(name: str, entry: dict[str, Any]) -> dict[str, Any]:
    """One ``mcpServers`` entry → a langchain-mcp-adapters ``Connection`` dict.
    Raises MCPConfigError (naming the server) when the entry is unusable."""
    if not SERVER_NAME_RE.match(name):
        raise MCPConfigError(f"MCP server name {name!r} must match {SERVER_NAME_RE.pattern}")
    if not isinstance(entry, dict):
        raise MCPConfigError(f"MCP server '{name}': entry must be an object")
    transport = str(entry.get("transport") or entry.get("type") or "").lower().replace("-", "_")
    if "command" in entry:
        if transport not in ("", "stdio"):
            raise MCPConfigError(f"MCP server '{name}': 'command' needs transport stdio, got {transport!r}")
        args = entry.get("args") or []
        env = entry.get("env")
        if not isinstance(args, list) or (env is not None and not isinstance(env, dict)):
            raise MCPConfigError(f"MCP server '{name}': args must be a list and env an object")
        conn: dict[str, Any] = {"transport": "stdio", "command": str(entry["command"]),
                                "args": [str(a) for a in args],
                                "env": {str(k): str(v) for k, v in (env or {}).items()}}
        if entry.get("cwd"):
            conn["cwd"] = str(entry["cwd"])
        return conn
    if "url" in entry:
        url = str(entry["url"])
        if not transport:
            transport = "sse" if url.rstrip("/").endswith("/sse") else "streamable_http"
        if transport == "http":
            transport = "streamable_http"
        if transport not in ("sse", "streamable_http"):
            raise MCPConfigError(f"MCP server '{name}': unsupported transport {transport!r} for a URL")
        conn = {"transport": transport, "url": url}
        if isinstance(entry.get("headers"), dict):
            conn["headers"] = dict(entry["headers"])
        return conn
    raise MCPConfigError(f"MCP server '{name}': entry needs 'command' (stdio) or 'url' (http/sse)")


def team_chat_entry(data_dir: Path) -> dict[str, Any]:
    """The ``mcpServers`` entry of the bundled team-chat server (stdio), storing its messages
    in ``data_dir/team_chat.db``."""
    return {
        "command": sys.executable,
        "args": ["-m", "tools.mcp.servers.team_chat"],
        "env": {"HERMES_TEAM_CHAT_DB": str(Path(data_dir).resolve() / "team_chat.db"),
                "PYTHONPATH": str(_PROJECT_ROOT)},
        "cwd": str(Path(data_dir).resolve()),
    }
