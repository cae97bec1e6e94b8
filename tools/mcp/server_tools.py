"""The tool list of one MCP server (part of :class:`tools.mcp.client.MCPServer`): learnt from each
session's handshake (``initialize`` + ``tools/list``), re-listed on
``notifications/tools/list_changed``; a changed list bumps ``tools_version`` and calls
``on_tools_changed`` (the toolbox re-registers). Each tool is normalised by
:func:`tools.mcp.tool_listing.tools_from_listing`.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from mcp import types

from tools.mcp.server_core import ServerCore
from tools.mcp.session import Handshake, MCPSession
from tools.mcp.tool_listing import tools_from_listing
from tools.mcp.transport_errors import describe

log = logging.getLogger(__name__)


class ServerTools(ServerCore):
    """The server's tool list kept current (handshakes, list_changed)."""

    def _learn(self, hs: Handshake) -> None:
        """Record a handshake; a changed tool list bumps :attr:`tools_version` and notifies."""
        self.protocol_version, self.capabilities = hs.protocol_version, hs.capabilities
        self.server_info, self.instructions = hs.server_info, hs.instructions
        if self.handshake_s is None:
            self.handshake_s = hs.seconds
        self._set_tools(hs.tools)

    def _set_tools(self, listed: list[types.Tool]) -> None:
        tools, skipped = tools_from_listing(self.name, listed)
        changed = self.tools_version == 0 or (
            {n: t.signature() for n, t in tools.items()} != {n: t.signature() for n, t in self.tools.items()}
        )
        self.tools, self.skipped = tools, skipped
        if not changed:
            return
        if self.tools_version:
            log.warning("MCP server %s changed its tool list: %d tools", self.name, len(tools))
        self.tools_version += 1
        if self.tools_version > 1 and self.on_tools_changed is not None:
            try:
                self.on_tools_changed(self)
            except Exception:
                log.exception("MCP server %s: re-registering its tools failed", self.name)

    # -- notifications -----------------------------------------------------------------------
    def _on_notification(self, session: MCPSession, note: Any) -> Any:
        if isinstance(note, types.ToolListChangedNotification):
            if self._relisting is None or self._relisting.done():
                self._relisting = self._track(asyncio.ensure_future(self._relist(session)))
        elif isinstance(note, types.LoggingMessageNotification):
            log.debug("MCP server %s log (%s): %s", self.name, note.params.level, note.params.data)
        return None

    async def _relist(self, session: MCPSession) -> None:
        for _ in range(50):  # a notification sent during the handshake: list once the session is up
            if session.state != "new":
                break
            await asyncio.sleep(0.1)
        try:
            listed = await session.list_tools()
        except Exception as exc:  # noqa: BLE001 - the next session's handshake lists again
            log.warning("MCP server %s: tools/list after list_changed failed: %s", self.name, describe(exc))
            return
        log.info("MCP server %s: tools/list_changed → %d tools", self.name, len(listed))
        self._set_tools(listed)
