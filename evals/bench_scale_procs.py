"""Processes and the database of ``evals.bench_scale``: the pgserver PostgreSQL it starts, worker
processes (``python -m evals.bench_scale --<role> ...``) started in their own process group and
killed with it, and the files by which workers say they are ready and are told to start."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


#: Connections the benchmark's PostgreSQL accepts. pgserver starts with PostgreSQL's default of
#: 100; each worker process holds up to ``graph.postgres.POOL_MAX_SIZE`` (8) checkpoint
#: connections plus the ledger's, the episodic store's and the delivery marks', so 8 workers × 16
#: threads reach it.
MAX_CONNECTIONS = 400


class Postgres:
    """A pgserver PostgreSQL in a temp directory, restarted once with :data:`MAX_CONNECTIONS`;
    :meth:`database` makes a new empty database."""

    def __init__(self) -> None:
        import pgserver
        import psycopg
        from pgserver._commands import pg_ctl  # type: ignore[attr-defined]  # made at import time

        self.dir = Path(tempfile.mkdtemp(prefix="hermes-bench-pg-"))
        self.server = pgserver.get_server(self.dir, cleanup_mode="stop")
        self.url = self.server.get_uri()
        with psycopg.connect(self.url, autocommit=True) as con:
            con.execute(f"ALTER SYSTEM SET max_connections = {MAX_CONNECTIONS}")
        pg_ctl(["-w", "-m", "fast", "stop"], pgdata=self.server.pgdata, user=self.server.system_user)
        self.server.ensure_postgres_running()

    def database(self) -> str:
        import psycopg

        name = f"b_{uuid.uuid4().hex[:10]}"
        with psycopg.connect(self.url, autocommit=True) as con:
            con.execute(f"CREATE DATABASE {name}")
        return self.url.replace("/postgres?", f"/{name}?", 1)

    def close(self) -> None:
        self.server.cleanup()
        shutil.rmtree(self.dir, ignore_errors=True)


def load() -> float:
    """The 1-minute load average (the machine is shared: every figure is reported beside it)."""
    return os.getloadavg()[0]


def spawn(*args: str, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "evals.bench_scale", *args],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT), **(env or {})},
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )


def stop(proc: subprocess.Popen[str]) -> None:
    if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def wait_files(paths: list[Path], procs: list[subprocess.Popen[str]], limit_s: float = 600) -> None:
    deadline = time.monotonic() + limit_s
    while not all(p.exists() for p in paths):
        for proc in procs:
            if proc.poll() is not None:
                raise RuntimeError(f"a worker exited early: {proc.communicate()[1][-3000:]}")
        if time.monotonic() > deadline:
            raise RuntimeError("workers did not get ready")
        time.sleep(0.05)


def ready_then_go(ready: Path, go: Path) -> None:
    """Say this worker is ready, then wait for the start signal (all workers start together)."""
    ready.write_text("ready")
    while not go.exists():
        time.sleep(0.005)
