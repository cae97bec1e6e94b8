"""SubprocessExecutor is an Executor (constructing one starts no process; its runs, timeouts
and environment scrubbing: tests/integration/test_tools_executor.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tools.executors.base import Executor
from tools.executors.subprocess import SubprocessExecutor


@pytest.fixture
def executor(tmp_path: Path) -> SubprocessExecutor:
    data = tmp_path / "data"
    data.mkdir()
    return SubprocessExecutor(data)


def test_is_an_executor(executor):
    assert isinstance(executor, Executor)
