"""Chat model factory and the JSON-grammar tool-calling adapter for llama.cpp (DESIGN §6).

``load_chat_model(context)`` returns a LangChain chat model:

* ``context.model`` is ``embedded`` (the catalog's default) or ``embedded:<name>`` and no
  ``base_url``: the catalog entry (``graph/embedded/catalog.py``: smollm2-135m,
  qwen2.5-coder-0.5b, qwen2.5-coder-1.5b) is located, assembled and verified, and served by the
  embedded llama.cpp server (``graph/embedded/server.py``) on a free 127.0.0.1 port. The model
  is a :class:`JsonToolCallingChat`.
* otherwise: an :class:`EndpointChat` — the ``ChatOpenAI`` LangChain's ``init_chat_model`` builds
  for provider ``openai``, its streamed tool-call chunks normalised (:func:`normalise_tool_call_chunks`) —
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
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, AIMessageChunk, BaseMessage
from langchain_core.messages.tool import ToolCallChunk, tool_call_chunk
from langchain_core.outputs import ChatGenerationChunk, ChatResult
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

    # Streaming (LangGraph's "messages" mode streams ``ainvoke``): the reply's JSON is decoded
    # as it arrives (:class:`_StepStream`); the merged chunks equal the non-streamed message.
    def _stream(
        self, messages: list[BaseMessage], stop: list[str] | None = None, run_manager: Any = None, **kwargs: Any
    ) -> Iterator[ChatGenerationChunk]:
        kwargs.setdefault("stream_usage", True)  # token counts, as the non-streamed reply has
        step = _StepStream()
        # run_manager stays here: BaseChatModel reports our chunks, not the raw JSON, to callbacks
        for generation in super()._stream(messages, stop=stop, **kwargs):
            yield step.chunk(generation)
        if (last := step.finish()) is not None:
            yield last

    async def _astream(
        self, messages: list[BaseMessage], stop: list[str] | None = None, run_manager: Any = None, **kwargs: Any
    ) -> AsyncIterator[ChatGenerationChunk]:
        kwargs.setdefault("stream_usage", True)
        step = _StepStream()
        async for generation in super()._astream(messages, stop=stop, **kwargs):
            yield step.chunk(generation)
        if (last := step.finish()) is not None:
            yield last

    def _convert_chunk_to_generation_chunk(
        self, chunk: dict, default_chunk_class: type, base_generation_info: dict | None
    ) -> ChatGenerationChunk | None:
        generation = super()._convert_chunk_to_generation_chunk(chunk, default_chunk_class, base_generation_info)
        timings = _timings(chunk)  # llama.cpp sends them with the last streamed chunk
        if generation is not None and timings:
            generation.message.response_metadata["timings"] = timings
        return generation

    def _generate_with_cache(self, *args: Any, **kwargs: Any) -> ChatResult:
        return _restore_invalid_call(super()._generate_with_cache(*args, **kwargs))

    async def _agenerate_with_cache(self, *args: Any, **kwargs: Any) -> ChatResult:
        return _restore_invalid_call(await super()._agenerate_with_cache(*args, **kwargs))


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


# --- streaming --------------------------------------------------------------------------------
# LangGraph's ``stream_mode="messages"`` (Studio, the SDK) makes ``ainvoke`` stream, so a reply
# reaches the graph through ``_astream`` and the merge of its chunks, not ``_create_chat_result``.

_RESPONSE_OPENING = re.compile(r'\{\s*"response"\s*:\s*"')
_INVALID_CALL_KEY = "hermes_invalid_tool_call"  # response_metadata carrier, see _restore_invalid_call


def _safe_json_prefix(body: str) -> tuple[int, bool]:
    """``(end, closed)``: ``body[:end]`` (the inside of a JSON string, opening quote excluded)
    ends on a whole character — no half escape, no high surrogate without its low half — and
    ``closed`` tells whether an unescaped ``"`` (the string's end) follows at ``end``."""
    i, n = 0, len(body)
    while i < n:
        c = body[i]
        if c == '"':
            return i, True
        if c != "\\":
            i += 1
            continue
        if i + 1 >= n:
            break
        if body[i + 1] != "u":
            i += 2
            continue
        if i + 6 > n:
            break
        try:
            code = int(body[i + 2 : i + 6], 16)
        except ValueError:
            break  # not an escape: json.loads rejects it, the final parse decides
        if 0xD800 <= code <= 0xDBFF:  # high surrogate: decode it with its low half
            if i + 6 == n or (body[i + 6] == "\\" and i + 12 > n):
                break
            i += 12 if body[i + 6 : i + 8] == "\\u" else 6
        else:
            i += 6
    return min(i, n), False


