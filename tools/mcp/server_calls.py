"""Tool calls on one MCP server (part of :class:`tools.mcp.client.MCPServer`): ``tools/call`` on
a pooled session, its timeouts and progress, the score updated after every call, and the
retries that are safe (exactly-once, DESIGN §2.4): a call is repeated on a fresh session only
when its request is known not to have run, or when the caller says the tool is ``retry_safe``.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

from tools.errors import ToolFailed, ToolTimeout, ToolTransportError
from tools.mcp.progress import ProgressEvent, ProgressSink, current_sink, emit
from tools.mcp.results import result_to_json
from tools.mcp.server_core import ServerCore, on_loop
from tools.mcp.session import ProgressFn

log = logging.getLogger(__name__)

#: Attempts of one call on one server when a retry is safe (fresh session each time).
MAX_ATTEMPTS = 3


class ServerCalls(ServerCore):
    """``call_tool`` and its progress reporting."""

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
            return await on_loop(
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
