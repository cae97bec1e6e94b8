"""The MCP server registry: the usual ``{"mcpServers": {...}}`` JSON (DESIGN §3), translated
into ``langchain_mcp_adapters`` connection dicts.

Entry shapes::

    {"command": "python", "args": ["-m", "srv"], "env": {"K": "V"}, "cwd": "/dir"}   → stdio
    {"url": "http://127.0.0.1:8000/mcp", "transport": "streamable_http"|"http"|"sse",
     "headers": {...}}                                                               → HTTP/SSE

A URL without ``transport`` is streamable HTTP unless it ends in ``/sse``.

Hermes keys of an entry (all optional; :func:`server_settings` validates them)::

    "timeoutSeconds": 20            (or "timeout_s") per-call timeout of this server's tools, in
                                    seconds; default: the toolbox timeout
    "tools": {"<tool name as the server lists it>": {
        "side_effect": false,       overrides the server's readOnlyHint (MCP default: a side effect)
        "idempotent": true,         overrides idempotentHint (safe to repeat: retries allowed)
        "requested_by": ["regex"],  request clauses that ask for the tool (ToolSpec.requested_by)
        "artifact_field": "url",    result field naming what the call produced
        "destination_args": ["to"], arguments that decide where the effect goes (DESIGN §2.8)
        "sensitive": true,          every result is sensitive data (DESIGN §2.8)
        "timeout_s": 60,            (or "timeoutSeconds") this tool's answer timeout
        "max_timeout_s": 600}},     (or "maxTimeoutSeconds") this tool's hard limit
    "maxTimeoutSeconds": 120        (or "max_timeout_s") hard limit of a call that keeps reporting
                                    progress (default: max(answer timeout, 30 s)); the answer
                                    timeout ends a call that neither answers nor reports progress
    "pool": {"min": 2, "max": 10}   live sessions kept for the server (default 2..10; the bundled
                                    team-chat server 1..4)
    "replicaGroup": "search"        servers of one group serve the same tools: one logical tool
                                    each, calls go to the best-scored healthy replica
    "breaker": {"failures": 3, "cooldownSeconds": 5, "maxCooldownSeconds": 60}
                                    circuit breaker: that many failures in a row park the server;
                                    it is probed back after the cooldown (doubling up to the max)
    "elicitation": "decline"        answer to elicitation/create: "decline" (default, capability
                                    not advertised) or "defaults" (accept with the schema defaults)
    "auth": {"type": "oauth", "scopes": [...], "clientId": ..., "clientSecret": ...,
             "redirectUri": "http://127.0.0.1:33418/callback"}   OAuth 2.1 (HTTP servers only);
             "grant": "authorization_code" (default) | "client_credentials" | "enterprise"
             (SEP-990: "idpTokenEndpoint", "idToken" / "idTokenFile"); keys: tools/mcp/auth.py
    "enabled": false                leave the server out

The config wins over what the server says about its tools (annotations, ``_meta``).
"""

from __future__ import annotations

import json
import math
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

SERVER_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
_PROJECT_ROOT = Path(__file__).resolve().parents[2]


class MCPConfigError(ValueError):
    """A malformed ``mcpServers`` config or entry (the message names the server)."""


