"""Container backend: the same worker inside bubblewrap (the mechanism that works on these
machines), escapes tried; and the clear error when no sandbox works (never a local fall-back)."""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

import pytest

from tests.integration.test_executors_subprocess import gone, kill_leftovers, our_cgroups, write_helpers
from tools.errors import ToolFailed, ToolTimeout
from tools.executors import container as container_mod
from tools.executors import make_executor
from tools.executors.cgroups import pids_cgroup_parent
from tools.executors.container import ContainerExecutor, Sandbox, SandboxUnavailable, detect_sandbox
from tools.executors.subprocess import RunContext

needs_bwrap = pytest.mark.skipif(
    shutil.which("bwrap") is None,
    reason="bubblewrap not installed (scripts/setup.sh installs it as root; or: apt-get install bubblewrap)",
)


@pytest.fixture
def box(tmp_path: Path):
    helpers = write_helpers(tmp_path)
    data = tmp_path / "data"
    data.mkdir()
    (tmp_path / "secret.txt").write_text("top secret")
    # generic tools that keep files in the data directory (not per-thread workspaces)
    ex = make_executor(
        "container",
        data,
        engine="bwrap",
        extra_paths=(str(helpers),),
        max_procs=32,
        memory_mb=512,
        workspace_only=False,
    )
    yield ex, data, tmp_path
    assert our_cgroups() == []


async def run(ex, entry, args=None, timeout_s=10.0):
    return await ex.run(f"exec_helpers:{entry}", args or {}, timeout_s=timeout_s, request_id="r")


# -- no sandbox: a clear error -----------------------------------------------------------------


def test_no_sandbox_raises_naming_everything_tried(monkeypatch, tmp_path):
    monkeypatch.setattr(container_mod.shutil, "which", lambda name: None)
    monkeypatch.setattr(container_mod, "_detected", {})
    with pytest.raises(SandboxUnavailable) as err:
        ContainerExecutor(tmp_path)
    text = str(err.value)
    assert "bwrap: not installed" in text and "docker: not installed" in text and "podman: not installed" in text
    assert "never falls back" in text


def test_engine_that_does_not_answer_is_reported(monkeypatch, tmp_path):
    fake = tmp_path / "docker"
    fake.write_text("#!/bin/sh\necho 'Cannot connect to the Docker daemon' >&2\nexit 1\n")
    fake.chmod(0o755)
    monkeypatch.setattr(container_mod.shutil, "which", lambda name: str(fake) if name == "docker" else None)
    monkeypatch.setattr(container_mod, "_detected", {})
    with pytest.raises(SandboxUnavailable, match="engine did not answer: Cannot connect to the Docker daemon"):
        detect_sandbox("docker")


def test_docker_command_is_locked_down(tmp_path):
    ex = ContainerExecutor(tmp_path, sandbox=Sandbox("docker", "/usr/bin/docker"), max_procs=16, memory_mb=256)
    ctx = RunContext(tmpdir=tmp_path, cgroup=None)
    argv = ex._command(ctx)
    assert argv[:3] == ["/usr/bin/docker", "run", "--rm"]
    for flag in (["--network", "none"], ["--pids-limit", "16"], ["--memory", "256m"], ["--read-only"]):
        assert all(f in argv for f in flag)
    assert f"{ex.data_dir}:{ex.data_dir}:rw" in argv and ctx.extra["container"] in argv


# -- bubblewrap ------------------------------------------------------------------------------------


@needs_bwrap
def test_bwrap_is_detected_first():
    assert detect_sandbox().engine == "bwrap"


@needs_bwrap
@pytest.mark.slow
async def test_runs_the_same_tool_as_the_subprocess_backend(box):
    ex, data, _ = box
    assert ex.kind == "container" and ex.engine == "bwrap"
    assert await run(ex, "echo", {"a": 1}) == {"a": 1}
    out = await run(ex, "whoami")
    assert Path(out["cwd"]) == data and out["tmp"] == "/tmp"
    assert out["pid"] < 10  # its own pid namespace


