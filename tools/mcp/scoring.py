"""Health of one MCP server: the seed's score (seed §3.3; DESIGN §3.4) and a circuit breaker.

Score, updated after every call (``latency`` in seconds, ``ok`` 1 when the server answered — a
result or an ``isError`` result — and 0 for a timeout or a lost transport)::

    latency_ema = 0.7 * latency_ema + 0.3 * latency      (the first call sets it)
    success     = 0.8 * success     + 0.2 * ok           (starts at 1.0)
    score       = 0.4 / (latency_ema + 0.1) + 0.6 * success

A server that was never called scores as if its latency were 0 (4.6): new replicas get tried.

Circuit breaker (no lifetime reconnect cap): ``failures`` failures in a row (a failed connect, a
lost transport, a timeout with no answer to ``ping``) open it: the server is *parked* — calls
fail at once, without being sent — for ``cooldown_s`` seconds, then a probe (a new session:
connect + ``initialize`` + ``tools/list``) runs on a timer. A good probe closes the breaker; a bad
one parks the server again for twice as long, up to ``max_cooldown_s``. A success resets it.
States: "closed" (serving), "open" (parked), "half_open" (a probe is running).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

LATENCY_KEEP, LATENCY_NEW = 0.7, 0.3
SUCCESS_KEEP, SUCCESS_NEW = 0.8, 0.2


def score_of(latency_ema: float | None, success: float) -> float:
    """The seed's score: ``0.4 / (latency_ema + 0.1) + 0.6 * success`` (latency 0 when unknown)."""
    return 0.4 / ((latency_ema or 0.0) + 0.1) + 0.6 * success


@dataclass
class Score:
    """Running score of one server (module docstring)."""

    latency_ema: float | None = None
    success: float = 1.0
    calls: int = 0
    failures: int = 0

    def update(self, latency_s: float, ok: bool) -> None:
        """Fold one call in (seconds; ok = the server answered)."""
        latency_s = max(0.0, float(latency_s))
        self.latency_ema = (
            latency_s if self.latency_ema is None else (LATENCY_KEEP * self.latency_ema + LATENCY_NEW * latency_s)
        )
        self.success = SUCCESS_KEEP * self.success + SUCCESS_NEW * (1.0 if ok else 0.0)
        self.calls += 1
        self.failures += 0 if ok else 1

    @property
    def value(self) -> float:
        return score_of(self.latency_ema, self.success)

    def as_dict(self) -> dict[str, Any]:
        return {
            "score": round(self.value, 4),
            "latency_ema_s": None if self.latency_ema is None else round(self.latency_ema, 6),
            "success": round(self.success, 4),
            "calls": self.calls,
            "failures": self.failures,
        }


@dataclass
class Breaker:
    """Circuit breaker of one server (module docstring). ``clock``: seconds (monotonic)."""

    failures: int = 3
    cooldown_s: float = 5.0
    max_cooldown_s: float = 60.0
    state: str = "closed"
    consecutive: int = 0
    opened_at: float | None = None
    current_cooldown_s: float = 0.0
    trips: int = 0
    last_error: str | None = None
    clock: Callable[[], float] = field(default=time.monotonic, repr=False)

    def success(self) -> None:
        """A call succeeded: closed, counters and backoff reset."""
        self.state, self.consecutive, self.opened_at, self.current_cooldown_s = "closed", 0, None, 0.0

    def probe_ok(self) -> None:
        """The probe opened a session: serving again, but one more failure before a call
        succeeds re-parks the server with a doubled cooldown (a server that starts and dies at
        once is not respawned in a tight loop)."""
        self.state, self.opened_at = "closed", None
        self.consecutive = max(0, self.failures - 1)

    def failure(self, reason: str) -> bool:
        """Record one failure; returns True when this one opened the breaker."""
        self.last_error = reason
        self.consecutive += 1
        if self.state == "half_open" or (self.state == "closed" and self.consecutive >= self.failures):
            self._open()
            return True
        return False

    def _open(self) -> None:
        self.current_cooldown_s = (
            self.cooldown_s if not self.current_cooldown_s else min(self.max_cooldown_s, self.current_cooldown_s * 2)
        )
        self.state, self.opened_at = "open", self.clock()
        self.trips += 1

    def trip(self, reason: str) -> None:
        """Open now (e.g. the server could not be started at all)."""
        self.last_error = reason
        self.consecutive = max(self.consecutive, self.failures)
        if self.state != "open":
            self._open()

    @property
    def parked(self) -> bool:
        return self.state in ("open", "half_open")

    def probe_due_in(self) -> float:
        """Seconds until the next probe (0 when due; 0 when closed)."""
        if self.state != "open" or self.opened_at is None:
            return 0.0
        return max(0.0, self.opened_at + self.current_cooldown_s - self.clock())

    def as_dict(self) -> dict[str, Any]:
        return {
            "state": self.state,
            "consecutive_failures": self.consecutive,
            "trips": self.trips,
            "cooldown_s": self.current_cooldown_s or None,
            "next_probe_in_s": round(self.probe_due_in(), 3) if self.state == "open" else None,
            "last_error": self.last_error,
        }
