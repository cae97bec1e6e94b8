"""Remote backend against the real reference server (``python -m tools.remote_server``) started
on 127.0.0.1:<free port> as its own process and stopped after each test: results, tool errors,
timeouts, retries on 5xx (idempotent per request_id: a lost answer is replayed, not re-run),
refusals, a dead endpoint, and the Toolbox option."""

from __future__ import annotations

import asyncio
import contextlib
import os
import select
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.integration.test_executors_subprocess import write_helpers
from tools.errors import ToolFailed, ToolTimeout
from tools.executors import make_executor
from tools.executors.remote import RemoteExecutor
from tools.procs import kill_process_tree
from tools.remote_server import READY_PREFIX

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[2]


@contextlib.contextmanager
def remote_server(data: Path, helpers: Path, *extra: str, env: dict[str, str] | None = None):
    """Start the reference server; yield its URL; stop it (SIGTERM, then the whole tree).
    ``env``: added to the server's environment (e.g. its HERMES_DATABASE)."""
    argv = [
        sys.executable,
        "-m",
        "tools.remote_server",
        "--data-dir",
        str(data),
        "--port",
        "0",
        "--allow",
        "exec_helpers:",
        "--allow",
        "tools.builtin.",
        "--extra-path",
        str(helpers),
        *extra,
    ]
    proc = subprocess.Popen(
        argv,
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT), **(env or {})},
        start_new_session=True,
    )
    assert proc.stdout is not None and proc.stderr is not None  # both piped
    try:
        deadline = time.monotonic() + 30
        url = None
        while url is None and time.monotonic() < deadline:
            ready, _, _ = select.select([proc.stdout], [], [], 0.2)
            if ready:
                line = proc.stdout.readline()
                if line.startswith(READY_PREFIX):
                    url = line.split()[1]
                elif not line and proc.poll() is not None:
                    break
        assert url, f"server did not start: {proc.stderr.read() if proc.poll() is not None else 'timeout'}"
        yield url
    finally:
        proc.terminate()
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(5)
        kill_process_tree(proc.pid, 1.0, pgid=proc.pid)
        proc.wait(5)
        proc.stdout.close()
        proc.stderr.close()


@pytest.fixture
def dirs(tmp_path: Path):
    helpers = write_helpers(tmp_path)
    data = tmp_path / "server-data"
    data.mkdir()
    return data, helpers


async def call(ex, entry, args=None, *, timeout_s=10.0, request_id="r1"):
    return await ex.run(f"exec_helpers:{entry}", args or {}, timeout_s=timeout_s, request_id=request_id)


async def test_same_tool_same_interface_results_and_errors(dirs):
    data, helpers = dirs
    with remote_server(data, helpers) as url:
        ex = make_executor("remote", data, remote_url=url)
        try:
            assert await call(ex, "echo", {"a": 1, "b": "x"}) == {"a": 1, "b": "x"}
            out = await call(ex, "whoami", request_id="w")
            assert Path(out["cwd"]) == data.resolve() and out["pid"] != os.getpid()
            with pytest.raises(ToolFailed, match="PermissionError"):  # the server's workers are confined
                await call(ex, "read_file", {"path": "../secret.txt"}, request_id="rf")
            with pytest.raises(ToolFailed, match="MemoryError"):
                await call(ex, "memory_hog", {"mb": 4096}, request_id="mh")
        finally:
            await ex.aclose()


async def test_timeout_is_enforced_on_the_server_and_reported_as_tool_timeout(dirs):
    data, helpers = dirs
    with remote_server(data, helpers) as url:
        ex = RemoteExecutor(url)
        try:
            start = time.monotonic()
            with pytest.raises(ToolTimeout):
                await call(ex, "sleep_ignoring_term", {"pid_file": "pid"}, timeout_s=1.0, request_id="slow")
            assert time.monotonic() - start < 2.0
        finally:
            await ex.aclose()
        pid = int((data / "pid").read_text())
        time.sleep(0.2)
        from tests.integration.test_executors_subprocess import gone

        assert gone(pid)


