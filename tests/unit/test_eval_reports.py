"""Eval runs and the source tree (issue 21, Deliver 5): a run writes to ``evals/out/`` (ignored by
git) unless told otherwise, and ``evals/reports/`` keeps only the runs and plots a document
cites. Pure: reads files, nothing else."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
REPORTS = ROOT / "evals" / "reports"


def _documents() -> str:
    """Every document that may cite a run: the top-level Markdown, docs/, evals/README.md."""
    files = [*ROOT.glob("*.md"), *(ROOT / "docs").rglob("*.md"), ROOT / "evals" / "README.md"]
    return "\n".join(f.read_text(encoding="utf-8") for f in files)


def kept_runs() -> list[str]:
    """What ``evals/reports/`` holds: ``<suite>/<run>`` for a run's folder, the name of a plot."""
    kept = []
    for entry in sorted(REPORTS.iterdir()):
        if entry.is_dir():
            kept += [f"{entry.name}/{run.name}" for run in sorted(entry.iterdir()) if run.is_dir()]
        else:
            kept.append(entry.name)
    return kept


def test_every_kept_run_and_plot_is_cited_by_a_document():
    """A run is kept only with the README line that cites it (evals/README.md); a superseded or
    never-cited run is deleted, not kept in the package's source tree."""
    text = _documents()
    kept = kept_runs()
    assert kept  # the scan works
    uncited = [name for name in kept if f"reports/{name}" not in text]
    assert uncited == [], f"in evals/reports/ but cited by no document (cite or delete): {uncited}"


def writes_into_reports(source: str) -> list[int]:
    """Lines of an evals module whose code (not a docstring or comment) names the cited-runs
    folder as a path: the string ``"reports"`` or one starting with ``evals/reports``. The
    constant ``REPORTS`` (evals/harness.py: where the cited runs are) may name it."""
    tree = ast.parse(source)
    docstrings = {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
        and node.body
        and isinstance(node.body[0], ast.Expr)
        and isinstance(node.body[0].value, ast.Constant)
    }
    docstrings |= {
        id(sub)
        for node in ast.walk(tree)
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "REPORTS" for t in node.targets)
        for sub in ast.walk(node.value)
    }
    return sorted(
        node.lineno
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant)
        and isinstance(node.value, str)
        and id(node) not in docstrings
        and (node.value == "reports" or node.value.startswith("evals/reports"))
    )


def test_the_reports_finder():
    source = (
        '"""Writes evals/reports/x.png."""\nA = ROOT / "reports" / "a.png"\nB = "evals/reports/b.png"\nC = "out"\n'
        'REPORTS = ROOT / "evals" / "reports"\n'
    )
    assert writes_into_reports(source) == [2, 3]


def test_runs_go_to_an_ignored_folder_by_default():
    from evals.harness import RUNS, default_out

    assert "evals/out/" in (ROOT / ".gitignore").read_text(encoding="utf-8").splitlines()
    assert RUNS == ROOT / "evals" / "out" and default_out("memory").is_relative_to(RUNS)
    found = []
    for file in sorted((ROOT / "evals").rglob("*.py")):
        rel = file.relative_to(ROOT).as_posix()
        if rel.startswith(("evals/reports/", "evals/out/")):
            continue
        found += [f"{rel}:{n}" for n in writes_into_reports(file.read_text(encoding="utf-8"))]
    assert found == [], "write runs and plots to evals/out/ (copy the cited ones into evals/reports/)"
