"""Worker process of every executor backend (subprocess, container; the remote reference server
runs it through the subprocess backend).

Run as ``python -P -m tools.executors.worker`` (``-P``: the working directory is *not* put on
``sys.path``, so a file a tool writes there cannot hijack the next run's imports). Reads one
JSON payload on stdin::

    {"entrypoint": "pkg.mod:func", "args": {...}, "request_id": "...",
     "limits": {"memory_mb": 1024, "cpu_s": 11, "open_files": 256, "procs": 64, "file_mb": 1024},
     "confine": {"workdir": "/abs/data", "tmpdir": "/abs/tmp", "read": [...], "network": false,
                 "hide": ["/abs/data/checkpoints.sqlite", ...], "threads": "/abs/data/threads",
                 "workspace": "/abs/data/threads/<thread>", "shared_write": false, "namespaces": true},
     "database": "/abs/path/of/the/users.db", "workspace": "/abs/data/threads/<thread>"}

Before the tool's module is even imported it applies, in this order:

1. resource limits (``setrlimit``): address space ``memory_mb`` MiB, CPU ``cpu_s`` s, open files,
   processes (effective for non-root users; root is bounded by the executor's pids cgroup),
   file size ``file_mb`` MiB, no core dumps;
2. namespaces (``confine``; Linux, as root or with unprivileged user namespaces): without
   ``network`` a new network namespace (no interface up: no socket reaches any host, this one
   included); with ``hide`` a private mount table in which each of those paths (the agent's own
   files in the data directory: checkpoints, ledger, memory, other threads' folders) is covered
   by an empty read-only tmpfs or ``/dev/null``; ``threads`` is covered whole and only
   ``workspace`` (the run's thread's folder) mounted back, and without ``shared_write`` the
   ``workdir`` is mounted read-only (the workspace stays writable). ``namespaces: false`` skips
   this (the bubblewrap backend does it itself). The reply's ``sandbox`` names what was applied
   (``landlock-v7+netns+mountns``);
3. file-system confinement (``confine``): **Landlock** where the kernel has it (writes only under
   ``workspace`` — and ``workdir`` with ``shared_write`` — and ``tmpdir``; reads only under
   ``workdir``/``tmpdir``, in Python's own trees, the paths in ``read`` and a
   few system files; no signals to processes outside the sandbox; no TCP when ``network`` is
   false), and in every case a Python audit hook that refuses the same paths with a clear
   message (``PermissionError: ... outside the tool's working directory``), so ``../`` paths
   supplied by the model cannot reach outside ``workdir``.

Then it calls ``func(**args)`` (plus ``data_dir=<cwd>`` when the function declares a ``data_dir``
parameter, ``database=<payload "database">`` — the user's database file the executor was
configured with, ``""`` for none — when it declares a ``database`` parameter, and
``workspace=<payload "workspace">`` (the run's thread's folder) when it declares a ``workspace``
parameter; model-supplied values of these are dropped) and writes one JSON line on stdout:
``{"ok": true, "result": ..., "sandbox": "landlock-v7"}`` or
``{"ok": false, "error_type": "...", "error": "..."}``. Anything the function prints goes to
stderr so it cannot corrupt the result. Kept lean on imports: its start-up is on every call.
"""

from __future__ import annotations

import json
import os
import sys

from tools.executors.rlimits import apply_limits

TYPE_CHECKING = False
if TYPE_CHECKING:  # kept lean: the worker starts for every call
    from typing import Any

#: System files a Python tool commonly needs to read (dynamic loader, time zone, name service,
#: TLS roots). Whole system trees (/usr, /lib...) are readable; /etc is not, apart from these.
SYSTEM_READ = (
    "/usr",
    "/lib",
    "/lib64",
    "/lib32",
    "/libx32",
    "/bin",
    "/sbin",
    "/etc/ld.so.cache",
    "/etc/ld.so.conf",
    "/etc/ld.so.conf.d",
    "/etc/localtime",
    "/etc/timezone",
    "/etc/nsswitch.conf",
    "/etc/passwd",
    "/etc/group",
    "/etc/hosts",
    "/etc/host.conf",
    "/etc/resolv.conf",
    "/etc/gai.conf",
    "/etc/protocols",
    "/etc/services",
    "/etc/mime.types",
    "/etc/ssl",
    "/etc/ca-certificates",
    "/etc/os-release",
    "/etc/alternatives",
    "/dev/null",
    "/dev/zero",
    "/dev/urandom",
    "/dev/random",
)
#: Writable device files (besides the working directory and the private temp directory).
DEVICE_WRITE = ("/dev/null",)


