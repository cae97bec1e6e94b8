"""The JSON-grammar tool-calling adapter for the embedded llama.cpp server (DESIGN §6).

Why :class:`JsonToolCallingChat`: measured here, SmolLM2 through llama.cpp's native tool-call
parsing never calls a tool (its template has no tool syntax, so llama.cpp picks the
content-only format), llama-cpp-python's ``chatml-function-calling`` format drops
``role=tool`` messages, and Qwen2.5-Coder free-form writes its calls as fenced JSON that no
parser turns into ``tool_calls``. So tools and tool results are rendered by our own chat
templates (``graph/templates/``), and every reply is constrained by a JSON Schema grammar
(llama.cpp's ``json_schema`` request field) to ``{"tool_call": {"name", "arguments"}}`` or
``{"response": "..."}``, which this class maps back to OpenAI-style ``tool_calls``. This is
llama.cpp's "generic" tool-call format done on the client side, and it works with any template.

``graph/model.py`` builds it (``load_chat_model``); the server it talks to is
``graph/embedded/server.py``.
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import AsyncIterator, Iterator
from typing import Any

from langchain_core.messages import AIMessage, AIMessageChunk, BaseMessage
from langchain_core.messages.tool import tool_call_chunk
from langchain_core.outputs import ChatGenerationChunk, ChatResult
from langchain_openai import ChatOpenAI

from graph.failures import CUT_OFF

MAX_RESPONSE_CHARS = 800  # bounds free-text answers of the small model (it rambles otherwise)
REPEAT_PENALTY = 1.1  # llama.cpp sampler setting; the 135M model loops on phrases without it
MAX_ARGUMENT_CHARS = 300  # bounds each string argument in the grammar, for the same reason


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

    def _get_request_payload(self, input_: Any, *, stop: list[str] | None = None, **kwargs: Any) -> dict[str, Any]:
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

    def _create_chat_result(self, response: Any, generation_info: dict[str, Any] | None = None) -> ChatResult:
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
        self, chunk: dict[str, Any], default_chunk_class: type, base_generation_info: dict[str, Any] | None
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
            decoded: str = json.loads('"' + body[:end] + '"')  # a JSON string literal
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
