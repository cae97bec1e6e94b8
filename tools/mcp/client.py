"""MCP client with one persistent session per server (DESIGN §3; failure kinds K6–K9).

Built on ``langchain_mcp_adapters``: a :class:`MultiServerMCPClient` holds the connections
(stdio / SSE / streamable HTTP); ``tools/list`` runs on the open session and each tool is also
converted to a LangChain tool (``convert_mcp_tool_to_langchain_tool``). ``get_tools()`` without
a session would spawn a new server process per call, so it is never used. Each listed tool keeps
its ``annotations`` and ``_meta`` (:class:`MCPTool`); the toolbox builds the ToolSpec from them
and the user's per-server/per-tool settings (:mod:`tools.mcp.config`).

Lifecycle of a server (:class:`MCPServer`):
  * ``start()`` runs one background asyncio task that enters ``client.session(name)`` (start the
    process / open the channel), sends ``initialize`` (protocol version, client capabilities),
    records the server capabilities and ``tools/list``, publishes the session and waits for the
    stop event. anyio cancel scopes must be exited by the task that entered them, which is why
    the session lives in its own task; calls from any task go through the published session.
  * A server that fails to start, exits, or never answers ``initialize`` fails within
    ``startup_timeout_s`` seconds with :class:`ToolTransportError` naming it (K8).
  * A server that dies later fails its pending calls with ``ToolTransportError``; its next
    call reconnects it (old process tree killed first; at most MAX_RECONNECTS times, each
    retried with tenacity), so one crash does not disable a server for the whole run. The
    failed call itself is never replayed (its side effect is unknown).
  * Calls (at most once on the wire, never replayed here): ``tools/call`` goes straight to
    ``ClientSession.send_request`` so the JSON-RPC id of the request is known. On a timeout (or
    when the caller cancels) the client sends ``notifications/cancelled`` for that id (the MCP
    spec's SHOULD; mcp 1.30's ``send_request`` does not send it itself) and raises
    :class:`ToolTimeout`. A :class:`ToolTransportError` has ``sent=False`` only when the request
    is known not to have left the client: the server was not connected (start or reconnect
    failed, known dead) or the write to the transport failed; otherwise ``sent=True``.
  * Sessions belong to the event loop that started them; calls and ``aclose()`` from another
    running loop are forwarded to it (``run_coroutine_threadsafe``).
  * ``aclose()``: stop event → the task leaves the session (close stdin, wait, SIGTERM,
    SIGKILL, as the MCP SDK does), then every process still carrying the server's environment
    marker (its whole tree, even re-parented children) gets SIGTERM, 1 s grace, SIGKILL (K9).
"""

from __future__ import annotations

import asyncio
import json
import logging
import math
import re
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

import anyio
import jsonschema
from langchain_core.tools import BaseTool
from langchain_mcp_adapters.client import MultiServerMCPClient
from langchain_mcp_adapters.tools import convert_mcp_tool_to_langchain_tool
from mcp import types
from mcp.shared.exceptions import McpError
from mcp.types import CONNECTION_CLOSED
from tenacity import AsyncRetrying, retry_if_exception_type, stop_after_attempt, wait_exponential

from tools.errors import ToolFailed, ToolTimeout, ToolTransportError
from tools.mcp.config import ServerSettings, server_settings, to_connection
from tools.procs import KILL_GRACE_S, find_by_env_marker, terminate
from tools.spec import normalize_schema

log = logging.getLogger(__name__)

#: Seconds a server gets to start and answer ``initialize`` + ``tools/list``.
STARTUP_TIMEOUT_S = 15.0
#: Seconds ``aclose`` waits for the session task to leave the session before cancelling it.
SHUTDOWN_TIMEOUT_S = 8.0
#: A server that died after a good start is reconnected on its next call, at most this many
#: times over its lifetime (each reconnect is tried RECONNECT_ATTEMPTS times).
MAX_RECONNECTS = 3
RECONNECT_ATTEMPTS = 2
#: Seconds a server gets to answer ``ping`` after one of its calls timed out.
PING_TIMEOUT_S = 2.0
#: Seconds the client waits for ``notifications/cancelled`` to be handed to the transport.
CANCEL_NOTIFY_TIMEOUT_S = 0.5
#: JSON-RPC error code of a request that ran over the session's read timeout (mcp SDK: HTTP 408).
REQUEST_TIMEOUT_CODE = 408
#: ``_meta`` key of ``tools/call`` carrying the agent's ``request_id`` (servers may log or use it).
REQUEST_ID_META = "hermes/request_id"
#: Environment variable that marks every process of one stdio server (value: unique id).
MARKER_ENV = "HERMES_MCP_SERVER_ID"

