"""graph/model.py streaming: a streamed reply (LangGraph's "messages" mode, Studio, the SDK)
merges to the message the non-streamed path gives, and streams answers, not grammar JSON.

The model's real openai client talks to an in-process ``httpx.MockTransport`` (no socket):
the non-streamed request gets a chat completion, the streamed one the same text as SSE chunks.
"""

from __future__ import annotations

import json
from typing import Any

import httpx
import openai._base_client
import pytest
from langchain_core.messages import AIMessage, AIMessageChunk, HumanMessage
from langchain_openai import ChatOpenAI

from graph.embedded.chat import JsonToolCallingChat
from graph.endpoint_chat import EndpointChat, normalise_tool_call_chunks
from graph.failures import CUT_OFF

TIMINGS = {"prompt_n": 12, "predicted_n": 7, "predicted_per_second": 9.5}
USAGE = {"prompt_tokens": 12, "completion_tokens": 7, "total_tokens": 19}
PROMPT = [HumanMessage("hi")]


@pytest.fixture(autouse=True)
def _no_uname(monkeypatch):
    # openai's client names the platform in its headers through platform.platform(), which
    # runs `uname -p` (a process, refused in the unit tier)
    monkeypatch.setattr(openai._base_client, "get_platform", lambda: "Linux")


def _sse(events: list[dict[str, Any]]) -> bytes:
    return b"".join(f"data: {json.dumps(e)}\n\n".encode() for e in events) + b"data: [DONE]\n\n"


def _chunk(delta: dict[str, Any], finish: str | None = None, **extra: Any) -> dict[str, Any]:
    return {
        "id": "c1",
        "object": "chat.completion.chunk",
        "created": 0,
        "model": "m",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        **extra,
    }


def _llama(text: str, pieces: list[str], finish: str = "stop") -> httpx.MockTransport:
    """A llama.cpp-like server replying ``text``: whole, or streamed in ``pieces``."""
    assert "".join(pieces) == text

    def handle(request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        if not body.get("stream"):
            return httpx.Response(
                200,
                json={
                    "id": "c1",
                    "object": "chat.completion",
                    "created": 0,
                    "model": "m",
                    "choices": [
                        {"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": finish}
                    ],
                    "usage": USAGE,
                    "timings": TIMINGS,
                },
            )
        events = [_chunk({"role": "assistant", "content": ""})]
        events += [_chunk({"content": p}) for p in pieces]
        events.append(_chunk({}, finish, timings=TIMINGS))
        if (body.get("stream_options") or {}).get("include_usage"):
            events.append(
                {
                    "id": "c1",
                    "object": "chat.completion.chunk",
                    "created": 0,
                    "model": "m",
                    "choices": [],
                    "usage": USAGE,
                }
            )
        return httpx.Response(200, headers={"content-type": "text/event-stream"}, content=_sse(events))

    return httpx.MockTransport(handle)


def _chat(transport: httpx.MockTransport, cls: type = JsonToolCallingChat, **kw: Any) -> Any:
    return cls(
        model="m",
        base_url="http://llama.invalid/v1",
        api_key="k",
        max_retries=0,
        http_client=httpx.Client(transport=transport),
        http_async_client=httpx.AsyncClient(transport=transport),
        **kw,
    )


def _split(text: str, size: int) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), size)]


def _shape(message: AIMessage) -> dict[str, Any]:
    """What must agree between the paths (call ids are fresh on each reply)."""
    return {
        "content": message.content,
        "tool_calls": [{k: v for k, v in c.items() if k != "id"} for c in message.tool_calls],
        "invalid_tool_calls": [{k: v for k, v in c.items() if k != "id"} for c in message.invalid_tool_calls],
        "timings": message.response_metadata.get("timings"),
        "finish_reason": message.response_metadata.get("finish_reason"),
        "tokens": message.usage_metadata["total_tokens"] if message.usage_metadata else None,
    }


