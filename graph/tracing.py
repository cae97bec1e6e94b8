"""Spans LangGraph cannot see by itself (issue 24: a run's trace has a span per node and per tool
call, the memory write included).

LangGraph traces each node as a run of the run's callbacks (LangSmith, OpenTelemetry through
``LANGSMITH_OTEL_ENABLED``, any ``BaseTracer`` in ``config["callbacks"]``); a tool the registry
runs (builtin, MCP or any other) is no LangChain runnable, so without this it would be invisible
inside its node's span. :func:`tool_span` opens a ``tool`` run named after the tool as a child of
the current node's run. :func:`background_span` does the same for work a node hands off to run
after it returns (the memory write). With no callbacks configured both do nothing (no tracer,
nothing sent).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Coroutine
from contextlib import asynccontextmanager
from typing import Any, TypeVar

from langchain_core.runnables.config import ensure_config, get_async_callback_manager_for_config

T = TypeVar("T")


class ToolSpan:
    """The open span of one tool call: :meth:`end` records its output (shape: any JSON-able
    value, e.g. ``{"status": "ok"}``) or its error text."""

    def __init__(self) -> None:
        self.output: Any = None
        self.error: str | None = None

    def end(self, output: Any, error: str | None = None) -> None:
        self.output, self.error = output, error


@asynccontextmanager
async def tool_span(
    name: str, args: Any, call_id: str | None, metadata: dict[str, Any] | None = None
) -> AsyncIterator[ToolSpan]:
    """A ``tool`` run ``name`` (inputs: ``args``; metadata: ``tool_call_id`` and ``metadata``)
    under the run of the calling node (the config LangGraph set for it). An exception inside
    ends the run as an error and propagates; :meth:`ToolSpan.end` with ``error`` ends it as an
    error without raising (a tool's error outcome)."""
    manager = get_async_callback_manager_for_config(ensure_config())
    manager.add_metadata({"tool_call_id": call_id, **(metadata or {})}, inherit=False)
    run = await manager.on_tool_start(
        {"name": name},
        json.dumps(args, default=str, ensure_ascii=False),
        name=name,
        inputs=args if isinstance(args, dict) else {"input": args},
        tool_call_id=call_id,
    )
    span = ToolSpan()
    try:
        yield span
    except BaseException as exc:
        await run.on_tool_error(exc)
        raise
    if span.error is not None:
        await run.on_tool_error(RuntimeError(span.error))
    else:
        await run.on_tool_end(span.output)


async def background_span(
    name: str, work: Coroutine[Any, Any, T], inputs: dict[str, Any] | None = None
) -> Coroutine[Any, Any, T]:
    """Open a ``chain`` run ``name`` (inputs: ``inputs``) under the calling node's run now, and
    return a coroutine that awaits ``work`` and then ends the run: with ``work``'s result as
    output (``{"output": result}``), or as an error if it raised (the error propagates). Give
    that coroutine to ``graph.resources.run_in_background``.

    The run starts while the node's run is still open: LangSmith's OpenTelemetry exporter finds a
    span's parent only while it still holds the parent's span, which it lets go when the parent's
    end arrives as an update of its own, so a child started after its parent ended may (depending
    on how the client batched the two) hang from a span missing from the trace. The span then
    ends after its parent, when the work does."""
    manager = get_async_callback_manager_for_config(ensure_config())
    run = await manager.on_chain_start({"name": name}, inputs or {}, name=name)

    async def traced() -> T:
        try:
            result = await work
        except BaseException as exc:
            await run.on_chain_error(exc)
            raise
        await run.on_chain_end({"output": result})
        return result

    return traced()