class _StepStream:
    """Turns the streamed text of one grammar-constrained reply into what :func:`parse_step`
    makes of the whole: ``{"response": "..."}`` streams the decoded answer as it arrives,
    ``{"tool_call": ...}`` (or any other JSON) is held and given whole by :meth:`finish`, text
    that is not JSON streams as it is. The concatenated content plus :meth:`finish`'s chunk
    merge to :func:`parse_step`'s message (content, tool calls, invalid calls)."""

    def __init__(self) -> None:
        self.raw = ""  # the reply as the server sent it
        self.sent = ""  # content emitted so far
        self.finish_reason: str | None = None

    def _target(self) -> str:
        """The content that can be emitted now (a prefix of the final content)."""
        head = self.raw.lstrip()
        if not head:
            return ""
        if not head.startswith("{"):
            return self.raw  # plain text: parse_step leaves it as it is
        opening = _RESPONSE_OPENING.match(head)
        if opening is None:
            return ""  # still opening, a tool call or other JSON: wait for the whole reply
        body = head[opening.end() :]
        end, closed = _safe_json_prefix(body)
        try:
            decoded = json.loads('"' + body[:end] + '"')
        except json.JSONDecodeError:
            return self.sent  # a malformed escape: the final parse decides
        # a reply cut off at the token limit loses its trailing spaces in parse_step
        return decoded if closed else decoded.rstrip(" ")

    def feed(self, text: str) -> str:
        """Add streamed ``text``; return the new content to emit (maybe ``""``)."""
        self.raw += text
        target = self._target()
        if not target.startswith(self.sent):
            return ""
        new, self.sent = target[len(self.sent) :], target
        return new

    def chunk(self, generation: ChatGenerationChunk) -> ChatGenerationChunk:
        """The server's chunk with its text replaced by the content to emit."""
        message = generation.message
        reason = (generation.generation_info or {}).get("finish_reason")
        if reason:
            self.finish_reason = reason
        if not isinstance(message, AIMessageChunk) or not isinstance(message.content, str):
            return generation
        new = self.feed(message.content)
        return ChatGenerationChunk(
            message=message.model_copy(update={"content": new}), generation_info=generation.generation_info
        )

    def finish(self) -> ChatGenerationChunk | None:
        """The last chunk: the rest of the content, or the tool call (``tool_call_chunks``:
        name, JSON arguments, id ``call_<hex12>``, index 0), or an invalid call (cut off or
        malformed JSON, carried to :func:`_restore_invalid_call`). ``None`` when nothing is left."""
        metadata = {"finish_reason": self.finish_reason} if self.finish_reason else {}
        parsed = parse_step(AIMessage(content=self.raw, response_metadata=metadata))
        content = parsed.content if isinstance(parsed.content, str) else ""
        rest = content[len(self.sent) :] if content.startswith(self.sent) else ""
        if parsed.tool_calls:
            call = parsed.tool_calls[0]
            chunks = [tool_call_chunk(name=call["name"], args=json.dumps(call["args"]), id=call["id"], index=0)]
            return ChatGenerationChunk(message=AIMessageChunk(content=rest, tool_call_chunks=chunks))
        if parsed.invalid_tool_calls:
            bad = parsed.invalid_tool_calls[0]
            chunks = [tool_call_chunk(name=bad["name"], args=bad["args"], id=bad["id"], index=0)]
            return ChatGenerationChunk(
                message=AIMessageChunk(
                    content=rest, tool_call_chunks=chunks, response_metadata={_INVALID_CALL_KEY: dict(bad)}
                )
            )
        return ChatGenerationChunk(message=AIMessageChunk(content=rest)) if rest else None