# -- file-system confinement --------------------------------------------------------------------


def _real(path: str) -> str:
    return os.path.realpath(path)


def _under(path: str, roots: tuple[str, ...]) -> bool:
    return any(path == r or path.startswith(r.rstrip("/") + "/") for r in roots)


def _roots(confine: dict[str, Any]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(write roots, read roots), real paths of those that exist."""
    # the thread's workspace; the whole working directory only for a call that reaches the
    # schedule (it lives at the top level) or a payload without a workspace
    own = [confine["workspace"]] if confine.get("workspace") else []
    top = [confine["workdir"]] if confine.get("shared_write") or not own else []
    write = [*own, *top] + ([confine["tmpdir"]] if confine.get("tmpdir") else [])
    read = [confine["workdir"], *write]
    read += [sys.prefix, sys.base_prefix, sys.exec_prefix, os.path.dirname(sys.executable)]
    read += [p for p in sys.path if p]
    read += list(confine.get("read") or ())
    read += list(SYSTEM_READ)
    real_write = tuple(dict.fromkeys(_real(p) for p in write if os.path.exists(p)))
    real_read = tuple(dict.fromkeys(_real(p) for p in read if os.path.exists(p)))
    return real_write, real_read


_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND
#: audit event → index of its path argument; these change the file system.
_WRITE_EVENTS = {
    "os.remove": 0,
    "os.rmdir": 0,
    "os.mkdir": 0,
    "os.rename": 0,
    "os.link": 0,
    "os.symlink": 1,
    "os.truncate": 0,
    "os.chmod": 0,
    "os.chown": 0,
    "os.utime": 0,
    "os.mkfifo": 0,
    "os.mknod": 0,
    "shutil.rmtree": 0,
    "shutil.copyfile": 1,
    "shutil.move": 1,
}
_MOVE_EVENTS = {"os.rename": 1, "os.link": 1, "shutil.move": 0}
_READ_EVENTS = {"os.listdir": 0, "os.scandir": 0, "os.chdir": 0}


def _install_audit_hook(
    workdir: str,
    write_roots: tuple[str, ...],
    read_roots: tuple[str, ...],
    hidden: list[str] | tuple[str, ...] = (),
    threads: str = "",
    workspace: str = "",
) -> None:
    busy = [False]
    allowed_write = write_roots + DEVICE_WRITE
    private = tuple(hidden)

    def refuse(path: str, what: str, write: bool) -> None:
        where = f"its writable area ({', '.join(write_roots)})" if write else f"the tool's working directory {workdir}"
        raise PermissionError(f"{what} {path!r} refused: outside {where}")

    def check(raw: object, write: bool, what: str) -> None:
        if isinstance(raw, bytes):
            raw = os.fsdecode(raw)
        if not isinstance(raw, str):  # a file descriptor
            return
        path = _real(raw)
        if private and _under(path, private):
            raise PermissionError(f"{what} {raw!r} refused: the agent's own state, not the tool's")
        if threads and _under(path, (threads,)) and not (workspace and _under(path, (workspace,))):
            raise PermissionError(f"{what} {raw!r} refused: another thread's folder, not this run's")
        if not _under(path, allowed_write if write else read_roots):
            refuse(raw, what, write)

    def hook(event: str, args: tuple[Any, ...]) -> None:
        if busy[0]:
            return
        if event != "open" and event not in _WRITE_EVENTS and event not in _READ_EVENTS:
            return
        busy[0] = True
        try:
            if event == "open":
                path, mode, flags = (*args, None, None)[:3]
                write = (isinstance(mode, str) and any(c in mode for c in "wax+")) or (
                    isinstance(flags, int) and bool(flags & _WRITE_FLAGS)
                )
                check(path, write, "writing" if write else "reading")
            elif event in _WRITE_EVENTS:
                check(args[_WRITE_EVENTS[event]], True, event)
                if event in _MOVE_EVENTS:
                    check(args[_MOVE_EVENTS[event]], True, event)
            else:
                path = args[_READ_EVENTS[event]] if args else "."
                check(path if path is not None else ".", False, event)
        finally:
            busy[0] = False

    sys.addaudithook(hook)


# Landlock (Linux >= 5.13): unprivileged, inherited by every child, cannot be undone.
_LL_FS = {  # access right → first ABI version that knows it
    1 << 0: 1,
    1 << 1: 1,
    1 << 2: 1,
    1 << 3: 1,
    1 << 4: 1,
    1 << 5: 1,
    1 << 6: 1,
    1 << 7: 1,
    1 << 8: 1,
    1 << 9: 1,
    1 << 10: 1,
    1 << 11: 1,
    1 << 12: 1,
    1 << 13: 2,
    1 << 14: 3,
    1 << 15: 5,
}
_LL_EXECUTE, _LL_WRITE_FILE, _LL_READ_FILE, _LL_READ_DIR = 1 << 0, 1 << 1, 1 << 2, 1 << 3
_LL_TRUNCATE, _LL_IOCTL_DEV = 1 << 14, 1 << 15
_LL_FILE_RIGHTS = _LL_EXECUTE | _LL_WRITE_FILE | _LL_READ_FILE | _LL_TRUNCATE | _LL_IOCTL_DEV
_LL_NET_CONNECT_TCP, _LL_NET_BIND_TCP = 1 << 1, 1 << 0
_LL_SCOPE_ABSTRACT_UNIX, _LL_SCOPE_SIGNAL = 1 << 0, 1 << 1
_SYS_LANDLOCK = {"x86_64": (444, 445, 446), "aarch64": (444, 445, 446)}


def landlock_abi() -> int:
    """The kernel's Landlock ABI version (0 = none). Changes nothing."""
    import ctypes

    numbers = _SYS_LANDLOCK.get(os.uname().machine)
    if numbers is None or sys.platform != "linux":
        return 0
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    return max(0, int(libc.syscall(numbers[0], None, ctypes.c_size_t(0), ctypes.c_uint32(1))))


def _landlock(write_roots: tuple[str, ...], read_roots: tuple[str, ...], network: bool) -> int:
    """Restrict this process (and its future children) with Landlock. Returns the ABI version
    used, 0 when the kernel or architecture has no Landlock (nothing was changed)."""
    import ctypes

    numbers = _SYS_LANDLOCK.get(os.uname().machine)
    if numbers is None:
        return 0
    create, add_rule, restrict = numbers
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    abi = int(libc.syscall(create, None, ctypes.c_size_t(0), ctypes.c_uint32(1)))  # ..._VERSION
    if abi < 1:
        return 0
    fs = 0
    for right, version in _LL_FS.items():
        if abi >= version:
            fs |= right

    class RulesetAttr(ctypes.Structure):
        _fields_ = [("fs", ctypes.c_uint64), ("net", ctypes.c_uint64), ("scoped", ctypes.c_uint64)]

    class PathBeneath(ctypes.Structure):
        _pack_ = 1
        _fields_ = [("allowed", ctypes.c_uint64), ("fd", ctypes.c_int32)]

    attr = RulesetAttr(fs, 0, 0)
    size = 8
    if abi >= 4:
        size = 16
        if not network:
            attr.net = _LL_NET_BIND_TCP | _LL_NET_CONNECT_TCP
    if abi >= 6:
        size = 24
        attr.scoped = _LL_SCOPE_SIGNAL | (0 if network else _LL_SCOPE_ABSTRACT_UNIX)
    ruleset = libc.syscall(create, ctypes.byref(attr), ctypes.c_size_t(size), ctypes.c_uint32(0))
    if ruleset < 0:
        return 0
    read_rights = _LL_EXECUTE | _LL_READ_FILE | _LL_READ_DIR
    try:
        rules = [(p, fs) for p in write_roots] + [(p, read_rights) for p in read_roots]
        rules += [(p, _LL_READ_FILE | _LL_WRITE_FILE) for p in DEVICE_WRITE]
        for path, rights in rules:
            try:
                fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
            except OSError:
                continue
            try:
                allowed = rights if os.path.isdir(path) else rights & _LL_FILE_RIGHTS
                rule = PathBeneath(allowed & fs, fd)
                libc.syscall(add_rule, ctypes.c_int(ruleset), ctypes.c_int(1), ctypes.byref(rule), ctypes.c_uint32(0))
            finally:
                os.close(fd)
        libc.prctl(38, 1, 0, 0, 0)  # PR_SET_NO_NEW_PRIVS
        if libc.syscall(restrict, ctypes.c_int(ruleset), ctypes.c_uint32(0)) != 0:
            return 0
    finally:
        os.close(ruleset)
    return abi


# Namespaces (Linux): a private mount table hides the agent's own files, a private network
# namespace (only a loopback that is down) leaves no network at all.
_CLONE_NEWNS, _CLONE_NEWUSER, _CLONE_NEWNET = 0x00020000, 0x10000000, 0x40000000
_MS_RDONLY, _MS_NOSUID, _MS_NODEV, _MS_REMOUNT, _MS_BIND, _MS_REC, _MS_PRIVATE = 1, 2, 4, 32, 4096, 16384, 1 << 18


def _namespaces(
    hide: list[str], network: bool, *, readonly: str = "", threads: str = "", workspace: str = ""
) -> list[str]:
    """Enter new mount (and, without ``network``, network) namespaces and cover every path in
    ``hide`` — an empty read-only tmpfs over a directory, a read-only ``/dev/null`` over a file.
    ``readonly``: a directory mounted read-only (the working directory of a call that may write
    only its workspace); ``threads``: a directory covered whole, ``workspace`` (one of its
    folders) mounted back writable on top, so the run sees no other folder of it.
    As root directly; otherwise inside a new user namespace (uid/gid mapped to themselves) when
    the kernel allows unprivileged ones. Returns what was done (``["netns", "mountns"]``), ``[]``
    when nothing could be (the caller says so)."""
    import ctypes

    if sys.platform != "linux":
        return []
    libc = ctypes.CDLL(None, use_errno=True)
    flags = _CLONE_NEWNS | (0 if network else _CLONE_NEWNET)
    if libc.unshare(flags) != 0:
        uid, gid = os.getuid(), os.getgid()
        if libc.unshare(flags | _CLONE_NEWUSER) != 0:
            return []
        try:
            for name, text in (("setgroups", "deny"), ("uid_map", f"{uid} {uid} 1"), ("gid_map", f"{gid} {gid} 1")):
                with open(f"/proc/self/{name}", "w") as f:
                    f.write(text)
        except OSError:
            return [] if network else ["netns"]
    done = [] if network else ["netns"]
    # private first: a mount made here must never propagate back to the machine's namespace
    if libc.mount(b"none", b"/", None, _MS_REC | _MS_PRIVATE, None) != 0:
        return done

    def failed(what: str, path: str) -> PermissionError:
        return PermissionError(f"could not {what} {path} for the tool (errno {ctypes.get_errno()})")

    # held before anything covers it: the workspace is mounted back from this descriptor
    own = os.open(workspace, os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC) if threads and workspace else None
    try:
        if readonly:
            target = readonly.encode()
            if libc.mount(target, target, None, _MS_BIND | _MS_REC, None) != 0 or libc.mount(
                None, target, None, _MS_REMOUNT | _MS_BIND | _MS_RDONLY, None
            ):
                raise failed("make read-only", readonly)
        if threads and os.path.isdir(threads) and not os.path.islink(threads):
            target, flags = threads.encode(), _MS_NOSUID | _MS_NODEV
            if libc.mount(b"tmpfs", target, b"tmpfs", flags, b"size=16k,mode=755") != 0:
                raise failed("cover", threads)
            if own is not None:
                mine = os.path.join(threads, os.path.basename(workspace))
                os.mkdir(mine, 0o755)
                if libc.mount(f"/proc/self/fd/{own}".encode(), mine.encode(), None, _MS_BIND, None) != 0:
                    raise failed("mount back", workspace)
            if libc.mount(None, target, None, _MS_REMOUNT | _MS_RDONLY | flags, None) != 0:
                raise failed("make read-only", threads)
    finally:
        if own is not None:
            os.close(own)
    for path in hide:
        target = path.encode()
        if os.path.isdir(path) and not os.path.islink(path):
            ok = libc.mount(b"tmpfs", target, b"tmpfs", _MS_RDONLY | _MS_NOSUID | _MS_NODEV, b"size=4k,mode=000") == 0
        elif os.path.isfile(path) and not os.path.islink(path):
            ok = libc.mount(b"/dev/null", target, None, _MS_BIND, None) == 0
            ok = ok and libc.mount(None, target, None, _MS_REMOUNT | _MS_BIND | _MS_RDONLY, None) == 0
        else:
            continue  # a symlink or a socket: the audit hook and Landlock still refuse it
        if not ok:
            raise PermissionError(f"could not hide {path} from the tool (errno {ctypes.get_errno()})")
    # the working directory still points into the mount it had before these: enter it again, so
    # a relative path goes through the read-only and covering mounts too
    os.chdir(os.getcwd())
    return [*done, "mountns"] if hide or readonly or threads else done


def _confine(confine: dict[str, Any]) -> str:
    workdir = _real(confine["workdir"])
    network = bool(confine.get("network", True))
    hide = [_real(p) for p in confine.get("hide") or ()]
    threads = _real(confine["threads"]) if confine.get("threads") else ""
    workspace = _real(confine["workspace"]) if confine.get("workspace") else ""
    readonly = workdir if workspace and not confine.get("shared_write") else ""
    parts: list[str] = []
    if confine.get("namespaces", True) and (hide or not network or threads or readonly):
        parts = _namespaces(hide, network, readonly=readonly, threads=threads, workspace=workspace)
    write_roots, read_roots = _roots(confine)
    sandbox = "audit-hook"
    if confine.get("landlock", True) and sys.platform == "linux":
        abi = _landlock(write_roots, read_roots, network)
        if abi:
            sandbox = f"landlock-v{abi}"
    _install_audit_hook(workdir, write_roots, read_roots, hide, threads, workspace)
    return "+".join([sandbox, *parts])


# -- entry point -------------------------------------------------------------------------------

#: Arguments the runner supplies itself; a value in the model's arguments is dropped.
INJECTED_ARGS = ("data_dir", "database", "workspace")


def _accepts(func: object, name: str) -> bool:
    while hasattr(func, "__wrapped__"):
        func = func.__wrapped__
    code = getattr(func, "__code__", None)
    if code is None:
        return False
    names = code.co_varnames[: code.co_argcount + code.co_kwonlyargcount]
    return name in names


def main() -> int:
    real_stdout = sys.stdout
    sys.stdout = sys.stderr
    sandbox = None
    try:
        payload = json.loads(sys.stdin.buffer.read())
        apply_limits(payload.get("limits") or {})
        if payload.get("confine"):
            sandbox = _confine(payload["confine"])
        import importlib

        module_name, _, func_name = payload["entrypoint"].partition(":")
        func = getattr(importlib.import_module(module_name), func_name)
        args = dict(payload.get("args") or {})
        for name in INJECTED_ARGS:
            args.pop(name, None)
        if _accepts(func, "data_dir"):
            from pathlib import Path

            args["data_dir"] = Path(os.getcwd())
        if _accepts(func, "database"):
            args["database"] = str(payload.get("database") or "")
        if _accepts(func, "workspace") and payload.get("workspace"):
            from pathlib import Path

            args["workspace"] = Path(payload["workspace"])
        result = func(**args)
        reply = {"ok": True, "result": result}
        if sandbox:
            reply["sandbox"] = sandbox
        line = json.dumps(reply, default=str)
    except BaseException as exc:  # noqa: BLE001 - every failure becomes a JSON error
        import traceback

        line = json.dumps(
            {
                "ok": False,
                "error_type": type(exc).__name__,
                # tools.errors.ConfigurationError / InvalidValueError, by name: the worker
                # imports nothing it need not
                "error_kind": _error_kind(exc),
                "error": str(exc),
                "traceback": traceback.format_exc(limit=5),
                # an InvalidValueError's structured fields: the graph keys on them (DESIGN §5.6)
                "suggestion": _suggestion(exc),
            },
            default=str,
        )
    real_stdout.write(line + "\n")
    real_stdout.flush()
    return 0


def _suggestion(exc: BaseException) -> dict[str, Any] | None:
    """``tools.errors.InvalidValueError.details()`` of ``exc`` (None for other errors)."""
    details = getattr(exc, "details", None)
    found = details() if callable(details) and _error_kind(exc) == "invalid_value" else None
    return found if isinstance(found, dict) else None


def _error_kind(exc: BaseException) -> str:
    """The registry's error kind of a tool's exception: by class name along its MRO."""
    names = {c.__name__ for c in type(exc).__mro__}
    if "ConfigurationError" in names:
        return "configuration"
    if "InvalidValueError" in names:
        return "invalid_value"
    return "tool_error"


if __name__ == "__main__":
    sys.exit(main())
