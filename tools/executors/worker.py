"""Worker process of :class:`tools.executors.subprocess.SubprocessExecutor`.

Run as ``python -m tools.executors.worker``. Reads one JSON payload on stdin::

    {"entrypoint": "pkg.mod:func", "args": {...}, "request_id": "...",
     "limits": {"memory_mb": 1024, "cpu_s": 11}}

calls ``func(**args)`` (plus ``data_dir=<cwd>`` when the function declares a ``data_dir``
parameter; a model-supplied ``data_dir`` is dropped) and writes one JSON line on stdout:
``{"ok": true, "result": ...}`` or ``{"ok": false, "error_type": "...", "error": "..."}``.
Anything the function prints goes to stderr so it cannot corrupt the result.
"""

from __future__ import annotations

import importlib
import inspect
import json
import os
import sys
import traceback
from pathlib import Path


def _apply_limits(limits: dict) -> None:
    try:
        import resource
    except ImportError:  # pragma: no cover - non-POSIX
        return
    mem = limits.get("memory_mb")
    if mem:
        b = int(mem) * 1024 * 1024
        resource.setrlimit(resource.RLIMIT_AS, (b, b))
    cpu = limits.get("cpu_s")
    if cpu:
        c = int(cpu) + 1
        resource.setrlimit(resource.RLIMIT_CPU, (c, c + 1))


def main() -> int:
    real_stdout = sys.stdout
    sys.stdout = sys.stderr
    try:
        payload = json.loads(sys.stdin.read())
        _apply_limits(payload.get("limits") or {})
        module_name, _, func_name = payload["entrypoint"].partition(":")
        func = getattr(importlib.import_module(module_name), func_name)
        args = dict(payload.get("args") or {})
        args.pop("data_dir", None)
        try:
            params = inspect.signature(func).parameters
        except (TypeError, ValueError):
            params = {}
        if "data_dir" in params:
            args["data_dir"] = Path(os.getcwd())
        result = func(**args)
        line = json.dumps({"ok": True, "result": result}, default=str)
    except BaseException as exc:  # noqa: BLE001 - every failure becomes a JSON error
        line = json.dumps({
            "ok": False,
            "error_type": type(exc).__name__,
            "error": str(exc),
            "traceback": traceback.format_exc(limit=5),
        })
    real_stdout.write(line + "\n")
    real_stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