_TRANSPORT_ERRORS: tuple[type[BaseException], ...] = (
    anyio.ClosedResourceError, anyio.BrokenResourceError, anyio.EndOfStream,
    ConnectionError, BrokenPipeError, EOFError, OSError,
)
try:  # httpx errors of the HTTP/SSE transports
    import httpx

    _TRANSPORT_ERRORS += (httpx.TransportError,)
except ImportError:  # pragma: no cover
    pass


@dataclass
class MCPTool:
    """One tool of a server as listed by ``tools/list``: original ``name``, description,
    normalised ``input_schema`` (K6), ``annotations`` (``readOnlyHint``, ``idempotentHint``,
    ``destructiveHint``, ``openWorldHint``, ``title``; only those the server set), ``meta``
    (the tool's ``_meta``, e.g. ``"hermes/requested_by"``), ``output_schema`` (validates
    ``structuredContent``) and the adapter's LangChain tool (for LangChain users; calls go
    through :meth:`MCPServer.call_tool`)."""

    name: str
    description: str
    input_schema: dict[str, Any]
    lc_tool: BaseTool | None = field(default=None, repr=False)
    annotations: dict[str, Any] = field(default_factory=dict)
    meta: dict[str, Any] = field(default_factory=dict)
    output_schema: dict[str, Any] | None = None

    @property
    def read_only(self) -> bool:
        """The server's ``readOnlyHint`` (MCP default: False)."""
        return self.annotations.get("readOnlyHint") is True

    @property
    def idempotent_hint(self) -> bool | None:
        """The server's ``idempotentHint``; None when it did not say."""
        value = self.annotations.get("idempotentHint")
        return value if isinstance(value, bool) else None


class _NotSent(Exception):
    """The ``tools/call`` request could not be handed to the transport (it never left)."""


@dataclass
class _Flight:
    """One ``tools/call`` in flight: its JSON-RPC id once the request was built."""

    request_id: types.RequestId | None = None


