"""The pool of sessions of one MCP server (part of :class:`tools.mcp.client.MCPServer`; module
docstring of :mod:`tools.mcp.client`): ``pool.min`` sessions opened at start, up to ``pool.max``
under load, idle ones above the min closed after IDLE_CLOSE_S; a dead session retired (its
processes killed) and replaced in the background; :meth:`SessionPool.aclose` closes every
session and kills what the server left behind (K9).
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

from tools.errors import ToolTransportError
from tools.mcp.server_core import ServerCore, on_loop
from tools.mcp.session import MARKER_ENV, MCPSession
from tools.procs import KILL_GRACE_S, find_by_env_marker, terminate

log = logging.getLogger(__name__)

#: Seconds a session above the pool's min may stay idle before it is closed.
IDLE_CLOSE_S = 120.0
#: Seconds :meth:`SessionPool.aclose` waits for the server's background tasks.
SHUTDOWN_TIMEOUT_S = 8.0


class SessionPool(ServerCore):
    """Opening, sharing, replacing and closing the sessions of one server."""

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
            return await on_loop(self.name, self._loop, self.reconnect())
        if self._closing or self._loop is None:
            raise ToolTransportError(self.name, f"cannot reconnect a server that is {self.state}", sent=False)
        old, self.sessions = list(self.sessions), []
        await asyncio.gather(*(s.close() for s in old), return_exceptions=True)
        self.reconnects += len(old)
        self.breaker.success()
        await self._open()
        self._refill()
        log.info("MCP server %s reconnected (%d)", self.name, self.reconnects)
        return None

    async def aclose(self) -> None:
        """Close every session and kill any leftover process of the server. Idempotent."""
        if self.state == "closed":
            return
        if self._loop is not None and self._loop is not asyncio.get_running_loop():
            await on_loop(self.name, self._loop, self.aclose())
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
