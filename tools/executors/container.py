"""Container executor (DESIGN §2 "container (multi-tenant isolation)"; seed §2.2).

Runs the same worker as the subprocess backend (:mod:`tools.executors.worker`, same payload,
same limits, same Landlock/audit-hook confinement inside) but inside a sandbox found on the
machine, tried in this order:

1. **bubblewrap** (``bwrap``; Debian package ``bubblewrap``): new user/pid/net/ipc/uts/cgroup
   namespaces (``--unshare-all``: no network unless ``network=True``), the host file system
   read-only, the run's thread workspace (``data_dir/threads/<thread>``) the only writable bind
   — ``data_dir`` itself read-only but for a call that reaches the schedule — with the other
   threads' folders covered, a private ``/tmp``, a fresh ``/proc`` that shows only the sandbox's
   processes, all capabilities dropped, ``--die-with-parent``.
2. **docker** / **podman**, when an engine actually answers and the image is present locally:
   ``run --rm -i --network none --read-only --pids-limit --memory``, project mounted read-only,
   ``data_dir`` and the workspace mounted the same way.

If none works, :class:`SandboxUnavailable` is raised naming everything tried and why it failed —
never a silent fall-back to a local process. Measured on the project's machines: bubblewrap
works; podman installs but its runtime fails; there is no Docker engine.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import threading
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tools.errors import ToolError
from tools.executors.subprocess import _PROJECT_ROOT, WORKER_ARGV, RunContext, SubprocessExecutor
from tools.executors.workspace import THREADS

#: Engines in the order they are tried by ``engine="auto"``.
ENGINES = ("bwrap", "docker", "podman")
#: Image for docker/podman runs (must hold Python >= 3.11 and the tools' dependencies).
#: (``Context.container_image``, env HERMES_CONTAINER_IMAGE, is passed in as ``image``.)
DEFAULT_IMAGE = "python:3.11-slim"
_PROBE_TIMEOUT_S = 10.0


class SandboxUnavailable(ToolError):
    """No container mechanism works on this machine; the message names each one tried."""


@dataclass(frozen=True)
class Sandbox:
    """A working sandbox mechanism: ``engine`` in ENGINES, ``path`` of its binary."""

    engine: str
    path: str
    detail: str = ""


def _probe_bwrap(path: str) -> str | None:
    """None when bwrap can build the sandbox we use; else why not."""
    probe = Path(tempfile.gettempdir())  # the directory a run's TMPDIR is made in
    argv = [
        path,
        "--ro-bind",
        "/",
        "/",
        "--dev",
        "/dev",
        "--proc",
        "/proc",
        "--tmpfs",
        "/tmp",
        "--unshare-all",
        "--die-with-parent",
        "--new-session",
        "--cap-drop",
        "ALL",
        "--bind",
        str(probe),
        str(probe),
        "--",
        "/bin/sh",
        "-c",
        "exit 0",
    ]
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=_PROBE_TIMEOUT_S, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"{type(exc).__name__}: {exc}"
    if done.returncode != 0:
        return (done.stderr or done.stdout).strip()[:300] or f"exit code {done.returncode}"
    return None


def _probe_engine(path: str, image: str) -> str | None:
    """None when the engine's daemon answers and ``image`` is present locally; else why not."""
    try:
        info = subprocess.run(
            [path, "info", "--format", "{{.ServerVersion}}"],
            capture_output=True,
            text=True,
            timeout=_PROBE_TIMEOUT_S,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"engine did not answer ({type(exc).__name__}: {exc})"
    if info.returncode != 0:
        return "engine did not answer: " + ((info.stderr or info.stdout).strip().splitlines() or ["?"])[-1][:300]
    try:
        img = subprocess.run(
            [path, "image", "inspect", image], capture_output=True, text=True, timeout=_PROBE_TIMEOUT_S, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"image check failed ({exc})"
    if img.returncode != 0:
        return f"image {image!r} is not present locally (pull or build it first)"
    return None


_detected: dict[tuple[str, str], Sandbox] = {}
_detect_lock = threading.Lock()


def detect_sandbox(engine: str = "auto", image: str = DEFAULT_IMAGE) -> Sandbox:
    """The first working mechanism of ``engine`` ("auto" = bwrap, docker, podman in turn).
    Blocking (runs probe processes): call from a thread in async code. Cached per process.
    Raises :class:`SandboxUnavailable` naming each mechanism tried and why it failed."""
    key = (engine, image)
    with _detect_lock:
        if key in _detected:
            return _detected[key]
        candidates = ENGINES if engine == "auto" else (engine,)
        if any(c not in ENGINES for c in candidates):
            raise ValueError(f"engine must be 'auto' or one of {ENGINES}, got {engine!r}")
        tried: list[str] = []
        for name in candidates:
            path = shutil.which(name)
            if path is None:
                hint = " (Debian: apt-get install bubblewrap)" if name == "bwrap" else ""
                tried.append(f"{name}: not installed{hint}")
                continue
            why = _probe_bwrap(path) if name == "bwrap" else _probe_engine(path, image)
            if why is None:
                _detected[key] = Sandbox(name, path, image if name != "bwrap" else "")
                return _detected[key]
            tried.append(f"{name} ({path}): {why}")
        raise SandboxUnavailable(
            "no container sandbox works on this machine, so the container executor cannot run "
            "tools (it never falls back to a local process). Tried: " + "; ".join(tried)
        )


class ContainerExecutor(SubprocessExecutor):
    """The subprocess backend's worker, run inside a sandbox (see module doc).

    Args (besides those of :class:`SubprocessExecutor`; ``confine`` is always on):
        engine    "auto" | "bwrap" | "docker" | "podman".
        image     image for docker/podman.
        network   False (default): no network inside the sandbox, unless the call asks for
                  it (``run(..., network=True)``, the tool's ``ToolSpec.network``).
        sandbox   an already detected :class:`Sandbox` (skips detection).
    Construction detects the sandbox (blocking, a few ms once per process); use
    ``await asyncio.to_thread(ContainerExecutor, ...)`` from async code.
    Raises :class:`SandboxUnavailable` when no mechanism works.
    """

    kind = "container"

    def __init__(
        self,
        data_dir: Path,
        *,
        engine: str = "auto",
        image: str = DEFAULT_IMAGE,
        network: bool = False,
        sandbox: Sandbox | None = None,
        **kw: Any,
    ) -> None:
        kw["confine"] = True
        super().__init__(data_dir, network=network, **kw)
        self.image = image
        self.sandbox = sandbox or detect_sandbox(engine, image)

    @property
    def engine(self) -> str:
        return self.sandbox.engine

    # -- hooks ------------------------------------------------------------------------------------
    def _worker_tmpdir(self, ctx: RunContext) -> str:
        return "/tmp"  # the sandbox's private tmpfs

    # The sandbox forks at once, so the cgroup is joined before it starts (see _command).
    _parent_attaches_cgroup = False
    # The sandbox makes the namespaces (no network, the agent's state covered) itself.
    _worker_namespaces = False

    @staticmethod
    def _covered(ctx: RunContext) -> list[tuple[str, bool]]:
        """The agent's state to cover in the sandbox: ``(path, is a directory)``."""
        return [(p, os.path.isdir(p) and not os.path.islink(p)) for p in ctx.extra.get("hide", ())]

    def _readable_binds(self, ctx: RunContext | None = None) -> list[str]:
        # the user's database file (+ -wal/-shm/-journal) is bound read-only, never its directory
        database = ctx.extra.get("database_read", ()) if ctx is not None else ()
        paths = [str(_PROJECT_ROOT), *self.extra_paths, *self.extra_read, *database]
        return [p for p in dict.fromkeys(paths) if os.path.exists(p)]

    def _command(self, ctx: RunContext) -> list[str]:
        python = [sys.executable, *WORKER_ARGV]
        if self.sandbox.engine == "bwrap":
            argv = [self.sandbox.path, "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp"]
            for p in self._readable_binds(ctx):  # visible again if they live under /tmp
                argv += ["--ro-bind", p, p]
            exe_dir = str(Path(sys.executable).parent)
            if exe_dir.startswith("/tmp/"):
                argv += ["--ro-bind", exe_dir, exe_dir]
            data = str(self.data_dir)
            argv += ["--bind" if ctx.extra.get("shared_write", True) else "--ro-bind", data, data, "--chdir", data]
            for path, is_dir in self._covered(ctx):  # after the data_dir bind: on top of it
                argv += ["--tmpfs", path, "--remount-ro", path] if is_dir else ["--ro-bind", "/dev/null", path]
            # threads/ covered whole, the run's own folder bound back on top (its mount point
            # made before the cover turns read-only): no other thread's folder is visible
            threads, own = str(self.data_dir / THREADS), ctx.extra.get("workspace")
            if own:
                argv += ["--tmpfs", threads, "--dir", own, "--remount-ro", threads, "--bind", own, own]
            argv += [
                "--unshare-all",
                *(["--share-net"] if ctx.extra.get("network") else []),
                "--die-with-parent",
                "--new-session",
                "--cap-drop",
                "ALL",
                "--",
                *python,
            ]
        else:
            name = f"hermes-tool-{uuid.uuid4().hex[:12]}"
            ctx.extra["container"] = name
            argv = [
                self.sandbox.path,
                "run",
                "--rm",
                "-i",
                "--name",
                name,
                "--read-only",
                "--tmpfs",
                "/tmp",
                "--workdir",
                str(self.data_dir),
                "-v",
                f"{self.data_dir}:{self.data_dir}:{'rw' if ctx.extra.get('shared_write', True) else 'ro'}",
            ]
            if own := ctx.extra.get("workspace"):  # threads/ covered, the run's own folder on top
                argv += ["--tmpfs", f"{self.data_dir / THREADS}:ro,size=16k", "-v", f"{own}:{own}:rw"]
            for p in self._readable_binds(ctx):
                argv += ["-v", f"{p}:{p}:ro"]
            for path, is_dir in self._covered(ctx):
                argv += ["--tmpfs", f"{path}:ro,size=4k"] if is_dir else ["-v", f"/dev/null:{path}:ro"]
            if not ctx.extra.get("network"):
                argv += ["--network", "none"]
            if self.max_procs:
                argv += ["--pids-limit", str(self.max_procs)]
            if self.memory_mb:
                argv += ["--memory", f"{self.memory_mb}m"]
            argv += ["--user", f"{os.getuid()}:{os.getgid()}"]
            for k in ("PYTHONPATH", "PYTHONDONTWRITEBYTECODE", "PYTHONUNBUFFERED"):
                argv += ["-e", k]
            argv += ["-e", "TMPDIR=/tmp", self.image, "python", *WORKER_ARGV]
        if ctx.cgroup is not None:
            # Join the run's pids cgroup *before* the sandbox forks anything, then become it.
            argv = ["/bin/sh", "-c", 'echo $$ > "$0" || exit 125; exec "$@"', str(ctx.cgroup.procs_file), *argv]
        return argv

    def _teardown_procs(self, ctx: RunContext, pid: int) -> None:
        super()._teardown_procs(ctx, pid)
        name = ctx.extra.get("container")
        if name:  # killing the CLI does not stop the container
            subprocess.run([self.sandbox.path, "rm", "-f", name], capture_output=True, timeout=30, check=False)


__all__ = ["ENGINES", "ContainerExecutor", "Sandbox", "SandboxUnavailable", "detect_sandbox"]
