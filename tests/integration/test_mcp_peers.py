"""Real MCP peers that no one here wrote, through the Toolbox (pinned by :mod:`tools.mcp.peers`):
``@modelcontextprotocol/server-everything`` over stdio, SSE and streamable HTTP (text, image
placeholder with a handle, structured content, resource links, progress), ``server-filesystem``
and PyPI ``mcp-server-time``. No process is left behind (psutil, by command line)."""

from __future__ import annotations

import asyncio
import json
import os
import socket
import subprocess
import time
from pathlib import Path

import psutil
import pytest

from tools.mcp import peers
from tools.toolbox import Toolbox

pytestmark = [pytest.mark.slow, pytest.mark.timeout(240)]


@pytest.fixture(scope="module", autouse=True)
def installed():
    try:
        peers.ensure()
    except RuntimeError as exc:
        pytest.skip(f"MCP peers not installable: {exc}")


def _ours() -> set[int]:
    """Live peer processes that are this test process's descendants or orphans (re-parented to
    init): a peer another session on the machine runs at the same time has its own parent."""
    home = str(peers.home())
    me = os.getpid()
    found = set()
    for p in psutil.process_iter(["cmdline"]):
        try:
            if (
                any(home in part for part in (p.info["cmdline"] or []))
                and p.status() != psutil.STATUS_ZOMBIE
                and (p.ppid() == 1 or any(a.pid == me for a in p.parents()))
            ):
                found.add(p.pid)
        except psutil.Error:
            continue
    return found


async def _open(tmp_path: Path, servers: dict) -> Toolbox:
    cfg = tmp_path / "mcp.json"
    cfg.write_text(json.dumps({"mcpServers": {"team_chat": {"enabled": False}, **servers}}))
    return await Toolbox.open(tmp_path / "data", cfg, timeout_s=15.0, startup_timeout_s=30.0)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


async def _check_everything(tb: Toolbox, tmp_path: Path) -> None:
    assert tb.problems == {}, tb.problems
    echo = await tb.registry.call("echo", {"message": "hi"}, "e1")
    assert echo.status == "ok" and "hi" in json.dumps(echo.content), echo
    total = await tb.registry.call("get_sum", {"a": 2, "b": 3}, "s1")
    assert total.status == "ok" and "5" in json.dumps(total.content), total
    image = await tb.registry.call("get_tiny_image", {}, "i1")
    assert image.status == "ok", image.error
    blocks = image.content if isinstance(image.content, list) else [image.content]
    placeholder = next(b for b in blocks if isinstance(b, dict) and b.get("type") == "image")
    assert placeholder["mime_type"] == "image/png" and Path(placeholder["handle"]).is_file()
    assert Path(placeholder["handle"]).parent == tmp_path / "data" / "mcp_media"
    assert len(json.dumps(image.content)) < 2000  # no base64 in what the model sees
    weather = await tb.registry.call("get_structured_content", {"location": "Chicago"}, "w1")
    assert weather.status == "ok" and "temperature" in json.dumps(weather.content), weather
    links = await tb.registry.call("get_resource_links", {"count": 2}, "r1")
    assert links.status == "ok" and "resource_link" in json.dumps(links.content), links


async def test_server_everything_over_stdio_with_progress(tmp_path):
    before = _ours()
    cmd = peers.everything_cmd("stdio")
    tb = await _open(
        tmp_path,
        {
            "everything": {
                "command": cmd[0],
                "args": cmd[1:],
                "pool": {"min": 1, "max": 2},
                "tools": {"trigger-long-running-operation": {"timeout_s": 1.5}},
            }
        },
    )
    try:
        await _check_everything(tb, tmp_path)
        # 3 s of work reporting progress every 0.5 s, answer timeout 1.5 s: not killed
        t0 = time.monotonic()
        long = await tb.registry.call("trigger_long_running_operation", {"duration": 3, "steps": 6}, "p1")
        assert long.status == "ok", long.error
        assert time.monotonic() - t0 >= 2.5 and tb.mcp.servers["everything"].progress
        assert tb.mcp_status()[0]["capabilities"]  # recorded from initialize
    finally:
        await tb.aclose()
    assert _ours() - before == set()


@pytest.mark.parametrize("transport", ["streamableHttp", "sse"])
async def test_server_everything_over_http(tmp_path, transport):
    port = _free_port()
    proc = subprocess.Popen(
        peers.everything_cmd(transport),
        env={**os.environ, "PORT": str(port)},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    url = f"http://127.0.0.1:{port}/" + ("mcp" if transport == "streamableHttp" else "sse")
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                    break
            except OSError:
                assert time.monotonic() < deadline and proc.poll() is None, "server-everything did not come up"
                await asyncio.sleep(0.2)
        tb = await _open(tmp_path, {"everything": {"url": url, "pool": {"min": 2}}})
        try:
            await _check_everything(tb, tmp_path)
            assert tb.mcp.servers["everything"].transport == ("sse" if transport == "sse" else "streamable_http")
            outs = await asyncio.gather(*(tb.registry.call("echo", {"message": str(i)}, f"c{i}") for i in range(6)))
            assert all(o.status == "ok" for o in outs)
        finally:
            await tb.aclose()
    finally:
        proc.kill()
        proc.wait(5)


async def test_server_filesystem_and_mcp_server_time(tmp_path):
    before = _ours()
    root = tmp_path / "shared"
    root.mkdir()
    (root / "notes.txt").write_text("hello from a file")
    fs = peers.filesystem_cmd(str(root))
    tm = peers.time_cmd()
    tb = await _open(
        tmp_path,
        {
            "fs": {"command": fs[0], "args": fs[1:], "pool": {"min": 1}},
            "time": {"command": tm[0], "args": ["--local-timezone", "UTC"], "pool": {"min": 1}},
        },
    )
    try:
        assert tb.problems == {}, tb.problems
        read = await tb.registry.call("read_text_file", {"path": str(root / "notes.txt")}, "f1")
        assert read.status == "ok" and "hello from a file" in json.dumps(read.content), read
        outside = await tb.registry.call("read_text_file", {"path": "/etc/hostname"}, "f2")
        assert outside.status == "error" and outside.error_kind == "tool_error"  # isError: access denied
        spec = tb.registry.get("write_file")
        assert spec.side_effect and spec.idempotent  # from its annotations (overwrite: idempotent)
        now = await tb.registry.call("get_current_time", {"timezone": "Asia/Tokyo"}, "t1")
        assert now.status == "ok" and now.content["timezone"] == "Asia/Tokyo", now
        assert not tb.registry.get("get_current_time").side_effect
    finally:
        await tb.aclose()
    assert _ours() - before == set()