class MCPServer:
    """One MCP server and its persistent session. ``state``: "new" → "ready" | "failed" → "closed".

    Args:
        name              server name from ``mcpServers``.
        entry             its config entry (see :mod:`tools.mcp.config`); its Hermes keys
                          (``timeoutSeconds``, ``tools``) are in :attr:`settings`.
        startup_timeout_s bound on start + ``initialize`` + ``tools/list`` (seconds).
    Raises MCPConfigError (a ValueError naming the server and field) for a bad entry.
    """

    def __init__(self, name: str, entry: dict[str, Any], *, startup_timeout_s: float = STARTUP_TIMEOUT_S) -> None:
        self.name = name
        self.startup_timeout_s = startup_timeout_s
        self.connection = to_connection(name, entry)
        self.settings: ServerSettings = server_settings(name, entry)
        self.transport: str = self.connection["transport"]
        self.marker = f"{name}-{uuid.uuid4().hex}"
        if self.transport == "stdio":
            self.connection["env"] = {**self.connection.get("env", {}), MARKER_ENV: self.marker}
        self._client = MultiServerMCPClient({name: self.connection})
        self.state = "new"
        self.error: str | None = None
        self.server_info: dict[str, Any] = {}
        self.capabilities: dict[str, Any] = {}
        self.protocol_version: str | None = None
        self.tools: dict[str, MCPTool] = {}
        self._session: Any = None
        self._ready: asyncio.Future[None] | None = None
        self._stop = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._lock: asyncio.Lock | None = None
        self.reconnects = 0
        self._background: set[asyncio.Task[None]] = set()

    # -- lifecycle -------------------------------------------------------------------------
    async def start(self) -> None:
        """Start the server and its session task; return once ``tools/list`` is known.
        Raises ToolTransportError naming the server (bounded by ``startup_timeout_s``)."""
        if self._task is not None:
            raise RuntimeError(f"MCP server '{self.name}' already started")
        self._loop = asyncio.get_running_loop()
        self._lock = asyncio.Lock()
        await self._launch()

    async def _launch(self) -> None:
        assert self._loop is not None
        ready: asyncio.Future[None] = self._loop.create_future()
        stop = asyncio.Event()
        self.state, self.error = "new", None
        self._stop = stop
        self._task = asyncio.create_task(self._own_session(ready, stop), name=f"mcp-session:{self.name}")
        try:
            await asyncio.wait_for(asyncio.shield(ready), self.startup_timeout_s + 2.0)
        except TimeoutError:
            self.state, self.error = "failed", f"no answer to initialize within {self.startup_timeout_s:g} s"
            await self._stop_session()
            raise ToolTransportError(self.name, self.error, sent=False) from None
        except ToolTransportError:
            await self._stop_session()
            raise

    async def _own_session(self, ready: asyncio.Future[None], stop: asyncio.Event) -> None:
        started = time.perf_counter()
        try:
            with anyio.fail_after(self.startup_timeout_s) as scope:
                async with self._client.session(self.name, auto_initialize=False) as session:
                    init = await session.initialize()
                    listed = await _list_tools(session)
                    scope.deadline = math.inf  # started: no deadline while serving
                    self._publish(session, init, listed)
                    ready.set_result(None)
                    log.info("MCP server %s ready (%s, %d tools, %.2f s)", self.name, self.transport,
                             len(self.tools), time.perf_counter() - started)
                    await stop.wait()
        except BaseException as exc:  # noqa: BLE001 - recorded and surfaced as transport errors
            reason = _describe(exc)
            if isinstance(exc, TimeoutError) and not ready.done():
                reason = f"no answer to initialize within {self.startup_timeout_s:g} s"
            if self.state in ("new", "ready") and not stop.is_set():
                self.error = ("failed to start: " if self.state == "new" else "connection lost: ") + reason
                self.state = "failed"
                # a cancelled session task is the host shutting down, not a server failure
                (log.info if isinstance(exc, asyncio.CancelledError) else log.warning)(
                    "MCP server %s %s", self.name, self.error)
            if not ready.done():
                ready.set_exception(ToolTransportError(self.name, self.error or reason, sent=False))
                ready.exception()
            if isinstance(exc, asyncio.CancelledError):
                raise
        finally:
            if self._stop is stop:
                self._session = None
            if not ready.done():  # clean exit before ready (stop requested)
                ready.set_exception(ToolTransportError(self.name, "closed before it was ready", sent=False))
                ready.exception()

    def _publish(self, session: Any, init: Any, listed: list[types.Tool]) -> None:
        self.protocol_version = str(getattr(init, "protocolVersion", "") or "") or None
        caps = getattr(init, "capabilities", None)
        self.capabilities = caps.model_dump(exclude_none=True) if caps is not None else {}
        info = getattr(init, "serverInfo", None)
        self.server_info = info.model_dump(exclude_none=True) if info is not None else {}
        tools = {}
        for t in listed:
            lc_tool = convert_mcp_tool_to_langchain_tool(session, t, server_name=self.name, handle_tool_errors=False)
            annotations = t.annotations.model_dump(exclude_none=True) if t.annotations is not None else {}
            tools[t.name] = MCPTool(name=t.name, description=" ".join((t.description or "").split()),
                                    input_schema=normalize_schema(t.inputSchema), lc_tool=lc_tool,
                                    annotations=annotations, meta=dict(t.meta or {}),
                                    output_schema=t.outputSchema if isinstance(t.outputSchema, dict) else None)
        if self.tools and set(tools) != set(self.tools):
            log.warning("MCP server %s changed its tool list on reconnect: %s -> %s",
                        self.name, sorted(self.tools), sorted(tools))
        self.tools = tools
        self._session = session
        self.state = "ready"

    async def _stop_session(self) -> None:
        """Leave the current session (stdin closed, SIGTERM, SIGKILL by the SDK), then kill any
        process still carrying the marker (SIGTERM, 1 s grace, SIGKILL)."""
        self._stop.set()
        task = self._task
        if task is not None and not task.done():
            try:
                await asyncio.wait_for(asyncio.shield(task), SHUTDOWN_TIMEOUT_S)
            except TimeoutError:
                task.cancel()
                await asyncio.gather(task, return_exceptions=True)
            except BaseException:  # noqa: BLE001 - the task's own failure is already recorded
                pass
        self._session = None
        if self.transport == "stdio":
            await asyncio.to_thread(self.kill_leftovers)

    async def reconnect(self) -> None:
        """Replace the session with a fresh one (new process for stdio): the old one is shut
        down first, with no process left behind (K9). Tried ``RECONNECT_ATTEMPTS`` times
        (tenacity, short backoff); raises ToolTransportError naming the server if all fail."""
        if self._loop is not None and self._loop is not asyncio.get_running_loop():
            return await _on_loop(self.name, self._loop, self.reconnect())
        if self.state == "closed" or self._task is None:
            raise ToolTransportError(self.name, f"cannot reconnect a server that is {self.state}", sent=False)
        self.reconnects += 1
        await self._stop_session()
        async for attempt in AsyncRetrying(stop=stop_after_attempt(RECONNECT_ATTEMPTS),
                                           wait=wait_exponential(multiplier=0.2, max=2.0),
                                           retry=retry_if_exception_type(ToolTransportError), reraise=True):
            with attempt:
                await self._launch()
        log.info("MCP server %s reconnected (%d)", self.name, self.reconnects)

    async def _ensure_connected(self) -> None:
        """Reconnect a server that died after a good start, at most MAX_RECONNECTS times."""
        if self.state != "failed" or self.reconnects >= MAX_RECONNECTS:
            return
        async with self._lock:
            if self.state == "failed":
                try:
                    await self.reconnect()
                except ToolTransportError as exc:
                    self.state, self.error = "failed", f"reconnect failed: {exc}"

    async def aclose(self) -> None:
        """Leave the session (shutdown sequence) and kill any leftover process of the server.
        Idempotent."""
        if self.state == "closed":
            return
        if self._loop is not None and self._loop is not asyncio.get_running_loop():
            await _on_loop(self.name, self._loop, self.aclose())
            return
        if self._background:  # cancellation notices still being sent (bounded)
            await asyncio.gather(*self._background, return_exceptions=True)
        await self._stop_session()
        self.state = "closed"

    def pids(self) -> list[int]:
        """PIDs of every live process of this stdio server (found by its env marker). Blocking."""
        if self.transport != "stdio":
            return []
        return sorted(p.pid for p in find_by_env_marker(MARKER_ENV, self.marker))

    def kill_leftovers(self, grace_s: float = KILL_GRACE_S) -> list[int]:
        """SIGTERM / grace / SIGKILL every process still carrying the marker. Blocking."""
        procs = find_by_env_marker(MARKER_ENV, self.marker)
        if procs:
            log.warning("MCP server %s left %d process(es) after shutdown; killing %s",
                        self.name, len(procs), [p.pid for p in procs])
        return terminate(procs, grace_s)

    # -- calls -------------------------------------------------------------------------------
    def _lost(self, session: Any, reason: str, *, sent: bool = True) -> ToolTransportError:
        """Mark the session dead (the next call reconnects) and return the error to raise."""
        if self._session is session and self.state == "ready":
            self.state, self.error = "failed", f"connection lost: {reason}"
            log.warning("MCP server %s %s", self.name, self.error)
        return ToolTransportError(self.name, reason, sent=sent)

    async def _alive(self) -> bool:
        """After a call timeout: does the server still answer ``ping`` within PING_TIMEOUT_S?
        If not it is marked failed, so later calls fail at once instead of timing out (K8c:
        a streamable-HTTP server that died mid-call leaves the request pending forever)."""
        session = self._session
        if session is None:
            return False
        try:
            await asyncio.wait_for(session.send_ping(), PING_TIMEOUT_S)
            return True
        except Exception as exc:  # noqa: BLE001 - any failure to answer means dead
            if self.state == "ready":
                self.state, self.error = "failed", f"no answer to ping ({_describe(exc) or 'timeout'})"
                log.warning("MCP server %s %s", self.name, self.error)
            return False

    async def _send_cancelled(self, session: Any, flight: _Flight, reason: str) -> bool:
        """Send ``notifications/cancelled`` for the request of ``flight`` (best effort, bounded
        by CANCEL_NOTIFY_TIMEOUT_S). Returns True when it was handed to the transport."""
        if flight.request_id is None:
            return False  # the request was never built, so never sent
        note = types.ClientNotification(types.CancelledNotification(
            params=types.CancelledNotificationParams(requestId=flight.request_id, reason=reason)))
        try:
            await asyncio.wait_for(session.send_notification(note), CANCEL_NOTIFY_TIMEOUT_S)
        except Exception as exc:  # noqa: BLE001 - the channel may be gone; nothing else to do
            log.info("MCP server %s: could not send notifications/cancelled for request %s: %s",
                     self.name, flight.request_id, _describe(exc) or "timeout")
            return False
        log.info("MCP server %s: sent notifications/cancelled for request %s (%s)",
                 self.name, flight.request_id, reason)
        return True

    def _cancel_in_background(self, session: Any, flight: _Flight, reason: str) -> None:
        """The caller was cancelled mid-call: notify the server from a task of our own."""
        if flight.request_id is None:
            return
        task = asyncio.get_running_loop().create_task(self._send_cancelled(session, flight, reason))
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    async def call_tool(self, tool: str, args: dict[str, Any], *, timeout_s: float, request_id: str = "") -> Any:
        """``tools/call`` over the persistent session; returns the result content as JSON/text.
        The request goes out at most once: a failed call is never replayed here.

        Raises ToolFailed with the server's text for an ``isError`` result (K7), a JSON-RPC
        error or a result that breaks the tool's output schema; ToolTimeout after ``timeout_s``
        seconds (``notifications/cancelled`` sent for the request first); ToolTransportError
        when the server is not connected (``sent=False``), the write to the transport failed
        (``sent=False``) or the channel failed after the request left (``sent=True``) (K8).
        ``request_id`` goes to the server in the request's ``_meta`` (``hermes/request_id``).
        """
        if self._loop is not None and self._loop is not asyncio.get_running_loop():
            # Called from another event loop (e.g. a server running graphs on isolated loops):
            # the session belongs to the loop that started it, so the call runs there.
            return await _on_loop(self.name, self._loop,
                                  self.call_tool(tool, args, timeout_s=timeout_s, request_id=request_id))
        await self._ensure_connected()
        if self.state != "ready" or self._session is None or self._task is None or self._task.done():
            raise ToolTransportError(self.name, f"not connected ({self.error or self.state})", sent=False)
        session, owner = self._session, self._task
        mcp_tool = self.tools.get(tool)
        if mcp_tool is None:
            raise ToolFailed(f"MCP server '{self.name}' has no tool {tool!r}")
        flight = _Flight()
        call = asyncio.ensure_future(_send_call(session, tool, args, request_id, flight))
        try:
            done, _ = await asyncio.wait({call, owner}, timeout=timeout_s, return_when=asyncio.FIRST_COMPLETED)
        except BaseException:  # the caller gave up (outer timeout, run cancelled): tell the server
            call.cancel()
            self._cancel_in_background(session, flight, "the client cancelled the call")
            raise
        if call not in done:
            call.cancel()
            await asyncio.gather(call, return_exceptions=True)
            if not call.cancelled() and isinstance(call.exception(), _NotSent):
                raise self._lost(session, f"{tool} could not be sent: {_describe(call.exception())}",
                                 sent=False) from None
            if owner in done:
                raise ToolTransportError(self.name, f"connection lost during {tool} ({self.error or 'session ended'})")
            return await self._timed_out(session, flight, tool, timeout_s)
        try:
            result = call.result()
        except _NotSent as exc:
            raise self._lost(session, f"{tool} could not be sent: {_describe(exc)}", sent=False) from None
        except McpError as exc:
            if exc.error.code == CONNECTION_CLOSED:
                raise self._lost(session, f"connection closed during {tool}") from None
            if exc.error.code == REQUEST_TIMEOUT_CODE:  # a session read timeout of the SDK
                return await self._timed_out(session, flight, tool, timeout_s)
            raise ToolFailed(f"MCP error {exc.error.code}: {exc.error.message}") from None
        except _TRANSPORT_ERRORS as exc:
            raise self._lost(session, f"{tool} failed in transport: {_describe(exc)}") from None
        return result_to_json(result, mcp_tool.output_schema)

    async def _timed_out(self, session: Any, flight: _Flight, tool: str, timeout_s: float) -> Any:
        """The call ran over ``timeout_s``: send ``notifications/cancelled``, then check the server
        answers ``ping``. Raises ToolTimeout, or ToolTransportError (sent) if it is dead."""
        notified = await self._send_cancelled(session, flight, f"timed out after {timeout_s:g} s")
        if not await self._alive():
            raise ToolTransportError(self.name, f"no answer to {tool} within {timeout_s:g} s and no answer "
                                                f"to ping: server considered dead")
        raise ToolTimeout(f"{tool} on MCP server '{self.name}' gave no answer within {timeout_s:g} s "
                          f"({'cancellation sent' if notified else 'cancellation could not be sent'})")


