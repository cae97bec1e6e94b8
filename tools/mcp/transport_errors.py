"""How an MCP session fails in transport: the exceptions that mean the connection broke
(:data:`TRANSPORT_ERRORS`), the mcp SDK's markers of a request timeout and of a session the
server no longer knows, whether an HTTP session never connected (:func:`never_connected`), and
readable text of an exception group (:func:`describe`). Used by ``tools.mcp.session`` and
``tools.mcp.client``.
"""

from __future__ import annotations

import anyio
from mcp.shared.exceptions import McpError

#: JSON-RPC error code of a request that ran over the session's read timeout (mcp SDK: HTTP 408).
REQUEST_TIMEOUT_CODE = 408
#: The mcp SDK's error for a streamable-HTTP request answered 404: the server no longer knows the
#: session (it restarted, or expired it); the request was not run.
SESSION_TERMINATED = "Session terminated"

#: Exceptions that mean the transport broke (the connection, not the tool).
TRANSPORT_ERRORS: tuple[type[BaseException], ...] = (
    anyio.ClosedResourceError,
    anyio.BrokenResourceError,
    anyio.EndOfStream,
    ConnectionError,
    BrokenPipeError,
    EOFError,
    OSError,
)
try:  # httpx errors of the HTTP/SSE transports
    import httpx

    TRANSPORT_ERRORS += (httpx.TransportError,)
except ImportError:  # pragma: no cover
    pass


def never_connected(exc: BaseException | None) -> bool:
    """True when the session died of an HTTP request that could not connect at all (no server
    listening): a request in flight on a live connection fails with a read error first."""
    if exc is None:
        return False
    if isinstance(exc, BaseExceptionGroup):
        return all(never_connected(e) for e in exc.exceptions)
    try:
        import httpx
    except ImportError:  # pragma: no cover
        return False
    return isinstance(exc, (httpx.ConnectError, httpx.ConnectTimeout))


def describe(exc: BaseException | None) -> str:
    """Readable text of an exception, unwrapping anyio/asyncio exception groups."""
    if exc is None:
        return ""
    if isinstance(exc, BaseExceptionGroup):
        return "; ".join(describe(e) for e in exc.exceptions)
    if isinstance(exc, McpError):
        return exc.error.message
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
