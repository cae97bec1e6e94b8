"""The resource provider: the live objects nodes use — the toolbox (tool registry, executors,
MCP sessions), the memory service and the chat model — built on first use and cached under the
values of every setting they are built from (docs/DESIGN.md §10 "Resources").

A node takes its settings from ``runtime.context`` (LangGraph ``Runtime[Context]``, the graph's
``context_schema``) and asks this module for a resource by that context::

    toolbox = await get_toolbox(runtime.context)     # TOOLBOX_SETTINGS
    memory = get_memory(runtime.context)             # MEMORY_SETTINGS
    model = await get_model(runtime.context)         # MODEL_SETTINGS

so the CLI, ``langgraph dev`` (each run's ``context`` from Studio or the SDK) and tests reach
resources the same way, and a run whose context changes one of those settings gets a resource
of its own. Tests inject with :func:`set_toolbox` and ``graph.model.register_model``.

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
from graph.mirror import close_shared_mirrors
from graph.model import embedded_model, embedded_server, is_embedded, is_registered, load_chat_model
from memory.service import MemoryService

if TYPE_CHECKING:
    from langchain_core.language_models import BaseChatModel

    from memory.episodic.base import EpisodicStore
    from tools.toolbox import Toolbox

_toolboxes: dict[tuple[Any, ...], Toolbox] = {}
_memories: dict[tuple[Any, ...], MemoryService] = {}
#: MODEL_SETTINGS key → (the embedded server's base URL or "", the model built for it)
_models: dict[tuple[Any, ...], tuple[str, BaseChatModel]] = {}
_lock: asyncio.Lock | None = None
_background: set[asyncio.Task[Any]] = set()


log = logging.getLogger(__name__)


#: Every setting the toolbox is built from: a run whose context changes one of them (Studio,
#: a per-run ``context``) gets a toolbox of its own.
TOOLBOX_SETTINGS = (
    "data_dir",
    "mcp_config",
    "database",
    "tool_timeout_s",
    "heavy_tool_timeout_s",
    "tool_timeouts",
    "tool_executor",
    "remote_url",
    "remote_token_env",
    "container_image",
    "postgres_url",  # the idempotency ledger's database (empty: data_dir/idempotency.db)
)


def _key(context: Context) -> tuple[Any, ...]:
    # The settings as given, not resolved: Path.resolve() calls os.getcwd, a blocking call
    # that `langgraph dev` refuses inside the event loop (the cwd does not change at run time).
    return context.resource_key(*TOOLBOX_SETTINGS)


async def open_toolbox(context: Context) -> Toolbox:
    """A new toolbox built from ``context``'s ``TOOLBOX_SETTINGS`` (builtin tools + MCP servers),
    not cached: the caller closes it (``hermes tools list``, ``hermes mcp ...``). Nodes use
    :func:`get_toolbox`. A server or tool left out is in ``toolbox.problems``."""
    from tools.toolbox import Toolbox  # opens processes: import only when needed

    return await Toolbox.open(
        Path(context.data_dir),
        Path(context.mcp_config) if context.mcp_config else None,
        timeout_s=context.tool_timeout_s,
        database=context.database,  # the user's database: resolved inside open's thread
        executor=context.tool_executor,
        remote_url=context.remote_url or None,
        remote_token=context.secret(context.remote_token_env) or None,
        container_image=context.container_image,
        heavy_timeout_s=context.heavy_tool_timeout_s,
        tool_timeouts=context.tool_timeouts,
        postgres_url=context.postgres_url,
    )


async def get_toolbox(context: Context) -> Toolbox:
    """The toolbox for ``context`` (:func:`open_toolbox` on first use of its settings)."""
    global _lock  # noqa: PLW0603 - made inside the first caller's event loop, not at import
    if _lock is None:
        _lock = asyncio.Lock()
    key = _key(context)
    async with _lock:
        toolbox = _toolboxes.get(key)
        if toolbox is None:
            toolbox = _toolboxes[key] = await open_toolbox(context)
            for where, problem in toolbox.problems.items():
                # a server or tool left out must be visible (CLI stderr, langgraph dev log)
                log.warning("MCP %s left out: %s", where, problem)
        return toolbox


def set_toolbox(context: Context, toolbox: Toolbox) -> None:
    """Use ``toolbox`` for ``context`` (tests inject registries of their own tools)."""
    _toolboxes[_key(context)] = toolbox


#: Every setting the memory service is built from.
MEMORY_SETTINGS = (
    "data_dir",
    "episodic",
    "postgres_url",
    "weaviate_url",
    "weaviate_grpc_port",
    "weaviate_api_key_env",
    "embeddings",
    "embeddings_base_url",
    "api_key_env",
    "embeddings_dim",
    "working_ttl_s",
    "episodic_ttl_days",
    "semantic_ttl_days",
    "memory_min_confidence",
    "memory_tokens",
)


def get_memory(context: Context) -> MemoryService:
    """The memory service for ``context``'s memory settings (cheap; stores open lazily).
    Settings are passed in here: ``memory/`` reads no environment variable."""
    key = context.resource_key(*MEMORY_SETTINGS)
    if key not in _memories:
        from memory.embeddings import make_embedder

        embedder = make_embedder(
            context.embeddings,
            base_url=context.embeddings_base_url,
            api_key=context.secret(context.api_key_env),
            dim=context.embeddings_dim,
        )
        store: EpisodicStore
        if context.episodic == "weaviate":
            from memory.episodic.weaviate import WeaviateEpisodicStore

            store = WeaviateEpisodicStore.from_url(
                context.weaviate_url,
                grpc_port=context.weaviate_grpc_port,
                embedder=embedder,
                api_key=context.secret(context.weaviate_api_key_env) or None,
                ttl_days=context.episodic_ttl_days,
            )
        elif context.postgres_url:  # one database for every worker and host (issue 22)
            from memory.episodic.postgres import PostgresEpisodicStore

            store = PostgresEpisodicStore(context.postgres_url, embedder, ttl_days=context.episodic_ttl_days)
        else:
            from memory.episodic.lance import LanceEpisodicStore

            store = LanceEpisodicStore.in_dir(Path(context.data_dir), embedder, ttl_days=context.episodic_ttl_days)
        semantic = origins = None
        if context.postgres_url:  # the knowledge graph and branch origins beside the episodic table (issue 22)
            from memory.branch_origins import BranchOrigins
            from memory.semantic_postgres import PostgresSemanticMemory

            semantic = PostgresSemanticMemory(
                context.postgres_url,
                ttl_days=context.semantic_ttl_days,
                min_confidence=context.memory_min_confidence,
            )
            origins = BranchOrigins.on_postgres(context.postgres_url)
        _memories[key] = MemoryService(
            Path(context.data_dir),
            episodic=store,
            semantic=semantic,
            origins=origins,
            working_ttl_seconds=context.working_ttl_s,
            episodic_ttl_days=context.episodic_ttl_days,
            semantic_ttl_days=context.semantic_ttl_days,
            min_confidence=context.memory_min_confidence,
            memory_tokens=context.memory_tokens,
        )
    return _memories[key]


#: Every setting the chat model is built from (``data_dir``: the embedded server's log).
MODEL_SETTINGS = ("model", "base_url", "api_key_env", "temperature", "max_output_tokens", "data_dir")


async def get_model(context: Context) -> BaseChatModel:
    """The chat model for ``context`` (``graph.model.load_chat_model``, see there for the
    choices and errors), built once per value of ``MODEL_SETTINGS``. The embedded server is
    started (or, after it died, restarted on a new port) on each call and the model is
    rebuilt when its URL changed. A name registered with ``graph.model.register_model`` is
    not cached: its factory is called every time."""
    if is_registered(context):
        return await load_chat_model(context)
    key = context.resource_key(*MODEL_SETTINGS)
    url = ""
    if is_embedded(context):
        url = await embedded_server(context.data_dir).start(embedded_model(context))
    cached = _models.get(key)
    if cached is None or cached[0] != url:
        cached = _models[key] = (url, await load_chat_model(context))
    return cached[1]


def run_in_background(coro: Coroutine[Any, Any, Any], name: str) -> asyncio.Task[Any]:
    """Run ``coro`` off the hot path (e.g. memory writes, DESIGN §4: they never block the
    answer). Exceptions are logged; :func:`drain_background` waits for what is still running."""
    task = asyncio.get_running_loop().create_task(coro, name=name)
    _background.add(task)

    def done(t: asyncio.Task[Any]) -> None:
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


async def aclose_resources(drain_timeout_s: float = 30.0) -> None:
    """Finish background writes (waiting up to ``drain_timeout_s`` seconds: a memory write cut
    off is held durably and replayed by the next drain), close every toolbox (MCP shutdown, no
    orphan processes) and forget the memory services and the shared mirrors."""
    await drain_background(drain_timeout_s)
    close_shared_mirrors()
    toolboxes = list(_toolboxes.values())
    _toolboxes.clear()
    memories = list(_memories.values())
    _memories.clear()
    _models.clear()
    for memory in memories:  # session end: working memory cleared, stores closed
        await memory.aclose()
    for toolbox in toolboxes:
        await toolbox.aclose()
