"""The agent's toolbox: builtin tools + MCP servers' tools in one :class:`ToolRegistry`
(DESIGN §2, §3). The graph's nodes only talk to this.

Usage::

    tb = await Toolbox.open(data_dir, mcp_config=None, timeout_s=10.0)
    tb.registry.openai_tools()          # for bind_tools
    outcome = await tb.registry.call("query_database", {"sql": "SELECT 1"}, request_id="call_1")
    await tb.aclose()

Naming of MCP tools (K5): a tool keeps its own name when no other source has it. If the name is
taken (by a builtin tool or a server started earlier in config order) it is registered as
``<server>__<tool>`` (server name lower-cased, non-alphanumerics → ``_``); if that is taken too,
or the tool's definition is unusable, it is refused and the reason is kept in
:attr:`Toolbox.problems`. Names that break the snake_case convention (``getTinyImage``,
``get-sum``) are converted (``get_tiny_image``, ``get_sum``); calls use the server's name.
Nothing is ever silently shadowed.

Metadata of an MCP tool's ToolSpec, first source that says wins: the user's ``mcpServers``
entry (``tools.<tool>``: ``side_effect``, ``idempotent``, ``requested_by``, ``artifact_field``,
``timeout_s``; ``timeoutSeconds`` of the server; see :mod:`tools.mcp.config`), then the server:
``side_effect`` = not ``readOnlyHint`` (MCP default: not read-only, so a side effect, run at
most once per ``request_id``), ``idempotent`` = ``idempotentHint`` (read-only tools count as
idempotent when the server does not say), ``requested_by`` / ``artifact_field`` from the
tool's ``_meta`` keys ``"hermes/requested_by"`` / ``"hermes/artifact_field"``; ``timeout_s``
defaults to the toolbox timeout.
"""

from __future__ import annotations

import asyncio
import logging
import re
from pathlib import Path
from typing import Any

from tools.builtin.catalog import register_builtin_tools
from tools.builtin.database.schema import schema_summary
from tools.content_checks import META_CONTENT_ARG, META_SHARE_FIELD
from tools.database_setting import database_location
from tools.errors import ToolDefinitionError
from tools.executors import make_executor
from tools.executors.base import Executor
from tools.idempotency import IdempotencyLedger
from tools.ledgers import open_ledger
from tools.mcp.client import MCPClient, MCPServer
from tools.mcp.config import (
    META_ARTIFACT_FIELD,
    META_DESTINATION_ARGS,
    META_REQUESTED_BY,
    META_SENSITIVE,
    MCPConfigError,
    ToolOverride,
    check_patterns,
    load_config,
    team_chat_entry,
)
from tools.mcp.replicas import Replica, call_replicas, ranked
from tools.mcp.server_core import STARTUP_TIMEOUT_S
from tools.mcp.tool_listing import MCPTool
from tools.registry import Runner, ToolRegistry
from tools.schema_versions import SchemaStore
from tools.selection import ToolHealth
from tools.spec import HEAVY_TIMEOUT_S, NAME_RE, ToolSpec

log = logging.getLogger(__name__)

#: Name of the bundled team-chat server started when no MCP config is given.
TEAM_CHAT_SERVER = "team_chat"
#: Folder of ``data_dir`` where images and other binary MCP results are saved (their handles).
MEDIA_DIR = "mcp_media"


def snake_name(name: str) -> str:
    """``getTinyImage`` → ``get_tiny_image``; ``get-sum`` → ``get_sum``; max 64 chars."""
    s = re.sub(r"(?<=[a-z0-9])([A-Z])", r"_\1", name)
    s = re.sub(r"[^a-z0-9_]+", "_", s.lower()).strip("_")
    s = re.sub(r"_{3,}", "__", s)
    if not s or not s[0].isalpha():
        s = "t_" + s
    return s[:64]


