"""Subprocess backend: resource limits, confinement and escapes tried (timeout, fork bomb,
memory hog, open files, ``../`` paths, symlinks, shell commands, secret env vars, the agent's
/proc environ, signals to the agent, import hijack through the working directory)."""

from __future__ import annotations

import contextlib
import os
import sys
import textwrap
import time
from pathlib import Path

import psutil
import pytest

from tools.errors import ToolFailed, ToolTimeout
from tools.executors import make_executor
from tools.executors.cgroups import pids_cgroup_parent
from tools.executors.subprocess import SubprocessExecutor
from tools.executors.worker import landlock_abi

pytestmark = pytest.mark.slow  # real worker processes

HELPERS = textwrap.dedent("""
    import os, signal, subprocess, sys, time
    from pathlib import Path

    def noop():
        return None

    def echo(**kw):
        return kw

    def whoami(data_dir):
        return {"pid": os.getpid(), "cwd": os.getcwd(), "data_dir": str(data_dir),
                "pgid": os.getpgid(0), "tmp": os.environ.get("TMPDIR")}

    def read_file(path):
        return Path(path).read_text()

    def write_file(path, text):
        Path(path).write_text(text)
        return "written"

    def append_line(path, line):
        with open(path, "a") as f:
            f.write(line + "\\n")
        return {"appended": line}

    def env_of(names):
        return {n: os.environ.get(n) for n in names}

    def agent_environ(pid):
        return open(f"/proc/{pid}/environ", "rb").read().decode(errors="replace")

    def probe_signal(pid):
        os.kill(pid, 0)   # signal 0: a permission check only, nothing is delivered
        return "allowed"

    def shell(cmd):
        p = subprocess.run(["/bin/sh", "-c", cmd], capture_output=True, text=True)
        return {"rc": p.returncode, "out": p.stdout, "err": p.stderr}

    def symlink_escape(target):
        link = Path("escape_link")
        if link.is_symlink():
            link.unlink()
        link.symlink_to(target)
        return link.read_text()

    def sleep_ignoring_term(pid_file, seconds=60):
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        Path(pid_file).write_text(str(os.getpid()))
        time.sleep(seconds)

    def fork_bomb(pid_log, generations=10):
        # Bounded on purpose (at most 2**generations processes if nothing contained it).
        fd = os.open(pid_log, os.O_WRONLY | os.O_CREAT | os.O_APPEND)
        refused = 0
        for _ in range(generations):
            try:
                if os.fork() == 0:
                    os.write(fd, f"{os.getpid()}\\n".encode())
            except OSError:
                refused += 1
        time.sleep(60)

    def memory_hog(mb):
        blob = bytearray(mb * 1024 * 1024)
        return len(blob)

    def open_many(n):
        files = [open(os.devnull) for _ in range(n)]
        return len(files)

    def plant_module(name):
        Path(f"{name}.py").write_text("raise SystemExit('hijacked')\\n")
        return "planted"

    def use_json():
        import json
        return json.dumps([1])
""")


def write_helpers(root: Path) -> Path:
    helpers = root / "helpers"
    helpers.mkdir(exist_ok=True)
    (helpers / "exec_helpers.py").write_text(HELPERS)
    return helpers


