"""MCP client: a pool of live sessions per server, scored and guarded by a circuit breaker
(DESIGN §3; seed §3.3, §5.3; failure kinds K6–K9).

:class:`MCPServer` is one configured server:

* **Pool.** ``pool.min`` (default 2) sessions are opened at start — :meth:`start` returns as soon
  as the first one is ready, the others join in the background — and up to ``pool.max`` (10)
  under load: a call takes an idle session, else opens a new one while below the max, else
  shares the least-loaded one (MCP multiplexes requests on a session). No call ever opens a
  session just for itself and closes it. Sessions idle for IDLE_CLOSE_S above the min are closed.
* **Transparent replacement.** A session whose process exited, whose channel broke, or that the
  server no longer knows ("Session terminated": a streamable-HTTP server that restarted or
  expired it) is retired — its processes killed — and replaced; the pool refills to its min in
  the background. There is no lifetime reconnect cap.
* **Retries only when safe** (exactly-once, DESIGN §2.4): a call is repeated on a
  fresh session when its request is known not to have run (``sent=False``: not written, session
  already dead, "Session terminated") or when the caller says the tool is ``retry_safe``
  (read-only or idempotent). A side-effect call that may have run is never repeated here.
* **Score** (:mod:`tools.mcp.scoring`), updated after every call; **circuit breaker**: failures
  in a row (failed connect, lost transport, timeout with no ``ping`` answer) park the server:
  calls fail at once with ``sent=False`` and a probe (a new session) runs on a timer, backing
  off; a good probe puts the server back (tools re-registered when they changed).
* **Handshake**: bounded connect, ``initialize`` (client capabilities: elicitation only when the
  server's ``elicitation`` setting answers it), capabilities recorded, ``tools/list`` with
  pagination; ``notifications/tools/list_changed`` re-lists and calls :attr:`on_tools_changed`.
  Tool schemas are normalised once (:func:`tools.schema_normalization.normalize_schema`); a schema that cannot be
  used (a ``$ref`` cycle, an invalid schema) skips only that tool (:attr:`skipped`, a warning).
* **Timeouts**: a call ends after its answer timeout with neither an answer nor a progress
  notification; progress extends it up to its hard limit (``notifications/cancelled`` on both).
* **Lifecycle**: :meth:`aclose` closes every session (stdin closed, SIGTERM, grace, SIGKILL by the
  SDK), then SIGTERM / 1 s / SIGKILL for any process still carrying the server's environment
  marker — re-parented children, ``npx``/``uvx`` wrappers and SIGTERM-ignoring servers (K9).
* Sessions belong to the event loop that started the server; calls and ``aclose()`` from
  another running loop are forwarded to it (``run_coroutine_threadsafe``).

:class:`MCPClient` holds every configured server; :meth:`MCPClient.status` (and
:meth:`MCPServer.status`) is what ``hermes mcp list`` and state metrics read.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from langchain_core.tools import BaseTool
from mcp import types

from tools.errors import ToolFailed, ToolTimeout, ToolTransportError
from tools.mcp.config import ServerSettings, server_settings, to_connection
from tools.mcp.progress import ProgressEvent, ProgressSink, current_sink, emit
from tools.mcp.results import Validator, content_to_json, output_validator, result_to_json  # noqa: F401
from tools.mcp.scoring import Breaker, Score
from tools.mcp.session import (  # noqa: F401 - re-exported
    MARKER_ENV,
    REQUEST_ID_META,
    Handshake,
    MCPSession,
    ProgressFn,
)
from tools.mcp.transport_errors import describe
from tools.procs import KILL_GRACE_S, find_by_env_marker, terminate
from tools.schema_normalization import SchemaNormalizationError, normalize_schema

log = logging.getLogger(__name__)

#: Seconds a session gets to start and answer ``initialize`` + ``tools/list``.
STARTUP_TIMEOUT_S = 15.0
#: Attempts of one call on one server when a retry is safe (fresh session each time).
MAX_ATTEMPTS = 3
#: Seconds a session above the pool's min may stay idle before it is closed.
IDLE_CLOSE_S = 120.0
#: Kept for callers of the former single-session client.
SHUTDOWN_TIMEOUT_S = 8.0


#: ``_meta`` key of a tool: "data" or "schema", what its results hold (``ToolSpec.reads``).
META_READS = "hermes/reads"


@dataclass
class MCPTool:
    """One tool of a server as listed by ``tools/list``: original ``name``, description,
    normalised ``input_schema`` (K6), ``annotations`` (``readOnlyHint``, ``idempotentHint``,
    ``destructiveHint``, ``openWorldHint``, ``title``; only those the server set), ``meta``
    (the tool's ``_meta``, e.g. ``"hermes/requested_by"``), ``output_schema`` (validates
    ``structuredContent``). ``lc_tool`` is kept for callers that want a LangChain tool (None here:
    calls go through :meth:`MCPServer.call_tool`)."""

    name: str
    description: str
    input_schema: dict[str, Any]
    lc_tool: BaseTool | None = field(default=None, repr=False)
    annotations: dict[str, Any] = field(default_factory=dict)
    meta: dict[str, Any] = field(default_factory=dict)
    output_schema: dict[str, Any] | None = None
    _validator: Validator | None = field(default=None, init=False, repr=False, compare=False)
    _checked: bool = field(default=False, init=False, repr=False, compare=False)

    @property
    def output_validator(self) -> Validator | None:
        """The compiled validator of :attr:`output_schema` (built once; None when there is no
        schema, or it is not a valid JSON Schema and so is ignored — a warning)."""
        if not self._checked:
            self._validator = output_validator(self.output_schema, f"MCP tool '{self.name}'")
            self._checked = True
        return self._validator

    @property
    def read_only(self) -> bool:
        """The server's ``readOnlyHint`` (MCP default: False)."""
        return self.annotations.get("readOnlyHint") is True

    @property
    def reads(self) -> str | None:
        """What a result holds (``ToolSpec.reads``): the tool's ``_meta["hermes/reads"]``
        ("data" | "schema"); else "data" for a read-only tool — its result may ground an answer
        about data — and None for a tool with side effects."""
        declared = self.meta.get(META_READS)
        if declared in ("data", "schema"):
            return str(declared)
        return "data" if self.read_only else None

    @property
    def idempotent_hint(self) -> bool | None:
        """The server's ``idempotentHint``; None when it did not say."""
        value = self.annotations.get("idempotentHint")
        return value if isinstance(value, bool) else None

    def signature(self) -> str:
        """What makes two servers' tools the same capability: name, description, schema and
        behaviour hints (replicas of one server list identical tools)."""
        hints = {k: self.annotations.get(k) for k in ("readOnlyHint", "idempotentHint", "destructiveHint")}
        return json.dumps([self.name, self.description, self.input_schema, hints], sort_keys=True, default=str)