def _restore_invalid_call(result: ChatResult) -> ChatResult:
    """Give a streamed reply's invalid call (cut off or malformed, K3) back its error: merging
    chunks re-parses ``tool_call_chunks`` (a cut-off call's partial JSON would pass as a call)
    and drops ``error``, so :meth:`_StepStream.finish` carries the call in ``response_metadata``."""
    for generation in result.generations:
        message = generation.message
        bad = message.response_metadata.get(_INVALID_CALL_KEY) if isinstance(message, AIMessage) else None
        if isinstance(message, AIMessage) and isinstance(bad, dict):
            metadata = {k: v for k, v in message.response_metadata.items() if k != _INVALID_CALL_KEY}
            generation.message = message.model_copy(
                update={"tool_calls": [], "invalid_tool_calls": [bad], "response_metadata": metadata}
            )
    return result


def normalise_tool_call_chunks(
    seen: dict[Any, tuple[str | None, int]], chunks: list[ToolCallChunk]
) -> list[ToolCallChunk]:
    """``chunks`` (one streamed message chunk's ``tool_call_chunks``) with indexes that merge
    into one call per call id. ``seen`` maps a provider's index to ``(call id, our index)`` and
    is kept across the chunks of one stream. A chunk whose id differs from the id seen at its
    index starts a new call (a new index, after all used so far); a chunk without id, or with
    the same id, continues the last call at its index. Some OpenAI-compatible providers reuse
    index 0 for every call, others omit ids after the first chunk (or throughout)."""
    out: list[ToolCallChunk] = []
    for chunk in chunks:
        index, cid = chunk.get("index"), chunk.get("id")
        known = seen.get(index)
        if known is None or (cid and known[0] and cid != known[0]):
            ours = max((i for _, i in seen.values()), default=-1) + 1
            seen[index] = (cid, ours)
        else:
            ours = known[1]
            if cid and not known[0]:
                seen[index] = (cid, ours)
        out.append({**chunk, "index": ours})
    return out


def _normalised(generation: ChatGenerationChunk, seen: dict[Any, tuple[str | None, int]]) -> ChatGenerationChunk:
    message = generation.message
    if isinstance(message, AIMessageChunk) and message.tool_call_chunks:
        fixed = normalise_tool_call_chunks(seen, message.tool_call_chunks)
        generation = ChatGenerationChunk(
            message=message.model_copy(update={"tool_call_chunks": fixed}), generation_info=generation.generation_info
        )
    return generation


class EndpointChat(ChatOpenAI):
    """``ChatOpenAI`` for an OpenAI-compatible endpoint whose streamed tool-call chunks go
    through :func:`normalise_tool_call_chunks` (so calls merge by id, whatever the provider
    does with ``index``). Otherwise exactly ``ChatOpenAI`` (what ``init_chat_model`` with
    provider ``openai`` builds)."""

    def _stream(
        self, messages: list[BaseMessage], stop: list[str] | None = None, run_manager: Any = None, **kwargs: Any
    ) -> Iterator[ChatGenerationChunk]:
        # run_manager stays here: BaseChatModel reports the normalised chunks to callbacks
        seen: dict[Any, tuple[str | None, int]] = {}
        for generation in super()._stream(messages, stop=stop, **kwargs):
            yield _normalised(generation, seen)

    async def _astream(
        self, messages: list[BaseMessage], stop: list[str] | None = None, run_manager: Any = None, **kwargs: Any
    ) -> AsyncIterator[ChatGenerationChunk]:
        seen: dict[Any, tuple[str | None, int]] = {}
        async for generation in super()._astream(messages, stop=stop, **kwargs):
            yield _normalised(generation, seen)


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