def gone(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def kill_leftovers(pids) -> None:
    for pid in pids:
        if not gone(pid):
            with contextlib.suppress(psutil.Error):
                psutil.Process(pid).kill()


def our_cgroups() -> list[Path]:
    parent = pids_cgroup_parent()
    return list(parent.glob(f"hermes-exec-{os.getpid()}-*")) if parent else []


@pytest.fixture
def box(tmp_path: Path):
    """(executor, data_dir, tmp_path) with a secret file next to data_dir."""
    helpers = write_helpers(tmp_path)
    data = tmp_path / "data"
    data.mkdir()
    (tmp_path / "secret.txt").write_text("top secret")
    # generic tools that keep files in the data directory (not per-thread workspaces)
    ex = make_executor(
        "subprocess", data, extra_paths=(str(helpers),), max_procs=32, memory_mb=512, workspace_only=False
    )
    yield ex, data, tmp_path
    assert our_cgroups() == [], "a run left its pids cgroup behind"


async def run(ex, entry, args=None, timeout_s=10.0):
    return await ex.run(f"exec_helpers:{entry}", args or {}, timeout_s=timeout_s, request_id="r")


async def test_noop_runs_out_of_process_with_private_tmp(box):
    ex, data, _ = box
    out = await run(ex, "whoami")
    assert out["pid"] != os.getpid() and out["pgid"] == out["pid"]
    assert Path(out["cwd"]) == data and out["tmp"] and not out["tmp"].startswith(str(data))
    assert not Path(out["tmp"]).exists()  # removed after the run


async def test_timeout_kills_within_one_second_of_the_limit(box):
    ex, data, _ = box
    pid_file = data / "pid"
    start = time.monotonic()
    with pytest.raises(ToolTimeout):
        await run(ex, "sleep_ignoring_term", {"pid_file": str(pid_file)}, timeout_s=1.5)
    elapsed = time.monotonic() - start
    pid = int(pid_file.read_text())
    try:
        assert elapsed < 1.5 + 1.0, elapsed  # SIGTERM ignored: SIGKILL after the 0.5 s grace
        assert gone(pid)
    finally:
        kill_leftovers([pid])


async def test_fork_bomb_is_bounded_and_fully_killed(box):
    ex, data, _ = box
    if os.geteuid() == 0 and pids_cgroup_parent() is None:
        pytest.skip("root without a writable pids cgroup: the kernel does not bound root's process count")
    log = data / "forks.log"
    with pytest.raises(ToolTimeout):
        await run(ex, "fork_bomb", {"pid_log": str(log), "generations": 10}, timeout_s=3)
    pids = [int(x) for x in log.read_text().split()] if log.exists() else []
    try:
        assert len(pids) < ex.max_procs, f"{len(pids)} processes forked, limit {ex.max_procs}"
        time.sleep(0.2)
        assert all(gone(p) for p in pids), [p for p in pids if not gone(p)]
    finally:
        kill_leftovers(pids)


async def test_memory_hog_hits_the_address_space_limit(box):
    ex, _, _ = box
    with pytest.raises(ToolFailed, match="MemoryError"):
        await run(ex, "memory_hog", {"mb": 4096})
    assert await run(ex, "memory_hog", {"mb": 16}) == 16 * 1024 * 1024


async def test_open_files_are_limited(box):
    ex, _, _ = box
    with pytest.raises(ToolFailed, match="Too many open files"):
        await run(ex, "open_many", {"n": 1000})


@pytest.mark.parametrize("path", ["../secret.txt", "../../", "/etc/shadow", "{tmp}/secret.txt"])
async def test_reads_outside_the_working_directory_are_refused(box, path):
    ex, _, tmp = box
    with pytest.raises(ToolFailed, match=r"PermissionError|IsADirectoryError"):
        await run(ex, "read_file", {"path": path.format(tmp=tmp)})


@pytest.mark.parametrize("path", ["../escaped.txt", "{tmp}/escaped.txt", "sub/../../escaped.txt"])
async def test_writes_outside_the_working_directory_are_refused(box, path):
    ex, data, tmp = box
    with pytest.raises(ToolFailed, match=r"PermissionError|FileNotFoundError"):
        await run(ex, "write_file", {"path": path.format(tmp=tmp), "text": "x"})
    assert not (tmp / "escaped.txt").exists()
    assert await run(ex, "write_file", {"path": "inside.txt", "text": "ok"}) == "written"
    assert (data / "inside.txt").read_text() == "ok"


async def test_symlink_out_of_the_working_directory_is_refused(box):
    ex, _, tmp = box
    with pytest.raises(ToolFailed, match="PermissionError"):
        await run(ex, "symlink_escape", {"target": str(tmp / "secret.txt")})


async def test_shell_commands_are_confined_too(box):
    if not landlock_abi():
        pytest.skip("kernel without Landlock: only Python-level file access is confined")
    ex, data, tmp = box
    out = await run(
        ex, "shell", {"cmd": "cat ../secret.txt; echo x > ../shell_escape.txt; echo ok > in.txt; cat in.txt"}
    )
    assert "top secret" not in out["out"] and out["out"].strip() == "ok"
    assert "Permission denied" in out["err"]
    assert not (tmp / "shell_escape.txt").exists() and (data / "in.txt").exists()


async def test_secret_env_vars_and_the_agents_environ_are_unreadable(box, monkeypatch):
    ex, _, _ = box
    monkeypatch.setenv("OPENAI_API_KEY", "sk-should-not-leak")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "nope")
    monkeypatch.setenv("HERMES_PLAIN_SETTING", "visible")
    out = await run(ex, "env_of", {"names": ["OPENAI_API_KEY", "AWS_SECRET_ACCESS_KEY", "HERMES_PLAIN_SETTING"]})
    assert out == {"OPENAI_API_KEY": None, "AWS_SECRET_ACCESS_KEY": None, "HERMES_PLAIN_SETTING": "visible"}
    with pytest.raises(ToolFailed, match="PermissionError"):
        await run(ex, "agent_environ", {"pid": os.getpid()})


