"""Health of one MCP server (part of :class:`tools.mcp.client.MCPServer`): what ``hermes mcp
list`` and state metrics read (:meth:`ServerHealth.status`, :meth:`ServerHealth.metrics`: pool,
score, breaker), and the circuit breaker's side — a failure counted, the server parked, a probe (a
new session) on a timer, backing off, until one opens (the score and breaker themselves:
:mod:`tools.mcp.scoring`).
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from tools.errors import ToolTransportError
from tools.mcp.server_core import ServerCore

log = logging.getLogger(__name__)


class ServerHealth(ServerCore):
    """Status, metrics and the circuit breaker's park / probe cycle of one server."""

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

    # -- circuit breaker -------------------------------------------------------------------
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
