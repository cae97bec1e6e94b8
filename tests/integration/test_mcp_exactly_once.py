"""Exactly-once on the MCP transport, with a real stdio FastMCP server written here.

* A call over its timeout raises ToolTimeout, the server receives ``notifications/cancelled``
  for that request's JSON-RPC id (its read stream logs every notification), the tool is
  cancelled, and its effect file shows exactly one run (no replay, by the client or anyone).
* The caller cancelling a call (an outer timeout) also sends ``notifications/cancelled``.
* A call to a server that is dead before the call, or never started, raises
  ToolTransportError with ``sent=False`` and has no effect.
* The server's annotations and ``_meta`` (and the user's config) reach the ToolSpec; the
  per-server timeout is the one calls use.

Every test stops the processes it starts (checked with psutil by a command-line marker).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import sys
import textwrap
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from tools.errors import ToolTimeout, ToolTransportError
from tools.mcp.client import MCPServer
from tools.toolbox import Toolbox

pytestmark = pytest.mark.slow

# argv: effects file, notification log, marker (ignored; lets psutil find the process)
SERVER = textwrap.dedent('''
    import json, sys
    import anyio
    from mcp.server.fastmcp import Context, FastMCP
    from mcp.server.stdio import stdio_server
    from mcp.types import ToolAnnotations

    effects, notes = sys.argv[1], sys.argv[2]
    mcp = FastMCP("exactly-once", log_level="WARNING")

    def log(record):
        with open(notes, "a") as f:
            f.write(json.dumps(record) + "\\n")

    @mcp.tool(annotations=ToolAnnotations(readOnlyHint=False, idempotentHint=False, destructiveHint=False),
              meta={"hermes/requested_by": [r"\\bappend\\b.{0,40}\\bline\\b"], "hermes/artifact_field": "line"})
    async def slow_append(text: str, ctx: Context, seconds: float = 5.0) -> dict:
        """Appends one line to the effects file, then waits `seconds` before answering."""
        with open(effects, "a") as f:
            f.write(text + "\\n")
        try:
            await anyio.sleep(seconds)
        except anyio.get_cancelled_exc_class():
            log({"event": "tool_cancelled", "request_id": ctx.request_id, "text": text})
            raise
        log({"event": "tool_finished", "request_id": ctx.request_id, "text": text})
        return {"line": text}

    @mcp.tool(annotations=ToolAnnotations(readOnlyHint=True))
    def read_lines() -> list[str]:
        """Lists the lines of the effects file (read-only)."""
        try:
            with open(effects) as f:
                return f.read().splitlines()
        except FileNotFoundError:
            return []

    @mcp.tool()
    def unannotated(x: int) -> int:
        """A tool with no annotations at all: MCP defaults apply."""
        return x

    async def main():
        async with stdio_server() as (read, write):
            send, receive = anyio.create_memory_object_stream(0)

            async def tee():  # log every notification the client sends, then pass it on
                async with send:
                    async for message in read:
                        root = getattr(getattr(message, "message", None), "root", None)
                        if getattr(root, "method", "").startswith("notifications/"):
                            log({"event": "notification", "method": root.method, "params": root.params})
                        await send.send(message)

            async with anyio.create_task_group() as tg:
                tg.start_soon(tee)
                await mcp._mcp_server.run(receive, write, mcp._mcp_server.create_initialization_options())
                tg.cancel_scope.cancel()

    anyio.run(main)
''')


def _procs_with(marker: str) -> list[psutil.Process]:
    found = []
    for p in psutil.process_iter(["cmdline"]):
        try:
            if any(marker in part for part in (p.info["cmdline"] or [])) and p.status() != psutil.STATUS_ZOMBIE:
                found.append(p)
        except psutil.Error:
            continue
    return found


@pytest.fixture
def marker() -> Iterator[str]:
    m = f"hermes-test-{uuid.uuid4().hex}"
    yield m
    leftovers = _procs_with(m)
    for p in leftovers:
        with contextlib.suppress(psutil.Error):
            p.kill()
    assert not leftovers, f"test left processes behind: {[p.pid for p in leftovers]}"


@pytest.fixture
def peer(tmp_path: Path, marker: str) -> dict:
    script = tmp_path / "exactly_once_server.py"
    script.write_text(SERVER)
    effects, notes = tmp_path / "effects.txt", tmp_path / "notes.jsonl"
    # one warm session: these tests count processes and cancellation notices of one server process
    entry = {"command": sys.executable, "args": [str(script), str(effects), str(notes), marker], "pool": {"min": 1}}
    return {"entry": entry, "effects": effects, "notes": notes}


def _lines(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


def _records(path: Path) -> list[dict]:
    return [json.loads(line) for line in _lines(path)]


async def _wait_for(predicate, timeout_s: float = 5.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if await asyncio.to_thread(predicate):
            return True
        await asyncio.sleep(0.1)
    return await asyncio.to_thread(predicate)


def _cancel_notes(notes: Path) -> list[dict]:
    return [r for r in _records(notes) if r["event"] == "notification" and r["method"] == "notifications/cancelled"]


async def test_timeout_sends_cancelled_and_the_effect_happens_once(peer, marker):
    server = MCPServer("once", peer["entry"])
    await server.start()
    try:
        t0 = time.monotonic()
        with pytest.raises(ToolTimeout, match="within 1 s"):
            await server.call_tool("slow_append", {"text": "first", "seconds": 5}, timeout_s=1.0, request_id="r-1")
        assert time.monotonic() - t0 < 2.5
        # The server got notifications/cancelled for that request and cancelled the tool.
        assert await _wait_for(lambda: any(r["event"] == "tool_cancelled" for r in _records(peer["notes"])))
        cancels = _cancel_notes(peer["notes"])
        assert len(cancels) == 1, _records(peer["notes"])
        cancelled_tool = next(r for r in _records(peer["notes"]) if r["event"] == "tool_cancelled")
        assert str(cancels[0]["params"]["requestId"]) == str(cancelled_tool["request_id"])
        assert "timed out" in cancels[0]["params"]["reason"]
        # The session is still usable; the timed-out call was not replayed by anyone.
        assert await server.call_tool(
            "slow_append", {"text": "second", "seconds": 0}, timeout_s=5.0, request_id="r-2"
        ) == {"line": "second"}
        await asyncio.sleep(0.5)
        assert _lines(peer["effects"]) == ["first", "second"]
        events = [(r["event"], r.get("text")) for r in _records(peer["notes"]) if r["event"].startswith("tool_")]
        assert events == [("tool_cancelled", "first"), ("tool_finished", "second")]
        assert len(await asyncio.to_thread(server.pids)) == 1  # one process throughout: no reconnect
    finally:
        await server.aclose()
    assert _procs_with(marker) == []


async def test_caller_cancellation_also_sends_cancelled(peer, marker):
    server = MCPServer("once", peer["entry"])
    await server.start()
    try:
        with pytest.raises(TimeoutError):  # the caller's own deadline, shorter than the call's
            await asyncio.wait_for(
                server.call_tool("slow_append", {"text": "outer", "seconds": 30}, timeout_s=30.0), 1.0
            )
        assert await _wait_for(lambda: len(_cancel_notes(peer["notes"])) == 1)
        assert await _wait_for(lambda: any(r["event"] == "tool_cancelled" for r in _records(peer["notes"])))
        assert _lines(peer["effects"]) == ["outer"]
    finally:
        await server.aclose()
    assert _procs_with(marker) == []


async def test_dead_before_the_call_is_not_sent_and_not_replayed(peer, marker):
    server = MCPServer("once", peer["entry"])
    await server.start()
    try:
        [pid] = await asyncio.to_thread(server.pids)
        os.kill(pid, signal.SIGKILL)
        assert await _wait_for(
            lambda: not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
        )
        await asyncio.sleep(0.5)  # the transport sees EOF
        # The dead session is never sent anything: it is retired and the call goes to a fresh
        # session (a new process), transparently; the effect happens once.
        assert await server.call_tool(
            "slow_append", {"text": "after", "seconds": 0}, timeout_s=5.0, request_id="d-1"
        ) == {"line": "after"}
        assert server.reconnects == 1 and _lines(peer["effects"]) == ["after"]
        [new_pid] = await asyncio.to_thread(server.pids)
        assert new_pid != pid
    finally:
        await server.aclose()
    assert _procs_with(marker) == []


async def test_server_that_failed_to_start_is_not_sent(tmp_path, marker):
    server = MCPServer(
        "broken", {"command": sys.executable, "args": ["-c", "import sys; sys.exit(1)", marker]}, startup_timeout_s=5.0
    )
    with pytest.raises(ToolTransportError) as started:
        await server.start()
    assert started.value.sent is False
    try:
        with pytest.raises(ToolTransportError) as err:
            await server.call_tool("anything", {}, timeout_s=1.0)
        assert err.value.sent is False and "broken" in str(err.value)
    finally:
        await server.aclose()
    assert _procs_with(marker) == []


async def test_toolbox_spec_metadata_and_per_server_timeout(tmp_path, peer, marker):
    cfg = tmp_path / "mcp.json"
    cfg.write_text(
        json.dumps(
            {
                "mcpServers": {
                    "once": {
                        **peer["entry"],
                        "timeoutSeconds": 1,
                        "tools": {
                            "unannotated": {"side_effect": False, "timeout_s": 4},
                            "no_such_tool": {"idempotent": True},
                        },
                    }
                }
            }
        )
    )
    tb = await Toolbox.open(tmp_path / "data", cfg, timeout_s=10.0)
    try:
        assert set(tb.problems) == {"once:tools.no_such_tool"}, tb.problems
        slow, read, plain = (tb.registry.get(n) for n in ("slow_append", "read_lines", "unannotated"))
        # spec.timeout_s is the hard limit (max(answer timeout, 30 s)); the answer timeout is the server's 1 s
        assert (slow.side_effect, slow.idempotent, slow.artifact_field, slow.timeout_s) == (True, False, "line", 30.0)
        assert slow.requested_by == (r"\bappend\b.{0,40}\bline\b",)
        assert (read.side_effect, read.retry_safe, read.timeout_s) == (False, True, 30.0)
        assert plain.side_effect is False  # the config overrode the MCP default
        answer = {n: tb.mcp_replicas[n][0].timeout_s for n in ("slow_append", "read_lines", "unannotated")}
        assert answer == {"slow_append": 1.0, "read_lines": 1.0, "unannotated": 4.0}
        # The call uses the server's 1 s timeout, not the toolbox's 10 s; the effect ran once.
        t0 = time.monotonic()
        out = await tb.registry.call("slow_append", {"text": "via-registry", "seconds": 5}, "tb-1")
        assert out.status == "error" and out.error_kind in ("timeout", "outcome_unknown"), out
        assert time.monotonic() - t0 < 3.5
        assert await _wait_for(lambda: len(_cancel_notes(peer["notes"])) == 1)
        again = await tb.registry.call("slow_append", {"text": "via-registry", "seconds": 5}, "tb-1")
        assert again.status == "error"
        assert _lines(peer["effects"]) == ["via-registry"]
    finally:
        await tb.aclose()
    assert _procs_with(marker) == []
