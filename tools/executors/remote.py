"""Remote-function executor (DESIGN §2 "remote function (production scale-out)"; seed §2.2).

Posts each call to a function endpoint over HTTP::

    POST {url}/v1/run
    {"request_id": "...", "tool": "query_database", "entrypoint": "pkg.mod:func",
     "arguments": {...}, "timeout_s": 10.0}
    → 200 {"ok": true, "result": ..., "replayed": false}
    → 200 {"ok": false, "error_type": "ValueError" | "ToolTimeout", "error": "..."}

Transport errors, 5xx, 408 and 429 are retried (tenacity: exponential backoff with jitter, at
most ``retries`` attempts, never past the call's deadline). Retrying is safe because the server
records results per ``request_id``: a call whose answer was lost is replayed, not re-run.
Other 4xx are not retried. Errors map to the executor interface: over ``timeout_s`` (+
``TIMEOUT_MARGIN_S`` for the network) → :class:`ToolTimeout`; a tool error, a refusal or an
endpoint still failing after the retries → :class:`ToolFailed`.
:mod:`tools.remote_server` is the reference endpoint. An optional bearer token comes from
``token`` (the toolbox reads it through ``Context.remote_token_env``).
"""

from __future__ import annotations

import asyncio
import time
import weakref
from typing import Any

import httpx
from tenacity import AsyncRetrying, retry_if_exception, stop_after_attempt, wait_exponential_jitter

from tools.errors import ToolFailed, ToolTimeout

#: Seconds the client waits beyond ``timeout_s`` (the server enforces the limit itself and
#: answers with ToolTimeout; this covers the network round trip).
TIMEOUT_MARGIN_S = 1.0
RUN_PATH = "/v1/run"
_RETRY_STATUS = {408, 429, 500, 502, 503, 504}


class _Retryable(Exception):
    def __init__(self, message: str) -> None:
        super().__init__(message)


class RemoteExecutor:
    """Executor that sends calls to ``url`` (e.g. ``http://127.0.0.1:8765``).

    Args:
        url          base URL of the function endpoint.
        retries      attempts per call (1 = no retry).
        connect_timeout_s  TCP connect limit per attempt.
        token        bearer token (None: no Authorization header; the toolbox passes the
                     value of ``Context.remote_token_env``).
    No I/O at construction; one ``httpx.AsyncClient`` per event loop, made on first use (in a
    thread: TLS set-up reads files).
    """

    kind = "remote"

    def __init__(self, url: str, *, retries: int = 3, connect_timeout_s: float = 5.0, token: str | None = None) -> None:
        if not url.startswith(("http://", "https://")):
            raise ValueError(f"remote executor URL must be http(s)://..., got {url!r}")
        self.url = url.rstrip("/")
        self.retries = max(1, retries)
        self.connect_timeout_s = connect_timeout_s
        self.token = token
        self._clients: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, httpx.AsyncClient] = (
            weakref.WeakKeyDictionary()
        )
        self.attempts = 0  # total HTTP attempts (observability, tests)

    async def _client(self) -> httpx.AsyncClient:
        loop = asyncio.get_running_loop()
        client = self._clients.get(loop)
        if client is None:
            headers = {"Authorization": f"Bearer {self.token}"} if self.token else {}
            client = await asyncio.to_thread(httpx.AsyncClient, headers=headers, trust_env=False)
            self._clients[loop] = client
        return client

    async def run(
        self,
        entrypoint: str,
        args: dict[str, Any],
        *,
        timeout_s: float,
        request_id: str,
        tool: str | None = None,
        network: bool = False,
        schedule: bool = False,
    ) -> Any:
        """Run ``entrypoint(**args)`` on the endpoint; see :class:`~tools.executors.base.Executor`.
        ``network`` is the function server's business (its own executor's sandbox); ``schedule``
        is passed on (the server's sandbox shows its schedule only to such a call)."""
        client = await self._client()
        body = {
            "request_id": request_id,
            "tool": tool or entrypoint.rpartition(":")[2],
            "entrypoint": entrypoint,
            "arguments": args,
            "timeout_s": timeout_s,
            "schedule": schedule,
        }
        deadline = time.monotonic() + timeout_s + TIMEOUT_MARGIN_S

        tries = [0]

        def remaining() -> float:
            return deadline - time.monotonic()

        async def attempt() -> dict[str, Any]:
            left = remaining()
            if left <= 0:
                raise ToolTimeout(f"{entrypoint} on {self.url} exceeded {timeout_s:g} s")
            self.attempts += 1
            tries[0] += 1
            timeout = httpx.Timeout(left, connect=min(self.connect_timeout_s, left))
            try:
                resp = await client.post(self.url + RUN_PATH, json=body, timeout=timeout)
            except httpx.TimeoutException as exc:
                if remaining() <= 0.05:
                    raise ToolTimeout(f"{entrypoint} on {self.url} exceeded {timeout_s:g} s (no answer)") from exc
                raise _Retryable(f"{type(exc).__name__}: {exc}") from exc
            except httpx.TransportError as exc:
                raise _Retryable(f"{type(exc).__name__}: {exc}") from exc
            if resp.status_code in _RETRY_STATUS:
                raise _Retryable(f"HTTP {resp.status_code}: {resp.text[:300]}")
            if resp.status_code != 200:
                raise ToolFailed(
                    f"remote endpoint {self.url} refused {entrypoint}: HTTP {resp.status_code} {resp.text[:300]}"
                )
            try:
                reply = resp.json()
            except ValueError as exc:
                raise ToolFailed(f"remote endpoint {self.url} answered with invalid JSON: {resp.text[:200]}") from exc
            if not isinstance(reply, dict):
                raise ToolFailed(f"remote endpoint {self.url} answered with {type(reply).__name__}, not an object")
            return reply

        retrying = AsyncRetrying(
            stop=stop_after_attempt(self.retries),
            wait=wait_exponential_jitter(initial=0.05, max=1.0, jitter=0.05),
            retry=retry_if_exception(lambda e: isinstance(e, _Retryable) and remaining() > 0.1),
            reraise=True,
        )
        try:
            reply: dict[str, Any] = await retrying(attempt)
        except _Retryable as exc:
            if remaining() <= 0.1:
                raise ToolTimeout(f"{entrypoint} on {self.url} exceeded {timeout_s:g} s ({exc})") from exc
            raise ToolFailed(f"remote endpoint {self.url} failed {tries[0]} time(s) for {entrypoint}: {exc}") from exc
        if reply.get("ok"):
            return reply.get("result")
        error_type = reply.get("error_type", "Error")
        if error_type == "ToolTimeout":
            raise ToolTimeout(reply.get("error", f"{entrypoint} exceeded {timeout_s:g} s"))
        raise ToolFailed(
            f"{error_type}: {reply.get('error', '')}",
            kind=reply.get("error_kind") or "tool_error",
            suggestion=reply.get("suggestion") if isinstance(reply.get("suggestion"), dict) else None,
        )

    async def aclose(self) -> None:
        """Close this loop's HTTP client (others are dropped with their loops)."""
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return
        client = self._clients.pop(loop, None)
        if client is not None:
            await client.aclose()


__all__ = ["RUN_PATH", "TIMEOUT_MARGIN_S", "RemoteExecutor"]