ESCAPED = '{"response": "Line one\\nsaid \\"caf\\u00e9\\" \\ud83d\\ude00 \\\\ end"}'
REPLIES = {
    "tool call": ('{"tool_call": {"name": "search", "arguments": {"q": "caf\\u00e9 \\"x\\""}}}', "stop"),
    "answer with escapes": (ESCAPED, "stop"),
    "answer ending in spaces": ('{"response": "done  "}', "stop"),
    "call cut off at the token limit": ('{"tool_call": {"name": "search", "arguments": {"q": "abc', "length"),
    "malformed call": ('{"tool_call": {"name": "search", "arguments": {"q": 1,,}}}', "stop"),
    "answer cut off at the token limit": ('{"response": "The report is rea', "length"),
    "plain text": ("just text", "stop"),
    # llama.cpp's grammar output is spaced and indented
    "spaced answer": ('{\n  "response" : "Two\\nlines"\n}', "stop"),
    "spaced call": ('{\n  "tool_call": {\n    "name": "search",\n    "arguments": {"q": "x"}\n  }\n}', "stop"),
}


@pytest.mark.parametrize("size", [1, 2, 3, 7, 1000])
@pytest.mark.parametrize("case", list(REPLIES))
async def test_streamed_reply_merges_to_the_non_streamed_message(case, size):
    text, finish = REPLIES[case]
    transport = _llama(text, _split(text, size), finish)
    whole = await _chat(transport).ainvoke(PROMPT)
    streamed = await _chat(transport, streaming=True).ainvoke(PROMPT)  # LangGraph's "messages" path
    assert isinstance(streamed, AIMessage) and not isinstance(streamed, AIMessageChunk)
    assert _shape(streamed) == _shape(whole)
    assert streamed.tool_calls or streamed.invalid_tool_calls or streamed.content
    for call in [*streamed.tool_calls, *streamed.invalid_tool_calls]:
        assert call["id"].startswith("call_") and len(call["id"]) == len("call_") + 12


def test_sync_stream_merges_like_the_async_one():
    text, finish = REPLIES["tool call"]
    transport = _llama(text, _split(text, 2), finish)
    whole = _chat(transport).invoke(PROMPT)
    assert _shape(_chat(transport, streaming=True).invoke(PROMPT)) == _shape(whole)
    assert whole.tool_calls[0]["args"] == {"q": 'café "x"'}
    cut, finish = REPLIES["call cut off at the token limit"]
    streamed = _chat(_llama(cut, _split(cut, 3), finish), streaming=True).invoke(PROMPT)
    assert not streamed.tool_calls and streamed.invalid_tool_calls[0]["error"].startswith(CUT_OFF)


async def test_an_answer_streams_decoded_text_split_mid_escape():
    # cut inside \n, \u00e9, \", a surrogate pair and \\
    cuts = [ESCAPED.index(s) + 1 for s in ("\\n", "\\u00e9", "\\u00e9")] + [ESCAPED.index("\\u00e9") + 4]
    cuts += [
        ESCAPED.index('\\"') + 1,
        ESCAPED.index("\\ud83d") + 3,
        ESCAPED.index("\\ude00"),
        ESCAPED.index("\\\\") + 1,
    ]
    cuts = sorted(set(cuts))
    pieces = [ESCAPED[a:b] for a, b in zip([0, *cuts], [*cuts, len(ESCAPED)], strict=True)]
    chat = _chat(_llama(ESCAPED, pieces))
    got = [c async for c in chat.astream(PROMPT)]
    texts = [c.content for c in got if c.content]
    assert "".join(texts) == 'Line one\nsaid "café" \U0001f600 \\ end'
    assert len(texts) > 3  # incremental, not one chunk at the end
    assert not any("{" in t or "\\u" in t or "\\n" in t or '\\"' in t for t in texts)  # no raw escapes
    assert not any(t.lstrip().startswith(("{", '"response"')) for t in texts)
    merged = sum(got[1:], got[0])
    assert merged.content == json.loads(ESCAPED)["response"] and not merged.tool_call_chunks


