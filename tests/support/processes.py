"""Processes this test process started: a test counts and stops only its own servers (other
runs on the machine have theirs)."""

from __future__ import annotations

import psutil


def own_processes(marker: str) -> list[psutil.Process]:
    """This process's descendants whose command line contains ``marker`` (running or zombie)."""
    found = []
    for proc in psutil.Process().children(recursive=True):
        try:
            if marker in " ".join(proc.cmdline()):
                found.append(proc)
        except psutil.Error:  # exited meanwhile
            continue
    return found
