"""The kill -9 eval of ``evals.bench_scale`` runs (issue 22): two rounds — a worker killed with
SIGKILL after a non-idempotent call's effect, and before an idempotent call's effect; a second
worker process sends the same requests — end with 0 duplicate effects, 0 lost acknowledged
writes, the first outcome stated unknown and the second claim taken over (the full 20 rounds:
``python -m evals.bench_scale --kill 20 --only kill``, figures in evals/README.md)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.integration.conftest import ROOT

pytestmark = pytest.mark.slow  # PostgreSQL and worker processes


def test_two_kill_rounds_leave_no_duplicate_and_lose_nothing_acknowledged():
    run = subprocess.run(
        [sys.executable, "-m", "evals.bench_scale", "--kill", "2", "--only", "kill"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    result = json.loads((ROOT / "evals" / "out" / "bench_scale_kill.json").read_text())["kill"]
    assert (result["rounds"], result["duplicate_effects"], result["lost_acknowledged_writes"]) == (2, 0, 0)
    after, before = result["details"]
    assert after["third_after_kill"]["error_kind"] == "outcome_unknown"  # never posted again
    assert before["third_after_kill"] == {"status": "ok", "replayed": False, "error_kind": None}  # taken over, ran
    assert list(after["effects"].values()) == list(before["effects"].values()) == [1, 1, 1]