class Toolbox:
    """Registry + executor + MCP client, opened and closed together.

    Attributes:
        data_dir   where reminders.db, reports/ and team_chat.db live.
        database   absolute path of the user's database the data tools read ("" = none
                   configured; see ``open``).
        registry   :class:`ToolRegistry` with every usable tool.
        executor   the executor builtin tools run in (subprocess by default; see ``open``).
        ledger     the idempotency ledger (``data_dir/idempotency.db``, or PostgreSQL: see ``open``).
        schemas    the tool schema versions (``data_dir/tool_schemas.db``).
        mcp        :class:`MCPClient` (``mcp.servers``, ``mcp.failed``).
        problems   ``{server or tool: reason}`` for servers that failed to start (K8) and
                   MCP tools refused at registration (K5); empty when all is well.
    """

    def __init__(self, data_dir: Path, registry: ToolRegistry, executor: Executor, mcp: MCPClient) -> None:
        self.data_dir = data_dir
        self.registry = registry
        self.executor = executor
        self.mcp = mcp
        self.problems: dict[str, str] = {}
        self._mcp_names: set[str] = set()
        #: Registered MCP tool name → its replicas (server, tool name there, answer timeout, hard limit).
        self.mcp_replicas: dict[str, list[Replica]] = {}
        self._mcp_timeouts: tuple[float, dict[str, float] | None] = (10.0, None)
        self.ledger: IdempotencyLedger = registry.ledger
        self.schemas: SchemaStore | None = registry.schema_store
        #: the user's database the data tools read, resolved ("" = none configured)
        self.database: str = ""
        self._closed = False
        registry.health_source = self.tool_health

    @classmethod
    async def open(
        cls,
        data_dir: Path,
        mcp_config: Path | None = None,
        timeout_s: float = 10.0,
        *,
        startup_timeout_s: float | None = None,
        executor: str | Executor | None = None,
        remote_url: str | None = None,
        remote_token: str | None = None,
        container_image: str | None = None,
        database: str | None = None,
        heavy_timeout_s: float = HEAVY_TIMEOUT_S,
        tool_timeouts: dict[str, float] | None = None,
        postgres_url: str = "",
    ) -> Toolbox:
        """Create dirs, register builtin tools, start the MCP servers of ``mcp_config``
        (``{"mcpServers": {...}}`` JSON, merged with the bundled team-chat server: an entry named ``team_chat`` replaces it, ``"enabled": false`` leaves a server out) and register
        their tools.

        ``database``: the user's database the data tools (describe_database, query_database,
        generate_report) read — an SQLite file path or ``sqlite:///path`` URL, relative paths
        against the current directory (resolved in a thread); None or "" = none. Nothing is created or generated: an empty, missing or non-SQLite setting
        still opens the toolbox, and those tools answer with an error saying how to set it
        (:attr:`database` holds the resolved path). An :class:`Executor` instance passed as
        ``executor`` keeps its own database.

        Timeouts, seconds (seed §2.2): ``timeout_s`` is the limit of every ordinary tool, builtin
        and MCP (an MCP server's config may set its own); ``heavy_timeout_s`` that of builtin
        tools declared heavy; ``tool_timeouts`` ``{tool name: seconds}`` overrides both, per
        tool (MCP tools by their registered name). Server start-up (process + ``initialize`` +
        ``tools/list``) is bounded by ``startup_timeout_s`` (default ``max(timeout_s, 15 s)``).
        A server that fails is recorded in :attr:`problems`; the toolbox still opens.
        Async-safe for ``langgraph dev`` (file work runs in a thread). Bound to the running
        event loop. Raises MCPConfigError for an unreadable config file.

        ``executor``: backend of the builtin tools, "subprocess" (default) | "container"
        (docker/podman use ``container_image``) | "remote" (needs ``remote_url``; ``remote_token``
        is its bearer token) | an :class:`Executor` instance. Every setting is an argument: this
        module reads no environment variable (``graph.resources`` passes ``Context``'s values). A container choice with no working
        sandbox raises :class:`~tools.executors.container.SandboxUnavailable` (no fall-back).
        Side-effect calls are recorded in ``data_dir/idempotency.db`` (replayed per request_id
        across restarts), or, with ``postgres_url`` (``HERMES_POSTGRES_URL``), in that
        PostgreSQL database, shared by every process and machine naming it
        (:class:`~tools.ledger_postgres.PostgresLedger`); tool schema versions in ``data_dir/tool_schemas.db``
        (``registry.migration_notes`` lists changes since the last run).
        """
        # All file-system work (resolve, mkdir, database path, config read, sandbox probe,
        # SQLite loads) off the event loop.
        data_dir, servers, chosen, ledger, schemas, location = await asyncio.to_thread(
            _prepare,
            Path(data_dir),
            mcp_config,
            executor,
            remote_url,
            database,
            {"token": remote_token} if remote_token else {},
            {"image": container_image} if container_image else {},
            postgres_url,
        )
        registry = ToolRegistry(ledger=ledger, schema_store=schemas)
        tool_timeouts = tool_timeouts or {}
        # the user's schema in the SQL tools' descriptions (read-only, in a thread)
        schema = await asyncio.to_thread(schema_summary, location) if location else ""
        register_builtin_tools(
            registry,
            chosen,
            ordinary_s=timeout_s,
            heavy_s=heavy_timeout_s,
            overrides=tool_timeouts,
            database_schema=schema,
            postgres_url=postgres_url,
        )
        client = MCPClient(
            servers,
            startup_timeout_s=startup_timeout_s or max(timeout_s, STARTUP_TIMEOUT_S),
            media_dir=data_dir / MEDIA_DIR,
            data_dir=data_dir,
        )
        tb = cls(data_dir, registry, chosen, client)
        tb.database = location
        tb._mcp_timeouts = (timeout_s, tool_timeouts)
        try:
            failed = await client.start()
            tb.problems.update(failed)
            tb._register_servers(client.ready(), timeout_s, tool_timeouts)
            for server in client.servers.values():
                server.on_tools_changed = tb._on_tools_changed
        except BaseException:
            await tb.aclose()
            raise
        return tb

    def _register_server(
        self, server: MCPServer, timeout_s: float, tool_timeouts: dict[str, float] | None = None
    ) -> None:
        """Register the tools of one started server (see :meth:`_register_servers`)."""
        self._register_servers([server], timeout_s, tool_timeouts)

    def _register_servers(
        self, servers: list[MCPServer], timeout_s: float, tool_timeouts: dict[str, float] | None = None
    ) -> None:
        """Register the tools of started servers, in config order. ``timeout_s``: the toolbox
        answer timeout, used when neither the server entry (``timeoutSeconds``) nor the tool's
        override sets one; ``tool_timeouts`` (the ``tool_timeouts`` setting, by registered name)
        wins over all. Overrides naming no listed tool, unusable ``_meta`` metadata and tools
        skipped for their schema go to :attr:`problems`.

        Replicas (seed §5.3): tools of servers in one ``replicaGroup`` with the same name, or
        tools of any servers with the same name, description, schema and behaviour hints, are
        *one* logical tool: one ToolSpec whose runner calls the best-scored healthy server and
        fails over when that is safe (:func:`tools.mcp.replicas.call_replicas`)."""
        groups: dict[str, list[tuple[MCPServer, MCPTool, ToolOverride]]] = {}
        for server in servers:
            settings = server.settings
            for tool_name, reason in getattr(server, "skipped", {}).items():
                self.problems[f"{server.name}:{tool_name}"] = reason
            by_name = {**{snake_name(t): t for t in server.tools}, **{t: t for t in server.tools}}
            overrides: dict[str, ToolOverride] = {}
            for key, override in settings.tools.items():
                if key not in by_name:
                    self.problems[f"{server.name}:tools.{key}"] = (
                        f"MCP server '{server.name}': config 'tools.{key}' names a tool the server does not "
                        f"list ({', '.join(sorted(server.tools)) or 'none'}); override ignored"
                    )
                    continue
                overrides[by_name[key]] = override
            for tool in server.tools.values():
                group = getattr(settings, "replica_group", None)
                key = f"group:{group}:{tool.name}" if group else f"same:{tool.signature()}"
                groups.setdefault(key, []).append((server, tool, overrides.get(tool.name) or ToolOverride()))
        for members in groups.values():
            self._register_logical(members, timeout_s, tool_timeouts)

    def _register_logical(
        self,
        members: list[tuple[MCPServer, MCPTool, ToolOverride]],
        timeout_s: float,
        tool_timeouts: dict[str, float] | None,
    ) -> None:
        server, tool, override = members[0]
        base = snake_name(tool.name)
        candidates = [base, f"{snake_name(server.name)}__{base}"[:64]]
        existing = self.registry.get(base)
        if existing is not None:
            log.warning("MCP tool %s of %s collides with %s; namespacing", tool.name, server.name, existing.source)
        name = next((c for c in candidates if c not in self.registry and NAME_RE.fullmatch(c)), None)
        if name is None:
            self.problems[f"{server.name}:{tool.name}"] = f"refused: names {candidates} are taken or invalid"
            return
        replicas = []
        for srv, t, ov in members:
            answer = (tool_timeouts or {}).get(name) or ov.timeout_s or srv.settings.timeout_s or timeout_s
            hard = max(
                answer, ov.max_timeout_s or getattr(srv.settings, "max_timeout_s", None) or max(answer, HEAVY_TIMEOUT_S)
            )
            replicas.append(Replica(srv, t.name, answer, hard))
        meta = self._tool_metadata(server, tool, override, replicas[0].timeout_s)
        # the registry's limit is the hard one: a call that keeps reporting progress may run that
        # long; one that neither answers nor reports progress ends at its answer timeout
        meta["timeout_s"] = max(r.max_timeout_s for r in replicas)
        where = server.name if len(members) == 1 else "+".join(dict.fromkeys(m[0].name for m in members))
        description = tool.description or f"MCP tool {tool.name} of server {server.name}"
        spec = ToolSpec(name=name, description=description, parameters=tool.input_schema, source=f"mcp:{where}", **meta)
        try:
            self.registry.register(spec, _mcp_runner(replicas, spec), strict=False)
        except ToolDefinitionError as exc:
            self.problems[f"{server.name}:{tool.name}"] = str(exc)
            return
        self._mcp_names.add(name)
        self.mcp_replicas[name] = replicas
        if len(members) > 1:
            log.info("MCP tool %s: one logical tool served by %s", name, where)

    def _on_tools_changed(self, server: MCPServer) -> None:
        """A server's tool list changed (``tools/list_changed``, a restart, a probe that brought
        it back): re-register every MCP tool (unchanged ones keep their names)."""
        if self._closed:
            return
        for name in sorted(self._mcp_names):
            self.registry.unregister(name)
        self._mcp_names.clear()
        self.mcp_replicas.clear()
        self.problems = {
            k: v
            for k, v in self.problems.items()
            if k not in self.mcp.servers and k.split(":", 1)[0] not in self.mcp.servers
        }
        timeout_s, tool_timeouts = self._mcp_timeouts
        self._register_servers(self.mcp.ready(), timeout_s, tool_timeouts)
        for srv in self.mcp.servers.values():
            if srv.tools_version == 0 and srv.error:
                self.problems.setdefault(srv.name, f"MCP server '{srv.name}': {srv.error}")
        log.info("MCP tools re-registered after %s changed: %d MCP tools", server.name, len(self._mcp_names))

    def tool_health(self, name: str) -> ToolHealth | None:
        """Health of the MCP server(s) behind tool ``name`` (None for a tool that is not an
        MCP tool): the seed score of its best replica (:func:`tools.mcp.client.ranked`: serving
        before failed before parked, then by score), available unless every replica is parked
        by its circuit breaker (then a note naming the servers and the next probe, seconds)."""
        replicas = self.mcp_replicas.get(name)
        if not replicas:
            return None
        best = ranked(replicas)[0].server
        parked = [r.server for r in replicas if r.server.breaker.parked]
        if len(parked) < len(replicas):
            return ToolHealth(score=best.score.value)
        names = ", ".join(dict.fromkeys(s.name for s in parked))
        wait = min(s.breaker.probe_due_in() for s in parked)
        note = (
            f"unavailable now: MCP server {names} is paused after failing repeatedly "
            f"({best.breaker.last_error}); next retry in about {wait:.0f} s"
        )
        return ToolHealth(score=best.score.value, available=False, note=note)

    def mcp_status(self) -> list[dict[str, Any]]:
        """Every MCP server's pool, score and circuit breaker (``hermes mcp list``, metrics)."""
        return self.mcp.status() if self.mcp is not None else []

    def _tool_metadata(
        self, server: MCPServer, tool: MCPTool, override: ToolOverride, timeout_s: float
    ) -> dict[str, Any]:
        """ToolSpec metadata of one MCP tool: the user's override, else the server's
        annotations and ``_meta``, else the defaults (see the module docstring)."""
        side_effect = override.side_effect if override.side_effect is not None else not tool.read_only
        idempotent = next(v for v in (override.idempotent, tool.idempotent_hint, not side_effect) if v is not None)
        bad: list[str] = []
        requested_by = override.requested_by
        if requested_by is None and META_REQUESTED_BY in tool.meta:
            try:
                requested_by = tuple(check_patterns(f"_meta {META_REQUESTED_BY!r}", tool.meta[META_REQUESTED_BY]))
            except MCPConfigError as exc:
                bad.append(str(exc))
        artifact = override.artifact_field
        if artifact is None and META_ARTIFACT_FIELD in tool.meta:
            value = tool.meta[META_ARTIFACT_FIELD]
            if isinstance(value, str) and value.strip():
                artifact = value
            else:
                bad.append(f"_meta {META_ARTIFACT_FIELD!r} must be a non-empty string, got {value!r}")
        # where the effect goes, and sensitive results (DESIGN §2.8); without them the
        # destination arguments follow the parameter names (ToolSpec.destination_params)
        destinations = override.destination_args
        if destinations is None:
            destinations = tool.meta.get(META_DESTINATION_ARGS)
        if destinations is not None and not (
            isinstance(destinations, (list, tuple)) and all(isinstance(d, str) and d for d in destinations)
        ):
            bad.append(f"_meta {META_DESTINATION_ARGS!r} must be a list of argument names, got {destinations!r}")
            destinations = None
        sensitive = override.sensitive if override.sensitive is not None else tool.meta.get(META_SENSITIVE, False)
        if not isinstance(sensitive, bool):
            bad.append(f"_meta {META_SENSITIVE!r} must be true or false, got {sensitive!r}")
            sensitive = True  # a server that meant to say something: the safe side
        # which argument is the delivered content, which result field is there to share
        content_meta = {
            key: value
            for key, meta_key in (("content_arg", META_CONTENT_ARG), ("share_field", META_SHARE_FIELD))
            if (value := tool.meta.get(meta_key)) is not None
        }
        for key, value in list(content_meta.items()):
            if not (isinstance(value, str) and value.strip()):
                bad.append(f"_meta for {key} must be a non-empty string, got {value!r}")
                del content_meta[key]
        if bad:
            self.problems[f"{server.name}:{tool.name}:_meta"] = "ignored: " + "; ".join(bad)
            log.warning("MCP tool %s of %s: ignored metadata: %s", tool.name, server.name, "; ".join(bad))
        return {
            "side_effect": side_effect,
            "idempotent": idempotent,
            "requested_by": requested_by or (),
            "artifact_field": artifact,
            "timeout_s": override.timeout_s or timeout_s,
            "destination_args": None if destinations is None else tuple(destinations),
            "sensitive_results": sensitive,
            "reads": tool.reads or (None if side_effect else "data"),  # a read-only tool reads data
            **content_meta,
        }

    async def aclose(self) -> None:
        """Shut down every MCP session (no orphan processes) and the executor. Idempotent."""
        if self._closed:
            return
        self._closed = True
        try:
            await self.mcp.aclose()
            await self.executor.aclose()
        finally:
            await self.ledger.aclose()
            if self.schemas is not None:
                await asyncio.to_thread(self.schemas.close)

    async def __aenter__(self) -> Toolbox:
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.aclose()


