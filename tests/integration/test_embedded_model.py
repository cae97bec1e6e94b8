"""The real Qwen2.5-Coder-0.5B (``embedded:qwen2.5-coder-0.5b``) through the embedded llama.cpp
server: assembled from its PyPI parts and verified, started, one grammar-constrained tool call,
tool results rendered by the ChatML template, the KV cache reused across calls, stopped.

Skipped, with the install command, when the model's packages are not installed (the set-up
step installs only the default model: ``HERMES_EMBEDDED_MODELS=qwen2.5-coder-0.5b bash
scripts/setup.sh`` adds it)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import jsonschema
import psutil
import pytest
from langchain_core.messages import HumanMessage, SystemMessage, ToolMessage

from graph.context import Context
from graph.embedded.assembly import locate_parts
from graph.embedded.chat import JsonToolCallingChat
from graph.model import CATALOG, ModelUnavailableError, embedded_server, load_chat_model
from tests.support.processes import own_processes

MODEL = "qwen2.5-coder-0.5b"
pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]  # a loaded 2-core machine: minutes

REMINDER: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": "schedule_reminder",
        "description": "Schedule a reminder that repeats every month.",
        "parameters": {
            "type": "object",
            "properties": {
                "text": {"type": "string", "description": "What to remind the user of."},
                "day_of_month": {"type": "integer", "minimum": 1, "maximum": 28},
            },
            "required": ["text", "day_of_month"],
        },
    },
}
POST: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": "post_message",
        "description": "Post a message to a team chat channel.",
        "parameters": {
            "type": "object",
            "properties": {"channel": {"type": "string"}, "text": {"type": "string"}},
            "required": ["channel", "text"],
        },
    },
}


def installed() -> str | None:
    try:
        locate_parts(CATALOG[MODEL])
    except ModelUnavailableError as exc:
        return str(exc)
    return None


def server_processes() -> list[psutil.Process]:
    """The llama.cpp servers this test process started."""
    return own_processes("graph.embedded_llm")


@pytest.mark.skipif(installed() is not None, reason=f"{MODEL} is not installed: {installed()}")
async def test_the_real_05b_model_makes_a_grammar_constrained_tool_call(tmp_path: Path):
    before = {p.pid for p in server_processes()}
    context = Context(model=f"embedded:{MODEL}", data_dir=str(tmp_path), max_output_tokens=96)
    server = embedded_server(tmp_path)  # the process-wide server (stopped below)
    try:
        model = await load_chat_model(context)
        ours = [p for p in server_processes() if p.pid not in before]  # found while they are our children
        assert isinstance(model, JsonToolCallingChat) and model.model_name == MODEL
        messages = [
            SystemMessage("You are Hermes, an agent that does the user's tasks with tools."),
            HumanMessage("Remind me on the 1st of every month to send the sales report."),
        ]
        reply = await model.bind_tools([REMINDER, POST], tool_choice="required").ainvoke(messages)
        assert not reply.invalid_tool_calls and len(reply.tool_calls) == 1, reply
        call = reply.tool_calls[0]
        assert call["name"] in {"schedule_reminder", "post_message"}
        spec = {"schedule_reminder": REMINDER, "post_message": POST}[call["name"]]
        jsonschema.validate(call["args"], spec["function"]["parameters"])  # the grammar enforces the schema
        timings = reply.response_metadata["timings"]
        assert timings["predicted_n"] > 0 and timings["prompt_n"] > 0

        # the tool result reaches the next prompt (ChatML template), and the shared prefix is
        # served from the KV cache (cache_prompt)
        follow = [
            *messages,
            reply,
            ToolMessage(json.dumps({"marker": "result-7f3a"}), tool_call_id=call["id"], name=call["name"]),
        ]
        payload = model._get_request_payload(follow)
        base = str(model.openai_api_base).removesuffix("/v1")
        async with httpx.AsyncClient(timeout=60) as client:
            rendered = (
                await client.post(
                    f"{base}/apply-template", json={"messages": payload["messages"], "tools": [REMINDER, POST]}
                )
            ).json()["prompt"]
        assert "<tool_response" in rendered and "result-7f3a" in rendered
        assert '{"tool_call": {"name": "' + call["name"] in rendered  # earlier call in the grammar's shape
        answer = await model.bind_tools([REMINDER, POST]).ainvoke(follow)
        assert answer.response_metadata["timings"]["cache_n"] > 0, "the common prefix was evaluated again"
        assert not answer.invalid_tool_calls
    finally:
        await server.astop()
    assert not [p for p in ours if p.is_running() and p.status() != psutil.STATUS_ZOMBIE], "orphan llama.cpp server"