async def _send_call(session: Any, tool: str, args: dict[str, Any], request_id: str, flight: _Flight) -> Any:
    """Send one ``tools/call`` and return its ``CallToolResult``; records the JSON-RPC id in
    ``flight``. Raises _NotSent when the request could not be handed to the transport."""
    meta = types.RequestParams.Meta(**{REQUEST_ID_META: request_id}) if request_id else None
    request = types.ClientRequest(types.CallToolRequest(
        params=types.CallToolRequestParams(name=tool, arguments=args, _meta=meta)))
    # BaseSession.send_request takes ``_request_id`` as this request's id before its first
    # await; read here with no await in between, it is exactly that id (even with concurrent
    # calls on the session).
    flight.request_id = getattr(session, "_request_id", None)
    try:
        return await session.send_request(request, types.CallToolResult)
    except (anyio.ClosedResourceError, anyio.BrokenResourceError) as exc:
        # Only the write to the transport raises these in send_request (the response stream
        # is its own): the request never left the client.
        raise _NotSent(_describe(exc)) from exc


async def _list_tools(session: Any) -> list[types.Tool]:
    """Every tool of ``tools/list`` (following ``nextCursor``, at most 1000 pages)."""
    tools: list[types.Tool] = []
    cursor: str | None = None
    for _ in range(1000):
        page = await session.list_tools(cursor=cursor)
        tools.extend(page.tools or [])
        cursor = page.nextCursor
        if not cursor:
            return tools
    raise RuntimeError("tools/list returned more than 1000 pages")


