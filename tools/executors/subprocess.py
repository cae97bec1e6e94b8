"""Local-subprocess executor (DESIGN §2 "local subprocess (dev)"; seed §2.2).

Each run is a fresh ``python -P -m tools.executors.worker`` process:
  * started with ``start_new_session=True`` (own process group), cwd = ``data_dir``;
  * environment scrubbed of anything that looks like a secret (names containing KEY, TOKEN,
    SECRET, PASSWORD, PASSWD, PASSPHRASE, CREDENTIAL, AUTH, PRIVATE, COOKIE), ``PYTHONPATH`` set
    so ``tools`` imports, ``TMPDIR`` a private directory removed after the run;
  * resource limits applied by the worker before the tool is imported (``setrlimit``):
    address space ``memory_mb`` MiB, CPU time ~``timeout_s``, ``open_files``, ``max_procs``,
    file size ``file_mb`` MiB;
  * process count also bounded by a **pids cgroup** (``max_procs``; :mod:`tools.executors.cgroups`)
    when the machine lets us create one (cgroup v1 ``pids`` hierarchy or a delegated v2 subtree; root ignores
    ``RLIMIT_NPROC``, a cgroup it cannot ignore). The cgroup also lists every descendant, even
    one that called ``setsid``, so nothing escapes the kill;
  * **no network** unless the call asks for it (``run(..., network=True)``: the tool's
    ``ToolSpec.network``; or the executor's ``network=True`` for every call): a new network
    namespace, plus Landlock's TCP rules (kernel ABI >= 4);
  * **none of the agent's own state** (:mod:`tools.executors.agent_state`: ``AGENT_STATE``, the
    checkpoints, the idempotency ledger, the memory store, the mirror, MCP tokens ...), nor other
    threads' ``payloads/`` folders, nor what every thread shares (``SHARED_STATE``: the reports of
    before they were per thread; the schedule, ``SCHEDULE_STATE``, unless the call's tool
    schedules or reads it: ``run(..., schedule=True)``): covered in a private mount namespace and
    refused by the audit hook (``private_entries``);
  * a **workspace per thread** (:mod:`tools.executors.workspace`): ``threads/<thread>/`` of the
    request's thread is the only place the run may write (plus its private temp directory; a
    scheduling call may also write the data directory's top level, where the schedule lives),
    injected as the ``workspace`` argument of a tool that declares one; the ``threads/`` folder
    is covered whole and only the run's own folder is mounted back, so no other thread's folder
    — one made during the run included — is visible;
  * file system confined to ``data_dir`` (Landlock where the kernel has it, plus a Python audit
    hook everywhere): ``../`` paths, absolute paths elsewhere and ``/proc/<agent>/environ`` are
    refused (see :mod:`tools.executors.worker`). The one exception is the user's database
    (``database``, the setting's value given by the toolbox): that file and its ``-wal``/``-shm``/
    ``-journal`` companions are readable (never writable), and tools declaring a ``database``
    parameter get its absolute path injected (a model-supplied value is dropped);
  * over ``timeout_s`` seconds: SIGTERM to the process group, every descendant (psutil) and
    every cgroup member, ``grace_s`` (0.5 s) grace, then SIGKILL; :class:`ToolTimeout` is raised
    within 1 s of the limit. Stray descendants left by a run that finished normally are cleaned
    up the same way.
Async-safe: only asyncio subprocess calls in the event loop; file-system set-up, psutil waits
and cgroup work run in a thread.

Namespaces need root or unprivileged user namespaces (measured here, as root: both work; with
them a tool can neither connect to 127.0.0.1 nor read ``checkpoints.sqlite``). Where the kernel
allows neither, the first run logs one warning naming what is missing, and the container
backend (bubblewrap, often setuid-installed) is the way to confine.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import re
import shutil
import signal
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from base.environment import inherited
from tools.errors import ToolFailed, ToolTimeout
from tools.executors import worker as _worker  # noqa: F401  (writes its .pyc: workers run without)
from tools.executors.agent_state import AGENT_STATE, private_entries
from tools.executors.cgroups import PidsCgroup
from tools.executors.links import remove_escaping_links
from tools.executors.workspace import THREADS, ensure_workspace
from tools.procs import kill_process_tree, signal_group

#: Environment variable names matching this are never passed to a tool process.
SECRET_ENV_RE = re.compile(r"KEY|TOKEN|SECRET|PASSWORD|PASSWD|PASSPHRASE|CREDENTIAL|AUTH|PRIVATE|COOKIE", re.IGNORECASE)
_PROJECT_ROOT = Path(__file__).resolve().parents[2]
_STDERR_TAIL = 2000
#: Bytes kept of a worker's stdout / stderr (a larger result is a tool error).
_MAX_OUTPUT = 32 * 1024 * 1024
#: Seconds between SIGTERM and SIGKILL of a tool run (keeps the kill within 1 s of the limit).
TERM_GRACE_S = 0.5
#: Command that starts the worker; ``-P`` keeps the working directory off ``sys.path``.
WORKER_ARGV = ("-P", "-m", "tools.executors.worker")

log = logging.getLogger(__name__)


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


def scrubbed_env(extra_paths: tuple[str, ...] = (), *, allow: tuple[str, ...] = ()) -> dict[str, str]:
    """A copy of this process's environment (:func:`base.environment.inherited`) without
    secret-looking names (except those in ``allow``), with
    PYTHONPATH = project root (+ ``extra_paths``)."""
    # propagation, not a settings read: the worker inherits this process's environment, filtered
    env = {k: v for k, v in inherited().items() if k in allow or not SECRET_ENV_RE.search(k)}
    env["PYTHONPATH"] = os.pathsep.join([str(_PROJECT_ROOT), *extra_paths])
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    env["PYTHONUNBUFFERED"] = "1"
    env.pop("PYTHONSTARTUP", None)
    env.pop("PYTHONINSPECT", None)
    return env


# -- the executor -------------------------------------------------------------------------------


@dataclass
class RunContext:
    """Per-run resources: private temp dir and (when available) a pids cgroup."""

    tmpdir: Path
    cgroup: PidsCgroup | None
    extra: dict[str, Any] = field(default_factory=dict)


class SubprocessExecutor:
    """Runs ``"module:function"`` entrypoints in a fresh, confined worker process per call.

    Args:
        data_dir        working directory of every run (tools see it as ``data_dir``); the only
                        place the tool may write.
        memory_mb       address-space limit per process in MiB (``None`` = no limit).
        extra_paths     added to the worker's PYTHONPATH after the project root (readable).
        open_files      open-file limit per process.
        max_procs       processes per run (pids cgroup where available, RLIMIT_NPROC always).
        file_mb         largest file a run may write, MiB.
        confine         confine the file system to ``data_dir`` (Landlock + audit hook). On by
                        default; ``confine=False`` only for trusted local tools.
        network         True: every call may use the network. False (default): only a call
                        made with ``run(..., network=True)`` (a tool whose spec asks for it).
        hidden          names (prefixes) of the agent's state in ``data_dir`` a tool never sees
                        (default :data:`AGENT_STATE`); other threads' payloads are hidden too.
        workspace_only  True: a call writes only its thread's workspace (and its temp
                        directory), the top level of ``data_dir`` is read-only to it unless it
                        reaches the schedule (``run(..., schedule=True)``). On for every
                        executor :func:`tools.executors.make_executor` builds (the toolbox's);
                        False (the constructor's default, for generic tools that keep files
                        in ``data_dir``): every call may write all of ``data_dir`` it sees.
        extra_read      more paths the tool may read.
        database        the user's database setting (SQLite path or ``sqlite:///`` URL; None or
                        "" = none; the toolbox passes ``Context.database``). Resolved here against the current
                        directory (blocking); passed to tools as the ``database`` argument, and
                        the file (+ ``-wal``/``-shm``/``-journal``) is readable by the worker.
        env_allow       secret-looking variable names to pass through anyway.
        grace_s         SIGTERM → SIGKILL grace on timeout (s).
    """

    kind = "subprocess"

    def __init__(
        self,
        data_dir: Path,
        *,
        memory_mb: int | None = 1024,
        extra_paths: tuple[str, ...] = (),
        open_files: int = 256,
        max_procs: int = 64,
        file_mb: int = 1024,
        confine: bool = True,
        network: bool = False,
        hidden: tuple[str, ...] = AGENT_STATE,
        extra_read: tuple[str, ...] = (),
        env_allow: tuple[str, ...] = (),
        grace_s: float = TERM_GRACE_S,
        database: str | None = None,
        workspace_only: bool = False,
    ) -> None:
        self.data_dir = Path(data_dir).resolve()
        self.memory_mb = memory_mb
        self.extra_paths = tuple(str(p) for p in extra_paths)
        self.open_files = open_files
        self.max_procs = max_procs
        self.file_mb = file_mb
        self.confine = confine
        self.network = network
        self.hidden = tuple(hidden)
        self.workspace_only = workspace_only
        self._warned = False
        self.extra_read = tuple(str(p) for p in extra_read)
        self.env_allow = tuple(env_allow)
        self.grace_s = grace_s
        from tools.database_setting import database_location

        #: Absolute path of the user's database ("" = none; another engine's URL stays as given
        #: with its password hidden, so the tool can say why it is refused).
        self.database = database_location(database)

    # -- hooks for the container backend --------------------------------------------------------
    def _command(self, ctx: RunContext) -> list[str]:
        return [sys.executable, *WORKER_ARGV]

    def _worker_tmpdir(self, ctx: RunContext) -> str:
        return str(ctx.tmpdir)

    #: True: the parent moves the worker into its cgroup while the worker starts up (a cgroup
    #: migration waits ~10 ms for an RCU grace period; overlapped with the interpreter start it
    #: costs nothing). Safe because the worker forks nothing before it has read the payload,
    #: which is written only after the move.
    _parent_attaches_cgroup = True

    def _payload_extra(self, ctx: RunContext) -> dict[str, Any]:
        return {}

    #: True: the worker makes its own namespaces (network, hidden state); the bubblewrap
    #: backend makes them itself.
    _worker_namespaces = True

    # -- per-run set-up / tear-down (blocking: run in a thread) ---------------------------------
    def _setup(self, request_id: str = "", schedule: bool = False) -> RunContext:
        from tools.database_setting import database_read_paths

        tmpdir = Path(tempfile.mkdtemp(prefix="hermes-tool-"))
        ctx = RunContext(tmpdir=tmpdir, cgroup=PidsCgroup.create(self.max_procs) if self.max_procs else None)
        # per run: a -wal / -shm file may appear or go between runs
        ctx.extra["database_read"] = tuple(database_read_paths(self.database))
        keep = (*self.extra_paths, *self.extra_read, *ctx.extra["database_read"])
        hide = private_entries(self.data_dir, request_id, self.hidden, keep, schedule=schedule) if self.confine else []
        ctx.extra["hide"], ctx.extra["schedule"] = hide, schedule
        ctx.extra["shared_write"] = schedule or not self.workspace_only
        ctx.extra["workspace"] = str(ensure_workspace(self.data_dir, request_id))
        ctx.extra["request_id"], ctx.extra["keep"] = request_id, keep
        return ctx

    def _other_threads(self, ctx: RunContext) -> list[str]:
        """The workspaces of ``threads/`` other than the run's own (blocking: lists the folder)."""
        try:
            return [str(p) for p in (self.data_dir / THREADS).iterdir() if str(p) != ctx.extra["workspace"]]
        except OSError:
            return []

    def _teardown(self, ctx: RunContext, pid: int | None) -> None:
        if pid is not None and not ctx.extra.get("reaped"):  # cancelled before the kill ran
            self._teardown_procs(ctx, pid)
        if ctx.cgroup is not None:
            ctx.cgroup.remove()
        shutil.rmtree(ctx.tmpdir, ignore_errors=True)
        if self.confine and ctx.extra.get("hide") is not None:
            # the agent reads what the tool wrote: no link may lead it to what the tool could not see
            now = private_entries(
                self.data_dir, ctx.extra["request_id"], self.hidden, ctx.extra["keep"], schedule=ctx.extra["schedule"]
            )
            hidden = {*ctx.extra["hide"], *now, *self._other_threads(ctx)}
            remove_escaping_links(self.data_dir, hidden)

    # -- the call ---------------------------------------------------------------------------------
    async def run(
        self,
        entrypoint: str,
        args: dict[str, Any],
        *,
        timeout_s: float,
        request_id: str,
        network: bool = False,
        schedule: bool = False,
    ) -> Any:
        """Run ``entrypoint(**args)`` in a worker; see :class:`~tools.executors.base.Executor`.
        ``network``: this call may use the network (its tool's ``ToolSpec.network``).
        ``schedule``: this call may reach the schedule, :data:`SCHEDULE_STATE`, and write the data
        directory's top level where it lives (its tool's ``ToolSpec.schedules`` or
        ``reads_schedule``); any other call writes only its thread's workspace."""
        ctx = await asyncio.to_thread(self._setup, request_id, schedule)
        ctx.extra["network"] = self.network or network
        pid: int | None = None
        try:
            payload = json.dumps(
                {
                    "entrypoint": entrypoint,
                    "args": args,
                    "request_id": request_id,
                    "limits": {
                        "memory_mb": self.memory_mb,
                        "cpu_s": max(1, int(timeout_s + 0.999)),
                        "open_files": self.open_files,
                        "procs": self.max_procs,
                        "file_mb": self.file_mb,
                    },
                    "confine": (
                        {
                            "workdir": str(self.data_dir),
                            "tmpdir": self._worker_tmpdir(ctx),
                            "read": list(self.extra_paths + self.extra_read + ctx.extra["database_read"]),
                            "network": ctx.extra["network"],
                            "hide": ctx.extra["hide"],
                            "threads": str(self.data_dir / THREADS),
                            "workspace": ctx.extra["workspace"],
                            "shared_write": ctx.extra["shared_write"],
                            "namespaces": self._worker_namespaces,
                        }
                        if self.confine
                        else None
                    ),
                    "database": self.database,
                    "workspace": ctx.extra["workspace"],
                    **self._payload_extra(ctx),
                }
            ).encode()
            env = scrubbed_env(self.extra_paths, allow=self.env_allow)
            env["TMPDIR"] = self._worker_tmpdir(ctx)
            proc = await asyncio.create_subprocess_exec(
                *self._command(ctx),
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                cwd=str(self.data_dir),
                env=env,
                start_new_session=True,
            )
            pid = proc.pid
            if ctx.cgroup is not None and self._parent_attaches_cgroup:
                try:
                    await asyncio.to_thread(ctx.cgroup.add, pid)
                except ProcessLookupError:
                    pass  # the worker already died: its exit status is reported below
                except OSError as exc:  # fail closed: no run outside the process-count bound
                    raise ToolFailed(f"{entrypoint}: could not place the worker in its pids cgroup: {exc}") from exc
            return await self._communicate(proc, payload, entrypoint, timeout_s, ctx)
        finally:
            # Always: the whole group goes (timeout, cancellation, or strays left after success).
            await asyncio.shield(asyncio.to_thread(self._teardown, ctx, pid))

    async def _communicate(
        self, proc: asyncio.subprocess.Process, payload: bytes, entrypoint: str, timeout_s: float, ctx: RunContext
    ) -> Any:
        readers = [
            asyncio.ensure_future(_read_all(proc.stdout, _MAX_OUTPUT)),
            asyncio.ensure_future(_read_all(proc.stderr, _MAX_OUTPUT)),
        ]
        timed_out = False
        try:
            try:
                await asyncio.wait_for(self._feed_and_wait(proc, payload), timeout_s)
            except TimeoutError:
                timed_out = True
        finally:
            # The whole group goes now (timeout, or strays left after success): killing strays
            # also closes their copies of our pipes, so the readers see EOF.
            await asyncio.to_thread(self._teardown_procs, ctx, proc.pid)
            ctx.extra["reaped"] = True
            with contextlib.suppress(TimeoutError):  # a stray outside the group still holds a pipe
                await asyncio.wait_for(proc.wait(), self.grace_s * 3)
            _, pending = await asyncio.wait(readers, timeout=self.grace_s)
            for task in pending:  # a stray that escaped the group still holds a pipe
                task.cancel()
        stdout = readers[0].result() if readers[0].done() and not readers[0].cancelled() else b""
        stderr = readers[1].result() if readers[1].done() and not readers[1].cancelled() else b""
        if timed_out:
            raise ToolTimeout(f"{entrypoint} exceeded {timeout_s:g} s; process group terminated")
        result = self._decode(entrypoint, proc.returncode, stdout, stderr)
        self._check_sandbox(stdout, ctx)
        return result

    def _check_sandbox(self, stdout: bytes, ctx: RunContext) -> None:
        """One warning per executor when a run could not be confined as asked (no namespaces:
        not root and no unprivileged user namespaces; no Landlock TCP rules either)."""
        if self._warned or not self.confine or not self._worker_namespaces:
            return
        try:
            sandbox = str(json.loads(stdout.decode(errors="replace").strip().splitlines()[-1]).get("sandbox") or "")
        except (ValueError, IndexError, AttributeError):
            return
        missing = []
        landlock_net = sandbox.startswith("landlock-v") and int(sandbox[10:].split("+", maxsplit=1)[0] or 0) >= 4
        if not ctx.extra["network"] and "netns" not in sandbox and not landlock_net:
            missing.append("network (tools can open sockets)")
        if ctx.extra["hide"] and "mountns" not in sandbox:
            missing.append("hiding the agent's state in the data directory (only Python's audit hook refuses it)")
        if missing:
            self._warned = True
            log.warning(
                "tool sandbox: cannot confine %s: no mount/network namespaces here (run as root, enable "
                "unprivileged user namespaces, or use HERMES_TOOL_EXECUTOR=container with bubblewrap)",
                " nor ".join(missing),
            )

    def _teardown_procs(self, ctx: RunContext, pid: int) -> None:
        """SIGTERM, grace, SIGKILL: the process group, the descendants and every cgroup member."""
        if ctx.cgroup is not None:
            # Exact membership from the cgroup (exited processes leave it at once, zombies
            # included): no scan of every process on the machine, no wait on zombies.
            signal_group(pid, signal.SIGTERM)
            ctx.cgroup.kill_all(self.grace_s)
            signal_group(pid, signal.SIGKILL)
        else:
            kill_process_tree(pid, self.grace_s, pgid=pid)

    @staticmethod
    def _decode(entrypoint: str, returncode: int | None, stdout: bytes, stderr: bytes) -> Any:
        tail = stderr.decode(errors="replace")[-_STDERR_TAIL:].strip()
        line = stdout.decode(errors="replace").strip().splitlines()[-1:] if stdout else []
        try:
            reply = json.loads(line[0]) if line else None
        except json.JSONDecodeError:
            reply = None
        if not isinstance(reply, dict):
            how = f"exited with code {returncode}"
            if returncode is not None and returncode < 0:
                with contextlib.suppress(ValueError):
                    how = f"was killed by {signal.Signals(-returncode).name} (exited with code {returncode})"
            raise ToolFailed(f"{entrypoint} {how} without a result" + (f"; stderr: {tail}" if tail else ""))
        if not reply.get("ok"):
            raise ToolFailed(
                f"{reply.get('error_type', 'Error')}: {reply.get('error', '')}",
                kind=reply.get("error_kind") or "tool_error",
                suggestion=reply.get("suggestion") if isinstance(reply.get("suggestion"), dict) else None,
            )
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
        # ``proc.wait()`` returns once the process exited *and* every pipe closed (the usual
        # case: immediately). A stray grandchild holding stdout would keep it waiting, so the
        # exit status is also polled (``returncode`` is set at exit).
        waiter = asyncio.ensure_future(proc.wait())
        try:
            while proc.returncode is None and not waiter.done():
                await asyncio.wait([waiter], timeout=0.05)
        finally:
            waiter.cancel()

    async def aclose(self) -> None:
        """Nothing persistent to close (one process per run)."""
