"""The embedded llama.cpp server's lifecycle (parent side; the process itself is
``graph/embedded_llm.py``).

``await embedded_server(data_dir).start(entry)`` → base URL ``http://127.0.0.1:<port>/v1``:
the model file is located, assembled and verified first (``graph/embedded/assembly.py``, in a
thread), then the server starts on a free port and ``/health`` is polled until it answers.
One server per agent process; asking for another catalog entry restarts it with that model.
``stop()`` / :func:`astop_embedded_server` end its whole process group (SIGTERM, grace, SIGKILL);
``stop`` is also registered with ``atexit``.

Serving settings come from the catalog entry (context size, threads); for tuning they can be
overridden by environment variables, which are not ``Context`` fields because they describe the
machine rather than a run: ``HERMES_EMBEDDED_THREADS``, ``HERMES_EMBEDDED_BATCH_THREADS``,
``HERMES_EMBEDDED_CTX``, ``HERMES_EMBEDDED_BATCH``, ``HERMES_EMBEDDED_UBATCH``,
``HERMES_EMBEDDED_CACHE_REUSE`` (see ``graph/embedded_llm.py --help``).

The server runs with ``OMP_WAIT_POLICY=PASSIVE`` unless the environment sets it, and by default
with one generation thread and one prompt thread per core (catalog). llama.cpp's OpenMP threads
otherwise spin at every barrier: measured on a shared 2-core machine, 2 spinning generation
threads were 5-20x slower than 1 (0.7-6.7 vs ~38 tokens/s for the 0.5B) as soon as other work
ran; passive waiting stops the collapse, and 1 generation thread + 2 prompt threads was the best
or equal setting in 5 of 6 paired runs (evals/README.md "Embedded models").
"""

from __future__ import annotations

import asyncio
import atexit
import os
import socket
import sys
from pathlib import Path

import httpx
from tenacity import AsyncRetrying, retry_if_exception_type, stop_after_delay, wait_fixed

from graph.context import MachineSettings
from graph.embedded.assembly import ensure_model_file
from graph.embedded.catalog import EmbeddedModel
from graph.embedded.errors import ModelUnavailableError
from tools.procs import astop_group, kill_process_tree

STOP_GRACE_S = 3.0  # SIGTERM → SIGKILL grace of a synchronous stop (atexit)
PROJECT_ROOT = Path(__file__).resolve().parent.parent.parent  # at import: no file-system calls in the loop
TEMPLATES = PROJECT_ROOT / "graph" / "templates"
_OVERRIDES = {  # environment variable → graph/embedded_llm.py option
    "HERMES_EMBEDDED_THREADS": "--threads",
    "HERMES_EMBEDDED_BATCH_THREADS": "--batch-threads",
    "HERMES_EMBEDDED_CTX": "--ctx",
    "HERMES_EMBEDDED_BATCH": "--batch",
    "HERMES_EMBEDDED_UBATCH": "--ubatch",
    "HERMES_EMBEDDED_CACHE_REUSE": "--cache-reuse",
}


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def serve_options(entry: EmbeddedModel, environ: dict[str, str] | None = None) -> list[str]:
    """Options of ``graph/embedded_llm.py`` for ``entry``: the catalog's settings, then any
    ``HERMES_EMBEDDED_*`` override (integers; a bad value raises :class:`ModelUnavailableError`).
    ``environ``: the overrides ``{variable: value}``; None = the machine's
    (``graph.context.MachineSettings``)."""
    env = MachineSettings().embedded_overrides() if environ is None else environ
    options = {
        "--ctx": str(entry.n_ctx),
        "--threads": str(entry.threads),
        "--batch-threads": str(entry.batch_threads or os.cpu_count() or 1),
    }
    for var, option in _OVERRIDES.items():
        if (value := env.get(var)) is None or value == "":
            continue
        if not value.isdigit():
            raise ModelUnavailableError(f"{var}={value!r} is not a non-negative integer; unset it or fix it")
        options[option] = value
    return [x for pair in options.items() for x in pair]


