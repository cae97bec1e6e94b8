"""Fixtures that start real servers for the integration tests (and stop them)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

import httpx
import psutil
import pytest

ROOT = Path(__file__).resolve().parents[2]

# The real-model tests of the pipeline (llama.cpp serving, grammar, streaming, the dev server,
# the eval samples) run on the smallest bundled model, the fastest on 2 cores; the default
# model's own run is test_flagship.py's, which names it. A HERMES_MODEL set by the caller wins.
PIPELINE_MODEL = "embedded:smollm2-135m"
os.environ.setdefault("HERMES_MODEL", PIPELINE_MODEL)


# package scope: stopped when the last test of tests/integration/ ends, not during the teardown
# of whatever test runs last (a unit test may start no process: tests/unit/conftest.py)
@pytest.fixture(scope="package")
def postgres_server() -> Iterator[str]:
    """A real PostgreSQL 16 for the session (PyPI ``pgserver``: its own binaries, a Unix socket
    in its data directory, no Docker), stopped and its directory removed at the end. Yields the
    server's URL (database ``postgres``). Skips the test, saying why, only if the server cannot
    start here.

    The data directory is a new one directly under the system temp dir, not under pytest's
    ``tmp_path``: run as root, pgserver runs PostgreSQL as its own ``pgserver`` user, which must
    traverse the path, and every pytest session resets ``/tmp/pytest-of-<user>`` to 0700."""
    import pgserver

    pgdata = Path(tempfile.mkdtemp(prefix="hermes-pg-"))
    try:
        server = pgserver.get_server(pgdata, cleanup_mode="stop")
    except Exception as exc:  # noqa: BLE001 - any failure to start is a reason to skip, named
        shutil.rmtree(pgdata, ignore_errors=True)
        pytest.skip(f"pgserver could not start PostgreSQL here: {type(exc).__name__}: {exc}")
    try:
        yield server.get_uri()
    finally:
        server.cleanup()
        shutil.rmtree(pgdata, ignore_errors=True)


@pytest.fixture
def postgres_url(postgres_server: str) -> str:
    """The URL of a new, empty database on the session's PostgreSQL (one per test: no test
    sees another's threads)."""
    import psycopg

    name = f"t_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(postgres_server, autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name}")
    return postgres_server.replace("/postgres?", f"/{name}?", 1)


@pytest.fixture(params=["sqlite", "postgres"])
def checkpoint_backend(request, monkeypatch) -> str:
    """Runs the test once per checkpoint store: ``sqlite`` (``HERMES_POSTGRES_URL`` unset: the
    data directory's file) and ``postgres`` (``HERMES_POSTGRES_URL`` = a new database on the
    session's real PostgreSQL). Everything that opens its checkpointer through
    ``graph.checkpoints.open_checkpointer`` (the CLI, the runner) follows the setting."""
    if request.param == "postgres":
        monkeypatch.setenv("HERMES_POSTGRES_URL", request.getfixturevalue("postgres_url"))
    else:
        monkeypatch.delenv("HERMES_POSTGRES_URL", raising=False)
    return request.param


def server_cwd(tmp_path: Path) -> Path:
    """The working directory ``langgraph_dev`` runs the server in (relative paths resolve here)."""
    path = tmp_path / "server-cwd"
    path.mkdir(parents=True, exist_ok=True)
    return path


def server_config(tmp_path: Path) -> Path:
    """The project's ``langgraph.json`` with its ``./`` paths made absolute, written into the
    server's working directory (the server resolves some paths, e.g. the checkpointer's,
    against its cwd)."""

    def absolute(value):
        if isinstance(value, str) and value.startswith("./"):
            return str(ROOT / value[2:])
        if isinstance(value, str) and value == ".":
            return str(ROOT)
        if isinstance(value, dict):
            return {k: absolute(v) for k, v in value.items()}
        if isinstance(value, list):
            return [absolute(v) for v in value]
        return value

    config = absolute(json.loads((ROOT / "langgraph.json").read_text()))
    path = server_cwd(tmp_path) / "langgraph.json"
    path.write_text(json.dumps(config, indent=2))
    return path


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@contextmanager
def langgraph_dev(tmp_path: Path, env: dict[str, str], *, via_hermes: bool = False) -> Iterator[tuple[str, Path]]:
    """The real ``langgraph dev --no-browser --no-reload`` on a free port, serving
    ``langgraph.json`` from the project root, with ``env`` added to the environment
    (``via_hermes``: started as ``hermes dev``, which runs it). Yields ``(url, log path)``; at
    the end its whole process group is stopped (SIGTERM, then SIGKILL for what is left,
    children included)."""
    port = free_port()
    log_path = tmp_path / "dev.log"
    log = open(log_path, "wb")  # noqa: SIM115 - closed in finally
    launcher = [str(Path(sys.executable).parent / ("hermes" if via_hermes else "langgraph")), "dev"]
    proc = subprocess.Popen(
        [
            *launcher,
            *([] if via_hermes else ["--no-browser"]),
            "--no-reload",
            "--port",
            str(port),
            "--config",
            str(server_config(tmp_path)),
        ],
        # the server keeps its own state in ./.langgraph_api: run it in the test's tmp dir, so a
        # test run never leaves a stale run for the user's next `langgraph dev` in the checkout
        cwd=server_cwd(tmp_path),
        env={**os.environ, "LANGSMITH_TRACING": "false", **env},
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
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
        with suppress(psutil.NoSuchProcess):
            group = [psutil.Process(proc.pid), *psutil.Process(proc.pid).children(recursive=True)]
        with suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
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


@pytest.fixture
def agent_dev_server(tmp_path, start_langgraph_dev) -> Callable[[int], tuple[str, Path]]:
    """``agent_dev_server(max_tool_rounds)`` → ``(url, log path)`` of ``langgraph dev`` serving the
    agent on a generated two-month sales database. The data dir and the database are given as
    relative paths, like the default ``.hermes``: resolving them against the server's cwd must
    not block its event loop."""
    from tools.builtin.demo_db import generate_sales_db

    def start(max_tool_rounds: int) -> tuple[str, Path]:
        data_dir = os.path.relpath(tmp_path / "data", server_cwd(tmp_path))
        database = os.path.relpath(generate_sales_db(tmp_path / "user" / "sales.db", months=2), server_cwd(tmp_path))
        return start_langgraph_dev(
            {"HERMES_DATA_DIR": data_dir, "HERMES_MAX_TOOL_ROUNDS": str(max_tool_rounds), "HERMES_DATABASE": database}
        )

    return start
