"""Chat model factory and the JSON-grammar tool-calling adapter for llama.cpp (DESIGN §6).

``load_chat_model(context)`` returns a LangChain chat model:

* ``context.model`` is ``embedded`` (the catalog's default) or ``embedded:<name>`` and no
  ``base_url``: the catalog entry (``graph/embedded/catalog.py``: smollm2-135m,
  qwen2.5-coder-0.5b, qwen2.5-coder-1.5b) is located, assembled and verified, and served by the
  embedded llama.cpp server (``graph/embedded/server.py``) on a free 127.0.0.1 port. The model
  is a :class:`JsonToolCallingChat`.
* otherwise: an ``EndpointChat`` (``graph/endpoint_chat.py``) — the ``ChatOpenAI`` LangChain's ``init_chat_model`` builds
  for provider ``openai``, its streamed tool-call chunks normalised (``normalise_tool_call_chunks``) —
  against ``context.base_url`` (any OpenAI-compatible endpoint; the model name is sent as
  given, a ``provider:`` prefix included) with the key of the environment variable named by
  ``context.api_key_env`` (``Context.secret``).
* names registered with :func:`register_model` (tests register LangChain fake chat models).

Nodes do not call :func:`load_chat_model` (it builds a new model each time): they take the
model from ``graph.resources.get_model``, which caches it under ``MODEL_SETTINGS`` (see
docs/DESIGN.md §10 "Resources").

The adapter for the embedded server, :class:`JsonToolCallingChat`, is in
``graph/embedded/chat.py`` (why it exists: its docstring).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from langchain_core.language_models import BaseChatModel
from pydantic import SecretStr

from graph.context import Context
from graph.embedded.catalog import (  # re-exported: the embedded model names
    CATALOG,
    DEFAULT_MODEL,
    EmbeddedModel,
    UnknownEmbeddedModel,
    is_embedded_name,
    resolve,
)
from graph.embedded.errors import ModelIntegrityError, ModelUnavailableError  # re-exported
from graph.embedded.server import (  # re-exported: callers stop the server through graph.model
    EmbeddedLlamaServer,
    astop_embedded_server,
    embedded_server,
    stop_embedded_server,
)

__all__ = [
    "CATALOG",
    "DEFAULT_MODEL",
    "EMBEDDED_TIMEOUT_S",
    "ENDPOINT_TIMEOUT_S",
    "EmbeddedLlamaServer",
    "EmbeddedModel",
    "ModelFactory",
    "ModelIntegrityError",
    "ModelUnavailableError",
    "UnknownEmbeddedModel",
    "astop_embedded_server",
    "embedded_model",
    "embedded_server",
    "is_embedded",
    "is_embedded_name",
    "is_registered",
    "load_chat_model",
    "register_model",
    "resolve",
    "stop_embedded_server",
]

ENDPOINT_TIMEOUT_S = 120  # per request to an OpenAI-compatible endpoint
EMBEDDED_TIMEOUT_S = 900  # per request to the embedded server: a long prompt on 2 loaded cores takes minutes

ModelFactory = Callable[[Context], BaseChatModel]
_FACTORIES: dict[str, ModelFactory] = {}


def register_model(name: str, factory: ModelFactory) -> None:
    """Make ``Context(model=name)`` resolve to ``factory(context)`` (tests, custom providers).
    The factory is called on every :func:`load_chat_model` (``graph.resources`` does not cache
    a registered model: the factory decides whether calls share one)."""
    _FACTORIES[name] = factory


def is_registered(context: Context) -> bool:
    """True when ``context.model`` is a name given to :func:`register_model`."""
    return context.model in _FACTORIES


def is_embedded(context: Context) -> bool:
    """True when ``context`` selects a bundled model (``embedded`` or ``embedded:<name>``, no
    ``base_url``) rather than an endpoint or a registered name."""
    return context.model not in _FACTORIES and is_embedded_name(context.model) and not context.base_url


def embedded_model(context: Context) -> EmbeddedModel:
    """The catalog entry ``context.model`` selects. Raises :class:`ModelUnavailableError` for an
    unknown ``embedded:<name>``, listing the choices."""
    try:
        return resolve(context.model)
    except UnknownEmbeddedModel as exc:
        raise ModelUnavailableError(f"{exc}; set HERMES_MODEL (or --model) to one of them") from None


async def load_chat_model(context: Context) -> BaseChatModel:
    """Resolve ``context`` to a chat model (see the module docstring). Starts the embedded
    server on first use. Raises :class:`ModelUnavailableError` with a next step on failure."""
    if context.model in _FACTORIES:
        return _FACTORIES[context.model](context)
    common: dict[str, Any] = {
        "temperature": context.temperature,
        "max_tokens": context.max_output_tokens,
        "max_retries": 1,
        "timeout": ENDPOINT_TIMEOUT_S,
    }
    # the OpenAI client (langchain-openai, openai: ~2 s to import) loads with the first model
    # built, not with this module (the graph, the CLI's read-only commands import it)
    from graph.embedded.chat import JsonToolCallingChat
    from graph.endpoint_chat import EndpointChat

    if is_embedded(context):
        entry = embedded_model(context)
        base_url = await embedded_server(context.data_dir).start(entry)
        # a local server that dies fails fast (connection refused); a slow CPU is not a hang
        common["timeout"] = EMBEDDED_TIMEOUT_S
        # streaming: no chunk arrives while llama.cpp reads a long prompt (2,600 tokens took
        # 60-150 s on 2 busy cores); langchain-openai's 120 s chunk-gap limit killed such calls
        # (fresh user, StreamChunkTimeoutError). The request's own timeout bounds them instead.
        common["stream_chunk_timeout"] = EMBEDDED_TIMEOUT_S
        return JsonToolCallingChat(model=entry.name, base_url=base_url, api_key=SecretStr("sk-no-key-needed"), **common)
    if not context.base_url:
        raise ModelUnavailableError(
            f"model {context.model!r} needs an endpoint: set HERMES_BASE_URL (or --base-url) to an "
            "OpenAI-compatible URL, or use model 'embedded' (or 'embedded:<name>', "
            f"one of {', '.join(CATALOG)})."
        )
    api_key = context.secret(context.api_key_env) or "sk-no-key-needed"
    # provider given explicitly: the name goes to the endpoint as it is ("qwen2.5:0.5b" stays whole)
    # EndpointChat: the ChatOpenAI init_chat_model(provider "openai") builds, streamed tool-call
    # chunks normalised (normalise_tool_call_chunks)
    return EndpointChat(model=context.model, base_url=context.base_url, api_key=SecretStr(api_key), **common)
