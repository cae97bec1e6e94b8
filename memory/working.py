"""Working memory: per-session, in-process, TTL-evicted (DESIGN.md §4 / seed §4.1).

Seed §4.1: working memory is the session's "scratch cache" (e.g. a one-off "reply concisely
this time"), lives in memory with TTL eviction, and is cleared when the session ends.
Built on ``cachetools.TTLCache``; nothing here does I/O.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any

from cachetools import TTLCache

#: Default lifetime of a working-memory item, seconds.
DEFAULT_TTL_SECONDS: float = 30 * 60
#: Default number of items kept per session (least recently used are dropped beyond it).
DEFAULT_MAXSIZE: int = 256


class WorkingMemory:
    """Key/value items of one session that expire ``ttl_seconds`` after being set.

    Args:
        ttl_seconds: lifetime of an item, seconds (> 0).
        maxsize: item capacity; beyond it the least recently used item is evicted.
        timer: clock in seconds (``time.monotonic`` by default; injectable for tests).
    Not thread-safe: use from one event loop.
    """

    def __init__(
        self,
        ttl_seconds: float = DEFAULT_TTL_SECONDS,
        *,
        maxsize: int = DEFAULT_MAXSIZE,
        timer: Callable[[], float] = time.monotonic,
    ) -> None:
        if ttl_seconds <= 0:
            raise ValueError("ttl_seconds must be > 0")
        self._cache: TTLCache[str, Any] = TTLCache(maxsize=maxsize, ttl=ttl_seconds, timer=timer)

    def set(self, key: str, value: Any) -> None:
        """Store ``value`` under ``key``; its TTL restarts."""
        self._cache[key] = value

    def get(self, key: str, default: Any = None) -> Any:
        """The live value of ``key``, or ``default`` if absent or expired."""
        return self._cache.get(key, default)

    def items(self) -> list[tuple[str, Any]]:
        """Live items, as a list (expired ones are dropped first)."""
        self._cache.expire()
        return list(self._cache.items())

    def clear(self) -> None:
        """Forget everything (session end)."""
        self._cache.clear()

    def __contains__(self, key: object) -> bool:
        return key in self._cache

    def __len__(self) -> int:
        self._cache.expire()
        return len(self._cache)

    def __iter__(self) -> Iterator[str]:
        return iter([k for k, _ in self.items()])


class SessionMemories:
    """The working memories of every live session (thread) of this process.

    A session's working memory is created on first use and forgotten by :meth:`end` (session
    end) or when it has been idle for ``session_ttl_seconds`` (a server never sees a session
    "end"; its sessions expire instead). ``ttl_seconds``: lifetime of each item.
    """

    def __init__(
        self,
        ttl_seconds: float = DEFAULT_TTL_SECONDS,
        *,
        session_ttl_seconds: float | None = None,
        max_sessions: int = 10_000,
        timer: Callable[[], float] = time.monotonic,
    ) -> None:
        self.ttl_seconds = ttl_seconds
        self._timer = timer
        self._sessions: TTLCache[str, WorkingMemory] = TTLCache(
            maxsize=max_sessions, ttl=session_ttl_seconds or ttl_seconds, timer=timer
        )

    def get(self, thread_id: str) -> WorkingMemory:
        """The working memory of ``thread_id`` (its idle clock restarts)."""
        wm = self._sessions.get(thread_id)
        if wm is None:
            wm = WorkingMemory(self.ttl_seconds, timer=self._timer)
        self._sessions[thread_id] = wm  # re-set: touching a session keeps it alive
        return wm

    def peek(self, thread_id: str) -> WorkingMemory | None:
        """The working memory of ``thread_id`` if the session is live, without creating it."""
        return self._sessions.get(thread_id)

    def end(self, thread_id: str) -> int:
        """Session end: clear and forget ``thread_id``'s working memory; return the items dropped."""
        wm = self._sessions.pop(thread_id, None)
        if wm is None:
            return 0
        n = len(wm)
        wm.clear()
        return n

    def end_all(self) -> None:
        for thread_id in list(self._sessions.keys()):
            self.end(thread_id)

    def __len__(self) -> int:
        self._sessions.expire()
        return len(self._sessions)
