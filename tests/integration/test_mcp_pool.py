"""The MCP pool with real server processes (FastMCP written here): sessions grow under load and
are replaced when they die; a restarted streamable-HTTP server ("Session terminated") is
reconnected transparently with no repeated effect; the circuit breaker parks a server that
cannot start and probes it back (no lifetime cap); replicas fail over only when safe; progress
keeps a long call alive up to its hard limit; ``tools/list_changed`` re-registers tools.

Every test stops what it starts and checks with psutil that no process is left."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import textwrap
import time
import uuid
from pathlib import Path

import httpx
import psutil
import pytest

from tools.toolbox import Toolbox

pytestmark = [pytest.mark.slow, pytest.mark.timeout(180)]

# argv: effects file, transport ("stdio" | "streamable-http" | "sse"), port, marker (ignored)
SERVER = textwrap.dedent('''
    import asyncio, os, sys, time
    from mcp.server.fastmcp import Context, FastMCP
    from mcp.types import ToolAnnotations

    effects, transport = sys.argv[1], sys.argv[2]
    port = int(sys.argv[3]) if len(sys.argv) > 3 and sys.argv[3].isdigit() else 0
    mcp = FastMCP("pool-peer", host="127.0.0.1", port=port or 8000, log_level="WARNING")
    RO = ToolAnnotations(readOnlyHint=True)

    @mcp.tool(annotations=RO)
    def whoami() -> str:
        """Returns this server's name and process id."""
        return f"{os.environ.get('PEER_NAME', 'peer')}:{os.getpid()}"

    @mcp.tool(annotations=RO)
    def block(seconds: float = 0.5) -> int:
        """Blocks the server process for `seconds` (a synchronous tool), returns its pid."""
        time.sleep(seconds)
        return os.getpid()

    @mcp.tool(annotations=ToolAnnotations(readOnlyHint=False, idempotentHint=False))
    def note(text: str) -> str:
        """Appends one line to the effects file (a side effect)."""
        if os.environ.get("PEER_CRASH"):
            os._exit(1)
        with open(effects, "a") as f:
            f.write(text + "\\n")
        return f"noted by {os.environ.get('PEER_NAME', 'peer')}"

    @mcp.tool(annotations=RO)
    def lookup(key: str) -> str:
        """Read-only lookup; the replica with PEER_CRASH set dies in the middle of it."""
        if os.environ.get("PEER_CRASH"):
            os._exit(1)
        return f"{key}@{os.environ.get('PEER_NAME', 'peer')}"

    @mcp.tool(annotations=RO)
    async def work(ctx: Context, seconds: float = 3.0, steps: int = 6, report: bool = True) -> str:
        """Works for `seconds`, reporting progress `steps` times when `report`."""
        for i in range(steps):
            await asyncio.sleep(seconds / steps)
            if report:
                await ctx.report_progress(i + 1, steps, f"step {i + 1}")
        return "done"

    @mcp.tool()
    async def grow(ctx: Context) -> str:
        """Adds the tool `extra` and tells the client (notifications/tools/list_changed)."""
        def extra() -> str:
            """A tool that did not exist at start-up, added by grow."""
            return "extra!"
        mcp.add_tool(extra, annotations=RO)
        await ctx.session.send_tool_list_changed()
        return "grown"

    mcp.run(transport)
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
def marker():
    m = f"hermes-pool-{uuid.uuid4().hex}"
    yield m
    leftovers = _procs_with(m)
    for p in leftovers:
        with contextlib.suppress(psutil.Error):
            p.kill()
    assert not leftovers, f"test left processes behind: {[p.pid for p in leftovers]}"


@pytest.fixture
def script(tmp_path: Path) -> Path:
    path = tmp_path / "pool_peer.py"
    path.write_text(SERVER)
    return path


def _stdio(script: Path, effects: Path, marker: str, **extra) -> dict:
    env = extra.pop("env", {})
    return {"command": sys.executable, "args": [str(script), str(effects), "stdio", "-", marker], "env": env, **extra}


async def _open(tmp_path: Path, servers: dict, **kw) -> Toolbox:
    cfg = tmp_path / "mcp.json"
    cfg.write_text(json.dumps({"mcpServers": {"team_chat": {"enabled": False}, **servers}}))
    return await Toolbox.open(tmp_path / "data", cfg, **{"timeout_s": 5.0, **kw})


