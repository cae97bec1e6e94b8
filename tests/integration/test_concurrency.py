"""Many ``hermes run`` processes on one data directory at once (checkpoints, memory, ledger
SQLite files in WAL mode with a busy timeout, graph/checkpoints.py, memory/db.py): every run
finishes, none reports "database is locked", and every thread's checkpoint reads back — on a
new data directory, while another writer holds the checkpoint file's write lock for longer
than sqlite3's default 5 s timeout, and on a machine made busy by CPU-bound processes (issue 23:
under heavy load 2 of 12 runs died in ``aput`` with "database is locked" and their threads had
no checkpoint; graph/checkpoints.py now retries a transient lock). And the same 16 processes
with ``HERMES_POSTGRES_URL`` on a new PostgreSQL database: every process creates the checkpoint
tables at once (graph/postgres.py serialises ``setup()``; the stock saver's concurrent setups
fail with ``UniqueViolation`` — measured 35 of 40 — and a blocking advisory lock deadlocks with
``CREATE INDEX CONCURRENTLY``).

The processes are the real console script against the OpenAI-compatible stub
(tests/support/openai_stub.py): an in-process scripted model cannot reach other processes,
and 16 embedded llama.cpp servers would not fit on the machine."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from graph.builder import make_graph
from graph.checkpoints import checkpoints_file, open_checkpointer
from tests.integration.conftest import ROOT
from tests.support.openai_stub import OpenAIStub

pytestmark = pytest.mark.slow
PROCESSES = 16
ANSWER = "Hello from the stub model."


@pytest.fixture
def openai_stub():
    with OpenAIStub(answer=ANSWER) as stub:
        yield stub
        stub.on_request = None


class _LockHolder:
    """Like a long writer (a backup, a big transaction): at the stub's first request — before
    its answer is sent — take the checkpoint file's write lock (``BEGIN IMMEDIATE``) and hold it
    ``seconds``. The run that asked has its next checkpoint write waiting all that time: longer
    than sqlite3's default 5 s timeout (the stock ``AsyncSqliteSaver.from_conn_string`` fails
    there with "database is locked"), shorter than the 30 s busy timeout of graph/checkpoints.py."""

    def __init__(self, db: Path, seconds: float = 8.0) -> None:
        self.db, self.seconds = db, seconds
        self.taken = threading.Event()
        self.released = threading.Event()
        self._once = threading.Lock()
        self._timer: threading.Timer | None = None

    def __call__(self, body: dict) -> None:  # the stub's on_request hook
        if not self._once.acquire(blocking=False):
            return
        con = sqlite3.connect(self.db, timeout=30, isolation_level=None, check_same_thread=False)
        con.execute("BEGIN IMMEDIATE")
        self.taken.set()

        def release() -> None:
            con.execute("COMMIT")
            con.close()
            self.released.set()

        self._timer = threading.Timer(self.seconds, release)
        self._timer.start()

    def wait_released(self) -> None:
        if self._timer is not None:
            self._timer.join(timeout=60)


class _CpuLoad:
    """``count`` CPU-bound processes (a busy loop each, one session each) while the runs go on:
    a heavily loaded machine, where a process holding a SQLite lock is descheduled mid-write.
    Stopped (SIGKILL of each group) on exit."""

    def __init__(self, count: int) -> None:
        self.count = count
        self.procs: list[subprocess.Popen] = []

    def __enter__(self) -> _CpuLoad:
        for _ in range(self.count):
            self.procs.append(subprocess.Popen([sys.executable, "-c", "while True: pass"], start_new_session=True))
        return self

    def __exit__(self, *exc: object) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def hermes_command() -> list[str]:
    script = Path(sys.executable).parent / "hermes"
    return [str(script)] if script.exists() else [sys.executable, "-m", "graph.cli"]


@pytest.mark.timeout(600)
@pytest.mark.parametrize("case", ["new_data_dir", "a_writer_holds_the_lock", "under_cpu_load", "postgres_new_database"])
async def test_sixteen_runs_on_one_data_dir(tmp_path, openai_stub, case, request):
    """``new_data_dir``: every process creates the files at once (the WAL switch of a new file
    needs it to itself); ``a_writer_holds_the_lock``: see :class:`_LockHolder`;
    ``under_cpu_load``: two CPU-bound processes per core run beside them (:class:`_CpuLoad`);
    ``postgres_new_database``: checkpoints in a new PostgreSQL database, created by all at once."""
    data_dir = tmp_path / "data"
    postgres = request.getfixturevalue("postgres_url") if case.startswith("postgres") else ""
    holder: _LockHolder | None = None
    if case == "a_writer_holds_the_lock":
        async with open_checkpointer(checkpoints_file(data_dir)):
            pass  # the file and its tables exist
        holder = openai_stub.on_request = _LockHolder(checkpoints_file(data_dir))
    env = {**os.environ, **openai_stub.env(), "HERMES_DATA_DIR": str(data_dir), "LANGSMITH_TRACING": "false"}
    env.pop("HERMES_DEBUG", None)
    env["HERMES_POSTGRES_URL"] = postgres
    threads = [f"conc-{i:02d}" for i in range(PROCESSES)]
    logs = tmp_path / "logs"
    logs.mkdir()
    procs: list[tuple[str, subprocess.Popen]] = []
    started = time.monotonic()
    with _CpuLoad(2 * (os.cpu_count() or 2) if case == "under_cpu_load" else 0):
        try:
            for thread in threads:  # all started before any is waited for: they overlap
                out = open(logs / f"{thread}.out", "wb")  # noqa: SIM115 - closed with the process
                procs.append(
                    (
                        thread,
                        subprocess.Popen(
                            [*hermes_command(), "run", f"Say hello to {thread}.", "--thread", thread, "--json"],
                            cwd=ROOT,
                            env=env,
                            stdout=out,
                            stderr=subprocess.STDOUT,
                            start_new_session=True,
                        ),
                    )
                )
                out.close()
            deadline = time.monotonic() + 480
            for _, proc in procs:
                proc.wait(timeout=max(1.0, deadline - time.monotonic()))
        finally:
            for _, proc in procs:
                if proc.poll() is None:
                    os.killpg(proc.pid, signal.SIGKILL)
                    proc.wait()
            if holder is not None:
                holder.wait_released()
    elapsed = time.monotonic() - started
    if holder is not None:
        assert holder.taken.is_set() and holder.released.is_set()

    failures = []
    for thread, proc in procs:
        text = (logs / f"{thread}.out").read_text(errors="replace")
        if proc.returncode != 0 or "database is locked" in text.lower():
            failures.append(f"{thread}: exit {proc.returncode}\n{text[-1500:]}")
    assert not failures, f"{len(failures)} of {PROCESSES} runs failed ({elapsed:.0f} s):\n" + "\n".join(failures)
    assert len(openai_stub.requests) >= PROCESSES

    assert checkpoints_file(data_dir).exists() == (not postgres)
    async with open_checkpointer(checkpoints_file(data_dir), postgres=postgres) as saver:
        agent = make_graph(checkpointer=saver)
        for thread in threads:
            saved = await saver.aget_tuple({"configurable": {"thread_id": thread}})
            assert saved is not None, f"no checkpoint for {thread}"
            state = await agent.aget_state({"configurable": {"thread_id": thread}})
            contents = [m.content for m in state.values["messages"]]
            assert contents[0] == f"Say hello to {thread}." and contents[-1] == ANSWER, (thread, contents)
            assert state.next == ()
    print(
        f"{PROCESSES} concurrent runs ({case}) finished in {elapsed:.1f} s"
        + (f"; a writer held the lock {holder.seconds:g} s" if holder else "")
    )
