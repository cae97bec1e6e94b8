"""Resource limits of a tool run, applied by the worker (``tools.executors.worker``) before the
tool is imported (``setrlimit``): address space ``memory_mb`` MiB, CPU time ``cpu_s`` (+1 s),
``open_files``, ``procs``, file size ``file_mb`` MiB, no core files. A limit already lower than
asked is kept. Kept lean on imports: the worker starts for every call.
"""

from __future__ import annotations

import contextlib  # already loaded by the interpreter's start-up: costs the worker nothing

TYPE_CHECKING = False
if TYPE_CHECKING:  # the worker imports this module before every tool run: keep it lean
    from typing import Any


def apply_limits(limits: dict[str, Any]) -> None:
    try:
        import resource
    except ImportError:  # pragma: no cover - non-POSIX
        return

    def cap(which: int, value: int) -> None:
        _soft, hard = resource.getrlimit(which)
        if hard != resource.RLIM_INFINITY:
            value = min(value, hard)
        with contextlib.suppress(ValueError, OSError):  # e.g. already lower than asked: keep the lower one
            resource.setrlimit(which, (value, value if which != resource.RLIMIT_CPU else value + 1))

    mem = limits.get("memory_mb")
    if mem:
        cap(resource.RLIMIT_AS, int(mem) * 1024 * 1024)
    cpu = limits.get("cpu_s")
    if cpu:
        cap(resource.RLIMIT_CPU, int(cpu) + 1)
    files = limits.get("open_files")
    if files:
        cap(resource.RLIMIT_NOFILE, int(files))
    procs = limits.get("procs")
    if procs:
        cap(resource.RLIMIT_NPROC, int(procs))
    fsize = limits.get("file_mb")
    if fsize:
        cap(resource.RLIMIT_FSIZE, int(fsize) * 1024 * 1024)
    cap(resource.RLIMIT_CORE, 0)