async def test_a_tool_call_streams_as_one_tool_call_chunk_not_json_text():
    text, finish = REPLIES["tool call"]
    got = [c async for c in _chat(_llama(text, _split(text, 4), finish)).astream(PROMPT)]
    assert all(c.content == "" for c in got)
    calls = [tc for c in got for tc in c.tool_call_chunks]
    assert len(calls) == 1 and calls[0]["name"] == "search" and calls[0]["index"] == 0
    assert json.loads(calls[0]["args"]) == {"q": 'café "x"'} and calls[0]["id"].startswith("call_")


# --- hosted providers: tool-call chunk normalisation -------------------------------------------


def _hosted(deltas: list[list[dict[str, Any]]]) -> httpx.MockTransport:
    def handle(request: httpx.Request) -> httpx.Response:
        events = [_chunk({"role": "assistant", "content": None, "tool_calls": d}) for d in deltas]
        events.append(_chunk({}, "tool_calls"))
        return httpx.Response(200, headers={"content-type": "text/event-stream"}, content=_sse(events))

    return httpx.MockTransport(handle)


def _call_delta(index: int, cid: str | None = None, name: str | None = None, args: str = "") -> dict[str, Any]:
    fn: dict[str, Any] = {"arguments": args}
    if name:
        fn["name"] = name
    delta: dict[str, Any] = {"index": index, "function": fn}
    if cid:
        delta.update(id=cid, type="function")
    return delta


async def test_two_calls_on_one_index_with_different_ids_merge_into_two_calls():
    deltas = [
        [_call_delta(0, "call_a", "search", '{"q": ')],
        [_call_delta(0, None, None, '"x"}')],
        [_call_delta(0, "call_b", "fetch", '{"url"')],
        [_call_delta(0, None, None, ': "u"}')],
    ]
    reply = await _chat(_hosted(deltas), EndpointChat, streaming=True).ainvoke(PROMPT)
    assert [(c["id"], c["name"], c["args"]) for c in reply.tool_calls] == [
        ("call_a", "search", {"q": "x"}),
        ("call_b", "fetch", {"url": "u"}),
    ]
    assert not reply.invalid_tool_calls
    # unnormalised, LangChain glues the second call's arguments onto the first
    raw = await _chat(_hosted(deltas), ChatOpenAI, streaming=True).ainvoke(PROMPT)
    assert raw.invalid_tool_calls and raw.invalid_tool_calls[0]["args"] == '{"q": "x"}: "u"}'


async def test_a_stream_without_ids_gives_one_call_per_index():
    deltas = [
        [_call_delta(0, None, "search", '{"q"')],
        [_call_delta(1, None, "fetch", '{"url": "u"}')],
        [_call_delta(0, None, None, ': "x"}')],
    ]
    reply = await _chat(_hosted(deltas), EndpointChat, streaming=True).ainvoke(PROMPT)
    assert [(c["name"], c["args"]) for c in reply.tool_calls] == [("search", {"q": "x"}), ("fetch", {"url": "u"})]


def test_normaliser_keeps_repeated_ids_on_their_call_and_numbers_new_calls_after_all_used():
    seen: dict = {}
    first = normalise_tool_call_chunks(
        seen,
        [
            {"type": "tool_call_chunk", "name": "a", "args": "", "id": "x", "index": 0},
            {"type": "tool_call_chunk", "name": "b", "args": "", "id": "y", "index": 1},
        ],
    )
    again = normalise_tool_call_chunks(
        seen,
        [
            {"type": "tool_call_chunk", "name": None, "args": "{}", "id": "x", "index": 0},
            {"type": "tool_call_chunk", "name": "c", "args": "{}", "id": "z", "index": 0},
            {"type": "tool_call_chunk", "name": None, "args": "", "id": None, "index": 0},
        ],
    )
    assert [c["index"] for c in first] == [0, 1]
    assert [c["index"] for c in again] == [0, 2, 2]
