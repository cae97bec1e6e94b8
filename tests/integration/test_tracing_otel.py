"""Tracing through LangSmith's OpenTelemetry export, end to end (issue 24, README "Tracing").

A real ``hermes run`` process (``python -m graph.cli``, what the ``hermes`` script runs) does one
turn against a scripted OpenAI-compatible model (it calls only the tools the request offered it:
two calls of the bundled team-chat MCP server, a real stdio process, then answers), with SQLite
checkpoints and the memory write. ``OTEL_EXPORTER_OTLP_ENDPOINT`` points at an OTLP/HTTP collector
stand-in in this test process, which decodes what it receives (OTLP protobuf).

* With ``LANGSMITH_TRACING=true LANGSMITH_OTEL_ENABLED=true LANGSMITH_OTEL_ONLY=true`` the run is
  exported as one trace: one root, a span per node execution (checked against the graph's own
  record, the thread's checkpoint history), a ``tool`` span per tool call under its
  ``dispatch_tools`` span (the MCP calls, with their call ids and ``tool_source``), and the memory
  write under ``write_memory``; the process connects to the model and the collector only.
* With no ``LANGSMITH_*`` variable the same turn exports nothing: the collector receives no
  request, the process connects to nothing but the model, no LangSmith client is created and no
  OTLP exporter is even imported.

The network record comes from a standard-library audit hook (PEP 578) installed in the hermes
process before it imports anything: every ``socket.connect`` and ``socket.getaddrinfo``.
"""

from __future__ import annotations

import asyncio
import json
import os
import sqlite3
import subprocess
import sys
import textwrap
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.trace.v1.trace_pb2 import Span

from graph.builder import make_graph
from graph.checkpoints import checkpoints_file, open_checkpointer
from tests.support.scripted_openai import ScriptedOpenAI

pytestmark = pytest.mark.slow  # a hermes process, its MCP server, a model stub and a collector

ROOT = Path(__file__).resolve().parents[2]
TASK = "Post the order count to the sales-team channel"
POST = {"channel": "sales-team", "text": "Order count: 42"}
READ = {"channel": "sales-team"}
ANSWER = "Posted the order count to #sales-team."
NODES = {"assemble_context", "call_model", "dispatch_tools", "compress_results", "evaluate_progress", "write_memory"}
#: seconds a hermes process may take (imports, MCP start-up, a loaded 2-core machine)
PROCESS_S = 240
TRACING = {"LANGSMITH_TRACING": "true", "LANGSMITH_OTEL_ENABLED": "true", "LANGSMITH_OTEL_ONLY": "true"}

# Runs `hermes` (graph.cli) in this interpreter after installing the audit hook: the hook sees
# every connection the process opens, whichever library opens it. At exit (registered first, so
# it runs after LangSmith's and OpenTelemetry's own exit handlers) it records whether a
# LangSmith client exists and which OpenTelemetry exporter modules were loaded.
HERMES_WITH_NET_LOG = textwrap.dedent("""
    import atexit, json, os, socket, sys
    log = open(os.environ["HERMES_TEST_NET_LOG"], "a")
    def record(**row):
        log.write(json.dumps(row) + "\\n")
        log.flush()
    def hook(event, args):
        if event == "socket.connect" and args[0].family in (socket.AF_INET, socket.AF_INET6):
            record(connect=list(args[1][:2]))
        elif event == "socket.getaddrinfo":
            record(getaddrinfo=str(args[0]))
    sys.addaudithook(hook)
    def at_exit():
        run_trees = sys.modules.get("langsmith.run_trees")
        record(langsmith_client=getattr(run_trees, "_CLIENT", None) is not None,
               exporters=sorted(m for m in sys.modules if m.startswith("opentelemetry.exporter")
                                or m.startswith("langsmith._internal.otel")))
    atexit.register(at_exit)
    import runpy
    runpy.run_module("graph.cli", run_name="__main__", alter_sys=True)
""")


