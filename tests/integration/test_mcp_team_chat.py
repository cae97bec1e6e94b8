"""Real MCP servers over stdio through the Toolbox: persistent session (one process), K5
namespacing, K6 schema normalisation, K7 isError, K8 dead / silent servers, K9 no orphans.

Every test closes its Toolbox and asserts with psutil that no process it started survives.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import sys
import textwrap
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from tools.mcp.config import team_chat_entry
from tools.toolbox import TEAM_CHAT_SERVER, Toolbox

pytestmark = pytest.mark.slow

# A low-level MCP server with the quirks of the failure catalogue. argv[1] = marker (for psutil).
QUIRKY = textwrap.dedent("""
    import asyncio, os, signal, subprocess, sys
    import mcp.types as types
    from mcp.server.lowlevel import Server
    from mcp.server.stdio import stdio_server

    server = Server("quirky")

    @server.list_tools()
    async def list_tools():
        return [
            types.Tool(name="say_hello", description="Says hello (K6: schema without properties).",
                       inputSchema={"$schema": "http://json-schema.org/draft-07/schema#", "type": "object"}),
            types.Tool(name="read_file", description="Reads a file; always reports isError (K7).",
                       inputSchema={"type": "object", "properties": {"path": {"type": "string"}},
                                    "required": ["path"]}),
            types.Tool(name="post_message", description="Same name as the team-chat tool (K5).",
                       inputSchema={"type": "object", "properties": {"channel": {"type": "string"},
                                    "text": {"type": "string"}}, "required": ["channel", "text"]}),
            types.Tool(name="crashMidCall", description="Exits the server process in the middle of a call (K8c).",
                       inputSchema={"type": "object", "properties": {}}),
            types.Tool(name="slow_tool", description="Sleeps longer than any call timeout.",
                       inputSchema={"type": "object", "properties": {}},
                       annotations=types.ToolAnnotations(readOnlyHint=True)),
        ]

    @server.call_tool()
    async def call_tool(name, arguments):
        if name == "say_hello":
            return [types.TextContent(type="text", text="hello")]
        if name == "read_file":
            return types.CallToolResult(content=[types.TextContent(type="text", text="file not found")],
                                        isError=True)
        if name == "post_message":
            return [types.TextContent(type="text", text="quirky got it")]
        if name == "crashMidCall":
            os._exit(0)
        if name == "slow_tool":
            await asyncio.sleep(1000)
        raise ValueError(f"unknown tool {name}")

    async def main():
        if os.environ.get("QUIRKY_ESCAPEE"):
            # A descendant in its own session that ignores SIGTERM (K9's worst case).
            subprocess.Popen([sys.executable, "-c",
                "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(1000)",
                sys.argv[1]], start_new_session=True)
        async with stdio_server() as (r, w):
            await server.run(r, w, server.create_initialization_options())

    asyncio.run(main())