async def test_503s_are_retried(dirs):
    data, helpers = dirs
    with remote_server(data, helpers, "--fault-503", "2") as url:
        ex = RemoteExecutor(url, retries=3)
        try:
            assert await call(ex, "append_line", {"path": "log.txt", "line": "once"}) == {"appended": "once"}
            assert ex.attempts == 3
        finally:
            await ex.aclose()
    assert (data / "log.txt").read_text() == "once\n"


async def test_lost_answer_is_replayed_not_rerun(dirs):
    """The server runs the side effect, then the answer is lost (500): the client retries with
    the same request_id and gets the recorded result; the line is written once."""
    data, helpers = dirs
    with remote_server(data, helpers, "--fault-after-run", "1") as url:
        ex = RemoteExecutor(url, retries=3)
        try:
            out = await call(ex, "append_line", {"path": "log.txt", "line": "pay 10"}, request_id="pay-1")
            assert out == {"appended": "pay 10"} and ex.attempts == 2
            dupes = await asyncio.gather(
                *(call(ex, "append_line", {"path": "log.txt", "line": "pay 10"}, request_id="pay-1") for _ in range(20))
            )
            assert all(d == out for d in dupes)
        finally:
            await ex.aclose()
    assert (data / "log.txt").read_text() == "pay 10\n"


async def test_retries_give_up_with_a_clear_error(dirs):
    data, helpers = dirs
    with remote_server(data, helpers, "--fault-503", "10") as url:
        ex = RemoteExecutor(url, retries=2)
        try:
            with pytest.raises(ToolFailed, match="failed 2 time"):
                await call(ex, "noop")
        finally:
            await ex.aclose()


async def test_disallowed_entrypoint_is_refused_without_retry(dirs):
    data, helpers = dirs
    with remote_server(data, helpers) as url:
        ex = RemoteExecutor(url, retries=3)
        try:
            with pytest.raises(ToolFailed, match=r"403.*not allowed"):
                await ex.run("os:system", {"command": "true"}, timeout_s=5, request_id="x")
            assert ex.attempts == 1
        finally:
            await ex.aclose()


async def test_dead_endpoint_fails_fast_with_tool_failed(dirs):
    import socket

    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()  # nothing listens there now
    ex = RemoteExecutor(f"http://127.0.0.1:{port}", retries=3)
    try:
        start = time.monotonic()
        with pytest.raises(ToolFailed, match="ConnectError"):
            await ex.run("exec_helpers:noop", {}, timeout_s=5, request_id="x")
        assert time.monotonic() - start < 3 and ex.attempts == 3
    finally:
        await ex.aclose()


async def test_toolbox_runs_builtin_tools_remotely_with_idempotency(dirs, tmp_path):
    from tools.builtin.demo_db import generate_sales_db
    from tools.toolbox import Toolbox

    data, helpers = dirs
    cfg = tmp_path / "mcp.json"
    cfg.write_text('{"mcpServers": {}}')
    # the function server reads the database named in its own environment
    db = generate_sales_db(tmp_path / "server-db" / "sales.db", months=2)
    with remote_server(data, helpers, env={"HERMES_DATABASE": str(db)}) as url:
        tb = await Toolbox.open(data, cfg, executor="remote", remote_url=url)
        try:
            assert tb.executor.kind == "remote"
            out = await tb.registry.call("query_database", {"sql": "SELECT COUNT(*) AS n FROM orders"}, "q1")
            assert out.status == "ok" and out.content["rows"][0][0] > 0
            first = await tb.registry.call("schedule_reminder", {"text": "send the report"}, "rem-1")
            again = await tb.registry.call("schedule_reminder", {"text": "send the report"}, "rem-1")
            assert first.status == "ok" and again.replayed and again.content == first.content
        finally:
            await tb.aclose()