class EmbeddedLlamaServer:
    """One embedded llama.cpp server process per agent process.

    ``await start(entry)`` → base URL (``http://127.0.0.1:<port>/v1``); raises
    :class:`ModelUnavailableError` if the model is not installed or fails its checks, or the
    server is not ready within ``ready_timeout_s`` (seconds).
    """

    def __init__(self, log_path: Path | None = None, ready_timeout_s: float = 120.0) -> None:
        self.log_path = log_path
        self.ready_timeout_s = ready_timeout_s
        self.process: asyncio.subprocess.Process | None = None
        self.base_url: str | None = None
        self.model: EmbeddedModel | None = None
        self._lock = asyncio.Lock()
        self._atexit = False

    async def start(self, entry: EmbeddedModel) -> str:
        async with self._lock:
            running = self.base_url and self.process and self.process.returncode is None
            if running and self.model == entry:
                return self.base_url  # type: ignore[return-value]
            if running:
                await self.astop()  # another model was asked for
            path = await asyncio.to_thread(ensure_model_file, entry)
            options = serve_options(entry)
            port = _free_port()
            log = await asyncio.to_thread(self._open_log) if self.log_path else asyncio.subprocess.DEVNULL
            # propagation, not a settings read: the server inherits this process's environment
            env = {**os.environ}
            env.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # see the module docstring
            self.process = await asyncio.create_subprocess_exec(
                sys.executable,
                "-m",
                "graph.embedded_llm",
                "--port",
                str(port),
                "--model-path",
                str(path),
                "--template",
                str(TEMPLATES / entry.template),
                "--alias",
                entry.name,
                *options,
                "--parent-pid",
                str(os.getpid()),
                stdin=asyncio.subprocess.DEVNULL,
                stdout=log,
                stderr=log,
                start_new_session=True,
                cwd=str(PROJECT_ROOT),
                env=env,
            )
            if not isinstance(log, int):  # a file we opened (DEVNULL is an int)
                log.close()
            if not self._atexit:
                atexit.register(self.stop)
                self._atexit = True
            url = f"http://127.0.0.1:{port}"
            try:
                await self._wait_ready(url)
            except Exception as exc:
                self.stop()
                raise ModelUnavailableError(
                    f"the embedded llama.cpp server ({entry.name}) did not become ready within "
                    f"{self.ready_timeout_s:.0f} s ({exc}); see {self.log_path or 'its log'}"
                ) from exc
            self.model = entry
            self.base_url = f"{url}/v1"
            return self.base_url

    def _open_log(self):  # blocking file I/O: called through asyncio.to_thread
        assert self.log_path is not None
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        return open(self.log_path, "ab")  # noqa: SIM115

    async def _wait_ready(self, url: str) -> None:
        async with httpx.AsyncClient(timeout=2.0) as client:
            async for attempt in AsyncRetrying(
                stop=stop_after_delay(self.ready_timeout_s),
                wait=wait_fixed(0.2),
                retry=retry_if_exception_type((httpx.HTTPError, RuntimeError)),
                reraise=True,
            ):
                with attempt:
                    if self.process is not None and self.process.returncode is not None:
                        raise ModelUnavailableError(f"embedded server exited with code {self.process.returncode}")
                    response = await client.get(f"{url}/health")
                    if response.status_code != 200:
                        raise RuntimeError(f"/health answered {response.status_code}")

    def stop(self) -> None:
        """Stop the server and everything in its process group. Idempotent."""
        process, self.process, self.base_url, self.model = self.process, None, None, None
        if process is None or process.returncode is not None:
            return
        kill_process_tree(process.pid, STOP_GRACE_S, pgid=process.pid)

    async def astop(self, grace_s: float = 3.0) -> None:
        """Stop from async code: SIGTERM to the process group, ``grace_s`` seconds to exit, then
        SIGKILL (``tools.procs.astop_group``; the child is reaped by its own event loop)."""
        process, self.process, self.base_url, self.model = self.process, None, None, None
        if process is None or process.returncode is not None:
            return
        await astop_group(process, grace_s)


_EMBEDDED: EmbeddedLlamaServer | None = None


def embedded_server(data_dir: str | Path = ".hermes") -> EmbeddedLlamaServer:
    """The process-wide embedded server (created on first use, logging to ``data_dir``)."""
    global _EMBEDDED
    if _EMBEDDED is None:
        _EMBEDDED = EmbeddedLlamaServer(log_path=Path(data_dir) / "embedded-llm.log")
    return _EMBEDDED


def stop_embedded_server() -> None:
    """Stop the process-wide embedded server, if one was started."""
    if _EMBEDDED is not None:
        _EMBEDDED.stop()


async def astop_embedded_server(grace_s: float = 3.0) -> None:
    """Stop the process-wide embedded server from async code (see :meth:`EmbeddedLlamaServer.astop`)."""
    if _EMBEDDED is not None:
        await _EMBEDDED.astop(grace_s)
