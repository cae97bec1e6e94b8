"""What one MCP server is, shared by the parts of :class:`tools.mcp.client.MCPServer`: its
config, state, tools, pool and breaker fields (:class:`ServerCore`), the background tasks it
tracks, and :func:`on_loop` (sessions belong to the event loop that started the server).

The parts are mixins over :class:`ServerCore`, one concern each: the session pool
(:mod:`tools.mcp.session_pool`), health — status, score, circuit breaker and its probe
(:mod:`tools.mcp.server_health`) —, the tool list (:mod:`tools.mcp.server_tools`) and tool calls
with their retries (:mod:`tools.mcp.server_calls`). The methods one part calls on another are
declared abstract here.
"""

from __future__ import annotations

import asyncio
import uuid
from abc import ABC, abstractmethod
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any, TypeVar

from tools.errors import ToolTransportError
from tools.mcp.config import ServerSettings, server_settings, to_connection
from tools.mcp.scoring import Breaker, Score
from tools.mcp.session import Handshake, MCPSession
from tools.mcp.tool_listing import MCPTool

T = TypeVar("T")

#: Seconds a session gets to start and answer ``initialize`` + ``tools/list``.
STARTUP_TIMEOUT_S = 15.0


class ServerCore(ABC):
    """The fields of one MCP server (arguments: :class:`tools.mcp.client.MCPServer`)."""

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
        self.on_tools_changed: Callable[[Any], Any] | None = None
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

    def _track(self, task: asyncio.Task[Any]) -> asyncio.Task[Any]:
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        task.add_done_callback(lambda t: t.cancelled() or t.exception())  # no "never retrieved" noise
        return task

    # -- provided by the other parts (tools.mcp.session_pool, server_health, server_tools) ----
    @abstractmethod
    async def _open(self) -> MCPSession:
        """Open one session and add it to the pool (:mod:`tools.mcp.session_pool`)."""

    @abstractmethod
    def _refill(self) -> None:
        """Open sessions in the background up to the pool's min (:mod:`tools.mcp.session_pool`)."""

    @abstractmethod
    def _retire(self, session: MCPSession) -> None:
        """Drop a dead session from the pool (:mod:`tools.mcp.session_pool`)."""

    @abstractmethod
    async def _acquire(self) -> MCPSession:
        """A live session for one call (:mod:`tools.mcp.session_pool`)."""

    @abstractmethod
    def _failure(self, reason: str) -> None:
        """Count a failure for the breaker (:mod:`tools.mcp.server_health`)."""

    @abstractmethod
    def _schedule_probe(self) -> None:
        """Start the breaker's probe unless one runs (:mod:`tools.mcp.server_health`)."""

    @abstractmethod
    def _learn(self, hs: Handshake) -> None:
        """Record a handshake and its tool list (:mod:`tools.mcp.server_tools`)."""

    @abstractmethod
    def _on_notification(self, session: MCPSession, note: Any) -> Any:
        """A server notification on one session (:mod:`tools.mcp.server_tools`)."""


async def on_loop(server: str, loop: asyncio.AbstractEventLoop, coro: Coroutine[Any, Any, T]) -> T:
    """Run ``coro`` on ``loop`` (another thread's running loop) and await its result here."""
    if loop.is_closed() or not loop.is_running():
        coro.close()
        raise ToolTransportError(server, "the event loop that owns this MCP session is not running", sent=False)
    return await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(coro, loop))
