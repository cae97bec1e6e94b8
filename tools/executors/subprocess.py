"""Local-subprocess executor (DESIGN §2 "local subprocess (dev)"; seed §2.2).

Each run is a fresh ``python -m tools.executors.worker`` process:
  * started with ``start_new_session=True`` (own process group), cwd = ``data_dir``;
  * environment scrubbed of anything that looks like a secret (names containing KEY, TOKEN,
    SECRET, PASSWORD, PASSWD, CREDENTIAL), ``PYTHONPATH`` set so ``tools`` imports;
  * address-space limit ``memory_mb`` (MiB) and CPU limit ~``timeout_s`` via ``setrlimit``;
  * over ``timeout_s`` seconds: SIGTERM to the process group and every descendant (found with
    psutil), 1 s grace, then SIGKILL; :class:`ToolTimeout` is raised. Stray descendants left
    by a run that finished normally are cleaned up the same way.
Async-safe: only asyncio subprocess calls in the event loop; psutil waits run in a thread.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import sys
from pathlib import Path
from typing import Any

from tools.errors import ToolFailed, ToolTimeout
from tools.procs import KILL_GRACE_S, kill_process_tree

#: Environment variable names matching this are never passed to a tool process.
SECRET_ENV_RE = re.compile(r"KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL", re.IGNORECASE)
_PROJECT_ROOT = Path(__file__).resolve().parents[2]
_STDERR_TAIL = 2000
#: Bytes kept of a worker's stdout / stderr (a larger result is a tool error).
_MAX_OUTPUT = 32 * 1024 * 1024


async def _read_all(stream: asyncio.StreamReader | None, cap: int) -> bytes:
    if stream is None:
        return b""
    chunks: list[bytes] = []
    size = 0
    while chunk := await stream.read(65536):
        if size < cap:
            chunks.append(chunk[: cap - size])
        size += len(chunk)
    return b"".join(chunks)


def scrubbed_env(extra_paths: tuple[str, ...] = ()) -> dict[str, str]:
    """A copy of ``os.environ`` without secret-looking names, with PYTHONPATH = project root
    (+ ``extra_paths``)."""
    env = {k: v for k, v in os.environ.items() if not SECRET_ENV_RE.search(k)}
    env["PYTHONPATH"] = os.pathsep.join([str(_PROJECT_ROOT), *extra_paths])
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    env["PYTHONUNBUFFERED"] = "1"
    return env


class SubprocessExecutor:
    """Runs ``"module:function"`` entrypoints in a fresh worker process per call.

    Args:
        data_dir     working directory of every run (tools see it as ``data_dir``).
        memory_mb    address-space limit per run in MiB (``None`` = no limit).
        extra_paths  added to the worker's PYTHONPATH after the project root.
    """

    def __init__(self, data_dir: Path, *, memory_mb: int | None = 1024, extra_paths: tuple[str, ...] = ()) -> None:
        self.data_dir = Path(data_dir).resolve()
        self.memory_mb = memory_mb
        self.extra_paths = tuple(str(p) for p in extra_paths)

    async def run(self, entrypoint: str, args: dict[str, Any], *, timeout_s: float, request_id: str) -> Any:
        """Run ``entrypoint(**args)`` in a worker; see :class:`~tools.executors.base.Executor`."""
        payload = json.dumps({
            "entrypoint": entrypoint,
            "args": args,
            "request_id": request_id,
            "limits": {"memory_mb": self.memory_mb, "cpu_s": timeout_s},
        }).encode()
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "tools.executors.worker",
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            cwd=str(self.data_dir),
            env=scrubbed_env(self.extra_paths),
            start_new_session=True,
        )
        readers = [asyncio.ensure_future(_read_all(proc.stdout, _MAX_OUTPUT)),
                   asyncio.ensure_future(_read_all(proc.stderr, _MAX_OUTPUT))]
        timed_out = False
        try:
            try:
                await asyncio.wait_for(self._feed_and_wait(proc, payload), timeout_s)
            except TimeoutError:
                timed_out = True
        finally:
            # Always: the whole group goes (timeout, cancellation, or strays left after success).
            # Killing strays also closes their copies of our pipes, so the readers see EOF.
            await asyncio.to_thread(kill_process_tree, proc.pid, KILL_GRACE_S, pgid=proc.pid)
            try:
                await asyncio.wait_for(proc.wait(), KILL_GRACE_S * 3)
            except TimeoutError:  # a stray outside the group still holds a pipe
                pass
            _, pending = await asyncio.wait(readers, timeout=KILL_GRACE_S)
            for task in pending:  # a stray that escaped the group still holds a pipe
                task.cancel()
        stdout = readers[0].result() if readers[0].done() and not readers[0].cancelled() else b""
        stderr = readers[1].result() if readers[1].done() and not readers[1].cancelled() else b""
        if timed_out:
            raise ToolTimeout(f"{entrypoint} exceeded {timeout_s:g} s; process group terminated")
        tail = stderr.decode(errors="replace")[-_STDERR_TAIL:].strip()
        line = stdout.decode(errors="replace").strip().splitlines()[-1:] if stdout else []
        try:
            reply = json.loads(line[0]) if line else None
        except json.JSONDecodeError:
            reply = None
        if not isinstance(reply, dict):
            raise ToolFailed(
                f"{entrypoint} exited with code {proc.returncode} without a result"
                + (f"; stderr: {tail}" if tail else "")
            )
        if not reply.get("ok"):
            raise ToolFailed(f"{reply.get('error_type', 'Error')}: {reply.get('error', '')}")
        return reply.get("result")

    @staticmethod
    async def _feed_and_wait(proc: asyncio.subprocess.Process, payload: bytes) -> None:
        assert proc.stdin is not None
        try:
            proc.stdin.write(payload)
            await proc.stdin.drain()
            proc.stdin.close()
        except (BrokenPipeError, ConnectionResetError):
            pass  # the worker died before reading: reported from its exit code
        # Not ``proc.wait()``: asyncio only returns from it once every pipe is closed, and a
        # stray grandchild holding stdout would keep it waiting. ``returncode`` is set at exit.
        while proc.returncode is None:
            await asyncio.sleep(0.02)

    async def aclose(self) -> None:
        """Nothing persistent to close (one process per run)."""
