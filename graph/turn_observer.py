"""What a turn run by ``graph.runner`` tells whoever runs it, while it runs: the
:class:`TurnObserver` protocol (the CLI's is ``graph.cli.render.ConsoleObserver``) and
:class:`SilentObserver`, the observer of a turn run without one."""

from __future__ import annotations

import logging
from typing import Any, Protocol

from graph.recovery import RecoveryReport

log = logging.getLogger(__name__)


class TurnObserver(Protocol):
    """What a turn tells whoever runs it, while it runs (the CLI prints it)."""

    def on_update(self, node: str, update: dict[str, Any] | None) -> None:
        """A node finished with this state update (``stream_mode="updates"``)."""

    def on_recovery(self, report: RecoveryReport) -> None:
        """The thread was rebuilt from its mirror before the turn."""

    # Optional: ``on_event(event: dict)`` — what a node wrote to LangGraph's custom stream
    # (``stream_mode="custom"``), e.g. ``{"type": "mcp_progress", "server", "tool",
    # "progress", "total", "message", ...}`` while a long MCP tool runs (tools.mcp.progress).
    # Optional: ``on_node_start(node: str)`` — a node began (``stream_mode="tasks"``), and
    # ``on_tokens(node: str, count: int)`` — a model called inside it streamed ``count`` more
    # chunks (``stream_mode="messages"``; one per generated token for llama.cpp): what a slow
    # model call shows while it runs.

    def on_warning(self, text: str) -> None:
        """Something went wrong that does not fail the turn (e.g. the mirror was not written)."""

    async def ask(self, question: str) -> str | None:
        """The agent asks ``question`` (an ``interrupt()``): the answer, or None when nobody is
        there to answer (the turn then ends and its summary carries the question)."""


class SilentObserver:
    """The observer of a turn run without one: logs, asks nobody."""

    def on_update(self, node: str, update: dict[str, Any] | None) -> None:
        pass

    def on_recovery(self, report: RecoveryReport) -> None:
        log.warning("%s", report.notice())

    def on_warning(self, text: str) -> None:
        log.warning("%s", text)

    async def ask(self, question: str) -> str | None:
        return None