def tools_from_listing(server: str, listed: list[types.Tool]) -> tuple[dict[str, MCPTool], dict[str, str]]:
    """``tools/list`` → ``({name: MCPTool}, {name: why it was skipped})``. A tool whose schema
    cannot be normalised or is not a valid JSON Schema is skipped with a warning naming the
    server and the tool; the others are kept."""
    tools: dict[str, MCPTool] = {}
    skipped: dict[str, str] = {}
    for t in listed:
        try:
            schema = normalize_schema(t.inputSchema)
        except SchemaNormalizationError as exc:
            skipped[t.name] = f"MCP server '{server}', tool '{t.name}': skipped, unusable input schema: {exc}"
            log.warning("%s", skipped[t.name])
            continue
        annotations = t.annotations.model_dump(exclude_none=True) if t.annotations is not None else {}
        output = t.outputSchema if isinstance(t.outputSchema, dict) else None
        tools[t.name] = MCPTool(
            name=t.name,
            description=" ".join((t.description or "").split()),
            input_schema=schema,
            annotations=annotations,
            meta=dict(t.meta or {}),
            output_schema=output,
        )
    return tools, skipped


class MCPServer:
    """One MCP server and its pool of sessions (module docstring).

    ``state``: "new" → "ready" (serving) | "failed" (never started, or no live session and the
    last connect failed) | "parked" (circuit breaker open) → "closed".

    Args:
        name              server name from ``mcpServers``.
        entry             its config entry (see :mod:`tools.mcp.config`); Hermes keys in
                          :attr:`settings`.
        startup_timeout_s bound on opening one session (process/channel + ``initialize`` +
                          ``tools/list``), seconds.
        media_dir         where image/audio/binary payloads of results are saved (None: not saved).
        data_dir          where OAuth tokens are stored (``auth`` entries; None: in memory).
    Raises MCPConfigError (a ValueError naming the server and field) for a bad entry.
    """

    def __init__(
        self,
        name: str,
        entry: dict[str, Any],
        *,
        startup_timeout_s: float = STARTUP_TIMEOUT_S,
        media_dir: Path | None = None,
        data_dir: Path | None = None,
    ) -> None:
        self.name = name
        self.startup_timeout_s = startup_timeout_s
        self.connection = to_connection(name, entry)
        self.settings: ServerSettings = server_settings(name, entry)
        self.transport: str = self.connection["transport"]
        self.marker = f"{name}-{uuid.uuid4().hex}"
        self.media_dir = media_dir
        self.data_dir = data_dir
        self.state = "new"
        self.error: str | None = None
        self.server_info: dict[str, Any] = {}
        self.capabilities: dict[str, Any] = {}
        self.protocol_version: str | None = None
        self.instructions: str | None = None
        self.tools: dict[str, MCPTool] = {}
        self.skipped: dict[str, str] = {}
        self.score = Score()
        self.breaker = Breaker(
            failures=self.settings.breaker_failures,
            cooldown_s=self.settings.breaker_cooldown_s,
            max_cooldown_s=self.settings.breaker_max_cooldown_s,
        )
        #: Sessions opened to replace ones that died (no cap).
        self.reconnects = 0
        self.handshake_s: float | None = None
        self.tools_version = 0
        #: Called (no arguments but the server) after the tool list changed (list_changed,
        #: a probe that brought the server back, a restart with other tools).
        self.on_tools_changed: Callable[[MCPServer], Any] | None = None
        #: Last progress notification per tool: name → (progress, total, message).
        self.progress: dict[str, tuple[float, float | None, str | None]] = {}
        self.sessions: list[MCPSession] = []
        self._opening: set[MCPSession] = set()
        self._index = 0
        self._loop: asyncio.AbstractEventLoop | None = None
        self._tasks: set[asyncio.Task[Any]] = set()
        self._refills: set[asyncio.Task[Any]] = set()
        self._probe: asyncio.Task[None] | None = None
        self._relisting: asyncio.Task[None] | None = None
        self._closing = False
        self._auth: Any = None

    # -- status ------------------------------------------------------------------------------
    def status(self) -> dict[str, Any]:
        """Pool, score and breaker of this server (for ``hermes mcp list`` and state metrics)."""
        live = [s for s in self.sessions if s.alive]
        return {
            "name": self.name,
            "transport": self.transport,
            "state": self.state,
            "error": self.error,
            "protocol_version": self.protocol_version,
            "server_info": self.server_info,
            "capabilities": sorted(self.capabilities),
            "tools": len(self.tools),
            "skipped_tools": sorted(self.skipped),
            "replica_group": self.settings.replica_group,
            "pool": {
                "min": self.settings.pool_min,
                "max": self.settings.pool_max,
                "live": len(live),
                "opening": len(self._opening),
                "busy": sum(1 for s in live if s.inflight),
                "inflight": sum(s.inflight for s in live),
            },
            "reconnects": self.reconnects,
            "handshake_s": self.handshake_s,
            **self.score.as_dict(),
            "breaker": self.breaker.as_dict(),
        }

    def metrics(self) -> dict[str, Any]:
        """The compact part of :meth:`status` kept in the graph state's ``metrics["mcp_servers"]``
        (numbers, not the server's info): ``{"name", "state", "score", "latency_ema_s" (seconds,
        None before the first call), "success" (0..1), "calls", "failures", "breaker" (closed |
        open | half_open), "breaker_trips", "live_sessions"}``."""
        score = self.score.as_dict()
        return {
            "name": self.name,
            "state": self.state,
            "score": score["score"],
            "latency_ema_s": score["latency_ema_s"],
            "success": score["success"],
            "calls": score["calls"],
            "failures": score["failures"],
            "breaker": self.breaker.state,
            "breaker_trips": self.breaker.trips,
            "live_sessions": sum(1 for s in self.sessions if s.alive),
        }

    # -- lifecycle -------------------------------------------------------------------------
    async def start(self) -> None:
        """Open ``pool.min`` sessions concurrently; return once one is ready (``tools/list``
        known). Raises ToolTransportError (``sent=False``) naming the server when none starts
        (bounded by ``startup_timeout_s``); the breaker then probes it back on its timer."""
        if self._loop is not None:
            raise RuntimeError(f"MCP server '{self.name}' already started")
        self._loop = asyncio.get_running_loop()
        opens = [asyncio.ensure_future(self._open()) for _ in range(self.settings.pool_min)]
        for t in opens:
            self._track(t)
        pending = set(opens)
        errors: list[BaseException] = []
        while pending:
            done, pending = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
            for t in done:
                if t.exception() is None:
                    return  # the others keep opening in the background
                errors.append(t.exception())  # type: ignore[arg-type]
        reason = str(errors[0]) if errors else "no session"
        self.state = "failed"
        self.error = reason.split(": ", 1)[1] if reason.startswith(f"MCP server '{self.name}': ") else reason
        self.breaker.trip(self.error)
        self._schedule_probe()
        raise (
            errors[0]
            if errors and isinstance(errors[0], ToolTransportError)
            else ToolTransportError(self.name, self.error, sent=False)
        )

    def _track(self, task: asyncio.Task[Any]) -> asyncio.Task[Any]:
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        task.add_done_callback(lambda t: t.cancelled() or t.exception())  # no "never retrieved" noise
        return task

    def _connection(self) -> dict[str, Any]:
        conn = dict(self.connection)
        if self.settings.auth and self.transport != "stdio":
            if self._auth is None:
                from tools.mcp.auth import oauth_provider  # imported only for servers with auth

                self._auth = oauth_provider(self.name, self.connection["url"], self.settings.auth, self.data_dir)
            conn["auth"] = self._auth
        return conn

    async def _open(self) -> MCPSession:
        """Open one session and add it to the pool. Failures count for the breaker and raise
        ToolTransportError (``sent=False``)."""
        if self._closing:
            raise ToolTransportError(self.name, "closing", sent=False)
        self._index += 1
        session = MCPSession(
            self.name,
            self._connection(),
            startup_timeout_s=self.startup_timeout_s,
            server_marker=self.marker,
            index=self._index,
            elicitation=self.settings.elicitation,
            on_notification=self._on_notification,
        )
        self._opening.add(session)
        try:
            hs = await session.start()
        except ToolTransportError as exc:
            if not self._closing:
                self._failure(session.error or str(exc))
            raise
        finally:
            self._opening.discard(session)
        if self._closing:
            await session.close()
            raise ToolTransportError(self.name, "closing", sent=False)
        self.sessions.append(session)
        self._learn(hs)
        if self.breaker.state == "half_open":
            self.breaker.probe_ok()
        self.state, self.error = "ready", None
        return session

    def _learn(self, hs: Handshake) -> None:
        """Record a handshake; a changed tool list bumps :attr:`tools_version` and notifies."""
        self.protocol_version, self.capabilities = hs.protocol_version, hs.capabilities
        self.server_info, self.instructions = hs.server_info, hs.instructions
        if self.handshake_s is None:
            self.handshake_s = hs.seconds
        self._set_tools(hs.tools)

    def _set_tools(self, listed: list[types.Tool]) -> None:
        tools, skipped = tools_from_listing(self.name, listed)
        changed = self.tools_version == 0 or (
            {n: t.signature() for n, t in tools.items()} != {n: t.signature() for n, t in self.tools.items()}
        )
        self.tools, self.skipped = tools, skipped
        if not changed:
            return
        if self.tools_version:
            log.warning("MCP server %s changed its tool list: %d tools", self.name, len(tools))
        self.tools_version += 1
        if self.tools_version > 1 and self.on_tools_changed is not None:
            try:
                self.on_tools_changed(self)
            except Exception:  # noqa: BLE001
                log.exception("MCP server %s: re-registering its tools failed", self.name)

    def _failure(self, reason: str) -> None:
        if self.breaker.failure(reason):
            log.warning(
                "MCP server %s parked by its circuit breaker after %d failures in a row (%s); probing again in %.1f s",
                self.name,
                self.breaker.consecutive,
                reason,
                self.breaker.current_cooldown_s,
            )
            self.state, self.error = "parked", reason
            self._schedule_probe()
        elif not any(s.alive for s in self.sessions):
            self.state, self.error = ("failed" if self.state != "parked" else "parked"), reason

    def _schedule_probe(self) -> None:
        if self._closing or (self._probe is not None and not self._probe.done()):
            return
        self._probe = self._track(asyncio.ensure_future(self._probe_loop()))

    async def _probe_loop(self) -> None:
        """Wait out the cooldown, then try a new session; repeat (backing off) until one opens."""
        while not self._closing and self.breaker.state in ("open", "half_open"):
            await asyncio.sleep(max(0.05, self.breaker.probe_due_in()))
            if self._closing:
                return
            self.breaker.state = "half_open"
            first = self.tools_version == 0
            try:
                await self._open()
            except ToolTransportError as exc:
                log.info(
                    "MCP server %s: probe failed (%s); next in %.1f s", self.name, exc, self.breaker.current_cooldown_s
                )
                continue
            log.info("MCP server %s is back (probe succeeded)", self.name)
            if first and self.on_tools_changed is not None:  # it never started before: register
                self.on_tools_changed(self)
            self._refill()
            return

    def _refill(self) -> None:
        """Open sessions in the background until the pool has its min (unless parked/closing)."""
        if self._closing or self.breaker.parked:
            return
        missing = self.settings.pool_min - len([s for s in self.sessions if s.alive]) - len(self._opening)
        for _ in range(max(0, missing)):
            task = self._track(asyncio.ensure_future(self._open()))
            self._refills.add(task)
            task.add_done_callback(self._refills.discard)

    def _retire(self, session: MCPSession) -> None:
        """Drop a dead (or surplus) session from the pool; its processes are killed in the background."""
        if session in self.sessions:
            self.sessions.remove(session)
            if session.state != "closed":
                self._track(asyncio.ensure_future(session.close()))
            if not self._closing and session.state == "failed":
                self.reconnects += 1
                if session.calls == 0:  # died with no call on it: the server's failure, not a call's
                    self._failure(session.error or "session ended")
                if not any(s.alive for s in self.sessions) and self.state == "ready":
                    self.state, self.error = "failed", session.error
                self._refill()  # replace it in the background (no lifetime cap)

    def _prune(self) -> None:
        for s in list(self.sessions):
            if not s.alive:
                self._retire(s)
        now = time.monotonic()
        idle = [s for s in self.sessions if s.alive and s.inflight == 0 and now - s.last_used > IDLE_CLOSE_S]
        extra = len([s for s in self.sessions if s.alive]) - self.settings.pool_min
        for s in idle[: max(0, extra)]:
            self.sessions.remove(s)
            self._track(asyncio.ensure_future(s.close()))

    async def _acquire(self) -> MCPSession:
        """A live session for one call (module docstring). Raises ToolTransportError
        (``sent=False``) when the server is parked or no session can be opened."""
        self._prune()
        if self.breaker.parked:
            raise ToolTransportError(
                self.name,
                f"parked by its circuit breaker after {self.breaker.consecutive} "
                f"failures in a row ({self.breaker.last_error}); next probe in "
                f"{self.breaker.probe_due_in():.1f} s",
                sent=False,
            )
        live = [s for s in self.sessions if s.alive]
        if not live and self._refills:  # a replacement is already opening: use it, not another one
            await asyncio.wait(
                set(self._refills), timeout=self.startup_timeout_s + 3, return_when=asyncio.FIRST_COMPLETED
            )
            live = [s for s in self.sessions if s.alive]
        idle = [s for s in live if s.inflight == 0]
        if idle:
            chosen = max(idle, key=lambda s: s.last_used)
        elif not live or len(live) + len(self._opening) < self.settings.pool_max:
            try:
                chosen = await self._open()
            except ToolTransportError:
                live = [s for s in self.sessions if s.alive]
                if not live:
                    raise
                chosen = min(live, key=lambda s: s.inflight)
        else:
            chosen = min(live, key=lambda s: s.inflight)
        self._refill()
        return chosen

    async def reconnect(self) -> None:
        """Replace every session with fresh ones (new processes for stdio; the old ones are shut
        down first, nothing left behind, K9). Raises ToolTransportError naming the server if no
        new session opens."""
        if self._loop is not None and self._loop is not asyncio.get_running_loop():
            return await _on_loop(self.name, self._loop, self.reconnect())
        if self._closing or self._loop is None:
            raise ToolTransportError(self.name, f"cannot reconnect a server that is {self.state}", sent=False)
        old, self.sessions = list(self.sessions), []
        await asyncio.gather(*(s.close() for s in old), return_exceptions=True)
        self.reconnects += len(old)
        self.breaker.success()
        await self._open()
        self._refill()
        log.info("MCP server %s reconnected (%d)", self.name, self.reconnects)

    async def aclose(self) -> None:
        """Close every session and kill any leftover process of the server. Idempotent."""
        if self.state == "closed":
            return
        if self._loop is not None and self._loop is not asyncio.get_running_loop():
            await _on_loop(self.name, self._loop, self.aclose())
            return
        self._closing = True
        for t in list(self._tasks):
            if t is self._probe or t is self._relisting:
                t.cancel()
        sessions = list(self.sessions) + list(self._opening)
        self.sessions = []
        await asyncio.gather(*(s.close() for s in sessions), return_exceptions=True)
        if self._tasks:
            await asyncio.wait(list(self._tasks), timeout=SHUTDOWN_TIMEOUT_S)
        if self.transport == "stdio":
            await asyncio.to_thread(self.kill_leftovers)
        self.state = "closed"

    def pids(self) -> list[int]:
        """PIDs of every live process of this stdio server, all sessions (env marker). Blocking."""
        if self.transport != "stdio":
            return []
        return sorted(p.pid for p in find_by_env_marker(MARKER_ENV, self.marker))

    def kill_leftovers(self, grace_s: float = KILL_GRACE_S) -> list[int]:
        """SIGTERM / grace / SIGKILL every process still carrying the server's marker. Blocking."""
        procs = find_by_env_marker(MARKER_ENV, self.marker)
        if procs:
            log.warning(
                "MCP server %s left %d process(es) after shutdown; killing %s",
                self.name,
                len(procs),
                [p.pid for p in procs],
            )
        return terminate(procs, grace_s)

    # -- notifications -----------------------------------------------------------------------
    def _on_notification(self, session: MCPSession, note: Any) -> Any:
        if isinstance(note, types.ToolListChangedNotification):
            if self._relisting is None or self._relisting.done():
                self._relisting = self._track(asyncio.ensure_future(self._relist(session)))
        elif isinstance(note, types.LoggingMessageNotification):
            log.debug("MCP server %s log (%s): %s", self.name, note.params.level, note.params.data)
        return None

    async def _relist(self, session: MCPSession) -> None:
        for _ in range(50):  # a notification sent during the handshake: list once the session is up
            if session.state != "new":
                break
            await asyncio.sleep(0.1)
        try:
            listed = await session.list_tools()
        except Exception as exc:  # noqa: BLE001 - the next session's handshake lists again
            log.warning("MCP server %s: tools/list after list_changed failed: %s", self.name, describe(exc))
            return
        log.info("MCP server %s: tools/list_changed → %d tools", self.name, len(listed))
        self._set_tools(listed)

    # -- calls -------------------------------------------------------------------------------
    async def call_tool(
        self,
        tool: str,
        args: dict[str, Any],
        *,
        timeout_s: float,
        max_timeout_s: float | None = None,
        request_id: str = "",
        retry_safe: bool = False,
        local_retry: bool = True,
        on_progress: ProgressFn | None = None,
    ) -> Any:
        """``tools/call`` on a pooled session; returns the result as JSON/text
        (:func:`tools.mcp.results.result_to_json`).

        ``timeout_s``: answer timeout (no answer and no progress); ``max_timeout_s``: hard limit
        while progress arrives (default ``timeout_s``). ``retry_safe``: the tool may be repeated
        (read-only or idempotent); with ``local_retry`` such a call that lost its session is
        repeated on a fresh one. Requests known not to have run are always retried (up to
        MAX_ATTEMPTS sessions).

        Progress notifications go to ``on_progress`` when given; otherwise they are logged,
        recorded in :attr:`progress` and handed to the sink of :func:`tools.mcp.progress.progress_to`
        (a :class:`tools.mcp.progress.ProgressEvent`) when the caller set one.

        Raises ToolFailed (``isError`` result with its text and structured payload, JSON-RPC
        error, output-schema mismatch), ToolTimeout (cancellation sent), ToolTransportError
        (``sent=False`` when the request never ran: parked, not connected, not written, session
        terminated; ``sent=True`` when it may have run).
        """
        if self._loop is not None and self._loop is not asyncio.get_running_loop():
            return await _on_loop(
                self.name,
                self._loop,
                self.call_tool(
                    tool,
                    args,
                    timeout_s=timeout_s,
                    max_timeout_s=max_timeout_s,
                    request_id=request_id,
                    retry_safe=retry_safe,
                    local_retry=local_retry,
                    on_progress=on_progress,
                ),
            )
        if self._closing or self._loop is None:
            raise ToolTransportError(self.name, f"not connected ({self.error or self.state})", sent=False)
        mcp_tool = self.tools.get(tool)
        if mcp_tool is None and self.tools_version:
            raise ToolFailed(f"MCP server '{self.name}' has no tool {tool!r}")
        reporter = on_progress or self._progress_reporter(tool, request_id, current_sink())
        attempt = 0
        while True:
            attempt += 1
            try:
                session = await self._acquire()
            except ToolTransportError:
                if self.tools_version == 0 and not self.breaker.parked:
                    self.state = "failed"
                raise
            if mcp_tool is None:  # the first handshake just happened
                mcp_tool = self.tools.get(tool)
                if mcp_tool is None:
                    raise ToolFailed(f"MCP server '{self.name}' has no tool {tool!r}")
            t0 = time.perf_counter()
            try:
                raw = await session.call(
                    tool,
                    args,
                    answer_timeout_s=timeout_s,
                    hard_timeout_s=max_timeout_s,
                    request_id=request_id,
                    on_progress=reporter,
                )
            except ToolTransportError as exc:
                self.score.update(time.perf_counter() - t0, False)
                self._failure(str(exc))
                self._retire(session)
                if (
                    attempt < MAX_ATTEMPTS
                    and not self.breaker.parked
                    and (not exc.sent or (retry_safe and local_retry))
                ):
                    log.info(
                        "MCP server %s: retrying %s on a fresh session (%s)",
                        self.name,
                        tool,
                        "not run" if not exc.sent else "retry-safe tool",
                    )
                    continue
                raise
            except ToolTimeout:
                self.score.update(time.perf_counter() - t0, False)
                raise
            except ToolFailed:
                self.score.update(time.perf_counter() - t0, True)
                self.breaker.success()
                raise
            self.score.update(time.perf_counter() - t0, True)
            self.breaker.success()
            if self.state == "failed":
                self.state, self.error = "ready", None
            if self.media_dir is not None and any(
                getattr(b, "type", "") in ("image", "audio", "resource") for b in raw.content or []
            ):
                return await asyncio.to_thread(result_to_json, raw, mcp_tool.output_validator, self.media_dir)
            return result_to_json(raw, mcp_tool.output_validator, None)

    def _progress_reporter(self, tool: str, request_id: str, sink: ProgressSink | None) -> ProgressFn:
        """Progress of one call: logged, recorded in :attr:`progress`, handed to ``sink``."""

        def report(progress: float, total: float | None, message: str | None) -> None:
            self.progress[tool] = (progress, total, message)
            log.info(
                "MCP server %s: %s progress %g%s%s",
                self.name,
                tool,
                progress,
                f"/{total:g}" if total else "",
                f" ({message})" if message else "",
            )
            emit(
                sink,
                ProgressEvent(
                    type="mcp_progress",
                    server=self.name,
                    tool=tool,
                    request_id=request_id,
                    progress=progress,
                    total=total,
                    message=message,
                ),
            )

        return report


