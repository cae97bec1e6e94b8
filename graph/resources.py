"""Process-wide resources the nodes share: the toolbox (tool registry, executors, MCP sessions)
and the memory service, keyed by the settings that define them.

They live outside the graph state because they are live objects (processes, sessions), not
data; checkpoints hold only data. The CLI closes them with :func:`aclose_resources`; under
``langgraph dev`` they live as long as the server process (MCP stdio servers and the embedded
model exit with it).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Coroutine
from pathlib import Path
from typing import TYPE_CHECKING, Any

from graph.context import Context
from memory.service import MemoryService

if TYPE_CHECKING:
    from memory.episodic.base import EpisodicStore
    from tools.toolbox import Toolbox

_toolboxes: dict[tuple[str, str, str], Toolbox] = {}
_memories: dict[tuple[Any, ...], MemoryService] = {}
_lock: asyncio.Lock | None = None
_background: set[asyncio.Task] = set()


log = logging.getLogger(__name__)


#: Every setting the toolbox is built from: a run whose context changes one of them (Studio,
#: a per-run ``context``) gets a toolbox of its own.
TOOLBOX_SETTINGS = ("data_dir", "mcp_config", "database", "tool_timeout_s", "heavy_tool_timeout_s",
                    "tool_timeouts", "tool_executor", "remote_url")


def _key(context: Context) -> tuple:
    # The settings as given, not resolved: Path.resolve() calls os.getcwd, a blocking call
    # that `langgraph dev` refuses inside the event loop (the cwd does not change at run time).
    return context.resource_key(*TOOLBOX_SETTINGS)


async def get_toolbox(context: Context) -> Toolbox:
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
                database=context.database,  # the user's database: resolved inside open's thread
                executor=context.tool_executor,
                remote_url=context.remote_url or None,
                heavy_timeout_s=context.heavy_tool_timeout_s,
                tool_timeouts=context.tool_timeouts,
            )
            for where, problem in toolbox.problems.items():
                # a server or tool left out must be visible (CLI stderr, langgraph dev log)
                log.warning("MCP %s left out: %s", where, problem)
            _toolboxes[key] = toolbox
        return toolbox


def set_toolbox(context: Context, toolbox: Toolbox) -> None:
    """Use ``toolbox`` for ``context`` (tests inject registries of their own tools)."""
    _toolboxes[_key(context)] = toolbox


#: Every setting the memory service is built from.
MEMORY_SETTINGS = ("data_dir", "episodic", "weaviate_url", "weaviate_grpc_port", "weaviate_api_key_env",
                   "embeddings", "embeddings_base_url", "embeddings_dim", "working_ttl_s", "episodic_ttl_days",
                   "semantic_ttl_days", "memory_min_confidence", "memory_tokens")


def get_memory(context: Context) -> MemoryService:
    """The memory service for ``context``'s memory settings (cheap; stores open lazily).
    Settings are passed in here: ``memory/`` reads no environment variable."""
    key = context.resource_key(*MEMORY_SETTINGS)
    if key not in _memories:
        import os  # noqa: PLC0415

        from memory.embeddings import make_embedder  # noqa: PLC0415

        embedder = make_embedder(context.embeddings, base_url=context.embeddings_base_url,
                                 api_key=os.environ.get(context.api_key_env, ""), dim=context.embeddings_dim)
        store: EpisodicStore
        if context.episodic == "weaviate":
            from memory.episodic.weaviate import WeaviateEpisodicStore  # noqa: PLC0415

            store = WeaviateEpisodicStore.from_url(
                context.weaviate_url, grpc_port=context.weaviate_grpc_port, embedder=embedder,
                api_key=os.environ.get(context.weaviate_api_key_env) or None, ttl_days=context.episodic_ttl_days)
        else:
            from memory.episodic.lance import LanceEpisodicStore  # noqa: PLC0415

            store = LanceEpisodicStore.in_dir(Path(context.data_dir), embedder, ttl_days=context.episodic_ttl_days)
        _memories[key] = MemoryService(
            Path(context.data_dir), episodic=store, working_ttl_seconds=context.working_ttl_s,
            episodic_ttl_days=context.episodic_ttl_days, semantic_ttl_days=context.semantic_ttl_days,
            min_confidence=context.memory_min_confidence, memory_tokens=context.memory_tokens)
    return _memories[key]


def run_in_background(coro: Coroutine[Any, Any, Any], name: str) -> asyncio.Task:
    """Run ``coro`` off the hot path (e.g. memory writes, DESIGN §4: they never block the
    answer). Exceptions are logged; :func:`drain_background` waits for what is still running."""
    task = asyncio.get_running_loop().create_task(coro, name=name)
    _background.add(task)

    def done(t: asyncio.Task) -> None:
        _background.discard(t)
        if not t.cancelled() and t.exception() is not None:
            log.error("background task %s failed: %r", t.get_name(), t.exception())

    task.add_done_callback(done)
    return task


async def drain_background(timeout_s: float = 30.0) -> None:
    """Wait up to ``timeout_s`` seconds for background tasks of the running loop to finish."""
    loop = asyncio.get_running_loop()
    pending = [t for t in _background if t.get_loop() is loop and not t.done()]
    if pending:
        await asyncio.wait(pending, timeout=timeout_s)


async def aclose_resources() -> None:
    """Finish background writes, close every toolbox (MCP shutdown, no orphan processes) and
    forget the memory services."""
    await drain_background()
    toolboxes = list(_toolboxes.values())
    _toolboxes.clear()
    memories = list(_memories.values())
    _memories.clear()
    for memory in memories:  # session end: working memory cleared, stores closed
        await memory.aclose()
    for toolbox in toolboxes:
        await toolbox.aclose()
