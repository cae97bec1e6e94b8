"""graph/model.py: the JSON-grammar tool-calling adapter for llama.cpp (no server needed)."""

from __future__ import annotations

import json

from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

from graph.embedded.chat import MAX_ARGUMENT_CHARS, JsonToolCallingChat, _grammar_ready, parse_step, step_schema
from graph.failures import CUT_OFF

TOOL = {
    "type": "function",
    "function": {
        "name": "schedule_reminder",
        "description": "Monthly reminder.",
        "parameters": {
            "type": "object",
            "properties": {
                "text": {"type": "string"},
                "time": {"type": "string", "pattern": r"^([01]\d|2[0-3]):[0-5]\d$"},
                "recurrence": {"type": "string", "enum": ["monthly"]},
            },
            "required": ["text"],
        },
    },
}


def test_a_tool_call_reply_becomes_tool_calls():
    msg = parse_step(AIMessage('{"tool_call": {"name": "schedule_reminder", "arguments": {"text": "x"}}}'))
    assert msg.tool_calls[0]["name"] == "schedule_reminder" and msg.tool_calls[0]["args"] == {"text": "x"}
    assert msg.tool_calls[0]["id"].startswith("call_") and msg.content == ""


def test_a_response_reply_becomes_content():
    assert parse_step(AIMessage('{"response": "All done."}')).content == "All done."


def test_a_call_cut_off_mid_json_becomes_an_invalid_tool_call_k3():
    msg = parse_step(AIMessage('{"tool_call": {"name": "search", "arguments": {"q": "x'))
    assert not msg.tool_calls
    bad = msg.invalid_tool_calls[0]
    assert bad["name"] == "search" and "not valid JSON" in bad["error"]


def test_plain_text_passes_through():
    assert parse_step(AIMessage("hello")).content == "hello"


def test_grammar_schema_bounds_strings_and_spells_out_regex_classes():
    ready = _grammar_ready(TOOL["function"]["parameters"])
    assert ready["properties"]["text"]["maxLength"] == MAX_ARGUMENT_CHARS
    assert "maxLength" not in ready["properties"]["recurrence"]  # enums are bounded already
    assert ready["properties"]["time"]["pattern"] == "^([01][0-9]|2[0-3]):[0-5][0-9]$"


def test_request_payload_carries_the_grammar_and_required_choice():
    chat = JsonToolCallingChat(model="m", base_url="http://127.0.0.1:9/v1", api_key="k")
    history = [
        HumanMessage("remind me"),
        AIMessage(
            "",
            invalid_tool_calls=[
                {"type": "invalid_tool_call", "id": "c1", "name": "x", "args": '{"a": ', "error": "cut"}
            ],
        ),
        ToolMessage("error", tool_call_id="c1"),
    ]
    payload = chat.bind_tools([TOOL], tool_choice="required")._get_request_payload(
        history, **chat.bind_tools([TOOL], tool_choice="required").kwargs
    )
    schema = payload["extra_body"]["json_schema"]
    assert "tool_call" in schema["properties"]  # required: no free-text alternative
    assert "tool_choice" not in payload
    # llama.cpp rejects unparseable arguments in history: they are sent as {}
    assistant = next(m for m in payload["messages"] if m["role"] == "assistant")
    assert all(json.loads(c["function"]["arguments"]) == {} for c in assistant["tool_calls"])
    assert assistant["content"] == ""


def test_without_tools_only_a_bounded_answer_is_allowed():
    chat = JsonToolCallingChat(model="m", base_url="http://127.0.0.1:9/v1", api_key="k")
    payload = chat._get_request_payload([HumanMessage("hi")])
    assert payload["extra_body"]["json_schema"]["required"] == ["response"]


def test_step_schema_offers_each_tool_by_name():
    schema = step_schema([TOOL])
    call = schema["anyOf"][0]["properties"]["tool_call"]["anyOf"][0]
    assert call["properties"]["name"] == {"const": "schedule_reminder"}


def test_requests_ask_llama_cpp_to_reuse_the_cached_prompt_prefix():
    chat = JsonToolCallingChat(model="m", base_url="http://127.0.0.1:9/v1", api_key="k")
    assert chat._get_request_payload([HumanMessage("hi")])["extra_body"]["cache_prompt"] is True


