"""The unit tier's guard (tests/unit/conftest.py) stops internet sockets and processes before
they happen, and leaves Unix sockets (asyncio's self-pipe) alone. Each test takes the
violations it made on purpose (``_guard.take()``), or the guard would fail it."""

from __future__ import annotations

import asyncio
import contextlib
import multiprocessing
import os
import socket
import subprocess
import sys

import pytest

from tests.unit.conftest import UnitTierViolation, _guard


def test_an_internet_connect_is_stopped_before_it_happens():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock, pytest.raises(UnitTierViolation, match="connect"):
        sock.connect(("127.0.0.1", 9))
    assert _guard.take(), "the attempt is recorded, so a test that swallows the error still fails"


def test_an_internet_bind_is_stopped():
    with socket.socket(socket.AF_INET6, socket.SOCK_STREAM) as sock, pytest.raises(UnitTierViolation, match="bind"):
        sock.bind(("::1", 0))
    assert len(_guard.take()) == 1


def test_a_swallowed_violation_is_still_recorded():
    with contextlib.suppress(Exception):  # what code under test often does with an unreachable endpoint
        socket.create_connection(("127.0.0.1", 9), timeout=0.1)
    assert len(_guard.take()) == 1


def test_processes_are_stopped_before_they_start():
    with pytest.raises(UnitTierViolation, match=r"subprocess\.Popen"):
        subprocess.run([sys.executable, "-c", "pass"], check=False)
    with pytest.raises(UnitTierViolation, match=r"os\.fork"):
        os.fork()
    with pytest.raises(UnitTierViolation, match="multiprocessing"):
        multiprocessing.get_context("spawn").Process(target=print).start()
    assert len(_guard.take()) == 3


async def test_asyncio_subprocesses_are_stopped_and_the_loop_still_works():
    with pytest.raises(UnitTierViolation, match=r"subprocess\.Popen"):
        await asyncio.create_subprocess_exec(sys.executable, "-c", "pass")
    await asyncio.sleep(0)
    assert len(_guard.take()) == 1


def test_unix_sockets_are_allowed():
    left, right = socket.socketpair()
    with left, right:
        left.sendall(b"x")
        assert right.recv(1) == b"x"