def result_to_json(result: types.CallToolResult, output_schema: dict[str, Any] | None = None) -> Any:
    """A ``CallToolResult`` → JSON-able value (:func:`content_to_json` of its content blocks).
    Raises ToolFailed for an ``isError`` result (K7, with the server's text) or structured
    content that breaks the tool's ``output_schema`` (the check ``ClientSession.call_tool``
    makes)."""
    blocks = [_block(b) for b in result.content or []]
    if result.isError:
        text = "\n".join(b["text"] for b in blocks if isinstance(b, dict) and b.get("type") == "text")
        raise ToolFailed(text or "MCP tool reported an error")
    if output_schema is not None:
        if result.structuredContent is None:
            raise ToolFailed("the tool has an output schema but returned no structured content")
        try:
            jsonschema.validate(result.structuredContent, output_schema)
        except jsonschema.ValidationError as exc:
            raise ToolFailed(f"structured content does not match the tool's output schema: {exc.message}") from None
        except jsonschema.SchemaError:
            log.warning("ignoring an invalid output schema of an MCP tool")
    artifact = {"structured_content": result.structuredContent} if result.structuredContent is not None else None
    return content_to_json(blocks, artifact)


def _block(b: Any) -> Any:
    """One MCP content block → the LangChain-style dict :func:`content_to_json` reads."""
    kind = getattr(b, "type", None)
    if kind == "text":
        return {"type": "text", "text": b.text}
    if kind in ("image", "audio"):
        return {"type": kind, "base64": b.data, "mime_type": b.mimeType}
    if kind == "resource_link":
        mime = b.mimeType or None
        return {"type": "image" if mime and mime.startswith("image/") else "file", "url": str(b.uri),
                "mime_type": mime, "name": b.name}
    if kind == "resource":
        res = b.resource
        if isinstance(res, types.TextResourceContents):
            return {"type": "text", "text": res.text}
        mime = getattr(res, "mimeType", None) or None
        return {"type": "image" if mime and mime.startswith("image/") else "file",
                "base64": getattr(res, "blob", ""), "mime_type": mime, "url": str(res.uri)}
    return b.model_dump(mode="json", exclude_none=True) if hasattr(b, "model_dump") else str(b)