""")


def _procs_with(marker: str) -> list[psutil.Process]:
    found = []
    for p in psutil.process_iter(["cmdline"]):
        try:
            if any(marker in part for part in (p.info["cmdline"] or [])) and p.status() != psutil.STATUS_ZOMBIE:
                found.append(p)
        except psutil.Error:
            continue
    return found


def _kill(procs: list[psutil.Process]) -> None:
    for p in procs:
        with contextlib.suppress(psutil.Error):
            p.kill()


@pytest.fixture
def marker() -> Iterator[str]:
    """A unique string put on the command line of every process a test starts."""
    m = f"hermes-test-{uuid.uuid4().hex}"
    yield m
    leftovers = _procs_with(m)
    _kill(leftovers)
    assert not leftovers, f"test left processes behind: {[p.pid for p in leftovers]}"


@pytest.fixture
def quirky_script(tmp_path: Path) -> Path:
    p = tmp_path / "quirky_server.py"
    p.write_text(QUIRKY)
    return p


def _config(tmp_path: Path, servers: dict) -> Path:
    path = tmp_path / "mcp.json"
    path.write_text(json.dumps({"mcpServers": servers}))
    return path


def _team_chat(data_dir: Path, marker: str) -> dict:
    entry = team_chat_entry(data_dir)
    entry["args"] = [*entry["args"], marker]  # argv ignored by the server; lets psutil find it
    return entry


async def test_default_toolbox_post_then_list_in_one_server_process(tmp_path):
    data = tmp_path / "data"
    tb = await Toolbox.open(data)
    try:
        server = tb.mcp.servers[TEAM_CHAT_SERVER]
        assert tb.problems == {}
        assert {
            "post_message",
            "list_messages",
            "query_database",
            "generate_report",
            "schedule_reminder",
            "list_reminders",
        } <= set(tb.registry.names())
        assert tb.registry.get("post_message").source == "mcp:team_chat"
        assert server.capabilities.get("tools") is not None and server.protocol_version
        # The server's annotations and _meta make the ToolSpec metadata (no names in the graph).
        post, listing = tb.registry.get("post_message"), tb.registry.get("list_messages")
        assert (post.side_effect, post.idempotent, post.retry_safe) == (True, False, False)
        assert (listing.side_effect, listing.retry_safe) == (False, True)
        asks = post.request_patterns()
        for clause in ("post it to the project group", "share the report with the team", "把报告发到项目群"):
            assert any(p.search(clause) for p in asks), clause
        assert not any(p.search("what is in the sales report?") for p in asks)
        pids_before = await asyncio.to_thread(server.pids)
        assert len(pids_before) == 1
        for i in range(3):
            out = await tb.registry.call("post_message", {"channel": "sales-team", "text": f"report {i}"}, f"p{i}")
            assert out.status == "ok", out.error
            assert out.content["channel"] == "sales-team" and out.content["text"] == f"report {i}"
        listed = await tb.registry.call("list_messages", {"channel": "sales-team", "limit": 2}, "l1")
        assert listed.status == "ok"
        assert [m["text"] for m in listed.content["messages"]] == ["report 1", "report 2"]
        # One persistent server process across all calls (no process per call).
        assert await asyncio.to_thread(server.pids) == pids_before
        children = [
            c
            for c in psutil.Process().children(recursive=True)
            if "tools.mcp.servers.team_chat" in " ".join(c.cmdline())
        ]
        assert [c.pid for c in children] == pids_before
        # Persisted in SQLite in data_dir.
        assert (data / "team_chat.db").exists()
        # Invalid arguments are refused by the schema before reaching the server.
        bad = await tb.registry.call("post_message", {"channel": "x"}, "p-bad")
        assert bad.error_kind == "invalid_arguments" and "'text' is a required property" in bad.error
    finally:
        await tb.aclose()
    assert all(not psutil.pid_exists(p) or psutil.Process(p).status() == psutil.STATUS_ZOMBIE for p in pids_before)
    await tb.aclose()  # idempotent


async def test_quirky_server_k5_k6_k7_and_timeout(tmp_path, quirky_script, marker):
    data = tmp_path / "data"
    cfg = _config(
        tmp_path,
        {
            "team_chat": _team_chat(data, marker),
            "quirky": {"command": sys.executable, "args": [str(quirky_script), marker]},
        },
    )
    tb = await Toolbox.open(data, cfg, timeout_s=2.0)
    try:
        assert tb.problems == {}, tb.problems
        names = tb.registry.names()
        # K5: team_chat (earlier in config) keeps post_message; quirky's is namespaced, not shadowed.
        assert tb.registry.get("post_message").source == "mcp:team_chat"
        assert tb.registry.get("quirky__post_message").source == "mcp:quirky"
        q = await tb.registry.call("quirky__post_message", {"channel": "c", "text": "t"}, "k5")
        assert q.content == "quirky got it"
        # camelCase MCP names are converted to the snake_case convention, calls use the original.
        assert "crash_mid_call" in names
        # K6: normalised schema, callable with {}.
        hello = tb.registry.get("say_hello")
        assert hello.parameters == {"type": "object", "properties": {}}
        tool_json = next(t for t in tb.registry.openai_tools() if t["function"]["name"] == "say_hello")
        assert "$schema" not in json.dumps(tool_json)
        out = await tb.registry.call("say_hello", {}, "k6")
        assert out.status == "ok" and out.content == "hello"
        # K7: isError → error outcome with the server's text; the run goes on.
        k7 = await tb.registry.call("read_file", {"path": "/nope"}, "k7")
        assert k7.status == "error" and k7.error_kind == "tool_error" and "file not found" in k7.error
        # A (read-only) call that never answers → timeout, bounded; the session stays usable.
        t0 = time.monotonic()
        slow = await tb.registry.call("slow_tool", {}, "slow")
        assert slow.error_kind == "timeout" and time.monotonic() - t0 < 6
        assert (await tb.registry.call("say_hello", {}, "after-timeout")).status == "ok"
        # K8(c): the server exits mid-call → an error naming it; pending call not left hanging. The
        # tool is unannotated (MCP default: a side effect) and the request had been sent, so its
        # outcome is unknown (never retried), not a plain transport error.
        assert tb.registry.get("crash_mid_call").side_effect
        t0 = time.monotonic()
        crash = await tb.registry.call("crash_mid_call", {}, "k8c")
        assert crash.error_kind == "outcome_unknown" and "quirky" in crash.error and time.monotonic() - t0 < 6
        # The next call is served by the pool (the dead session is retired, its process gone, and
        # replaced in the background: the pool is back at its min of 2 sessions, no lifetime cap).
        quirky = tb.mcp.servers["quirky"]
        later = await tb.registry.call("say_hello", {}, "after-crash")
        assert later.status == "ok" and later.content == "hello", later.error
        assert quirky.reconnects == 1
        deadline = time.monotonic() + 15
        while quirky.status()["pool"]["live"] != 2 and time.monotonic() < deadline:
            await asyncio.sleep(0.2)
        assert len(await asyncio.to_thread(quirky.pids)) == 2 and quirky.status()["pool"]["live"] == 2
        # The other server keeps working.
        ok = await tb.registry.call("post_message", {"channel": "general", "text": "still here"}, "tc")
        assert ok.status == "ok"
    finally:
        await tb.aclose()
    assert _procs_with(marker) == []


#: Start-up bound of the K8 test = this many times team_chat's start measured in the same run.
STARTUP_MARGIN = 3


def _team_chat_only(root: Path, marker: str) -> Path:
    root.mkdir()
    return _config(root, {"team_chat": _team_chat(root / "data", marker)})


async def _team_chat_start_s(root: Path, marker: str) -> float:
    """Seconds team_chat alone takes to start here now (Toolbox.open + close, in ``root``;
    asserts it started)."""
    cfg = await asyncio.to_thread(_team_chat_only, root, marker)
    t0 = time.monotonic()
    tb = await Toolbox.open(root / "data", cfg, startup_timeout_s=120)
    took = time.monotonic() - t0
    try:
        assert tb.problems == {}, tb.problems
    finally:
        await tb.aclose()
    return took


async def test_k8_dead_and_silent_servers_fail_bounded_while_team_chat_works(tmp_path, marker):
    data = tmp_path / "data"
    cfg = _config(
        tmp_path,
        {
            "team_chat": _team_chat(data, marker),
            # (a) exits with code 1 at start
            "exits_at_start": {"command": sys.executable, "args": ["-c", "import sys; sys.exit(1)", marker]},
            # (b) reads stdin and never answers initialize (and ignores SIGTERM)
            "never_answers": {
                "command": sys.executable,
                "args": [
                    "-c",
                    (
                        "import signal, sys, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
                        "sys.stdin.read(); time.sleep(1000)"
                    ),
                    marker,
                ],
            },
            "no_such_binary": {"command": f"/nonexistent/{marker}", "args": []},
        },
    )
    # The start-up bound is what ends `never_answers`; it must also leave team_chat time to
    # start on this machine now (under load a fixed 3 s did not: team_chat failed too). It is
    # sized from team_chat's own start in this run, never asserted on: the bound shows in
    # the problem text, and a hang would end at the test's timeout.
    bound = round(max(3.0, STARTUP_MARGIN * await _team_chat_start_s(tmp_path / "baseline", marker)), 1)
    tb = await Toolbox.open(data, cfg, timeout_s=2.0, startup_timeout_s=bound)
    try:
        assert set(tb.problems) == {"exits_at_start", "never_answers", "no_such_binary"}, tb.problems
        for name, reason in tb.problems.items():
            assert f"'{name}'" in reason
        assert f"no answer to initialize within {bound:g} s" in tb.problems["never_answers"]
        # The failed servers' processes are gone already (no orphans from failed starts).
        assert [p for p in _procs_with(marker) if "team_chat" not in " ".join(p.cmdline())] == []
        out = await tb.registry.call("post_message", {"channel": "sales", "text": "hello"}, "m1")
        assert out.status == "ok", out.error
    finally:
        await tb.aclose()
    assert _procs_with(marker) == []


async def test_k9_no_orphans_from_wrapper_shell_or_escaped_descendants(tmp_path, quirky_script, marker):
    data = tmp_path / "data"
    tc = team_chat_entry(data)
    cfg = _config(
        tmp_path,
        {
            # K9: a shell that leaves `sleep` behind and execs the real server.
            "wrapped": {
                "command": "sh",
                "args": ["-c", f"sleep 1000 & exec {sys.executable} -m tools.mcp.servers.team_chat {marker}"],
                "env": tc["env"],
                "cwd": tc["cwd"],
                "pool": {"min": 1},
            },
            # A server with a SIGTERM-ignoring descendant in its own session.
            "escapee": {
                "command": sys.executable,
                "args": [str(quirky_script), marker],
                "env": {"QUIRKY_ESCAPEE": "1"},
                "pool": {"min": 1},
            },
        },
    )
    tb = await Toolbox.open(data, cfg, timeout_s=3.0)
    try:
        assert tb.problems == {}, tb.problems
        wrapped_pids = await asyncio.to_thread(tb.mcp.servers["wrapped"].pids)
        escapee_pids = await asyncio.to_thread(tb.mcp.servers["escapee"].pids)
        assert len(wrapped_pids) == 2  # the server and its `sleep`
        assert len(escapee_pids) == 2  # the server and its escaped child
        assert (await tb.registry.call("list_messages", {"channel": "x"}, "w")).status == "ok"
        # K9: force a reconnect: the old trees are gone, the new ones serve calls.
        for name in ("wrapped", "escapee"):
            await tb.mcp.servers[name].reconnect()
        for pid in wrapped_pids + escapee_pids:
            assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
        new_pids = await asyncio.to_thread(tb.mcp.servers["wrapped"].pids) + await asyncio.to_thread(
            tb.mcp.servers["escapee"].pids
        )
        assert len(new_pids) == 4 and not set(new_pids) & set(wrapped_pids + escapee_pids)
        assert (await tb.registry.call("list_messages", {"channel": "x"}, "w2")).status == "ok"
        wrapped_pids, escapee_pids = new_pids, []
    finally:
        t0 = time.monotonic()
        await tb.aclose()
        closed_in = time.monotonic() - t0
    assert closed_in < 15
    for pid in wrapped_pids + escapee_pids:
        assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    assert _procs_with(marker) == []


async def test_calls_from_other_tasks_and_concurrently(tmp_path):
    tb = await Toolbox.open(tmp_path / "data")
    try:

        async def post(i: int):
            return await tb.registry.call("post_message", {"channel": "c", "text": str(i)}, f"r{i}")

        outs = await asyncio.gather(*(asyncio.create_task(post(i)) for i in range(8)))
        assert all(o.status == "ok" for o in outs)
        listed = await tb.registry.call("list_messages", {"channel": "c", "limit": 50}, "l")
        assert sorted(m["text"] for m in listed.content["messages"]) == sorted(str(i) for i in range(8))
    finally:
        await tb.aclose()


async def test_async_safe_under_blockbuster_like_langgraph_dev(tmp_path, marker):
    """``langgraph dev`` raises BlockingError on blocking I/O in the event loop (BlockBuster with
    no excluded modules); open, calls (ok, error, timeout) and close must not trip it."""
    import os

    from blockbuster import BlockBuster

    from tools.builtin.demo_db import generate_sales_db

    data = tmp_path / "data"
    await asyncio.to_thread(data.mkdir)
    db = await asyncio.to_thread(generate_sales_db, tmp_path / "user" / "sales.db", 2)
    relative_db = os.path.relpath(db)  # resolved inside Toolbox.open's thread, not on the loop
    cfg = _config(
        tmp_path,
        {
            "team_chat": _team_chat(data, marker),
            "exits_at_start": {"command": sys.executable, "args": ["-c", "import sys; sys.exit(1)", marker]},
        },
    )
    bb = BlockBuster(excluded_modules=[])
    bb.activate()
    try:
        tb = await Toolbox.open(data, cfg, timeout_s=3.0, startup_timeout_s=5.0, database=relative_db)
        try:
            assert set(tb.problems) == {"exits_at_start"}, tb.problems
            assert (await tb.registry.call("describe_database", {}, "dd")).status == "ok"
            assert (
                await tb.registry.call("query_database", {"sql": "SELECT COUNT(*) FROM orders"}, "q")
            ).status == "ok"
            report = await tb.registry.call(
                "generate_report",
                {"title": "Orders", "queries": [{"label": "Orders", "sql": "SELECT COUNT(*) AS n FROM orders"}]},
                "g",
            )
            assert report.status == "ok", report.error
            assert (await tb.registry.call("post_message", {"channel": "c", "text": "t"}, "p")).status == "ok"
            assert (await tb.registry.call("query_database", {"sql": "DROP TABLE orders"}, "d")).status == "error"
        finally:
            await tb.aclose()
    finally:
        bb.deactivate()


async def test_calls_from_another_event_loop_are_forwarded(tmp_path):
    """A toolbox opened on one loop (e.g. the server's main loop) serves calls made on another
    loop (langgraph-api can run graphs on isolated loops)."""
    import threading

    owner = asyncio.new_event_loop()
    thread = threading.Thread(target=owner.run_forever, daemon=True)
    thread.start()
    try:
        tb = await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(Toolbox.open(tmp_path / "data"), owner))
        pids = await asyncio.to_thread(tb.mcp.servers[TEAM_CHAT_SERVER].pids)
        out = await tb.registry.call("post_message", {"channel": "x", "text": "from another loop"}, "r1")
        assert out.status == "ok", out.error
        listed = await tb.registry.call("list_messages", {"channel": "x"}, "r2")
        assert listed.content["messages"][-1]["text"] == "from another loop"
        await tb.aclose()
        assert all(not psutil.pid_exists(p) or psutil.Process(p).status() == psutil.STATUS_ZOMBIE for p in pids)
    finally:
        owner.call_soon_threadsafe(owner.stop)
        thread.join(5)
        owner.close()
