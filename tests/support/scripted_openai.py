"""An OpenAI-compatible stub whose replies a test scripts, tool calls included, for tests that run
``hermes`` in other processes (a registered Python model cannot reach another process).

``reply(body)`` gets the request body and returns either ``{"content": "text"}`` or
``{"tool_calls": [{"name": ..., "arguments": {...}}]}``; both the JSON and the streaming
(server-sent chunks) forms are served, so the CLI's streaming model calls work too.

    def reply(body):
        if body["messages"][-1]["role"] == "tool":
            return {"content": "Posted."}
        return {"tool_calls": [{"name": "post_message", "arguments": {"channel": "x", "text": "hi"}}]}

    with ScriptedOpenAI(reply) as stub:
        env = stub.env()
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, StreamingResponse

from tests.support.openai_stub import OpenAIStub

Reply = Callable[[dict[str, Any]], dict[str, Any]]


class ScriptedOpenAI(OpenAIStub):
    """:class:`OpenAIStub` answering with ``reply(body)`` (see the module docstring)."""

    def __init__(self, reply: Reply, **kw: Any) -> None:
        super().__init__(**kw)
        self.reply = reply

    async def _completions(self, request: Request):
        body = await request.json()
        with self._lock:
            self.requests.append(body)
            n = next(self._ids)
        out = self.reply(body)
        cid, created, model = f"chatcmpl-scripted-{n}", int(time.time()), body.get("model", "stub")
        calls = [
            {
                "id": f"call_{n}_{i}",
                "type": "function",
                "function": {"name": c["name"], "arguments": json.dumps(c.get("arguments") or {})},
            }
            for i, c in enumerate(out.get("tool_calls") or [])
        ]
        content = out.get("content") or ""
        finish = "tool_calls" if calls else "stop"
        usage = {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}
        if not body.get("stream"):
            message: dict[str, Any] = {"role": "assistant", "content": content or None}
            if calls:
                message["tool_calls"] = calls
            return JSONResponse(
                {
                    "id": cid,
                    "object": "chat.completion",
                    "created": created,
                    "model": model,
                    "choices": [{"index": 0, "message": message, "logprobs": None, "finish_reason": finish}],
                    "usage": usage,
                }
            )

        def chunk(delta: dict[str, Any], finish_reason: str | None = None, **extra: Any) -> str:
            data = {
                "id": cid,
                "object": "chat.completion.chunk",
                "created": created,
                "model": model,
                "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish_reason}],
                **extra,
            }
            return f"data: {json.dumps(data)}\n\n"

        async def events():
            yield chunk({"role": "assistant", "content": ""})
            if content:
                yield chunk({"content": content})
            for i, call in enumerate(calls):
                yield chunk({"tool_calls": [{"index": i, **call}]})
            yield chunk({}, finish)
            if (body.get("stream_options") or {}).get("include_usage"):
                yield f"data: {json.dumps({'id': cid, 'object': 'chat.completion.chunk', 'created': created, 'model': model, 'choices': [], 'usage': usage})}\n\n"
            yield "data: [DONE]\n\n"

        return StreamingResponse(events(), media_type="text/event-stream")


__all__ = ["ScriptedOpenAI"]