async def _on_loop(server: str, loop: asyncio.AbstractEventLoop, coro: Any) -> Any:
    """Run ``coro`` on ``loop`` (another thread's running loop) and await its result here."""
    if loop.is_closed() or not loop.is_running():
        coro.close()
        raise ToolTransportError(server, "the event loop that owns this MCP session is not running", sent=False)
    return await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(coro, loop))


def content_to_json(content: Any, artifact: Any = None) -> Any:
    """MCP result content blocks → JSON-able value: one text block that parses as JSON → that
    value; one text block → the string; several → a list (text blocks as strings/JSON, other
    blocks as dicts without base64 payloads). Falls back to ``structuredContent``."""
    if isinstance(content, str):
        return _maybe_json(content)
    blocks = content if isinstance(content, list) else [content]
    out: list[Any] = []
    for b in blocks:
        if isinstance(b, dict) and b.get("type") == "text":
            out.append(_maybe_json(b.get("text", "")))
        elif isinstance(b, str):
            out.append(_maybe_json(b))
        elif isinstance(b, dict):
            out.append({k: (f"<{len(v)} base64 chars>" if k == "base64" else v)
                        for k, v in b.items() if k != "id"})
        else:
            out.append(str(b))
    if not out and isinstance(artifact, dict) and artifact.get("structured_content") is not None:
        return artifact["structured_content"]
    return out[0] if len(out) == 1 else out


