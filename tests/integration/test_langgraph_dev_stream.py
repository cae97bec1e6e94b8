"""Streaming through the real ``langgraph dev`` server (what Studio and the SDK do by default):
``runs.stream(stream_mode="messages-tuple")`` carries answers and tool calls, never the embedded
model's grammar JSON (``{"tool_call": ...}`` / ``{"response": ...}``)."""

from __future__ import annotations

import re

import pytest
from langgraph_sdk import get_client

pytestmark = pytest.mark.slow
TASK = "Write last month's sales report and post it to the project group."


@pytest.fixture
def dev_server(agent_dev_server):
    return agent_dev_server(2)


GRAMMAR_JSON = re.compile(r'\s*\{\s*"(tool_call|response)"')


def _is_grammar_json(text: str) -> bool:
    """The embedded model's raw reply (``{"tool_call": ...}`` / ``{"response": ...}``, any spacing)."""
    return GRAMMAR_JSON.match(text) is not None


async def test_a_streamed_run_streams_answers_and_tool_calls_not_grammar_json(dev_server):
    url, log_path = dev_server
    client = get_client(url=url)
    thread = await client.threads.create()
    events: list[str] = []
    ai_chunks: list[dict] = []
    async for part in client.runs.stream(
        thread["thread_id"],
        "agent",
        input={"messages": [{"role": "human", "content": TASK}]},
        stream_mode="messages-tuple",
    ):
        events.append(part.event)
        if part.event == "messages":
            message, _metadata = part.data
            if message.get("type") in ("AIMessageChunk", "ai"):
                ai_chunks.append(message)
    log_tail = log_path.read_text(errors="replace")[-3000:]
    assert "error" not in events, (events, log_tail)
    assert ai_chunks, f"no message chunk events: {sorted(set(events))} {log_tail}"
    # chunk by chunk, and the text of each streamed model reply (chunks of one id) as a whole
    texts: dict[str, str] = {}
    for chunk in ai_chunks:
        content = chunk.get("content")
        text = content if isinstance(content, str) else ""
        assert not _is_grammar_json(text), chunk
        texts[chunk.get("id") or ""] = texts.get(chunk.get("id") or "", "") + text
    assert not [t for t in texts.values() if _is_grammar_json(t)], texts
    state = await client.threads.get_state(thread["thread_id"])
    messages = state["values"]["messages"]
    ai = [m for m in messages if m["type"] == "ai"]
    assert ai, messages
    last = ai[-1]
    assert isinstance(last["content"], str) and not _is_grammar_json(last["content"]), last
    assert last["content"] or last.get("tool_calls") or last.get("invalid_tool_calls")
    for message in ai:
        assert not _is_grammar_json(message["content"] if isinstance(message["content"], str) else "")
        for call in message.get("tool_calls") or []:
            assert call["name"] and isinstance(call["args"], dict), call
    # the goal forces a tool call first: it was streamed as a tool call, not as text
    assert any(c.get("tool_call_chunks") for c in ai_chunks) or any(m.get("tool_calls") for m in ai)
