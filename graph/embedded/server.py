"""The embedded llama.cpp server's lifecycle (parent side; the process itself is
``graph/embedded_llm.py``).

``await embedded_server(data_dir).start(entry)`` → base URL ``http://127.0.0.1:<port>/v1``:
the model file is located, assembled and verified first (``graph/embedded/assembly.py``, in a
thread), then the server starts on a free port and ``/health`` is polled until it answers.
One server per agent process; asking for another catalog entry, or other serving options,
restarts it; its log and KV cache follow the data dir of the latest caller
(:func:`embedded_server`).
``stop()`` / :func:`astop_embedded_server` end its whole process group (SIGTERM, grace, SIGKILL);
``stop`` is also registered with ``atexit``.

Serving settings come from the catalog entry (context size, threads); for tuning they can be
overridden by environment variables, which are not ``Context`` fields because they describe the
machine rather than a run: ``HERMES_EMBEDDED_THREADS``, ``HERMES_EMBEDDED_BATCH_THREADS``,
``HERMES_EMBEDDED_CTX``, ``HERMES_EMBEDDED_BATCH``, ``HERMES_EMBEDDED_UBATCH``,
``HERMES_EMBEDDED_CACHE_REUSE`` (see ``graph/embedded_llm.py --help``).

**The prompt's KV cache outlives the process** (issue 19): the first call of a new process
otherwise evaluates the whole ~2,000-token system turn and tool list again (117 s of a 3-minute
demo on 2 cores). When the server stops, its slot's KV cache — the last prompt, whose head is
the system turn and the rendered tools — is saved with llama.cpp's ``/slots/0?action=save``
into ``<data_dir>/kv-cache/`` (under the data dir, never a shared cache: the tokens are the
user's prompt, memories included); the next server for the same key restores it
(``action=restore``) before its first call, and llama.cpp's prompt cache then evaluates only
the tokens after the common prefix. The file is keyed on what makes a KV cache valid: the
GGUF's SHA-256, the chat template's text and the serving options (context, batch sizes)
(:func:`kv_cache_name`). A changed prefix needs no invalidation — llama.cpp compares tokens
and reuses only the shared head — and a file that cannot be restored is deleted. Saving writes
a temporary file and renames it (several processes may share a data dir) and keeps the old
file when the slot is empty. Measured (0.5B model, ~2,300-token prompt, loaded machine): 160 s
cold, 2.6 s restored.

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
import hashlib
import logging
import os
import socket
import sys
from io import BufferedWriter
from pathlib import Path

import httpx
from tenacity import AsyncRetrying, retry_if_exception_type, stop_after_delay, wait_fixed

from base.environment import inherited
from graph.context import MachineSettings
from graph.embedded.assembly import ensure_model_file
from graph.embedded.catalog import EmbeddedModel
from graph.embedded.errors import ModelUnavailableError
from tools.procs import astop_group, kill_process_tree

#: The server's log and its KV-cache folder inside the data dir it serves.
LOG_FILE, KV_FOLDER = "embedded-llm.log", "kv-cache"
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


log = logging.getLogger(__name__)

#: Seconds a slot save or restore may take (tens of MB written or read; ~20-40 ms measured).
KV_IO_TIMEOUT_S = 30.0


def kv_cache_name(entry: EmbeddedModel, options: list[str]) -> str:
    """File name of ``entry``'s saved KV cache: ``<model name>-<12 hex>.bin``, the hex a SHA-256
    of the GGUF's SHA-256, the chat template's text and the serving ``options`` — what a
    restored cache must match to be valid."""
    digest = hashlib.sha256()
    for part in (entry.sha256, (TEMPLATES / entry.template).read_text(), *options):
        digest.update(part.encode())
        digest.update(b"\0")
    return f"{entry.name}-{digest.hexdigest()[:12]}.bin"


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]  # (host, port) of an AF_INET socket
        return port


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

    def __init__(
        self, log_path: Path | None = None, ready_timeout_s: float = 120.0, kv_dir: Path | None = None
    ) -> None:
        self.log_path = log_path
        self.ready_timeout_s = ready_timeout_s
        #: where the KV cache is saved across processes (module docstring), made absolute when
        #: the server starts; None: not kept
        self.kv_dir = kv_dir
        #: the KV folder the latest caller's data dir asks for (:meth:`use_data_dir`), and the
        #: one :attr:`kv_dir` was made from
        self._kv_wanted, self._kv_from = kv_dir, kv_dir
        self.kv_name: str | None = None
        #: the serving options the running process was started with (:func:`serve_options`)
        self.options: list[str] = []
        self.process: asyncio.subprocess.Process | None = None
        self.base_url: str | None = None
        self.model: EmbeddedModel | None = None
        self._lock = asyncio.Lock()
        self._atexit = False

    def use_data_dir(self, data_dir: str | Path) -> None:
        """Serve the runs of ``data_dir`` from now on: a process started later logs into its
        ``embedded-llm.log``, and the KV cache is saved into and restored from its
        ``kv-cache/`` — the prompt of one data dir is never saved into another's (the switch
        happens in :meth:`start`, before the next call)."""
        self.log_path = Path(data_dir) / LOG_FILE
        self._kv_wanted = Path(data_dir) / KV_FOLDER

    async def start(self, entry: EmbeddedModel) -> str:
        """The base URL of a server for ``entry``: the running one when it serves ``entry``
        with the current serving options, else a new process (the old one stopped). Called
        before every model call (``graph.resources.get_model``)."""
        async with self._lock:
            options = serve_options(entry)
            running = self.base_url and self.process and self.process.returncode is None
            if running and self.model == entry and self.options == options:
                if self._kv_wanted != self._kv_from:
                    await self._switch_kv(self.base_url.removesuffix("/v1"))  # type: ignore[union-attr]
                return self.base_url  # type: ignore[return-value]
            if running:
                await self.astop()  # another model or other serving options were asked for
            path = await asyncio.to_thread(ensure_model_file, entry)
            kv: list[str] = []
            self.kv_dir, self._kv_from = self._kv_wanted, self._kv_wanted
            if self.kv_dir is not None:
                # absolute: the server runs in the project root, the data dir may be relative to ours
                self.kv_dir = await asyncio.to_thread(self._make_kv_dir, self.kv_dir)
                self.kv_name = await asyncio.to_thread(kv_cache_name, entry, options)
                kv = ["--slot-dir", str(self.kv_dir)]
            port = _free_port()
            log = await asyncio.to_thread(self._open_log) if self.log_path else asyncio.subprocess.DEVNULL
            # propagation, not a settings read: the server inherits this process's environment
            env = inherited(OMP_WAIT_POLICY="PASSIVE")  # unless set: see the module docstring
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
                *kv,
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
            self.model, self.options = entry, options
            self.base_url = f"{url}/v1"
            await self._restore_kv(url)
            return self.base_url

    async def _switch_kv(self, url: str) -> None:
        """Another data dir's runs from now on: the slot (the last prompt, the previous data
        dir's) is saved into the previous data dir's folder, then the new one's saved cache, if
        any, is restored."""
        await asyncio.to_thread(self._save_kv)
        wanted = self._kv_wanted
        self.kv_dir = None if wanted is None else await asyncio.to_thread(self._make_kv_dir, wanted)
        self._kv_from = wanted
        await self._restore_kv(url)

    @staticmethod
    def _make_kv_dir(path: Path) -> Path:  # blocking: called through asyncio.to_thread
        path = path.absolute()
        path.mkdir(parents=True, exist_ok=True)
        return path

    async def _restore_kv(self, url: str) -> None:
        """Load the saved KV cache into slot 0 (module docstring); a file llama.cpp refuses is
        deleted. Never raises: without the cache the first call is only slower."""
        if self.kv_dir is None or self.kv_name is None or not (self.kv_dir / self.kv_name).exists():
            return
        try:
            async with httpx.AsyncClient(timeout=KV_IO_TIMEOUT_S) as client:
                response = await client.post(f"{url}/slots/0?action=restore", json={"filename": self.kv_name})
            response.raise_for_status()
            log.info("embedded model: KV cache restored (%s tokens)", response.json().get("n_restored"))
        except (httpx.HTTPError, ValueError) as exc:
            log.warning("embedded model: saved KV cache %s not usable (%s); deleted", self.kv_name, exc)
            (self.kv_dir / self.kv_name).unlink(missing_ok=True)

    def _save_kv(self) -> None:
        """Save slot 0's KV cache for the next process (module docstring): into a temporary
        file, renamed over the old one only when the slot held tokens. Never raises."""
        if self.kv_dir is None or self.kv_name is None or not self.base_url:
            return
        url = self.base_url.removesuffix("/v1")
        temporary = f"{self.kv_name}.{os.getpid()}.tmp"
        try:
            response = httpx.post(f"{url}/slots/0?action=save", json={"filename": temporary}, timeout=KV_IO_TIMEOUT_S)
            response.raise_for_status()
            if int(response.json().get("n_saved") or 0) > 0:
                os.replace(self.kv_dir / temporary, self.kv_dir / self.kv_name)
        except (httpx.HTTPError, ValueError, OSError) as exc:
            log.debug("embedded model: KV cache not saved (%s)", exc)
        finally:
            (self.kv_dir / temporary).unlink(missing_ok=True)

    def _open_log(self) -> BufferedWriter:  # blocking file I/O: called through asyncio.to_thread
        assert self.log_path is not None
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        return open(self.log_path, "ab")

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
        """Save the KV cache, then stop the server and everything in its process group.
        Idempotent."""
        if self.process is not None and self.process.returncode is None:
            self._save_kv()
        process, self.process, self.base_url, self.model = self.process, None, None, None
        if process is None or process.returncode is not None:
            return
        kill_process_tree(process.pid, STOP_GRACE_S, pgid=process.pid)

    async def astop(self, grace_s: float = 3.0) -> None:
        """Stop from async code: SIGTERM to the process group, ``grace_s`` seconds to exit, then
        SIGKILL (``tools.procs.astop_group``; the child is reaped by its own event loop). The
        KV cache is saved first (a blocking HTTP call of tens of milliseconds, in a thread)."""
        if self.process is not None and self.process.returncode is None:
            await asyncio.to_thread(self._save_kv)
        process, self.process, self.base_url, self.model = self.process, None, None, None
        if process is None or process.returncode is not None:
            return
        await astop_group(process, grace_s)


_EMBEDDED: EmbeddedLlamaServer | None = None


def embedded_server(data_dir: str | Path = ".hermes") -> EmbeddedLlamaServer:
    """The process-wide embedded server (one llama.cpp process per agent process, created on
    first use), serving ``data_dir``'s runs: its log and KV cache follow the data dir of the
    latest caller (:meth:`EmbeddedLlamaServer.use_data_dir`); the model and the serving options
    restart it when they change (:meth:`EmbeddedLlamaServer.start`). Stopped at exit (``atexit``)."""
    global _EMBEDDED  # noqa: PLW0603 - one llama.cpp process per agent process, stopped at exit
    if _EMBEDDED is None:
        _EMBEDDED = EmbeddedLlamaServer(log_path=Path(data_dir) / LOG_FILE, kv_dir=Path(data_dir) / KV_FOLDER)
    else:
        _EMBEDDED.use_data_dir(data_dir)
    return _EMBEDDED


def stop_embedded_server() -> None:
    """Stop the process-wide embedded server, if one was started."""
    if _EMBEDDED is not None:
        _EMBEDDED.stop()


async def astop_embedded_server(grace_s: float = 3.0) -> None:
    """Stop the process-wide embedded server from async code (see :meth:`EmbeddedLlamaServer.astop`)."""
    if _EMBEDDED is not None:
        await _EMBEDDED.astop(grace_s)