async def test_tool_cannot_signal_the_agent(box):
    if landlock_abi() < 6:
        pytest.skip("Landlock ABI < 6: no signal scoping on this kernel")
    ex, _, _ = box
    with pytest.raises(ToolFailed, match="PermissionError"):
        await run(ex, "probe_signal", {"pid": os.getpid()})


async def test_a_module_planted_in_the_working_directory_is_not_imported(box):
    ex, _, _ = box
    assert await run(ex, "plant_module", {"name": "json"}) == "planted"
    assert await run(ex, "use_json") == "[1]"


async def test_confinement_is_the_default_and_can_be_turned_off_explicitly(tmp_path):
    helpers = write_helpers(tmp_path)
    (tmp_path / "data").mkdir()
    assert SubprocessExecutor(tmp_path / "data", extra_paths=(str(helpers),)).confine
    ex = SubprocessExecutor(tmp_path / "data", extra_paths=(str(helpers),), confine=False)
    assert await run(ex, "write_file", {"path": str(tmp_path / "outside.txt"), "text": "x"}) == "written"


async def test_executor_and_ledger_are_async_safe_under_blockbuster(box):
    """``langgraph dev`` raises BlockingError on blocking calls in the event loop."""
    from blockbuster import BlockBuster

    from tools.idempotency import IdempotencyLedger
    from tools.registry import ToolRegistry
    from tools.spec import ToolSpec

    ex, data, _ = box
    ledger = IdempotencyLedger(data / "ledger.db")
    reg = ToolRegistry(ledger=ledger)

    async def runner(args, request_id):
        return await ex.run("exec_helpers:append_line", args, timeout_s=10, request_id=request_id)

    reg.register(
        ToolSpec(
            name="append_line",
            description="Appends one line to a file in the data dir (test).",
            parameters={
                "type": "object",
                "properties": {"path": {"type": "string"}, "line": {"type": "string"}},
                "required": ["path", "line"],
            },
            side_effect=True,
        ),
        runner,
    )
    bb = BlockBuster(excluded_modules=[])
    bb.activate()
    try:
        first = await reg.call("append_line", {"path": "f.txt", "line": "a"}, "r1")
        again = await reg.call("append_line", {"path": "f.txt", "line": "a"}, "r1")
        with pytest.raises(ToolTimeout):
            await ex.run(
                "exec_helpers:sleep_ignoring_term", {"pid_file": "p", "seconds": 30}, timeout_s=1, request_id="t"
            )
    finally:
        bb.deactivate()
        await ledger.aclose()
    assert first.status == "ok" and again.replayed and again.content == first.content
    assert (data / "f.txt").read_text() == "a\n"
    kill_leftovers([int((data / "p").read_text())])


def test_worker_start_up_stays_lean():
    """The worker's own imports are on every call's path: no typing/inspect/pathlib."""
    import subprocess

    code = "import sys, tools.executors.worker as w; print(sorted(m for m in ('typing', 'inspect', 'asyncio') if m in sys.modules))"
    out = subprocess.run(
        [sys.executable, "-P", "-c", code],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])},
        timeout=30,
        check=False,
    )
    assert out.stdout.strip() == "[]", out.stderr
