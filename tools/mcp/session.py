"""One live MCP session (one server process for stdio, one HTTP session for SSE / streamable
HTTP): the unit a server's pool (:mod:`tools.mcp.client`) holds several of.

* ``start()`` runs one background asyncio task that opens the transport through
  ``langchain_mcp_adapters.sessions.create_session`` (stdio / SSE / streamable HTTP, headers,
  auth), sends ``initialize`` (protocol version; client capabilities: elicitation only when the
  server's settings answer it), records the server's capabilities, runs ``tools/list``
  (following ``nextCursor``), then waits for the stop event. anyio cancel scopes must be exited
  by the task that entered them, which is why the session lives in its own task. Start-up is
  bounded by ``startup_timeout_s``; failing raises :class:`ToolTransportError` (``sent=False``).
* ``call()``: ``tools/call`` through ``ClientSession.send_request`` (so the JSON-RPC id is known)
  with a progress token. The call ends after ``answer_timeout_s`` without an answer *or a
  progress notification*; progress extends it, up to ``hard_timeout_s`` from the start. On a
  timeout, or when the caller cancels, ``notifications/cancelled`` goes out for that id. The
  request goes out at most once; this class never replays it.
* A stdio session's processes carry two environment markers: the server's (all its sessions)
  and the session's own; ``close()`` leaves the session (stdin closed, SIGTERM, SIGKILL by the
  SDK) and then SIGTERMs / SIGKILLs whatever still carries the session marker (K9).
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, NoReturn

import anyio
from langchain_mcp_adapters.sessions import create_session
from mcp import ClientSession, types
from mcp.shared.exceptions import McpError
from mcp.types import CONNECTION_CLOSED

from tools.errors import ToolFailed, ToolTimeout, ToolTransportError
from tools.mcp.transport_errors import (
    REQUEST_TIMEOUT_CODE,
    SESSION_TERMINATED,
    TRANSPORT_ERRORS,
    describe,
    never_connected,
)
from tools.procs import find_by_env_marker, terminate

log = logging.getLogger(__name__)

#: Seconds ``close`` waits for the session task to leave the session before cancelling it.
SHUTDOWN_TIMEOUT_S = 8.0
#: Seconds a server gets to answer ``ping`` after one of its calls timed out.
PING_TIMEOUT_S = 2.0
#: Seconds the client waits for ``notifications/cancelled`` to be handed to the transport.
CANCEL_NOTIFY_TIMEOUT_S = 0.5
#: ``_meta`` key of ``tools/call`` carrying the agent's ``request_id`` (servers may log or use it).
REQUEST_ID_META = "hermes/request_id"
#: Environment variables marking the processes of one stdio server / one of its sessions.
MARKER_ENV = "HERMES_MCP_SERVER_ID"
SESSION_MARKER_ENV = "HERMES_MCP_SESSION_ID"
CLIENT_INFO = types.Implementation(name="hermes-agent", version="0.1.0")


ProgressFn = Callable[[float, float | None, str | None], Any]


class _NotSent(Exception):
    """The ``tools/call`` request could not be handed to the transport (it never left)."""


@dataclass
class _Flight:
    """One ``tools/call`` in flight: its JSON-RPC id once the request was built, and when the
    last progress notification arrived."""

    request_id: types.RequestId | None = None
    last_progress: float = 0.0
    progress: tuple[float, float | None, str | None] | None = None


@dataclass
class Handshake:
    """What ``initialize`` + ``tools/list`` returned."""

    protocol_version: str | None
    capabilities: dict[str, Any]
    server_info: dict[str, Any]
    instructions: str | None
    tools: list[types.Tool]
    seconds: float


class MCPSession:
    """One session of server ``server``. ``state``: "new" → "ready" | "failed" → "closed".

    ``connection``: a langchain-mcp-adapters connection dict (its ``session_kwargs`` are added
    here). ``server_marker``: the server's process marker (stdio). ``on_notification(session,
    notification)``: called for every server notification (e.g. ``tools/list_changed``).
    ``elicitation``: "decline" (capability not advertised) or "defaults" (accept with the
    requested schema's defaults).
    """

    def __init__(
        self,
        server: str,
        connection: dict[str, Any],
        *,
        startup_timeout_s: float,
        server_marker: str = "",
        index: int = 0,
        elicitation: str = "decline",
        on_notification: Callable[[MCPSession, Any], Awaitable[None] | None] | None = None,
    ) -> None:
        self.server = server
        self.index = index
        self.startup_timeout_s = startup_timeout_s
        self.transport: str = connection["transport"]
        self.marker = f"{server_marker or server}.{index}.{uuid.uuid4().hex[:8]}"
        conn = dict(connection)
        if self.transport == "stdio":
            conn["env"] = {**conn.get("env", {}), MARKER_ENV: server_marker, SESSION_MARKER_ENV: self.marker}
        kwargs: dict[str, Any] = dict(conn.get("session_kwargs") or {})
        kwargs.setdefault("client_info", CLIENT_INFO)
        kwargs["message_handler"] = self._on_message
        if elicitation == "defaults":
            kwargs["elicitation_callback"] = _accept_defaults
        conn["session_kwargs"] = kwargs
        self.connection = conn
        self._on_notification = on_notification
        self.state = "new"
        self.error: str | None = None
        self.handshake: Handshake | None = None
        self.inflight = 0
        self.calls = 0
        self.created = time.monotonic()
        self.last_used = self.created
        self._session: Any = None
        self._task: asyncio.Task[None] | None = None
        self._stop = asyncio.Event()
        #: What ended the session task (None while it runs or after a clean close).
        self.fatal: BaseException | None = None
        self._background: set[asyncio.Task[Any]] = set()

    def __repr__(self) -> str:
        return f"<MCPSession {self.server}#{self.index} {self.state} inflight={self.inflight}>"

    # -- lifecycle -------------------------------------------------------------------------
    @property
    def alive(self) -> bool:
        return self.state == "ready" and self._session is not None and self._task is not None and not self._task.done()

    async def start(self) -> Handshake:
        """Open the session; return the handshake. Raises ToolTransportError (``sent=False``)
        naming the server, within ``startup_timeout_s`` (+2 s)."""
        loop = asyncio.get_running_loop()
        ready: asyncio.Future[Handshake] = loop.create_future()
        self._task = asyncio.create_task(self._own(ready), name=f"mcp-session:{self.server}#{self.index}")
        try:
            return await asyncio.wait_for(asyncio.shield(ready), self.startup_timeout_s + 2.0)
        except TimeoutError:
            self.state, self.error = "failed", f"no answer to initialize within {self.startup_timeout_s:g} s"
            await self.close()
            raise ToolTransportError(self.server, self.error, sent=False) from None
        except BaseException:
            await self.close()
            raise

    async def _own(self, ready: asyncio.Future[Handshake]) -> None:
        started = time.perf_counter()
        try:
            with anyio.fail_after(self.startup_timeout_s) as scope:
                async with create_session(self.connection) as session:  # type: ignore[arg-type]
                    init = await session.initialize()
                    listed = await list_all_tools(session)
                    scope.deadline = math.inf  # started: no deadline while serving
                    caps = getattr(init, "capabilities", None)
                    info = getattr(init, "serverInfo", None)
                    self.handshake = Handshake(
                        protocol_version=str(getattr(init, "protocolVersion", "") or "") or None,
                        capabilities=caps.model_dump(exclude_none=True) if caps is not None else {},
                        server_info=info.model_dump(exclude_none=True) if info is not None else {},
                        instructions=getattr(init, "instructions", None),
                        tools=listed,
                        seconds=time.perf_counter() - started,
                    )
                    self._session, self.state = session, "ready"
                    ready.set_result(self.handshake)
                    await self._stop.wait()
        except BaseException as exc:  # recorded and surfaced as transport errors
            self.fatal = exc
            reason = describe(exc)
            if isinstance(exc, TimeoutError) and not ready.done():
                reason = f"no answer to initialize within {self.startup_timeout_s:g} s"
            if self.state in ("new", "ready") and not self._stop.is_set():
                self.error = ("failed to start: " if self.state == "new" else "connection lost: ") + reason
                self.state = "failed"
                (log.info if isinstance(exc, asyncio.CancelledError) else log.warning)(
                    "MCP server %s (session %d) %s", self.server, self.index, self.error
                )
            if not ready.done():
                ready.set_exception(ToolTransportError(self.server, self.error or reason, sent=False))
                ready.exception()
            if isinstance(exc, asyncio.CancelledError):
                raise
        finally:
            self._session = None
            if self.state == "ready":
                self.state = "failed" if not self._stop.is_set() else self.state
                self.error = self.error or "session ended"
            if not ready.done():  # clean exit before ready (stop requested)
                ready.set_exception(ToolTransportError(self.server, "closed before it was ready", sent=False))
                ready.exception()

    async def close(self) -> None:
        """Leave the session, then kill any process still carrying its marker. Idempotent."""
        if self.state == "closed":
            return
        if self._background:  # cancellation notices still being sent (bounded)
            await asyncio.gather(*self._background, return_exceptions=True)
        self._stop.set()
        task = self._task
        if task is not None and not task.done() and self.state == "new":
            task.cancel()  # still starting: nothing to shut down gracefully
            await asyncio.gather(task, return_exceptions=True)
        elif task is not None and not task.done():
            try:
                await asyncio.wait_for(asyncio.shield(task), SHUTDOWN_TIMEOUT_S)
            except TimeoutError:
                task.cancel()
                await asyncio.gather(task, return_exceptions=True)
            except BaseException:  # noqa: BLE001 - the task's own failure is already recorded
                pass
        self._session = None
        self.state = "closed"
        if self.transport == "stdio":
            await asyncio.to_thread(self.kill_leftovers)

    def kill_leftovers(self) -> list[int]:
        """SIGTERM / grace / SIGKILL every process still carrying this session's marker. Blocking."""
        procs = find_by_env_marker(SESSION_MARKER_ENV, self.marker)
        if procs:
            log.info(
                "MCP server %s (session %d) left %d process(es); killing %s",
                self.server,
                self.index,
                len(procs),
                [p.pid for p in procs],
            )
        return terminate(procs)

    def mark_failed(self, reason: str) -> None:
        if self.state == "ready":
            self.state, self.error = "failed", reason
            log.warning("MCP server %s (session %d) %s", self.server, self.index, reason)

    # -- notifications -----------------------------------------------------------------------
    async def _on_message(self, message: Any) -> None:
        if isinstance(message, types.ServerNotification) and self._on_notification is not None:
            try:
                result = self._on_notification(self, message.root)
                if asyncio.iscoroutine(result):
                    task = asyncio.get_running_loop().create_task(result)
                    self._background.add(task)
                    task.add_done_callback(self._background.discard)
            except Exception:  # a handler bug must not kill the session
                log.exception("MCP server %s: notification handler failed", self.server)
        await anyio.lowlevel.checkpoint()

    async def list_tools(self) -> list[types.Tool]:
        if not self.alive:
            raise ToolTransportError(self.server, f"session not connected ({self.error or self.state})", sent=False)
        return await list_all_tools(self._session)

    async def ping(self, timeout_s: float = PING_TIMEOUT_S) -> bool:
        """Does the server answer ``ping`` within ``timeout_s``? A failure marks the session failed."""
        session = self._session
        if session is None:
            return False
        try:
            await asyncio.wait_for(session.send_ping(), timeout_s)
            return True
        except Exception as exc:  # noqa: BLE001 - any failure to answer means dead
            self.mark_failed(f"no answer to ping ({describe(exc) or 'timeout'})")
            return False

    # -- calls -------------------------------------------------------------------------------
    async def _send_cancelled(self, session: Any, flight: _Flight, reason: str) -> bool:
        if flight.request_id is None:
            return False  # the request was never built, so never sent
        note = types.ClientNotification(
            types.CancelledNotification(
                params=types.CancelledNotificationParams(requestId=flight.request_id, reason=reason)
            )
        )
        try:
            await asyncio.wait_for(session.send_notification(note), CANCEL_NOTIFY_TIMEOUT_S)
        except Exception as exc:  # noqa: BLE001 - the channel may be gone; nothing else to do
            log.info(
                "MCP server %s: could not send notifications/cancelled for request %s: %s",
                self.server,
                flight.request_id,
                describe(exc) or "timeout",
            )
            return False
        log.info(
            "MCP server %s: sent notifications/cancelled for request %s (%s)", self.server, flight.request_id, reason
        )
        return True

    def _cancel_in_background(self, session: Any, flight: _Flight, reason: str) -> None:
        if flight.request_id is None:
            return
        task = asyncio.get_running_loop().create_task(self._send_cancelled(session, flight, reason))
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    def _lost(self, reason: str, *, sent: bool = True) -> ToolTransportError:
        self.mark_failed(f"connection lost: {reason}")
        return ToolTransportError(self.server, reason, sent=sent)

    async def call(
        self,
        tool: str,
        args: dict[str, Any],
        *,
        answer_timeout_s: float,
        hard_timeout_s: float | None = None,
        request_id: str = "",
        on_progress: ProgressFn | None = None,
    ) -> types.CallToolResult:
        """``tools/call``; returns the raw ``CallToolResult`` (``isError`` results included).

        The request is awaited in the caller's task (no task per call): one ``asyncio.timeout``
        whose deadline a progress notification moves (``reschedule``) and that the end of the
        session task expires at once.

        Raises ToolTimeout (``notifications/cancelled`` sent first) when neither an answer nor
        progress came for ``answer_timeout_s`` seconds, or ``hard_timeout_s`` passed;
        ToolTransportError when the session is not connected or the request could not be
        written (``sent=False``), the server no longer knows the session ("Session terminated":
        ``sent=False``, it did not run) or the channel failed after the request left
        (``sent=True``); ToolFailed for a JSON-RPC error answer. A caller that cancels the call
        gets its CancelledError; ``notifications/cancelled`` goes out in the background."""
        if not self.alive:
            raise ToolTransportError(self.server, f"not connected ({self.error or self.state})", sent=False)
        session, owner = self._session, self._task
        assert owner is not None
        loop = asyncio.get_running_loop()
        hard = max(answer_timeout_s, hard_timeout_s or answer_timeout_s)
        flight = _Flight()
        start = loop.time()
        flight.last_progress = start
        timeout = asyncio.timeout(None)
        waiting = False  # inside the timeout scope: progress and the session's end may move it
        ended = False  # the session task ended while the call was in flight

        def deadline() -> float:
            return min(flight.last_progress + answer_timeout_s, start + hard)

        async def progress(value: float, total: float | None, message: str | None) -> None:
            flight.last_progress, flight.progress = loop.time(), (value, total, message)
            if waiting and not timeout.expired():
                timeout.reschedule(deadline())
            if on_progress is not None:
                try:
                    out = on_progress(value, total, message)
                    if asyncio.iscoroutine(out):
                        await out
                except Exception:
                    log.exception("MCP progress handler failed")

        def owner_done(_: Any) -> None:
            nonlocal ended
            if waiting and not timeout.expired():  # wake the call now
                ended = True
                timeout.reschedule(loop.time())

        self.inflight += 1
        self.calls += 1
        self.last_used = time.monotonic()
        owner.add_done_callback(owner_done)
        try:
            try:
                async with timeout:
                    timeout.reschedule(deadline())
                    waiting = True
                    try:
                        return await _send_call(session, tool, args, request_id, flight, progress)
                    finally:
                        waiting = False
            except TimeoutError as exc:
                if not timeout.expired():  # not ours: an OS-level timeout in the transport
                    raise self._lost(f"{tool} failed in transport: {describe(exc)}") from None
                if ended:  # the session task ended first
                    if never_connected(self.fatal):  # the HTTP request found no server to connect to
                        raise self._lost(
                            f"{tool} could not be sent: the server refused the connection "
                            f"({self.error or 'session ended'})",
                            sent=False,
                        ) from None
                    raise self._lost(f"connection lost during {tool} ({self.error or 'session ended'})") from None
                over_hard = loop.time() >= start + hard
                return await self._timed_out(
                    session,
                    flight,
                    tool,
                    hard if over_hard else answer_timeout_s,
                    over_hard and hard > answer_timeout_s,
                )
            except asyncio.CancelledError:  # the caller gave up: tell the server
                self._cancel_in_background(session, flight, "the client cancelled the call")
                raise
            except _NotSent as exc:
                raise self._lost(f"{tool} could not be sent: {describe(exc)}", sent=False) from None
            except McpError as exc:
                if exc.error.code == CONNECTION_CLOSED:
                    raise self._lost(f"connection closed during {tool}") from None
                if exc.error.message == SESSION_TERMINATED:
                    raise self._lost(
                        f"{tool}: session terminated by the server (restarted or expired); the request was not run",
                        sent=False,
                    ) from None
                if exc.error.code == REQUEST_TIMEOUT_CODE:  # a session read timeout of the SDK
                    return await self._timed_out(session, flight, tool, answer_timeout_s, False)
                raise ToolFailed(f"MCP error {exc.error.code}: {exc.error.message}") from None
            except TRANSPORT_ERRORS as exc:
                raise self._lost(f"{tool} failed in transport: {describe(exc)}") from None
        finally:
            owner.remove_done_callback(owner_done)
            self.inflight -= 1
            self.last_used = time.monotonic()

    async def _timed_out(self, session: Any, flight: _Flight, tool: str, limit_s: float, hard: bool) -> NoReturn:
        what = "its hard limit of" if hard else "no answer within"
        notified = await self._send_cancelled(session, flight, f"timed out after {limit_s:g} s")
        if not await self.ping():
            raise ToolTransportError(
                self.server, f"no answer to {tool} within {limit_s:g} s and no answer to ping: server considered dead"
            )
        last = (
            f"; last progress {flight.progress[0]:g}" + (f"/{flight.progress[1]:g}" if flight.progress[1] else "")
            if flight.progress
            else ""
        )
        raise ToolTimeout(
            f"{tool} on MCP server '{self.server}' gave {what} {limit_s:g} s{last} "
            f"({'cancellation sent' if notified else 'cancellation could not be sent'})"
        )


async def _send_call(
    session: ClientSession, tool: str, args: dict[str, Any], request_id: str, flight: _Flight, progress: Any
) -> types.CallToolResult:
    """Send one ``tools/call`` and return its ``CallToolResult``; records the JSON-RPC id in
    ``flight``. Raises _NotSent when the request could not be handed to the transport."""
    meta = types.RequestParams.Meta(**{REQUEST_ID_META: request_id}) if request_id else None
    request = types.ClientRequest(
        types.CallToolRequest(params=types.CallToolRequestParams(name=tool, arguments=args, _meta=meta))
    )
    # BaseSession.send_request takes ``_request_id`` as this request's id before its first
    # await; read here with no await in between, it is exactly that id (and the progress token).
    flight.request_id = getattr(session, "_request_id", None)
    try:
        return await session.send_request(request, types.CallToolResult, progress_callback=progress)
    except (anyio.ClosedResourceError, anyio.BrokenResourceError) as exc:
        # Only the write to the transport raises these in send_request (the response stream
        # is its own): the request never left the client.
        raise _NotSent(describe(exc)) from exc


async def list_all_tools(session: Any, max_pages: int = 1000) -> list[types.Tool]:
    """Every tool of ``tools/list`` (following ``nextCursor``, at most ``max_pages`` pages)."""
    tools: list[types.Tool] = []
    cursor: str | None = None
    seen: set[str] = set()
    for _ in range(max_pages):
        page = await session.list_tools(params=types.PaginatedRequestParams(cursor=cursor) if cursor else None)
        tools.extend(page.tools or [])
        cursor = page.nextCursor
        if not cursor:
            return tools
        if cursor in seen:
            raise RuntimeError(f"tools/list repeated the cursor {cursor!r}")
        seen.add(cursor)
    raise RuntimeError(f"tools/list returned more than {max_pages} pages")


async def _accept_defaults(context: Any, params: Any) -> types.ElicitResult | types.ErrorData:
    """Elicitation answer of mode "defaults": accept with every default of the requested schema
    (SEP-1034); decline when a required field has no default, and for URL-mode requests."""
    schema = getattr(params, "requestedSchema", None)
    if not isinstance(schema, dict):
        return types.ElicitResult(action="decline")
    props = schema.get("properties") or {}
    content = {k: v["default"] for k, v in props.items() if isinstance(v, dict) and "default" in v}
    if any(r not in content for r in schema.get("required") or []):
        return types.ElicitResult(action="decline")
    return types.ElicitResult(action="accept", content=content)
