"""Tool-call arguments that are valid JSON but not an object (``[1, 2]``, ``"x"``, ``42``) from
an OpenAI-compatible endpoint: the client library cannot build the message; the run gets an
error result for the call and goes on (case K3's sibling), it does not crash. The endpoint is
ChatOpenAI's real HTTP client over an in-process transport (no socket; the openai
client runs `uname` for its headers, so this lives in the integration tier)."""

from __future__ import annotations

import json

import httpx
import pytest
from langchain_core.messages import HumanMessage, ToolMessage
from langchain_openai import ChatOpenAI
from langgraph.checkpoint.memory import InMemorySaver

from graph import resources
from graph.builder import make_graph
from graph.context import Context
from graph.model import register_model
from tests.conftest import FakeToolbox


def completion(message: dict) -> dict:
    return {
        "id": "x",
        "object": "chat.completion",
        "created": 0,
        "model": "m",
        "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 5, "completion_tokens": 5, "total_tokens": 10},
    }


@pytest.mark.parametrize("arguments", ["[1, 2]", '"just a string"', "42"])
async def test_non_object_arguments_become_an_error_result_and_the_run_goes_on(tmp_path, arguments):
    replies = [
        completion(
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {"id": "c1", "type": "function", "function": {"name": "lookup", "arguments": arguments}}
                ],
            }
        ),
        completion({"role": "assistant", "content": "I could not look it up."}),
    ]
    sent: list[dict] = []

    def handle(request: httpx.Request) -> httpx.Response:
        sent.append(json.loads(request.content))
        return httpx.Response(200, json=replies[min(len(sent), len(replies)) - 1])

    client = httpx.AsyncClient(transport=httpx.MockTransport(handle))
    name = f"non-object-{abs(hash(arguments))}"
    register_model(
        name,
        lambda _c: ChatOpenAI(
            model="m", api_key="x", base_url="http://endpoint.invalid/v1", http_async_client=client, max_retries=0
        ),
    )
    box = FakeToolbox()
    box.add("lookup", lambda **kw: {"ok": True})
    context = Context(model=name, data_dir=str(tmp_path))
    resources.set_toolbox(context, box)
    out = await make_graph(InMemorySaver()).ainvoke(
        {"messages": [HumanMessage("look it up")]}, {"configurable": {"thread_id": "t"}}, context=context
    )
    errors = [m for m in out["messages"] if isinstance(m, ToolMessage) and m.status == "error"]
    assert errors and "not a JSON object" in str(errors[0].content)
    assert out["messages"][-1].content == "I could not look it up."
    # the second request carries the invalid call and its error result, paired
    second = sent[1]["messages"]
    call_ids = [c["id"] for m in second if m.get("tool_calls") for c in m["tool_calls"]]
    assert [m["tool_call_id"] for m in second if m["role"] == "tool"] == call_ids
    await client.aclose()