def test_llama_cpp_timings_reach_the_message_metadata():
    chat = JsonToolCallingChat(model="m", base_url="http://127.0.0.1:9/v1", api_key="k")
    response = {
        "id": "x",
        "object": "chat.completion",
        "created": 0,
        "model": "m",
        "choices": [
            {
                "index": 0,
                "finish_reason": "stop",
                "message": {
                    "role": "assistant",
                    "content": '{"tool_call": {"name": "schedule_reminder", "arguments": {"text": "x"}}}',
                },
            }
        ],
        "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
        "timings": {
            "prompt_n": 3,
            "cache_n": 7,
            "prompt_per_second": 100.0,
            "predicted_n": 5,
            "predicted_per_second": 20.0,
        },
    }
    message = chat._create_chat_result(response).generations[0].message
    assert message.tool_calls[0]["name"] == "schedule_reminder"
    assert message.response_metadata["timings"]["cache_n"] == 7


def test_a_call_cut_off_at_the_token_limit_says_so_without_guessing_at_json():
    text = '{"tool_call": {"name": "generate_report", "arguments": {"queries": [{"sql": "SELECT a FROM t JOIN u ON t.id = u.'
    msg = parse_step(AIMessage(text, response_metadata={"finish_reason": "length"}))
    bad = msg.invalid_tool_calls[0]
    assert bad["name"] == "generate_report" and bad["error"].startswith(CUT_OFF)
    assert "shorter arguments" in bad["error"]


def test_the_server_s_length_finish_reason_reaches_the_parser():
    chat = JsonToolCallingChat(model="m", base_url="http://127.0.0.1:9/v1", api_key="k")
    response = {
        "id": "x",
        "object": "chat.completion",
        "created": 0,
        "model": "m",
        "choices": [
            {
                "index": 0,
                "finish_reason": "length",
                "message": {
                    "role": "assistant",
                    "content": '{"tool_call": {"name": "search", "arguments": {"q": "SELECT a FROM t WHERE',
                },
            }
        ],
        "usage": {"prompt_tokens": 10, "completion_tokens": 384, "total_tokens": 394},
    }
    message = chat._create_chat_result(response).generations[0].message
    assert message.invalid_tool_calls[0]["error"].startswith(CUT_OFF)


def _fn(name: str) -> dict:
    return {
        "type": "function",
        "function": {"name": name, "description": name, "parameters": {"type": "object", "properties": {}}},
    }


def test_rendered_tools_stay_in_the_prompt_while_the_grammar_allows_only_the_offer():
    # the same tools in every prompt of a goal keep llama.cpp's cached prefix; the grammar
    # alone decides what may be called now
    chat = JsonToolCallingChat(model="m", base_url="http://127.0.0.1:9/v1", api_key="k")
    bound = chat.bind_tools([_fn("a"), _fn("b"), _fn("c")], tool_choice="required").bind(allowed_tools=["b"])
    payload = chat._get_request_payload([HumanMessage("hi")], **bound.kwargs)
    assert [t["function"]["name"] for t in payload["tools"]] == ["a", "b", "c"]
    names = [
        c["properties"]["name"]["const"]
        for c in payload["extra_body"]["json_schema"]["properties"]["tool_call"]["anyOf"]
    ]
    assert names == ["b"] and "allowed_tools" not in payload
    # nothing allowed: only an answer, the tools still rendered
    answer_only = chat.bind_tools([_fn("a")]).bind(allowed_tools=[])
    payload = chat._get_request_payload([HumanMessage("hi")], **answer_only.kwargs)
    assert payload["tools"] and payload["extra_body"]["json_schema"]["required"] == ["response"]


async def test_the_embedded_model_streams_without_langchain_s_120_s_chunk_gap(monkeypatch, tmp_path):
    # fresh user: the first call of the 1.5B model read a 2,600-token prompt for over 120 s with
    # no chunk, and langchain-openai's stream_chunk_timeout killed it (StreamChunkTimeoutError)
    import graph.model as model_module
    from graph.context import Context
    from graph.model import EMBEDDED_TIMEOUT_S, load_chat_model

    class _Server:
        async def start(self, entry):
            return "http://127.0.0.1:1/v1"

    monkeypatch.setattr(model_module, "embedded_server", lambda _d=".hermes": _Server())
    chat = await load_chat_model(Context(model="embedded:qwen2.5-coder-1.5b", data_dir=str(tmp_path)))
    assert chat.stream_chunk_timeout == EMBEDDED_TIMEOUT_S
