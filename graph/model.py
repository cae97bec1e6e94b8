"""Chat model factory and the JSON-grammar tool-calling adapter for llama.cpp (DESIGN §6).

``load_chat_model(context)`` returns a LangChain chat model:

* ``context.model`` is ``embedded`` (the catalog's default) or ``embedded:<name>`` and no
  ``base_url``: the catalog entry (``graph/embedded/catalog.py``: smollm2-135m,
  qwen2.5-coder-0.5b, qwen2.5-coder-1.5b) is located, assembled and verified, and served by the
  embedded llama.cpp server (``graph/embedded/server.py``) on a free 127.0.0.1 port. The model
  is a :class:`JsonToolCallingChat`.
* otherwise: LangChain's ``init_chat_model`` with provider ``openai`` (a ``ChatOpenAI``)
  against ``context.base_url`` (any OpenAI-compatible endpoint; the model name is sent as
  given, a ``provider:`` prefix included) with the key of the environment variable named by
  ``context.api_key_env`` (``Context.secret``).
* names registered with :func:`register_model` (tests register LangChain fake chat models).

Nodes do not call :func:`load_chat_model` (it builds a new model each time): they take the
model from ``graph.resources.get_model``, which caches it under ``MODEL_SETTINGS`` (see
docs/DESIGN.md §10 "Resources").

Why :class:`JsonToolCallingChat`: measured here, SmolLM2 through llama.cpp's native tool-call
parsing never calls a tool (its template has no tool syntax, so llama.cpp picks the
content-only format), llama-cpp-python's ``chatml-function-calling`` format drops
``role=tool`` messages, and Qwen2.5-Coder free-form writes its calls as fenced JSON that no
parser turns into ``tool_calls``. So tools and tool results are rendered by our own chat
templates (``graph/templates/``), and every reply is constrained by a JSON Schema grammar
(llama.cpp's ``json_schema`` request field) to ``{"tool_call": {"name", "arguments"}}`` or
``{"response": "..."}``, which this class maps back to OpenAI-style ``tool_calls``. This is
llama.cpp's "generic" tool-call format done on the client side, and it works with any template.
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Callable
from typing import Any

from langchain.chat_models import init_chat_model
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage
from langchain_core.outputs import ChatResult
from langchain_openai import ChatOpenAI
from pydantic import SecretStr

from graph.context import Context
from graph.embedded.catalog import (  # noqa: F401  (re-exported: the embedded model names)
    CATALOG,
    DEFAULT_MODEL,
    EmbeddedModel,
    UnknownEmbeddedModel,
    is_embedded_name,
    resolve,
)
from graph.embedded.errors import ModelIntegrityError, ModelUnavailableError  # noqa: F401  (re-exported)
from graph.embedded.server import (  # noqa: F401  (re-exported: callers stop the server through graph.model)
    EmbeddedLlamaServer,
    astop_embedded_server,
    embedded_server,
    stop_embedded_server,
)
from graph.failures import CUT_OFF

MAX_RESPONSE_CHARS = 800  # bounds free-text answers of the small model (it rambles otherwise)
REPEAT_PENALTY = 1.1  # llama.cpp sampler setting; the 135M model loops on phrases without it
MAX_ARGUMENT_CHARS = 300  # bounds each string argument in the grammar, for the same reason
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


# llama.cpp's JSON-Schema-to-grammar regex support has no shorthand classes: measured here, a
# pattern with \d is silently not enforced, the same pattern with [0-9] is.
_REGEX_CLASSES = {r"\d": "[0-9]", r"\w": "[A-Za-z0-9_]", r"\s": "[ \t\n\r]"}


def _grammar_ready(schema: Any) -> Any:
    """Copy of a JSON Schema prepared for llama.cpp's grammar: every string without
    ``maxLength`` gets ``MAX_ARGUMENT_CHARS`` (so a reply always terminates) and ``pattern``
    shorthand classes are spelled out (so they are enforced)."""
    if isinstance(schema, list):
        return [_grammar_ready(s) for s in schema]
    if not isinstance(schema, dict):
        return schema
    out = {k: _grammar_ready(v) for k, v in schema.items()}
    if out.get("type") == "string" and "maxLength" not in out and "enum" not in out:
        out["maxLength"] = MAX_ARGUMENT_CHARS
    if isinstance(out.get("pattern"), str):
        for short, spelled in _REGEX_CLASSES.items():
            out["pattern"] = out["pattern"].replace(short, spelled)
    return out


def step_schema(tools: list[dict[str, Any]]) -> dict[str, Any]:
    """JSON Schema of one reply: a call of one of ``tools`` or a final ``response`` string.

    ``tools`` are OpenAI function definitions (``{"type": "function", "function": {...}}``).
    Argument schemas go through :func:`_grammar_ready` (bounded strings, enforceable patterns).
    """
    calls = []
    for tool in tools:
        fn = tool.get("function", tool)
        params = _grammar_ready(fn.get("parameters") or {"type": "object", "properties": {}})
        calls.append(
            {
                "type": "object",
                "properties": {"name": {"const": fn["name"]}, "arguments": params},
                "required": ["name", "arguments"],
            }
        )
    return {
        "anyOf": [
            {
                "type": "object",
                "properties": {"tool_call": {"anyOf": calls}},
                "required": ["tool_call"],
            },
            {
                "type": "object",
                "properties": {"response": {"type": "string", "maxLength": MAX_RESPONSE_CHARS}},
                "required": ["response"],
            },
        ]
    }


class JsonToolCallingChat(ChatOpenAI):
    """``ChatOpenAI`` for llama.cpp servers whose model has no native tool-call format.

    Request: the tools stay in the payload (the server's chat template renders them) and a
    ``json_schema`` grammar from :func:`step_schema` constrains the reply — to the bound
    ``allowed_tools`` only, when given (the others are rendered, not callable); ``tool_choice`` is
    turned into the grammar (``"required"`` removes the free-text alternative). Response: ``{"tool_call": ...}`` becomes ``AIMessage.tool_calls`` (one call),
    ``{"response": ...}`` becomes plain content, and a reply cut off mid-call (token limit)
    becomes an ``invalid_tool_calls`` entry so the graph can send the error back (case K3).
    """

    def _get_request_payload(self, input_: Any, *, stop: list[str] | None = None, **kwargs: Any) -> dict:
        # ``allowed_tools`` (names; bound with ``.bind(allowed_tools=[...])``): the grammar
        # permits only these, while every bound tool is still rendered in the prompt — so the
        # prompt, and llama.cpp's KV cache of it, stays the same across a goal's calls
        allowed = kwargs.pop("allowed_tools", None)
        payload = super()._get_request_payload(input_, stop=stop, **kwargs)
        for message in payload.get("messages", []):
            if message.get("role") != "assistant":
                continue
            if message.get("content") is None:
                message["content"] = ""  # llama.cpp templates expect a string
            for call in message.get("tool_calls") or []:
                # llama.cpp answers 500 to history holding unparseable arguments (an earlier
                # invalid_tool_calls entry, K3); the error result that follows quotes them.
                try:
                    json.loads(call["function"]["arguments"])
                except (KeyError, TypeError, ValueError):
                    call.setdefault("function", {})["arguments"] = "{}"
        tools = payload.get("tools") or []
        if allowed is not None:
            tools = [t for t in tools if t.get("function", t).get("name") in set(allowed)]
        choice = payload.pop("tool_choice", None)
        payload.pop("parallel_tool_calls", None)
        schema = step_schema(tools)
        if not tools:
            schema = schema["anyOf"][1]  # no tools offered: only a (bounded) answer
        elif choice in ("required", "any") or isinstance(choice, dict):
            schema = schema["anyOf"][0]  # a call is required: no free-text alternative
        payload["extra_body"] = {
            **(payload.get("extra_body") or {}),
            "json_schema": schema,
            "repeat_penalty": REPEAT_PENALTY,
            # reuse the KV cache of the prefix this call shares with the last one (system turn,
            # tools, history): the loop's calls differ mostly at the end
            "cache_prompt": True,
        }
        return payload

    def _create_chat_result(self, response: Any, generation_info: dict | None = None) -> ChatResult:
        result = super()._create_chat_result(response, generation_info)
        timings = _timings(response)
        for generation in result.generations:
            message = generation.message
            if isinstance(message, AIMessage) and not message.tool_calls:
                # finish_reason reaches response_metadata only after this method; parse_step
                # needs it to tell a reply cut at the token limit from malformed JSON
                reason = (generation.generation_info or {}).get("finish_reason")
                if reason and "finish_reason" not in message.response_metadata:
                    message.response_metadata["finish_reason"] = reason
                generation.message = message = parse_step(message)
            if timings and isinstance(message, AIMessage):
                message.response_metadata["timings"] = timings
        return result


def _timings(response: Any) -> dict[str, Any]:
    """llama.cpp's per-request ``timings`` (prompt_n, prompt_per_second, predicted_n,
    predicted_per_second, cache_n, …) from a chat completion, or ``{}``."""
    if isinstance(response, dict):
        found = response.get("timings")
    else:
        found = getattr(response, "timings", None) or (getattr(response, "model_extra", None) or {}).get("timings")
    return dict(found) if isinstance(found, dict) else {}


def parse_step(message: AIMessage) -> AIMessage:
    """Map a grammar-constrained JSON reply to an ``AIMessage`` with tool calls or content."""
    text = message.content if isinstance(message.content, str) else ""
    stripped = text.strip()
    if not stripped.startswith("{"):
        return message
    common = {
        "response_metadata": message.response_metadata,
        "usage_metadata": message.usage_metadata,
        "id": message.id,
    }
    try:
        data = json.loads(stripped)
    except json.JSONDecodeError as exc:
        if '"tool_call"' in stripped:
            cut = message.response_metadata.get("finish_reason") == "length"
            return AIMessage(
                content="",
                invalid_tool_calls=[
                    {
                        "type": "invalid_tool_call",
                        "id": f"call_{uuid.uuid4().hex[:12]}",
                        "name": _guess_name(stripped),
                        "args": stripped,
                        "error": (
                            f"{CUT_OFF} ({len(stripped)} characters): send the call again with "
                            "shorter arguments (fewer or shorter items)"
                            if cut
                            else f"reply was not valid JSON ({exc.msg} at char {exc.pos})"
                        ),
                    }
                ],
                **common,
            )
        # A free-text answer cut at the length limit: keep what was said, without the wrapper.
        said = re.sub(r'^\{\s*"response"\s*:\s*"?', "", stripped)
        return AIMessage(content=said.rstrip('"} \n'), **common)
    if isinstance(data, dict) and isinstance(data.get("tool_call"), dict):
        call = data["tool_call"]
        return AIMessage(
            content="",
            tool_calls=[
                {
                    "type": "tool_call",
                    "id": f"call_{uuid.uuid4().hex[:12]}",
                    "name": str(call.get("name", "")),
                    "args": call.get("arguments") if isinstance(call.get("arguments"), dict) else {},
                }
            ],
            **common,
        )
    if isinstance(data, dict) and "response" in data:
        return AIMessage(content=str(data["response"]), **common)
    return message


def _guess_name(text: str) -> str:
    marker = '"name":'
    if marker not in text:
        return ""
    rest = text.split(marker, 1)[1].strip()
    return rest[1:].split('"', 1)[0] if rest.startswith('"') else ""


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
    if is_embedded(context):
        entry = embedded_model(context)
        base_url = await embedded_server(context.data_dir).start(entry)
        # a local server that dies fails fast (connection refused); a slow CPU is not a hang
        common["timeout"] = EMBEDDED_TIMEOUT_S
        return JsonToolCallingChat(model=entry.name, base_url=base_url, api_key=SecretStr("sk-no-key-needed"), **common)
    if not context.base_url:
        raise ModelUnavailableError(
            f"model {context.model!r} needs an endpoint: set HERMES_BASE_URL (or --base-url) to an "
            "OpenAI-compatible URL, or use model 'embedded' (or 'embedded:<name>', "
            f"one of {', '.join(CATALOG)})."
        )
    api_key = context.secret(context.api_key_env) or "sk-no-key-needed"
    # provider given explicitly: the name goes to the endpoint as it is ("qwen2.5:0.5b" stays whole)
    return init_chat_model(
        context.model, model_provider="openai", base_url=context.base_url, api_key=SecretStr(api_key), **common
    )
