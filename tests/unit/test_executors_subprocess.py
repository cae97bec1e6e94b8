"""The executor factory's choice of backend (no process is started here; the subprocess
backend's limits and confinement: tests/integration/test_executors_subprocess.py)."""

from __future__ import annotations

import pytest

from tools.executors import make_executor
from tools.executors.subprocess import SubprocessExecutor


def test_factory_defaults_to_confined_subprocess(tmp_path):
    ex = make_executor("subprocess", tmp_path)
    assert isinstance(ex, SubprocessExecutor) and ex.confine and ex.kind == "subprocess"
    with pytest.raises(ValueError, match="one of"):
        make_executor("vm", tmp_path)