@needs_bwrap
@pytest.mark.slow
async def test_builtin_tool_runs_in_the_sandbox(tmp_path):
    from tools.builtin.demo_db import generate_sales_db

    helpers = write_helpers(tmp_path)
    data = tmp_path / "data"
    data.mkdir()
    # the user's database lives outside the data dir (here under /tmp, which the sandbox hides):
    # that file alone is bound in, read-only
    db = generate_sales_db(tmp_path / "user" / "sales.db", months=2)
    (db.parent / "private.txt").write_text("not for tools")
    ex = make_executor("container", data, database=str(db), extra_paths=(str(helpers),))
    out = await ex.run(
        "tools.builtin.database:query_database",
        {"sql": "SELECT COUNT(*) AS n FROM orders"},
        timeout_s=10,
        request_id="q",
    )
    assert out["columns"] == ["n"] and out["rows"][0][0] > 0
    described = await ex.run("tools.builtin.database:describe_database", {}, timeout_s=10, request_id="d")
    assert described["database"] == str(db) and described["table_count"] == 6  # 5 tables + the sales_lines view
    with pytest.raises(ToolFailed, match=r"PermissionError|FileNotFoundError"):
        await run(ex, "read_file", {"path": str(db.parent / "private.txt")})


@needs_bwrap
@pytest.mark.slow
async def test_timeout_kills_the_sandbox_within_one_second(box):
    ex, data, _ = box
    start = time.monotonic()
    with pytest.raises(ToolTimeout):
        await run(ex, "sleep_ignoring_term", {"pid_file": str(data / "pid")}, timeout_s=1.5)
    assert time.monotonic() - start < 2.5
    time.sleep(0.1)
    left = list(_sandbox_processes(data))
    kill_leftovers(left)
    assert left == []


def _sandbox_processes(data: Path) -> list[int]:
    import psutil

    found = []
    for proc in psutil.process_iter(["pid", "cmdline", "cwd"]):
        try:
            if proc.info["cwd"] == str(data) and proc.pid != os.getpid():
                found.append(proc.pid)
        except psutil.Error:
            continue
    return [p for p in found if not gone(p)]


@needs_bwrap
@pytest.mark.slow
async def test_fork_bomb_is_contained(box):
    ex, data, _ = box
    if os.geteuid() == 0 and pids_cgroup_parent() is None:
        pytest.skip("root without a writable pids cgroup: the kernel does not bound root's process count")
    with pytest.raises(ToolTimeout):
        await run(ex, "fork_bomb", {"pid_log": str(data / "forks.log"), "generations": 10}, timeout_s=3)
    forks = (data / "forks.log").read_text().split() if (data / "forks.log").exists() else []
    assert len(forks) < ex.max_procs
    time.sleep(0.2)
    left = _sandbox_processes(data)
    kill_leftovers(left)
    assert left == []


@needs_bwrap
@pytest.mark.slow
async def test_memory_hog_is_contained(box):
    ex, _, _ = box
    with pytest.raises(ToolFailed, match="MemoryError"):
        await run(ex, "memory_hog", {"mb": 4096})


@needs_bwrap
@pytest.mark.slow
async def test_dotdot_paths_cannot_reach_the_host(box):
    ex, _, tmp = box
    with pytest.raises(ToolFailed, match=r"PermissionError|FileNotFoundError"):
        await run(ex, "read_file", {"path": "../secret.txt"})
    with pytest.raises(ToolFailed, match=r"PermissionError|FileNotFoundError|OSError"):
        await run(ex, "write_file", {"path": str(Path.home() / "hermes_escape.txt"), "text": "x"})
    out = await run(
        ex, "shell", {"cmd": f"cat {tmp}/secret.txt; echo x > {tmp}/escaped.txt; echo x > /etc/escaped; ls /proc"}
    )
    assert "top secret" not in out["out"]
    assert not (tmp / "escaped.txt").exists() and not Path("/etc/escaped").exists()
    assert not (Path.home() / "hermes_escape.txt").exists()


@needs_bwrap
@pytest.mark.slow
async def test_secrets_and_the_agent_are_invisible(box, monkeypatch):
    ex, _, _ = box
    monkeypatch.setenv("OPENAI_API_KEY", "sk-should-not-leak")
    out = await run(ex, "env_of", {"names": ["OPENAI_API_KEY"]})
    assert out == {"OPENAI_API_KEY": None}
    with pytest.raises(ToolFailed, match=r"PermissionError|FileNotFoundError|ProcessLookupError"):
        await run(ex, "agent_environ", {"pid": os.getpid()})
    with pytest.raises(ToolFailed, match=r"PermissionError|ProcessLookupError"):
        await run(ex, "probe_signal", {"pid": os.getpid()})


@needs_bwrap
@pytest.mark.slow
async def test_no_network_inside_by_default(box):
    import socket

    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(1)
    port = srv.getsockname()[1]
    try:
        ex, _, _ = box
        out = await run(
            ex,
            "shell",
            {
                "cmd": f"python3 -c \"import socket; socket.create_connection(('127.0.0.1', {port}), 2)\" && echo connected"
            },
        )
        assert "connected" not in out["out"] and out["rc"] != 0
    finally:
        srv.close()
