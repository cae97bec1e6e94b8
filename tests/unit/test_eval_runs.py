"""Eval runs are not source (evals/harness.py): a run goes to an ignored folder by default, and
neither the cited runs (evals/reports/) nor local ones (evals/out/) are part of the package."""

from __future__ import annotations

import tomllib
from pathlib import Path

from evals.harness import default_out

ROOT = Path(__file__).resolve().parents[2]


def test_a_run_goes_to_an_ignored_folder_by_default():
    out = default_out("tasks")
    assert out.parent == ROOT / "evals" / "out" / "tasks"
    assert "evals/out/" in (ROOT / ".gitignore").read_text(encoding="utf-8").splitlines()


def test_eval_runs_are_not_packaged():
    find = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["setuptools"]["packages"][
        "find"
    ]
    assert {"evals.reports*", "evals.out*"} <= set(find.get("exclude", []))
