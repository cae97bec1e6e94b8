"""Process-wide resources the nodes share: the toolbox (tool registry, executors, MCP sessions)
and the memory service, keyed by the settings that define them.

They live outside the graph state because they are live objects (processes, sessions), not
data; checkpoints hold only data. The CLI closes them with :func:`aclose_resources`; under
``langgraph dev`` they live as long as the server process (MCP stdio servers and the embedded
model exit with it).
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import TYPE_CHECKING

from graph.context import Context
from memory.service import MemoryService

if TYPE_CHECKING:
    from tools.toolbox import Toolbox

_toolboxes: dict[tuple[str, str], "Toolbox"] = {}
_memories: dict[str, MemoryService] = {}
_lock: asyncio.Lock | None = None


def _key(context: Context) -> tuple[str, str]:
    return (str(Path(context.data_dir).resolve()), context.mcp_config)


async def get_toolbox(context: Context) -> "Toolbox":
    """The toolbox for ``context`` (opened on first use: builtin tools + MCP servers)."""
    global _lock
    if _lock is None:
        _lock = asyncio.Lock()
    key = _key(context)
    async with _lock:
        toolbox = _toolboxes.get(key)
        if toolbox is None:
            from tools.toolbox import Toolbox  # opens processes: import only when needed

            toolbox = await Toolbox.open(
                Path(context.data_dir),
                Path(context.mcp_config) if context.mcp_config else None,
                timeout_s=context.tool_timeout_s,
            )
            _toolboxes[key] = toolbox
        return toolbox


def set_toolbox(context: Context, toolbox: "Toolbox") -> None:
    """Use ``toolbox`` for ``context`` (tests inject registries of their own tools)."""
    _toolboxes[_key(context)] = toolbox


def get_memory(context: Context) -> MemoryService:
    """The memory service for ``context.data_dir`` (cheap; the database opens lazily)."""
    key = str(Path(context.data_dir).resolve())
    if key not in _memories:
        _memories[key] = MemoryService(Path(context.data_dir))
    return _memories[key]


async def aclose_resources() -> None:
    """Close every toolbox (MCP shutdown, no orphan processes) and forget the memory services."""
    toolboxes = list(_toolboxes.values())
    _toolboxes.clear()
    _memories.clear()
    for toolbox in toolboxes:
        await toolbox.aclose()
