"""A tiny OpenAI-compatible chat-completions server for tests that run Hermes in other processes.

``POST /v1/chat/completions`` answers every request with one fixed assistant message (no tool
calls), as a JSON completion or, with ``"stream": true``, as server-sent chunks ending in
``data: [DONE]`` (a usage chunk first when ``stream_options.include_usage`` is set);
``GET /v1/models`` lists the requested model names. Every request body is recorded in
:attr:`OpenAIStub.requests`, so a test can check what the model was sent; ``on_request(body)``
(optional, a quick synchronous callable) runs before each answer is sent.

    with OpenAIStub(answer="Hello from the stub.") as stub:
        env = {"HERMES_MODEL": "stub", "HERMES_BASE_URL": stub.base_url, "OPENAI_API_KEY": "x"}

The server (uvicorn + starlette) runs on 127.0.0.1 on a free port in a thread of the test
process and is stopped when the ``with`` block ends.
"""

from __future__ import annotations

import itertools
import json
import socket
import threading
import time
from collections.abc import Callable
from typing import Any, Self

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, StreamingResponse
from starlette.routing import Route

DEFAULT_ANSWER = "Hello from the stub model."


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _words(messages: list[dict[str, Any]]) -> int:
    total = 0
    for m in messages:
        content = m.get("content")
        total += len(json.dumps(content, ensure_ascii=False).split()) if content is not None else 0
    return total


class OpenAIStub:
    """The stub server; see the module docstring. ``answer``: the fixed reply text."""

    def __init__(
        self,
        answer: str = DEFAULT_ANSWER,
        port: int | None = None,
        on_request: Callable[[dict[str, Any]], None] | None = None,
    ) -> None:
        self.answer = answer
        self.on_request = on_request
        self.port = port or _free_port()
        self.base_url = f"http://127.0.0.1:{self.port}/v1"
        self.requests: list[dict[str, Any]] = []
        self._ids = itertools.count(1)
        self._lock = threading.Lock()
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None
        self.app = Starlette(
            routes=[
                Route("/v1/chat/completions", self._completions, methods=["POST"]),
                Route("/v1/models", self._models, methods=["GET"]),
            ]
        )

    # --- handlers ------------------------------------------------------------------------

    async def _models(self, request: Request) -> JSONResponse:
        with self._lock:
            names = sorted({r.get("model", "stub") for r in self.requests} | {"stub"})
        return JSONResponse(
            {"object": "list", "data": [{"id": n, "object": "model", "owned_by": "stub"} for n in names]}
        )

    async def _completions(self, request: Request):
        body = await request.json()
        with self._lock:
            self.requests.append(body)
            n = next(self._ids)
        if self.on_request is not None:
            self.on_request(body)  # before the answer leaves: a test can act "during" the call
        model = body.get("model", "stub")
        created = int(time.time())
        cid = f"chatcmpl-stub-{n}"
        usage = {"prompt_tokens": _words(body.get("messages") or []), "completion_tokens": len(self.answer.split())}
        usage["total_tokens"] = usage["prompt_tokens"] + usage["completion_tokens"]
        if not body.get("stream"):
            return JSONResponse(
                {
                    "id": cid,
                    "object": "chat.completion",
                    "created": created,
                    "model": model,
                    "choices": [
                        {
                            "index": 0,
                            "message": {"role": "assistant", "content": self.answer},
                            "logprobs": None,
                            "finish_reason": "stop",
                        }
                    ],
                    "usage": usage,
                }
            )
        include_usage = bool((body.get("stream_options") or {}).get("include_usage"))

        def chunk(delta: dict[str, Any], finish: str | None = None) -> str:
            return (
                "data: "
                + json.dumps(
                    {
                        "id": cid,
                        "object": "chat.completion.chunk",
                        "created": created,
                        "model": model,
                        "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}],
                    }
                )
                + "\n\n"
            )

        async def events():
            yield chunk({"role": "assistant", "content": ""})
            for i, word in enumerate(self.answer.split(" ")):
                yield chunk({"content": (" " if i else "") + word})
            yield chunk({}, "stop")
            if include_usage:
                yield (
                    "data: "
                    + json.dumps(
                        {
                            "id": cid,
                            "object": "chat.completion.chunk",
                            "created": created,
                            "model": model,
                            "choices": [],
                            "usage": usage,
                        }
                    )
                    + "\n\n"
                )
            yield "data: [DONE]\n\n"

        return StreamingResponse(events(), media_type="text/event-stream")

    # --- lifecycle -----------------------------------------------------------------------

    def start(self, timeout_s: float = 15.0) -> Self:
        config = uvicorn.Config(
            self.app, host="127.0.0.1", port=self.port, log_level="warning", access_log=False, lifespan="off"
        )
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(target=self._server.run, name="openai-stub", daemon=True)
        self._thread.start()
        deadline = time.monotonic() + timeout_s
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError(f"the OpenAI stub did not start on port {self.port}")
            time.sleep(0.02)
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout=10)
        self._server = self._thread = None

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    def env(self) -> dict[str, str]:
        """The environment that points Hermes at this stub."""
        return {"HERMES_MODEL": "stub", "HERMES_BASE_URL": self.base_url, "OPENAI_API_KEY": "x"}


__all__ = ["DEFAULT_ANSWER", "OpenAIStub"]
