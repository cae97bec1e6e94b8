"""MCP over streamable HTTP and SSE (DESIGN §3) with a real FastMCP server process, including
K8(c): a server that dies mid-call after a good handshake fails the call with a transport
error naming the server, within a bounded time."""

from __future__ import annotations

import asyncio
import json
import socket
import sys
import textwrap
import time
from pathlib import Path

import httpx
import psutil
import pytest

from tools.toolbox import Toolbox

pytestmark = pytest.mark.slow

SERVER = textwrap.dedent('''
    import os, sys
    from mcp.server.fastmcp import FastMCP

    port, transport = int(sys.argv[1]), sys.argv[2]
    mcp = FastMCP("http-peer", host="127.0.0.1", port=port, log_level="WARNING")

    @mcp.tool()
    def add(a: int, b: int) -> int:
        """Adds two integers and returns their sum."""
        return a + b

    @mcp.tool()
    def crash() -> str:
        """Kills the server in the middle of the call (K8c)."""
        os._exit(0)

    mcp.run(transport)
''')


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
async def http_server(tmp_path: Path, request):
    transport = request.param
    script = tmp_path / "http_server.py"
    script.write_text(SERVER)
    port = _free_port()
    proc = await asyncio.create_subprocess_exec(
        sys.executable, str(script), str(port), transport, stderr=asyncio.subprocess.DEVNULL, start_new_session=True
    )
    path = "/mcp" if transport == "streamable-http" else "/sse"
    url = f"http://127.0.0.1:{port}{path}"
    try:
        deadline = time.monotonic() + 20
        async with httpx.AsyncClient() as client:
            while True:
                try:
                    async with client.stream("GET", url, timeout=1.0):
                        break
                except httpx.HTTPError as err:
                    if time.monotonic() > deadline or proc.returncode is not None:
                        raise RuntimeError("HTTP MCP server did not come up") from err
                    await asyncio.sleep(0.2)
        yield {"url": url, "transport": "sse" if transport == "sse" else "streamable_http"}, proc
    finally:
        if proc.returncode is None:
            proc.kill()
        await proc.wait()
        assert not psutil.pid_exists(proc.pid) or psutil.Process(proc.pid).status() == psutil.STATUS_ZOMBIE


@pytest.mark.parametrize("http_server", ["streamable-http", "sse"], indirect=True)
async def test_http_transports_call_and_k8c_death_mid_call(tmp_path, http_server):
    entry, proc = http_server
    cfg = tmp_path / "mcp.json"
    cfg.write_text(json.dumps({"mcpServers": {"peer": entry}}))
    tb = await Toolbox.open(tmp_path / "data", cfg, timeout_s=3.0, startup_timeout_s=10.0)
    try:
        assert tb.problems == {}, tb.problems
        assert tb.registry.get("add").source == "mcp:peer"
        for i in range(3):  # persistent session: repeated calls on one connection
            out = await tb.registry.call("add", {"a": i, "b": 2}, f"a{i}")
            assert out.status == "ok" and out.content == i + 2, out
        t0 = time.monotonic()
        # crash is unannotated (MCP default: a side effect) and its request was sent: outcome unknown.
        dead = await tb.registry.call("crash", {}, "boom")
        assert dead.status == "error" and dead.error_kind == "outcome_unknown"
        assert "peer" in dead.error and time.monotonic() - t0 < 10
        await asyncio.wait_for(proc.wait(), 5)
        # The server is gone: the reconnect fails, so this request is known never to have been sent.
        after = await tb.registry.call("add", {"a": 1, "b": 1}, "after")
        assert after.status == "error" and after.error_kind == "transport" and "peer" in after.error
        assert time.monotonic() - t0 < 15
    finally:
        t0 = time.monotonic()
        await tb.aclose()
        assert time.monotonic() - t0 < 15
