"""Pids cgroups for tool runs (DESIGN §2.2): one cgroup per run bounds the process count
(``pids.max``: fork bombs, and root ignores ``RLIMIT_NPROC``) and lists every descendant, even
one that called ``setsid``, for the final kill. Created where the machine lets us: a cgroup v1
``pids`` hierarchy or a delegated v2 subtree. Blocking: call from a thread.
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import os
import signal
import time
from dataclasses import dataclass
from pathlib import Path

import psutil

_cgroup_seq = itertools.count()
_CGROUP_PREFIX = "hermes-exec-"


def _pids_cgroup_parent() -> Path | None:
    """Directory under which this process may create pids cgroups, or None."""
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return None
    v1 = Path("/sys/fs/cgroup/pids")
    for line in lines:
        _, controllers, path = line.split(":", 2)
        if "pids" in controllers.split(",") and v1.is_dir():
            candidate = v1 / path.lstrip("/")
            if os.access(candidate, os.W_OK):
                return candidate
    for line in lines:  # cgroup v2: our own cgroup must delegate "pids" to its children
        if line.startswith("0::"):
            base = Path("/sys/fs/cgroup") / line[3:].lstrip("/")
            try:
                if "pids" in (base / "cgroup.subtree_control").read_text().split() and os.access(base, os.W_OK):
                    return base
            except OSError:
                return None
    return None


@functools.cache
def pids_cgroup_parent() -> Path | None:
    """Cached :func:`_pids_cgroup_parent` (blocking: call from a thread); the first call also
    sweeps the stale cgroups under it."""
    parent = _pids_cgroup_parent()
    if parent is not None:
        _sweep_stale_cgroups(parent)
    return parent


def _sweep_stale_cgroups(parent: Path) -> None:
    """Remove empty cgroups left by executors of processes that no longer exist."""
    for d in parent.glob(f"{_CGROUP_PREFIX}*"):
        try:
            owner = int(d.name[len(_CGROUP_PREFIX) :].split("-")[0])
            if not psutil.pid_exists(owner):
                d.rmdir()
        except (ValueError, OSError):
            continue


@dataclass
class PidsCgroup:
    """One pids cgroup per run: ``pids.max`` bounds the process count (fork bombs), and
    ``cgroup.procs`` lists every member for the final kill."""

    path: Path

    @classmethod
    def create(cls, max_procs: int) -> PidsCgroup | None:
        parent = pids_cgroup_parent()
        if parent is None:
            return None
        path = parent / f"{_CGROUP_PREFIX}{os.getpid()}-{next(_cgroup_seq)}"
        try:
            path.mkdir()
            (path / "pids.max").write_text(str(max_procs))
        except OSError:
            with contextlib.suppress(OSError):
                path.rmdir()
            return None
        return cls(path)

    @property
    def procs_file(self) -> Path:
        return self.path / "cgroup.procs"

    def add(self, pid: int) -> None:
        """Move process ``pid`` into this cgroup (blocking: ~10 ms RCU wait on cgroup v1)."""
        self.procs_file.write_text(str(pid))

    def pids(self) -> list[int]:
        try:
            return [int(x) for x in self.procs_file.read_text().split()]
        except OSError:
            return []

    def kill_all(self, grace_s: float) -> None:
        """SIGTERM every member, wait ``grace_s``, then SIGKILL until the cgroup is empty."""
        pids = self.pids()
        if not pids:
            return
        for pid in pids:
            _kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + grace_s
        while self.pids() and time.monotonic() < deadline:
            time.sleep(0.01)
        for _ in range(200):  # a fork bomb refills the list while we kill; pids.max bounds it
            pids = self.pids()
            if not pids:
                return
            for pid in pids:
                _kill(pid, signal.SIGKILL)
            time.sleep(0.005)

    def remove(self) -> None:
        for _ in range(100):
            try:
                self.path.rmdir()
                return
            except FileNotFoundError:
                return
            except OSError:  # EBUSY: members not reaped yet
                time.sleep(0.01)


def _kill(pid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.kill(pid, sig)
