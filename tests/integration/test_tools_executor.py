"""SubprocessExecutor: out-of-process runs, timeouts kill the whole process group (grandchild
included), secret-looking environment variables never reach the tool."""

from __future__ import annotations

import os
import textwrap
import time
from pathlib import Path

import psutil
import pytest

from tools.executors.base import ToolFailed, ToolTimeout
from tools.executors.subprocess import SubprocessExecutor, scrubbed_env

pytestmark = pytest.mark.slow  # real worker processes

HELPERS = textwrap.dedent("""
    import os, subprocess, sys, time, signal
    from pathlib import Path

    def whoami(data_dir):
        return {"pid": os.getpid(), "cwd": os.getcwd(), "data_dir": str(data_dir),
                "pgid": os.getpgid(0), "sid": os.getsid(0)}

    def env_of(names):
        return {n: os.environ.get(n) for n in names}

    def explode():
        raise ValueError("boom")

    def chatty():
        print("this goes to stderr, not into the result")
        return "clean"

    def spawn_and_hang(pid_file, ignore_term=False):
        if ignore_term:
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
        child = subprocess.Popen([sys.executable, "-c",
            "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(1000)"])
        Path(pid_file).write_text(f"{os.getpid()} {child.pid}")
        time.sleep(1000)

    def spawn_and_return(pid_file):
        child = subprocess.Popen(["sleep", "1000"])
        Path(pid_file).write_text(str(child.pid))
        return "left a child behind"

    def die_hard():
        os._exit(3)
""")


@pytest.fixture
def executor(tmp_path: Path) -> SubprocessExecutor:
    helpers = tmp_path / "helpers"
    helpers.mkdir()
    (helpers / "exec_helpers.py").write_text(HELPERS)
    data = tmp_path / "data"
    data.mkdir()
    return SubprocessExecutor(data, extra_paths=(str(helpers),))


def _gone(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


async def test_runs_out_of_process_in_own_session_confined_to_data_dir(executor):
    out = await executor.run("exec_helpers:whoami", {}, timeout_s=10, request_id="r")
    assert out["pid"] != os.getpid()
    assert out["sid"] == out["pid"] == out["pgid"]  # start_new_session=True
    assert Path(out["cwd"]) == executor.data_dir == Path(out["data_dir"])


async def test_model_cannot_override_data_dir(executor, tmp_path):
    out = await executor.run("exec_helpers:whoami", {"data_dir": "/etc"}, timeout_s=10, request_id="r")
    assert Path(out["data_dir"]) == executor.data_dir


async def test_secret_env_vars_are_not_visible(executor, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-should-not-leak")
    monkeypatch.setenv("GITHUB_TOKEN", "ghp-nope")
    monkeypatch.setenv("DB_PASSWORD", "hunter2")
    monkeypatch.setenv("HERMES_PLAIN_SETTING", "visible")
    names = ["OPENAI_API_KEY", "GITHUB_TOKEN", "DB_PASSWORD", "HERMES_PLAIN_SETTING"]
    out = await executor.run("exec_helpers:env_of", {"names": names}, timeout_s=10, request_id="r")
    assert out == {"OPENAI_API_KEY": None, "GITHUB_TOKEN": None, "DB_PASSWORD": None, "HERMES_PLAIN_SETTING": "visible"}
    assert "OPENAI_API_KEY" not in scrubbed_env()


async def test_exception_in_tool_is_tool_failed_with_text(executor):
    with pytest.raises(ToolFailed, match="ValueError: boom"):
        await executor.run("exec_helpers:explode", {}, timeout_s=10, request_id="r")


async def test_prints_do_not_corrupt_the_result(executor):
    assert await executor.run("exec_helpers:chatty", {}, timeout_s=10, request_id="r") == "clean"


async def test_abrupt_exit_is_tool_failed(executor):
    with pytest.raises(ToolFailed, match="exited with code 3"):
        await executor.run("exec_helpers:die_hard", {}, timeout_s=10, request_id="r")


async def test_unknown_entrypoint_is_tool_failed(executor):
    with pytest.raises(ToolFailed, match=r"ModuleNotFoundError|AttributeError"):
        await executor.run("no_such_module_xyz:f", {}, timeout_s=10, request_id="r")


@pytest.mark.parametrize("ignore_term", [False, True])
async def test_timeout_kills_whole_process_group_including_grandchild(executor, tmp_path, ignore_term):
    pid_file = executor.data_dir / f"pids-{ignore_term}"  # inside the confined data dir
    start = time.monotonic()
    with pytest.raises(ToolTimeout):
        await executor.run(
            "exec_helpers:spawn_and_hang",
            {"pid_file": str(pid_file), "ignore_term": ignore_term},
            timeout_s=1.5,
            request_id="r",
        )
    elapsed = time.monotonic() - start
    worker_pid, grandchild_pid = (int(x) for x in pid_file.read_text().split())
    try:
        # SIGTERM, 1 s grace, SIGKILL: bounded well below the tool's sleep(1000)
        assert elapsed < 6, elapsed
        assert _gone(worker_pid), "worker survived"
        assert _gone(grandchild_pid), "grandchild (ignores SIGTERM) survived"
    finally:
        for pid in (worker_pid, grandchild_pid):
            if not _gone(pid):
                psutil.Process(pid).kill()


async def test_strays_left_by_a_successful_run_are_cleaned_up(executor, tmp_path):
    pid_file = executor.data_dir / "stray"
    assert (
        await executor.run("exec_helpers:spawn_and_return", {"pid_file": str(pid_file)}, timeout_s=10, request_id="r")
        == "left a child behind"
    )
    stray = int(pid_file.read_text())
    try:
        assert _gone(stray)
    finally:
        if not _gone(stray):
            psutil.Process(stray).kill()
