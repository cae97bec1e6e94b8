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

The parts of :class:`MCPServer`, one concern each (mixins over
:class:`tools.mcp.server_core.ServerCore`, which holds the fields): the pool and the lifecycle —
:mod:`tools.mcp.session_pool`; calls, timeouts, progress and safe retries —
:mod:`tools.mcp.server_calls`; status, score and the circuit breaker's probe —
:mod:`tools.mcp.server_health`; the tool list (handshake, ``list_changed``) —
:mod:`tools.mcp.server_tools`, each tool normalised in :mod:`tools.mcp.tool_listing`.

:class:`MCPClient` holds every configured server; :meth:`MCPClient.status` (and
:meth:`MCPServer.status`) is what ``hermes mcp list`` and state metrics read.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from tools.mcp.results import Validator, content_to_json, output_validator, result_to_json  # noqa: F401
from tools.mcp.server_calls import MAX_ATTEMPTS, ServerCalls  # noqa: F401 - re-exported
from tools.mcp.server_core import STARTUP_TIMEOUT_S
from tools.mcp.server_health import ServerHealth
from tools.mcp.server_tools import ServerTools
from tools.mcp.session import (  # noqa: F401 - re-exported
    MARKER_ENV,
    REQUEST_ID_META,
    Handshake,
    MCPSession,
    ProgressFn,
)
from tools.mcp.session_pool import IDLE_CLOSE_S, SHUTDOWN_TIMEOUT_S, SessionPool  # noqa: F401 - re-exported
from tools.mcp.tool_listing import META_READS, MCPTool, tools_from_listing  # noqa: F401 - re-exported


class MCPServer(ServerCalls, SessionPool, ServerHealth, ServerTools):
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