class Collector:
    """An OTLP/HTTP trace collector stand-in on 127.0.0.1: ``POST /v1/traces`` bodies decoded
    into :attr:`requests` (``(path, headers, ExportTraceServiceRequest)``), answered 200."""

    def __init__(self) -> None:
        self.requests: list[tuple[str, dict[str, str], ExportTraceServiceRequest]] = []
        received = self.requests

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                request = ExportTraceServiceRequest()
                request.ParseFromString(self.rfile.read(int(self.headers["Content-Length"])))
                received.append((self.path, dict(self.headers), request))
                body = ExportTraceServiceResponse().SerializeToString()
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, name="otlp-collector", daemon=True)

    def spans(self) -> list[Span]:
        return [s for _, _, r in self.requests for rs in r.resource_spans for ss in rs.scope_spans for s in ss.spans]


@pytest.fixture
def collector() -> Iterator[Collector]:
    c = Collector()
    c.thread.start()
    try:
        yield c
    finally:
        c.server.shutdown()
        c.server.server_close()
        c.thread.join(timeout=10)


def model(offers: list[set[str]]):
    """The scripted model: both team-chat calls in one reply (only if the request offered them),
    then the answer once there are tool results. ``offers`` gets each request's tool names."""

    def reply(body: dict[str, Any]) -> dict[str, Any]:
        offered = {t["function"]["name"] for t in body.get("tools") or []}
        offers.append(offered)
        if any(m["role"] == "tool" for m in body["messages"]):
            return {"content": ANSWER}
        if not {"list_messages", "post_message"} <= offered:
            return {"content": "I cannot post from here."}
        return {
            "tool_calls": [{"name": "list_messages", "arguments": READ}, {"name": "post_message", "arguments": POST}]
        }

    return reply


def run_hermes(
    tmp_path: Path, stub: ScriptedOpenAI, collector: Collector, tracing: dict[str, str]
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """One ``hermes run TASK --thread t1 --json`` with ``tracing`` added to an environment that
    has no ``LANGSMITH_*``, ``LANGCHAIN_*`` or ``OTEL_*`` variable of the caller's. Returns its
    JSON summary and its network log (rows ``connect``, ``getaddrinfo``, and the exit row)."""
    net_log = tmp_path / "net.jsonl"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LANGSMITH_", "LANGCHAIN_", "OTEL_"))}
    for name in ("HERMES_MCP_CONFIG", "HERMES_POSTGRES_URL", "HERMES_DATABASE", "HERMES_DEBUG"):
        env.pop(name, None)
    env |= {
        **stub.env(),
        "HERMES_EMBEDDINGS": "hash",
        # where an exporter would send, were one configured: here, so that anything sent is seen
        "OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{collector.port}",
        "HERMES_TEST_NET_LOG": str(net_log),
        **tracing,
    }
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            HERMES_WITH_NET_LOG,
            *["run", TASK, "--thread", "t1", "--data-dir", str(tmp_path / "data"), "--json"],
        ],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=PROCESS_S,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    rows = [json.loads(line) for line in net_log.read_text().splitlines()]
    return json.loads(done.stdout.strip().splitlines()[-1]), rows  # the summary is the last line


def posts(data: Path) -> list[tuple[str, str]]:
    with sqlite3.connect(data / "team_chat.db") as con:
        return con.execute("SELECT channel, text FROM messages ORDER BY id").fetchall()


async def executed_nodes(data: Path, thread_id: str) -> tuple[list[str], list[dict[str, Any]]]:
    """The graph's own record of the turn: the nodes run, in order (each checkpoint's ``next``,
    oldest first), and the tool calls the model made (from the final state's messages)."""
    async with open_checkpointer(checkpoints_file(data), postgres="") as saver:
        history = [s async for s in make_graph(saver).aget_state_history({"configurable": {"thread_id": thread_id}})]
    ran = [node for snapshot in reversed(history) for node in snapshot.next if node != "__start__"]
    calls = [c for m in history[0].values["messages"] for c in getattr(m, "tool_calls", None) or []]
    return ran, calls