_JSON_SCALAR = re.compile(r'^(-?\d+(\.\d+)?([eE][+-]?\d+)?|true|false|null)$')


def _maybe_json(text: str) -> Any:
    s = text.strip()
    if s[:1] in ("{", "[") or _JSON_SCALAR.match(s):
        try:
            return json.loads(s)
        except json.JSONDecodeError:
            pass
    return text


def _describe(exc: BaseException) -> str:
    """Readable text of an exception, unwrapping anyio/asyncio exception groups."""
    if isinstance(exc, BaseExceptionGroup):
        return "; ".join(_describe(e) for e in exc.exceptions)
    if isinstance(exc, McpError):
        return exc.error.message
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


class MCPClient:
    """All configured MCP servers: ``{name: MCPServer}``. ``start()`` starts them concurrently;
    a server that fails is recorded in :attr:`failed` (name → reason) and the others work."""

    def __init__(self, servers: dict[str, dict[str, Any]], *, startup_timeout_s: float = STARTUP_TIMEOUT_S) -> None:
        self.servers: dict[str, MCPServer] = {}
        self.failed: dict[str, str] = {}
        for name, entry in servers.items():
            try:
                self.servers[name] = MCPServer(name, entry, startup_timeout_s=startup_timeout_s)
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
        """Servers whose session is up, in config order."""
        return [s for s in self.servers.values() if s.state == "ready"]

    async def aclose(self) -> None:
        """Close every server (concurrently); idempotent."""
        await asyncio.gather(*(s.aclose() for s in self.servers.values()), return_exceptions=True)
