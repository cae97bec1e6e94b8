"""PostgreSQL restarted in the middle of a ``hermes run`` turn (issue 22, the fault test).

``hermes run`` with ``HERMES_POSTGRES_URL`` (checkpoints and the idempotency ledger in that
database) against a scripted OpenAI-compatible model; its side-effect tool (an MCP server)
pauses mid-call while the test stops the PostgreSQL server and starts it again (``pg_ctl stop
-m fast``: every session is ended, as by a real restart). Then the tool answers and the turn
goes on: the checkpoint pool replaces its broken connections and the ledger reconnects to record
the outcome. Nothing acknowledged is lost (the checkpoints written before the restart are read
after it, the first turn's answer is in the thread) and the effect ran once (the ledger's record
is ``done``: recorded after the restart). A server stopped for good mid-turn stops the run
with one message naming the setting, the effect run once and nothing acknowledged lost.

The test starts its own PostgreSQL (pgserver), not the package's shared ``postgres_server``:
stopping that one would break the other tests' connections.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import subprocess
import sys
import tempfile
import textwrap
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.integration.test_repeat_after_crash import hermes_env, kill_started_from
from tests.support.scripted_openai import ScriptedOpenAI

pytestmark = pytest.mark.slow  # a PostgreSQL of its own, hermes processes, an MCP server

ROOT = Path(__file__).resolve().parents[2]
GREETING = "Say hello to the team"
HELLO = "Hello, team."
TASK = "Post the order count to the sales-team channel"
POST = {"channel": "sales-team", "text": "Order count: 42"}
ANSWER = "Posted the order count to #sales-team."
#: seconds a hermes process may take (imports, MCP start-up, a loaded 2-core machine)
PROCESS_S = 240

# A side effect that, the first time, says it started and waits for the test's go-ahead (the
# server is restarted meanwhile); later calls answer at once, so a repeat shows as a second line.
PAUSING = textwrap.dedent("""
    import os, sys, time
    from mcp.server.fastmcp import FastMCP
    from mcp.types import ToolAnnotations

    effects, started, release = sys.argv[1], sys.argv[2], sys.argv[3]
    mcp = FastMCP("pausing-chat", log_level="WARNING")

    @mcp.tool(annotations=ToolAnnotations(readOnlyHint=False, idempotentHint=False, destructiveHint=False),
              meta={"hermes/requested_by": [r"\\bpost\\b.{0,80}\\bchannel\\b"]})
    def announce(channel: str, text: str) -> dict:
        \"\"\"Posts text to a channel of the team chat (a side effect), then answers.\"\"\"
        first = not os.path.exists(started)
        with open(effects, "a") as f:
            f.write(channel + " " + text + "\\n")
        open(started, "w").close()
        deadline = time.monotonic() + 300
        while first and not os.path.exists(release) and time.monotonic() < deadline:
            time.sleep(0.05)
        return {"posted": text}

    mcp.run("stdio")
""")


def reply(body: dict[str, Any]) -> dict[str, Any]:
    """The model: a greeting for the first request; for the posting request, the tool call,
    then the answer once the request has a tool result."""
    messages = body["messages"]
    start = max((i for i, m in enumerate(messages) if m["role"] == "user"), default=0)
    if "order count" not in str(messages[start].get("content")):
        return {"content": HELLO}
    if any(m["role"] == "tool" for m in messages[start:]):
        return {"content": ANSWER}
    return {"tool_calls": [{"name": "announce", "arguments": POST}]}


@pytest.fixture
def own_postgres() -> Iterator[tuple[Any, str]]:
    """A PostgreSQL of this test only (pgserver, its own data directory and socket): yields
    ``(server, url of a new database)``; stopped and removed at the end."""
    import pgserver
    import psycopg

    pgdata = Path(tempfile.mkdtemp(prefix="hermes-pg-restart-"))
    try:
        server = pgserver.get_server(pgdata, cleanup_mode="stop")
    except Exception as exc:  # noqa: BLE001 - any failure to start is a reason to skip, named
        shutil.rmtree(pgdata, ignore_errors=True)
        pytest.skip(f"pgserver could not start PostgreSQL here: {type(exc).__name__}: {exc}")
    try:
        uri = server.get_uri()
        with psycopg.connect(uri, autocommit=True) as conn:
            conn.execute("CREATE DATABASE restart_test")
        yield server, uri.replace("/postgres?", "/restart_test?", 1)
    finally:
        server.cleanup()
        shutil.rmtree(pgdata, ignore_errors=True)


def restart(server: Any) -> tuple[int, int]:
    """Stop the server (fast mode: every session is ended) and start it again on the same data
    directory and socket. Returns the postmaster's pid before and after."""
    from pgserver._commands import pg_ctl  # type: ignore[attr-defined]  # pgserver sets its command wrappers at import

    before = server.get_pid()
    pg_ctl(["-w", "-m", "fast", "stop"], pgdata=server.pgdata, user=server.system_user)
    server.ensure_postgres_running()
    return before, server.get_pid()


def hermes(text: str, data: Path, *more: str) -> list[str]:
    return [sys.executable, "-m", "graph.cli", "run", text, "--thread", "t1", "--data-dir", str(data), *more]


def checkpoint_ids(url: str) -> set[str]:
    import psycopg

    with psycopg.connect(url) as con:
        return {r[0] for r in con.execute("SELECT checkpoint_id FROM checkpoints WHERE thread_id = 't1'")}


def thread_messages(url: str) -> list[str]:
    """The contents of the thread's messages at its head, read through Hermes's own saver."""
    from graph.postgres import open_postgres_checkpointer

    async def read() -> list[str]:
        async with open_postgres_checkpointer(url) as saver:
            tup = await saver.aget_tuple({"configurable": {"thread_id": "t1", "checkpoint_ns": ""}})
        assert tup is not None
        return [str(m.content) for m in tup.checkpoint["channel_values"].get("messages", [])]

    return asyncio.run(read())


