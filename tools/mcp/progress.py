"""Where MCP progress notifications go (DESIGN §3; seed §3.3: "progress notifications shown as
progress").

A caller that wants the progress of the MCP calls it makes — the graph's ``dispatch_tools`` node,
which hands it to LangGraph's custom stream (``stream_mode="custom"``, Studio) — wraps them in
:func:`progress_to`; every ``notifications/progress`` of a ``tools/call`` made inside (through
:meth:`tools.mcp.client.MCPServer.call_tool`, whatever sits between: the registry, the toolbox's
runner, failover) is passed to the sink as one :class:`ProgressEvent`. The sink rides a
``contextvars.ContextVar``, so this layer needs no import of the graph and the call chain no
extra parameter; tasks created inside (``asyncio.timeout``, ``wait_for``) inherit it.

A sink must be quick and must not raise (an exception is logged and dropped: progress never
fails a call). It is called on the event loop that owns the server's sessions, from the task that
reads the server's messages — but inside a copy of the context :func:`progress_to` ran in, so
a sink that needs its caller's context variables (LangGraph's stream writer reads the run's
config from one) finds them.
"""

from __future__ import annotations

import contextvars
import logging
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypedDict

log = logging.getLogger(__name__)


class ProgressEvent(TypedDict):
    """One ``notifications/progress`` of a ``tools/call``.

    type        "mcp_progress"
    server      MCP server name (``mcpServers`` key)
    tool        the tool's name on that server
    request_id  the agent's request id of the call ("" when none)
    progress    the server's progress value (it only grows; units are the server's)
    total       the expected total when the server gave one, else None
    message     the server's message, else None
    """

    type: str
    server: str
    tool: str
    request_id: str
    progress: float
    total: float | None
    message: str | None


ProgressSink = Callable[[ProgressEvent], Any]

_sink: contextvars.ContextVar[ProgressSink | None] = contextvars.ContextVar("hermes_mcp_progress_sink", default=None)


@contextmanager
def progress_to(sink: ProgressSink | None) -> Iterator[None]:
    """Send the progress of MCP calls made inside this block (this task and the tasks it
    creates) to ``sink``; None turns it off. Nests: the previous sink comes back on exit."""
    bound: ProgressSink | None = None
    if sink is not None:
        context, target = contextvars.copy_context(), sink

        def bound(event: ProgressEvent) -> Any:
            return context.run(target, event)

    token = _sink.set(bound)
    try:
        yield
    finally:
        _sink.reset(token)


def current_sink() -> ProgressSink | None:
    """The sink of the running context (None: progress is only logged)."""
    return _sink.get()


def emit(sink: ProgressSink | None, event: ProgressEvent) -> None:
    """Hand ``event`` to ``sink``; a failing sink is logged, never raised."""
    if sink is None:
        return
    try:
        sink(event)
    except Exception:  # progress never fails a call
        log.exception("MCP progress sink failed")
