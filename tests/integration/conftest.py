"""Fixtures that start real servers for the integration tests (and stop them)."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import psutil
import pytest

ROOT = Path(__file__).resolve().parents[2]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@contextmanager
def langgraph_dev(tmp_path: Path, env: dict[str, str]) -> Iterator[tuple[str, Path]]:
    """The real ``langgraph dev --no-browser --no-reload`` on a free port, serving
    ``langgraph.json`` from the project root, with ``env`` added to the environment. Yields
    ``(url, log path)``; at the end its whole process group is stopped (SIGTERM, then SIGKILL
    for what is left, children included)."""
    port = free_port()
    log_path = tmp_path / "dev.log"
    log = open(log_path, "wb")  # noqa: SIM115 - closed in finally
    proc = subprocess.Popen(
        [str(Path(sys.executable).parent / "langgraph"), "dev", "--no-browser", "--no-reload",
         "--port", str(port), "--config", str(ROOT / "langgraph.json")],
        cwd=ROOT, env={**os.environ, "LANGSMITH_TRACING": "false", **env},
        stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                raise AssertionError("langgraph dev exited: " + log_path.read_text()[-3000:])
            try:
                if httpx.get(f"{url}/ok", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                time.sleep(0.5)
        else:
            raise AssertionError("langgraph dev did not answer /ok within 90 s")
        yield url, log_path
    finally:
        group: list[psutil.Process] = []
        try:
            group = [psutil.Process(proc.pid), *psutil.Process(proc.pid).children(recursive=True)]
        except psutil.NoSuchProcess:
            pass
        try:
            os.killpg(proc.pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
        _, alive = psutil.wait_procs(group, timeout=10)
        for p in alive:
            p.kill()
        log.close()


@pytest.fixture
def start_langgraph_dev(tmp_path) -> Iterator[Callable[[dict[str, str]], tuple[str, Path]]]:
    """``start_langgraph_dev(env)`` → ``(url, log path)``; stopped after the test."""
    with_servers: list = []

    def start(env: dict[str, str]) -> tuple[str, Path]:
        cm = langgraph_dev(tmp_path, env)
        with_servers.append(cm)
        return cm.__enter__()

    yield start
    for cm in reversed(with_servers):
        cm.__exit__(None, None, None)