async def _until(predicate, timeout_s: float = 15.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return True
        await asyncio.sleep(0.1)
    return predicate()


async def test_pool_grows_under_load_and_replaces_dead_sessions(tmp_path, script, marker):
    tb = await _open(tmp_path, {"peer": _stdio(script, tmp_path / "fx", marker, pool={"min": 2, "max": 4})})
    try:
        server = tb.mcp.servers["peer"]
        assert await _until(lambda: server.status()["pool"]["live"] == 2)
        t0 = time.monotonic()
        outs = await asyncio.gather(*(tb.registry.call("block", {"seconds": 0.6}, f"b{i}") for i in range(8)))
        elapsed = time.monotonic() - t0
        assert all(o.status == "ok" for o in outs), [o.error for o in outs]
        used = {o.content for o in outs}
        assert 2 <= len(used) <= 4 and server.status()["pool"]["live"] <= 4
        assert elapsed < 8 * 0.6, elapsed  # concurrent sessions, not one call at a time
        # A session's process dies between calls: the next calls never notice (retired, replaced).
        pids = await asyncio.to_thread(server.pids)
        for pid in pids[:2]:
            os.kill(pid, signal.SIGKILL)
        await asyncio.sleep(0.3)
        again = await asyncio.gather(*(tb.registry.call("whoami", {}, f"w{i}") for i in range(4)))
        assert all(o.status == "ok" for o in again), [o.error for o in again]
        assert server.reconnects >= 1 and server.state == "ready"
        status = tb.mcp_status()[0]
        assert status["name"] == "peer" and status["calls"] >= 12 and status["breaker"]["state"] == "closed"
    finally:
        await tb.aclose()
    assert _procs_with(marker) == []


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _start_http(script: Path, effects: Path, port: int, marker: str) -> subprocess.Popen:
    proc = subprocess.Popen(
        [sys.executable, str(script), str(effects), "streamable-http", str(port), marker],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        try:
            httpx.get(f"http://127.0.0.1:{port}/mcp", timeout=0.5)
            return proc
        except httpx.HTTPError as err:
            if proc.poll() is not None:
                raise RuntimeError("HTTP peer exited") from err
            time.sleep(0.2)
    proc.kill()
    raise RuntimeError("HTTP peer did not come up")


def _stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(5)


async def test_http_server_restarted_between_calls_session_terminated_is_transparent(tmp_path, script, marker):
    effects, port = tmp_path / "fx", _free_port()
    proc = await asyncio.to_thread(_start_http, script, effects, port, marker)
    try:
        tb = await _open(tmp_path, {"web": {"url": f"http://127.0.0.1:{port}/mcp", "pool": {"min": 1}}})
        try:
            assert (await tb.registry.call("note", {"text": "one"}, "n1")).status == "ok"
            # The stateful server restarts: it no longer knows the session id ("Session terminated").
            await asyncio.to_thread(_stop, proc)
            proc = await asyncio.to_thread(_start_http, script, effects, port, marker)
            t0 = time.monotonic()
            two = await tb.registry.call("note", {"text": "two"}, "n2")  # a side effect: it did not run before
            assert two.status == "ok", two.error
            assert time.monotonic() - t0 < 10
            assert effects.read_text().splitlines() == ["one", "two"]  # exactly once each
            assert tb.mcp.servers["web"].reconnects >= 1
        finally:
            await tb.aclose()
    finally:
        await asyncio.to_thread(_stop, proc)
    assert _procs_with(marker) == []


async def test_breaker_parks_a_dead_server_and_probes_it_back_repeatedly(tmp_path, script, marker):
    flag = tmp_path / "down"
    entry = {
        "command": "sh",
        "args": [
            "-c",
            f'test -e "{flag}" && exit 1; exec "{sys.executable}" "{script}" "{tmp_path / "fx"}" stdio - {marker}',
        ],
        "pool": {"min": 1, "max": 2},
        "breaker": {"failures": 2, "cooldownSeconds": 0.5, "maxCooldownSeconds": 1},
    }
    tb = await _open(tmp_path, {"flappy": entry}, startup_timeout_s=5.0)
    try:
        server = tb.mcp.servers["flappy"]
        for round_ in range(3):  # more rounds than any reconnect cap the old client had
            assert (await tb.registry.call("whoami", {}, f"ok{round_}")).status == "ok"
            flag.touch()
            for pid in await asyncio.to_thread(server.pids):
                os.kill(pid, signal.SIGKILL)
            await asyncio.sleep(0.3)
            first = await tb.registry.call("whoami", {}, f"down{round_}")
            assert first.status == "error" and first.error_kind == "transport" and "flappy" in first.error
            assert await _until(lambda: server.breaker.parked, 5)
            t0 = time.monotonic()
            parked = await tb.registry.call("whoami", {}, f"parked{round_}")
            assert parked.error_kind == "transport" and "parked" in parked.error and time.monotonic() - t0 < 0.5
            assert server.status()["state"] == "parked"
            flag.unlink()
            assert await _until(lambda: server.state == "ready", 10), server.status()
        assert server.breaker.trips >= 3
    finally:
        await tb.aclose()
    assert _procs_with(marker) == []


async def test_replicas_are_one_tool_and_fail_over_only_when_safe(tmp_path, script, marker):
    fx_a, fx_b = tmp_path / "fx_a", tmp_path / "fx_b"
    servers = {
        "alpha": _stdio(
            script, fx_a, marker, env={"PEER_NAME": "alpha", "PEER_CRASH": "1"}, replicaGroup="peers", pool={"min": 1}
        ),
        "beta": _stdio(script, fx_b, marker, env={"PEER_NAME": "beta"}, replicaGroup="peers", pool={"min": 1}),
    }
    tb = await _open(tmp_path, servers)
    try:
        assert "lookup" in tb.registry and "alpha__lookup" not in tb.registry and "beta__lookup" not in tb.registry
        assert tb.registry.get("lookup").source == "mcp:alpha+beta"
        alpha, beta = tb.mcp.servers["alpha"], tb.mcp.servers["beta"]
        alpha.score.latency_ema, beta.score.latency_ema = 0.001, 0.5  # alpha looks best: it is tried first
        # read-only: alpha dies mid-call → the call moves to beta and succeeds
        out = await tb.registry.call("lookup", {"key": "k"}, "l1")
        assert out.status == "ok" and out.content == "k@beta", out.error
        assert alpha.score.failures == 1 and alpha.score.success < 1.0
        # a side effect that may have run on alpha is never sent to beta: outcome unknown
        assert await _until(lambda: alpha.state == "ready" and alpha.status()["pool"]["live"] >= 1)
        alpha.score.latency_ema, alpha.score.success = 0.0001, 1.0
        wrote = await tb.registry.call("note", {"text": "once"}, "n1")
        assert wrote.status == "error" and wrote.error_kind == "outcome_unknown", wrote
        assert not fx_b.exists() and not fx_a.exists()
        # scores and breakers are visible
        names = [s["name"] for s in tb.mcp_status()]
        assert names == ["alpha", "beta"] and all("score" in s and "breaker" in s for s in tb.mcp_status())
    finally:
        await tb.aclose()
    assert _procs_with(marker) == []


async def test_progress_keeps_a_long_call_alive_up_to_its_hard_limit(tmp_path, script, marker):
    entry = _stdio(
        script, tmp_path / "fx", marker, pool={"min": 1}, timeoutSeconds=1, tools={"work": {"max_timeout_s": 2.5}}
    )
    tb = await _open(tmp_path, {"peer": entry})
    try:
        t0 = time.monotonic()
        ok = await tb.registry.call("work", {"seconds": 2.0, "steps": 8}, "w1")  # 2 s > 1 s, progress every 0.25 s
        assert ok.status == "ok" and ok.content == "done", ok.error
        assert 1.8 < time.monotonic() - t0 < 2.5
        assert tb.mcp.servers["peer"].progress  # progress was recorded (and logged)
        t0 = time.monotonic()
        silent = await tb.registry.call("work", {"seconds": 2.0, "steps": 1, "report": False}, "w2")
        assert silent.error_kind == "timeout" and "no answer within 1 s" in silent.error
        assert time.monotonic() - t0 < 1.8
        t0 = time.monotonic()
        long = await tb.registry.call("work", {"seconds": 6.0, "steps": 24}, "w3")
        assert long.error_kind == "timeout" and "hard limit of 2.5 s" in long.error, long.error
        assert 2.3 < time.monotonic() - t0 < 4.0
    finally:
        await tb.aclose()
    assert _procs_with(marker) == []


async def test_tools_list_changed_re_registers(tmp_path, script, marker):
    tb = await _open(tmp_path, {"peer": _stdio(script, tmp_path / "fx", marker, pool={"min": 1, "max": 1})})
    try:
        assert "extra" not in tb.registry
        assert (await tb.registry.call("grow", {}, "g1")).status == "ok"
        assert await _until(lambda: "extra" in tb.registry, 5)
        out = await tb.registry.call("extra", {}, "e1")
        assert out.status == "ok" and out.content == "extra!"
        assert "whoami" in tb.registry  # the others are still there
    finally:
        await tb.aclose()
    assert _procs_with(marker) == []
