"""Process-tree control with psutil (DESIGN §2 "interrupted cleanly (whole process group)",
§3 "no orphan server processes"; failure kind K9).

The one place process trees and groups are stopped: the executors' workers, the MCP stdio
servers and the embedded llama.cpp server (``graph/embedded/server.py``) all use it.
Every function but :func:`astop_group` blocks (psutil waits up to ``grace_s`` seconds): call
them through ``asyncio.to_thread`` from async code.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from collections.abc import Iterable

import psutil

#: Seconds between SIGTERM and SIGKILL.
KILL_GRACE_S = 1.0


def tree(pid: int, *, pgid: int | None = None) -> list[psutil.Process]:
    """``pid``, its descendants and (if given) every member of process group ``pgid``."""
    procs: dict[int, psutil.Process] = {}
    try:
        root = psutil.Process(pid)
        procs[pid] = root
        for child in root.children(recursive=True):
            procs[child.pid] = child
    except psutil.NoSuchProcess:
        pass
    if pgid is not None:
        for proc in psutil.process_iter():
            try:
                if os.getpgid(proc.pid) == pgid:
                    procs.setdefault(proc.pid, proc)
            except (OSError, psutil.Error):
                continue
    procs.pop(os.getpid(), None)
    return list(procs.values())


def find_by_env_marker(key: str, value: str) -> list[psutil.Process]:
    """Every live process (of this user) whose environment has ``key=value``. Descendants
    inherit the environment, so this finds a server's whole tree even after re-parenting or
    ``setsid``."""
    found = []
    for proc in psutil.process_iter():
        if proc.pid == os.getpid():
            continue
        try:
            if proc.environ().get(key) == value and proc.status() != psutil.STATUS_ZOMBIE:
                found.append(proc)
        except (psutil.Error, OSError):
            continue
    return found


def terminate(
    procs: Iterable[psutil.Process], grace_s: float = KILL_GRACE_S, *, pgids: Iterable[int] = ()
) -> list[int]:
    """SIGTERM every process (and process group in ``pgids``), wait ``grace_s`` seconds,
    SIGKILL the survivors. Returns the pids signalled."""
    procs = [p for p in procs if p.pid != os.getpid()]
    pgids = [g for g in set(pgids) if g not in (0, 1, os.getpgid(0))]
    if not procs and not pgids:
        return []
    _signal(procs, pgids, signal.SIGTERM)
    _, alive = psutil.wait_procs(procs, timeout=grace_s)
    if alive or pgids:
        _signal(alive, pgids, signal.SIGKILL)
        if alive:
            psutil.wait_procs(alive, timeout=grace_s)
    return sorted(p.pid for p in procs)


def kill_process_tree(pid: int, grace_s: float = KILL_GRACE_S, *, pgid: int | None = None) -> list[int]:
    """:func:`terminate` applied to :func:`tree` of ``pid`` (plus group ``pgid``)."""
    return terminate(tree(pid, pgid=pgid), grace_s, pgids=[pgid] if pgid else [])


def signal_group(pgid: int, sig: int) -> None:
    """Send ``sig`` to process group ``pgid``; a group that is gone (or not ours) is ignored."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


async def astop_group(process: asyncio.subprocess.Process, grace_s: float = KILL_GRACE_S) -> None:
    """Stop an asyncio child that leads its own process group (``start_new_session=True``) and
    the whole group: SIGTERM to the group, up to ``grace_s`` seconds for the child to exit (it
    is reaped by its own event loop, so asyncio reports no unknown child), then SIGKILL to the
    group (the child, if it is still there, and any member that outlived the grace)."""
    if process.returncode is None:
        signal_group(process.pid, signal.SIGTERM)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(process.wait(), grace_s)
    signal_group(process.pid, signal.SIGKILL)
    await process.wait()


def _signal(procs: Iterable[psutil.Process], pgids: Iterable[int], sig: int) -> None:
    for g in pgids:
        signal_group(g, sig)
    for proc in procs:
        with contextlib.suppress(psutil.Error):
            proc.send_signal(sig)