def attr(span: Span, key: str) -> str | None:
    return next((a.value.string_value for a in span.attributes if a.key == key), None)


def test_one_run_is_one_otel_trace_with_a_span_per_node_tool_call_and_memory_write(tmp_path: Path, collector):
    offers: list[set[str]] = []
    with ScriptedOpenAI(model(offers)) as stub:
        summary, net = run_hermes(tmp_path, stub, collector, {**TRACING, "LANGSMITH_API_KEY": "test-key"})
    data = tmp_path / "data"
    assert summary["answer"] == ANSWER and summary["memory_writes"] >= 1
    assert posts(data) == [(POST["channel"], POST["text"])]  # the real MCP server ran the call
    assert {"list_messages", "post_message"} <= offers[0]

    # exported to the collector, with LangSmith's defaults (its API key header)
    assert collector.requests and {path for path, _, _ in collector.requests} == {"/v1/traces"}
    assert {headers.get("x-api-key") for _, headers, _ in collector.requests} == {"test-key"}
    spans = collector.spans()
    by_id = {s.span_id: s for s in spans}
    assert len(by_id) == len(spans)

    # one trace: one root, every other span's parent in it
    [root] = [s for s in spans if not s.parent_span_id]
    assert {s.trace_id for s in spans} == {root.trace_id}
    assert all(s.parent_span_id in by_id for s in spans if s is not root)

    # a span per node execution, directly under the root, in the order the graph ran them
    ran, calls = asyncio.run(executed_nodes(data, "t1"))
    assert set(ran) == NODES
    node_spans = sorted((s for s in spans if s.parent_span_id == root.span_id), key=lambda s: s.start_time_unix_nano)
    assert [s.name for s in node_spans] == ran

    # a tool span per tool call, under the dispatch_tools span that ran it: the two MCP calls
    tool_spans = [s for s in spans if attr(s, "langsmith.span.kind") == "tool"]
    assert sorted((s.name, attr(s, "langsmith.metadata.tool_call_id")) for s in tool_spans) == sorted(
        (c["name"], c["id"]) for c in calls
    )
    assert {s.name for s in tool_spans} == {"list_messages", "post_message"}
    assert {attr(s, "langsmith.metadata.tool_source") for s in tool_spans} == {"mcp:team_chat"}
    assert {by_id[s.parent_span_id].name for s in tool_spans} == {"dispatch_tools"}

    # the memory write (after write_memory returned, in the background): under write_memory
    [memory_write] = [s for s in spans if s.name == "memory_write"]
    assert by_id[memory_write.parent_span_id].name == "write_memory"
    assert all(s.end_time_unix_nano >= s.start_time_unix_nano > 0 for s in spans)

    # LANGSMITH_OTEL_ONLY: nothing went to LangSmith's API, only to the model and the collector
    assert {tuple(r["connect"]) for r in net if "connect" in r} == {
        ("127.0.0.1", stub.port),
        ("127.0.0.1", collector.port),
    }
    assert {r["getaddrinfo"] for r in net if "getaddrinfo" in r} <= {"127.0.0.1"}


def test_with_no_langsmith_variable_nothing_is_exported_or_sent(tmp_path: Path, collector):
    offers: list[set[str]] = []
    with ScriptedOpenAI(model(offers)) as stub:
        summary, net = run_hermes(tmp_path, stub, collector, {})
    assert summary["answer"] == ANSWER and summary["memory_writes"] >= 1  # the same traced turn
    assert posts(tmp_path / "data") == [(POST["channel"], POST["text"])]
    assert collector.requests == []
    # the only connection: the model endpoint; no name looked up (e.g. api.smith.langchain.com)
    assert {tuple(r["connect"]) for r in net if "connect" in r} == {("127.0.0.1", stub.port)}
    assert {r["getaddrinfo"] for r in net if "getaddrinfo" in r} <= {"127.0.0.1"}
    # no tracer was set up at all: no LangSmith client, no exporter module loaded
    [at_exit] = [r for r in net if "langsmith_client" in r]
    assert at_exit == {"langsmith_client": False, "exporters": []}