def mcp_config(tmp_path: Path) -> tuple[Path, Path]:
    """The pausing chat server as the only MCP server: ``(config file, server script)``."""
    mcp_server = tmp_path / "pausing_chat.py"
    mcp_server.write_text(PAUSING)
    args = [str(mcp_server), *(str(tmp_path / n) for n in ("effects.txt", "started", "release"))]
    config = tmp_path / "mcp.json"
    config.write_text(
        json.dumps({"mcpServers": {"chat": {"command": sys.executable, "args": args}, "team_chat": {"enabled": False}}})
    )
    return config, mcp_server


def run_turn_with_fault(tmp_path: Path, env: dict[str, str], fault: Callable[[], None]) -> tuple[int, str, str]:
    """``hermes run TASK --json`` on thread t1; ``fault()`` runs while its tool call waits, then
    the tool answers. Returns ``(exit code, stdout, stderr)``."""
    started, release = tmp_path / "started", tmp_path / "release"
    proc = subprocess.Popen(
        hermes(TASK, tmp_path / "data", "--json"),
        env=env,
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + PROCESS_S
        while not started.exists():
            if proc.poll() is not None:
                raise AssertionError(f"hermes exited before its tool call: {proc.communicate()[1][-3000:]}")
            assert time.monotonic() < deadline, "the tool call was never reached"
            time.sleep(0.1)
        fault()
        release.touch()
        out, err = proc.communicate(timeout=PROCESS_S)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    return proc.returncode, out, err


def first_turn(tmp_path: Path, env: dict[str, str], url: str) -> set[str]:
    """The greeting turn on thread t1; returns its checkpoint ids (acknowledged: it answered)."""
    first = subprocess.run(
        hermes(GREETING, tmp_path / "data"),
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=PROCESS_S,
        check=False,
    )
    assert first.returncode == 0 and HELLO in first.stdout, first.stderr[-3000:]
    acknowledged = checkpoint_ids(url)
    assert acknowledged
    return acknowledged


def ledger_states(url: str) -> list[str]:
    import psycopg

    with psycopg.connect(url) as con:
        return [r[0] for r in con.execute("SELECT state FROM hermes_tool_requests WHERE tool = 'announce'")]


def turn_env(stub: ScriptedOpenAI, config: Path, url: str) -> dict[str, str]:
    """The turn's environment: the scripted model, the announce server (its call may wait out
    the fault: 300 s timeout) and the PostgreSQL at ``url``."""
    return hermes_env(
        stub,
        HERMES_MCP_CONFIG=str(config),
        HERMES_TOOL_TIMEOUTS=json.dumps({"announce": 300}),
        HERMES_POSTGRES_URL=url,
    )


def test_postgres_restarted_mid_turn_the_run_resumes_and_loses_nothing(tmp_path, own_postgres):
    server, url = own_postgres
    config, mcp_server = mcp_config(tmp_path)
    with ScriptedOpenAI(reply) as stub:
        env = turn_env(stub, config, url)
        pids: list[tuple[int, int]] = []
        try:
            acknowledged = first_turn(tmp_path, env, url)
            code, out, err = run_turn_with_fault(tmp_path, env, lambda: pids.append(restart(server)))
        finally:
            kill_started_from(mcp_server)
    assert pids and pids[0][0] != pids[0][1]  # a new postmaster: every session of the turn was ended
    assert code == 0, err[-3000:]
    summary = json.loads(out.strip().splitlines()[-1])
    assert summary["tools_called"] == {"announce": 1}, summary
    assert ANSWER in out, out[-2000:]
    # nothing acknowledged lost: every checkpoint of the first turn is still there
    assert acknowledged <= checkpoint_ids(url)
    messages = thread_messages(url)
    assert HELLO in messages and ANSWER in messages, messages
    assert ledger_states(url) == ["done"]  # recorded after the restart (the ledger reconnected)
    assert (tmp_path / "effects.txt").read_text().splitlines() == ["sales-team Order count: 42"]  # posted once


def test_postgres_down_for_good_mid_turn_stops_the_run_with_one_clear_message(tmp_path, own_postgres):
    """The server stopped while the side effect is in flight and not started again: the run
    stops (exit 1) with one message naming ``HERMES_POSTGRES_URL`` — not psycopg's bare
    ``PoolTimeout`` after each queued checkpoint write waited its own 30 s in turn (measured:
    304 s). Once the server is back, nothing acknowledged is lost and the effect ran once."""
    from pgserver._commands import pg_ctl  # type: ignore[attr-defined]  # set at import

    server, url = own_postgres
    config, mcp_server = mcp_config(tmp_path)
    with ScriptedOpenAI(reply) as stub:
        env = turn_env(stub, config, url)
        try:
            acknowledged = first_turn(tmp_path, env, url)
            code, out, err = run_turn_with_fault(
                tmp_path,
                env,
                lambda: pg_ctl(["-w", "-m", "fast", "stop"], pgdata=server.pgdata, user=server.system_user),
            )
        finally:
            kill_started_from(mcp_server)
            server.ensure_postgres_running()
    assert code == 1, (out[-2000:], err[-3000:])
    summary = json.loads(out.strip().splitlines()[-1])
    assert "HERMES_POSTGRES_URL" in summary["error"] and "PostgreSQL at" in summary["error"], summary
    assert "Traceback" not in out + err
    assert acknowledged <= checkpoint_ids(url)
    assert HELLO in thread_messages(url)
    assert (tmp_path / "effects.txt").read_text().splitlines() == ["sales-team Order count: 42"]