async def _on_loop(server: str, loop: asyncio.AbstractEventLoop, coro: Any) -> Any:
    """Run ``coro`` on ``loop`` (another thread's running loop) and await its result here."""
    if loop.is_closed() or not loop.is_running():
        coro.close()
        raise ToolTransportError(server, "the event loop that owns this MCP session is not running", sent=False)
    return await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(coro, loop))


class MCPClient:
    """All configured MCP servers: ``{name: MCPServer}``. ``start()`` starts them concurrently;
    a server that fails is recorded in :attr:`failed` (name → reason) and the others work."""

    def __init__(
        self,
        servers: dict[str, dict[str, Any]],
        *,
        startup_timeout_s: float = STARTUP_TIMEOUT_S,
        media_dir: Path | None = None,
        data_dir: Path | None = None,
    ) -> None:
        self.servers: dict[str, MCPServer] = {}
        self.failed: dict[str, str] = {}
        for name, entry in servers.items():
            try:
                self.servers[name] = MCPServer(
                    name, entry, startup_timeout_s=startup_timeout_s, media_dir=media_dir, data_dir=data_dir
                )
            except ValueError as exc:
                self.failed[name] = str(exc)

    async def start(self) -> dict[str, str]:
        """Start every server concurrently; return :attr:`failed`."""
        names = list(self.servers)
        results = await asyncio.gather(*(self.servers[n].start() for n in names), return_exceptions=True)
        for name, res in zip(names, results):
            if isinstance(res, BaseException):
                self.failed[name] = str(res)
        return self.failed

    def ready(self) -> list[MCPServer]:
        """Servers that have started (listed their tools), in config order."""
        return [s for s in self.servers.values() if s.tools_version > 0 and s.state != "closed"]

    def status(self) -> list[dict[str, Any]]:
        """:meth:`MCPServer.status` of every server, config order (failed configs included)."""
        out = [s.status() for s in self.servers.values()]
        out += [{"name": n, "state": "invalid", "error": e} for n, e in self.failed.items() if n not in self.servers]
        return out

    def metrics(self) -> list[dict[str, Any]]:
        """:meth:`MCPServer.metrics` of every server, config order (what state metrics keep)."""
        return [s.metrics() for s in self.servers.values()]

    async def aclose(self) -> None:
        """Close every server (concurrently); idempotent."""
        await asyncio.gather(*(s.aclose() for s in self.servers.values()), return_exceptions=True)