def load_config(source: Path | str | dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Read the config (a path to JSON, or an already-parsed dict) → ``{name: entry}``.
    Raises MCPConfigError (naming the file) when it cannot be read, is not UTF-8, is not JSON or
    has no ``mcpServers`` object."""
    if isinstance(source, dict):
        data = source
    else:
        try:
            raw = Path(source).read_bytes()
        except OSError as exc:
            raise MCPConfigError(f"cannot read MCP config {source}: {exc}") from exc
        try:
            text = raw.decode("utf-8-sig")  # a leading BOM (Windows editors) is not an error
        except UnicodeDecodeError as exc:
            line = raw.count(b"\n", 0, exc.start) + 1
            raise MCPConfigError(
                f"cannot read MCP config {source}: it is not UTF-8 text (byte 0x{raw[exc.start]:02x} at "
                f"line {line}, offset {exc.start}); save it as UTF-8 JSON"
            ) from None
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise MCPConfigError(f"cannot read MCP config {source}: {exc}") from exc
    servers = data.get("mcpServers") if isinstance(data, dict) else None
    if not isinstance(servers, dict):
        raise MCPConfigError('MCP config needs an object "mcpServers": {name: {...}}')
    return servers


def to_connection(name: str, entry: dict[str, Any]) -> dict[str, Any]:
    """One ``mcpServers`` entry → a langchain-mcp-adapters ``Connection`` dict.
    Raises MCPConfigError (naming the server) when the entry is unusable."""
    if not SERVER_NAME_RE.fullmatch(name):
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
        conn: dict[str, Any] = {
            "transport": "stdio",
            "command": str(entry["command"]),
            "args": [str(a) for a in args],
            "env": {str(k): str(v) for k, v in (env or {}).items()},
        }
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


@dataclass(frozen=True)
class ToolOverride:
    """The user's settings for one tool of a server (``tools.<name>`` of its entry); None =
    not set (the server's annotations / ``_meta`` or the defaults apply)."""

    side_effect: bool | None = None
    idempotent: bool | None = None
    requested_by: tuple[str, ...] | None = None
    artifact_field: str | None = None
    timeout_s: float | None = None
    max_timeout_s: float | None = None
    destination_args: tuple[str, ...] | None = None
    sensitive: bool | None = None


#: Pool bounds of a server without a ``pool`` entry (seed: min 2, max 10 live sessions).
POOL_MIN, POOL_MAX = 2, 10
#: Circuit breaker defaults: failures in a row that park a server, first and longest cooldown (s).
BREAKER_FAILURES, BREAKER_COOLDOWN_S, BREAKER_MAX_COOLDOWN_S = 3, 5.0, 60.0
ELICITATION_MODES = ("decline", "defaults")
#: ``auth.grant`` values (tools/mcp/auth.py builds the provider of each).
AUTH_GRANTS = ("authorization_code", "client_credentials", "enterprise")


@dataclass(frozen=True)
class ServerSettings:
    """Hermes settings of one ``mcpServers`` entry: ``timeout_s`` (answer timeout; None = the
    toolbox default), ``max_timeout_s`` (hard limit; None = max(answer timeout, 30 s)),
    ``tools`` (tool name as the server lists it → :class:`ToolOverride`), pool bounds,
    ``replica_group``, circuit-breaker settings, elicitation mode and ``auth`` (see module doc)."""

    timeout_s: float | None = None
    tools: dict[str, ToolOverride] = field(default_factory=dict)
    max_timeout_s: float | None = None
    pool_min: int = POOL_MIN
    pool_max: int = POOL_MAX
    replica_group: str | None = None
    breaker_failures: int = BREAKER_FAILURES
    breaker_cooldown_s: float = BREAKER_COOLDOWN_S
    breaker_max_cooldown_s: float = BREAKER_MAX_COOLDOWN_S
    elicitation: str = "decline"
    auth: dict[str, Any] | None = None


#: ``_meta`` keys of an MCP tool that carry Hermes metadata (set by the server).
META_REQUESTED_BY = "hermes/requested_by"  # list of regular expressions (ToolSpec.requested_by)
META_ARTIFACT_FIELD = "hermes/artifact_field"  # result field naming what the call produced
META_DESTINATION_ARGS = "hermes/destination_args"  # arguments naming where the effect goes (ToolSpec)
META_SENSITIVE = "hermes/sensitive"  # true: every result is sensitive data (ToolSpec.sensitive_results)

#: Keys of a ``tools.<name>`` override (``timeoutSeconds`` is accepted for ``timeout_s``).
TOOL_OVERRIDE_KEYS = (
    "side_effect",
    "idempotent",
    "requested_by",
    "artifact_field",
    "destination_args",
    "sensitive",
    "timeout_s",
    "timeoutSeconds",
    "max_timeout_s",
    "maxTimeoutSeconds",
)


def server_settings(name: str, entry: dict[str, Any]) -> ServerSettings:
    """Validate and read the Hermes keys of one ``mcpServers`` entry (``timeoutSeconds`` /
    ``timeout_s``, ``tools``). Raises MCPConfigError naming the server and the field."""
    if not isinstance(entry, dict):
        raise MCPConfigError(f"MCP server '{name}': entry must be an object")
    where = f"MCP server '{name}'"
    timeout = _timeout(where, entry)
    common = dict(
        timeout_s=timeout,
        max_timeout_s=_timeout(where, entry, keys=_MAX_KEYS),
        **_pool(where, entry),
        **_breaker(where, entry),
        **_misc(where, entry),
    )
    tools_cfg = entry.get("tools")
    if tools_cfg is None:
        return ServerSettings(**common)
    if not isinstance(tools_cfg, dict):
        raise MCPConfigError(
            f"{where}: 'tools' must be an object {{tool name: {{...}}}}, got {type(tools_cfg).__name__}"
        )
    tools: dict[str, ToolOverride] = {}
    for tool, cfg in tools_cfg.items():
        field_ = f"tools.{tool}"
        if not isinstance(cfg, dict):
            raise MCPConfigError(f"{where}: '{field_}' must be an object, got {type(cfg).__name__}")
        unknown = sorted(set(cfg) - set(TOOL_OVERRIDE_KEYS))
        if unknown:
            raise MCPConfigError(f"{where}: '{field_}' has unknown key(s) {unknown}; known: {list(TOOL_OVERRIDE_KEYS)}")
        for flag in ("side_effect", "idempotent", "sensitive"):
            if flag in cfg and not isinstance(cfg[flag], bool):
                raise MCPConfigError(f"{where}: '{field_}.{flag}' must be true or false, got {cfg[flag]!r}")
        requested = cfg.get("requested_by")
        if requested is not None:
            requested = tuple(check_patterns(f"{where}: '{field_}.requested_by'", requested))
        artifact = cfg.get("artifact_field")
        if artifact is not None and not (isinstance(artifact, str) and artifact.strip()):
            raise MCPConfigError(f"{where}: '{field_}.artifact_field' must be a non-empty string, got {artifact!r}")
        destinations = cfg.get("destination_args")
        if destinations is not None and not (
            isinstance(destinations, list) and all(isinstance(d, str) and d for d in destinations)
        ):
            raise MCPConfigError(
                f"{where}: '{field_}.destination_args' must be a list of argument names, got {destinations!r}"
            )
        tools[str(tool)] = ToolOverride(
            destination_args=None if destinations is None else tuple(destinations),
            sensitive=cfg.get("sensitive"),
            side_effect=cfg.get("side_effect"),
            idempotent=cfg.get("idempotent"),
            requested_by=requested,
            artifact_field=artifact,
            timeout_s=_timeout(where, cfg, prefix=f"{field_}."),
            max_timeout_s=_timeout(where, cfg, prefix=f"{field_}.", keys=_MAX_KEYS),
        )
    return ServerSettings(tools=tools, **common)


_MAX_KEYS = ("maxTimeoutSeconds", "max_timeout_s")


def _int(where: str, key: str, value: Any, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise MCPConfigError(f"{where}: '{key}' must be an integer {low}-{high}, got {value!r}")
    return value


def _pool(where: str, entry: dict[str, Any]) -> dict[str, Any]:
    pool = entry.get("pool")
    if pool is None:
        return {}
    if not isinstance(pool, dict) or set(pool) - {"min", "max"}:
        raise MCPConfigError(f'{where}: \'pool\' must be an object {{"min": n, "max": m}}, got {pool!r}')
    low = _int(where, "pool.min", pool.get("min", min(POOL_MIN, pool.get("max", POOL_MIN))), 1, 100)
    high = _int(where, "pool.max", pool.get("max", max(POOL_MAX, low)), 1, 100)
    if high < low:
        raise MCPConfigError(f"{where}: 'pool.max' ({high}) is below 'pool.min' ({low})")
    return {"pool_min": low, "pool_max": high}


def _breaker(where: str, entry: dict[str, Any]) -> dict[str, Any]:
    cfg = entry.get("breaker")
    if cfg is None:
        return {}
    known = {"failures", "cooldownSeconds", "maxCooldownSeconds"}
    if not isinstance(cfg, dict) or set(cfg) - known:
        raise MCPConfigError(f"{where}: 'breaker' must be an object with keys {sorted(known)}, got {cfg!r}")
    out: dict[str, Any] = {}
    if "failures" in cfg:
        out["breaker_failures"] = _int(where, "breaker.failures", cfg["failures"], 1, 1000)
    for key, attr in (("cooldownSeconds", "breaker_cooldown_s"), ("maxCooldownSeconds", "breaker_max_cooldown_s")):
        if key in cfg:
            out[attr] = _timeout(where, cfg, prefix="breaker.", keys=(key,))
    if out.get("breaker_max_cooldown_s", BREAKER_MAX_COOLDOWN_S) < out.get("breaker_cooldown_s", BREAKER_COOLDOWN_S):
        out["breaker_max_cooldown_s"] = out.get("breaker_cooldown_s", BREAKER_COOLDOWN_S)
    return out


def _misc(where: str, entry: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    group = entry.get("replicaGroup", entry.get("replica_group"))
    if group is not None:
        if not (isinstance(group, str) and SERVER_NAME_RE.fullmatch(group)):
            raise MCPConfigError(
                f"{where}: 'replicaGroup' must be a name matching {SERVER_NAME_RE.pattern}, got {group!r}"
            )
        out["replica_group"] = group
    mode = entry.get("elicitation")
    if mode is not None:
        if mode not in ELICITATION_MODES:
            raise MCPConfigError(f"{where}: 'elicitation' must be one of {list(ELICITATION_MODES)}, got {mode!r}")
        out["elicitation"] = mode
    auth = entry.get("auth")
    if auth is not None:
        if "url" not in entry:
            raise MCPConfigError(f"{where}: 'auth' is for HTTP servers (an entry with 'url')")
        if not isinstance(auth, dict) or auth.get("type", "oauth") != "oauth":
            raise MCPConfigError(f'{where}: \'auth\' must be an object {{"type": "oauth", ...}}, got {auth!r}')
        scopes = auth.get("scopes")
        if scopes is not None and not (isinstance(scopes, list) and all(isinstance(x, str) for x in scopes)):
            raise MCPConfigError(f"{where}: 'auth.scopes' must be a list of strings, got {scopes!r}")
        grant = auth.get("grant", "authorization_code")
        if grant not in AUTH_GRANTS:
            raise MCPConfigError(f"{where}: 'auth.grant' must be one of {list(AUTH_GRANTS)}, got {grant!r}")
        out["auth"] = dict(auth)
    return out


def check_patterns(where: str, value: Any) -> list[str]:
    """``value`` must be a list of regular expressions (strings that compile); returns it.
    Raises MCPConfigError starting with ``where``."""
    if not isinstance(value, (list, tuple)) or not all(isinstance(p, str) and p for p in value):
        raise MCPConfigError(f"{where} must be a list of regular expressions (strings), got {value!r}")
    for pattern in value:
        try:
            re.compile(pattern)
        except re.error as exc:
            raise MCPConfigError(f"{where}: {pattern!r} is not a regular expression: {exc}") from None
    return list(value)


def _timeout(
    where: str, cfg: dict[str, Any], prefix: str = "", keys: tuple[str, ...] = ("timeoutSeconds", "timeout_s")
) -> float | None:
    given = {k: cfg[k] for k in keys if k in cfg}
    if not given:
        return None
    if len(given) == 2 and len({repr(v) for v in given.values()}) == 2:
        a, b = keys
        raise MCPConfigError(
            f"{where}: '{prefix}{a}' and '{prefix}{b}' disagree ({given[a]!r} vs {given[b]!r}); give one"
        )
    key, value = next(iter(given.items()))
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
        raise MCPConfigError(f"{where}: '{prefix}{key}' must be a number of seconds > 0, got {value!r}")
    return float(value)


def team_chat_entry(data_dir: Path) -> dict[str, Any]:
    """The ``mcpServers`` entry of the bundled team-chat server (stdio), storing its messages
    in ``data_dir/team_chat.db``."""
    return {
        "command": sys.executable,
        "args": ["-m", "tools.mcp.servers.team_chat"],
        "env": {
            "HERMES_TEAM_CHAT_DB": str(Path(data_dir).resolve() / "team_chat.db"),
            "PYTHONPATH": str(_PROJECT_ROOT),
        },
        "cwd": str(Path(data_dir).resolve()),
        # a local SQLite-backed server answering in milliseconds: one warm process is enough
        "pool": {"min": 1, "max": 4},
    }