def _mcp_runner(replicas: list[Replica], spec: ToolSpec) -> Runner:
    """Runner of one (logical) MCP tool: ``tools/call`` on the best replica with that replica's
    answer timeout and hard limit, failing over when safe (``spec.retry_safe``)."""
    if len(replicas) == 1:
        rep = replicas[0]

        async def run_one(args: dict[str, Any], request_id: str) -> Any:
            return await rep.server.call_tool(
                rep.tool,
                args,
                timeout_s=rep.timeout_s,
                max_timeout_s=rep.max_timeout_s,
                request_id=request_id,
                retry_safe=spec.retry_safe,
            )

        return run_one

    async def run(args: dict[str, Any], request_id: str) -> Any:
        return await call_replicas(replicas, args, request_id=request_id, retry_safe=spec.retry_safe)

    return run


def _prepare(
    data_dir: Path,
    mcp_config: Path | None,
    executor: str | Executor | None = None,
    remote_url: str | None = None,
    database: str | None = None,
    remote_kw: dict[str, Any] | None = None,
    container_kw: dict[str, Any] | None = None,
    postgres_url: str = "",
) -> tuple[Path, dict[str, dict[str, Any]], Executor, IdempotencyLedger, SchemaStore, str]:
    """Blocking part of :meth:`Toolbox.open` (run in a thread). Never creates the database."""
    data_dir = data_dir.resolve()
    data_dir.mkdir(parents=True, exist_ok=True)
    (data_dir / "reports").mkdir(exist_ok=True)
    # the user's database, resolved against the cwd here (blocking); "" = none configured
    location = database_location(database)
    # the user's servers are merged with the bundled team-chat server, never replace it
    # silently: an entry of the same name replaces it explicitly; "enabled": false leaves a
    # server out (the bundled one included)
    servers = {TEAM_CHAT_SERVER: team_chat_entry(data_dir)}
    if mcp_config is not None:
        servers.update(load_config(mcp_config))
    servers = {
        name: entry
        for name, entry in servers.items()
        if not (isinstance(entry, dict) and entry.get("enabled") is False)
    }
    chosen: Executor
    if executor is None or isinstance(executor, str):
        kind = executor or "subprocess"
        extra = (remote_kw if kind == "remote" else container_kw if kind == "container" else None) or {}
        chosen = make_executor(kind, data_dir, remote_url=remote_url, database=location, **extra)
    else:
        chosen = executor
    schemas = SchemaStore.in_data_dir(data_dir)
    schemas.load()
    return data_dir, servers, chosen, open_ledger(data_dir, postgres_url), schemas, location


__all__ = ["TEAM_CHAT_SERVER", "MCPConfigError", "Toolbox", "snake_name"]
