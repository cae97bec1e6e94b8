"""Owners of ledger claims: an owner id names the host, the process and its start time
(:func:`new_owner`), so another process can tell whether the owner still runs
(:func:`owner_alive`) — a reused pid is not the owner. Used by the idempotency ledger and the
reminder scheduler's firing claims.
"""

from __future__ import annotations

import os
import socket
import uuid

import psutil


def _started(pid: int) -> str:
    """The start time of process ``pid`` as psutil reports it (the same text every time)."""
    return f"{psutil.Process(pid).create_time():.2f}"


def new_owner() -> str:
    """An owner id ``host:pid:random:start time`` for claims other processes can check
    (:func:`owner_alive`)."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}:{_started(os.getpid())}"


def owner_alive(owner: str) -> bool:
    """Whether the process named by ``owner`` (:func:`new_owner`) still runs; an owner on
    another host cannot be checked and counts as alive (stale claims expire by age). A process
    with the owner's pid but another start time is not the owner: the owner died and its pid was
    reused (pids wrap at 32768 on a default Linux, within minutes on a busy machine)."""
    host, _, rest = owner.partition(":")
    if host != socket.gethostname():
        return True  # cannot tell: assume alive
    parts = rest.split(":")
    try:
        pid = int(parts[0])
    except ValueError:
        return True
    if len(parts) < 3:  # an owner id without a start time (an older ledger): the pid alone
        return psutil.pid_exists(pid)
    try:
        return _started(pid) == parts[2]
    except psutil.NoSuchProcess:
        return False
    except psutil.Error:
        return True  # cannot tell (access denied): assume alive
