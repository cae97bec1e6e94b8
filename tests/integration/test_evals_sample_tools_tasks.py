"""CI sample of the ``tools`` (BFCL) and ``tasks`` (end-to-end) eval suites on the smallest
embedded model (``PIPELINE_MODEL``, the fastest): the report files are written and well-formed, and what the product decides
whatever the model does holds (an irrelevance question offered no function cannot call one; a
read-only task writes nothing). One BFCL case per category and two tasks keep it short."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from evals.harness import EvalConfig, run_suite
from tests.integration.conftest import PIPELINE_MODEL

pytestmark = pytest.mark.slow


def _read(out: Path) -> tuple[list[dict], dict]:
    for name in ("report.md", "results.jsonl", "summary.json"):
        assert (out / name).is_file(), f"{name} missing"
    rows = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines() if line]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["cases"] == len(rows)
    return rows, summary["summary"]


@pytest.mark.timeout(600)
async def test_tools_and_tasks_samples_on_the_embedded_model(tmp_path: Path):
    pytest.importorskip("bfcl_eval")
    from evals.suites.tasks import SAMPLE_TASKS, TASKS
    from evals.suites.tools import CATEGORIES

    tools = await run_suite(
        EvalConfig(suite="tools", model=PIPELINE_MODEL, sample=True, limit=1, out=tmp_path / "tools")
    )
    rows, summary = _read(tools.out)
    assert sorted(r["category"] for r in rows) == sorted(CATEGORIES), "one case per category"
    for r in rows:
        assert r["score"] in (0, 1) and isinstance(r["calls"], list)
        assert r["offered"] <= 2, "the embedded model's tool cap"
        if r["category"].startswith("parallel"):
            assert r["loop_score"] in (0, 1)
        if "irrelevance" in r["category"] and r["offered"] == 0:
            assert r["score"] == 1 and r["calls"] == [], "no function offered: the grammar allows only an answer"
    for name, value in summary.items():
        if name.endswith("accuracy"):
            assert 0.0 <= value <= 1.0
    assert "| category |" in (tools.out / "report.md").read_text()
    assert (tools.out / "accuracy.png").stat().st_size > 0

    tasks = await run_suite(
        EvalConfig(suite="tasks", model=PIPELINE_MODEL, sample=True, limit=2, out=tmp_path / "tasks")
    )
    rows, summary = _read(tasks.out)
    assert [r["task"] for r in rows] == list(SAMPLE_TASKS[:2])
    assert {r["kind"] for r in rows} == {next(t.kind for t in TASKS if t.id == i) for i in SAMPLE_TASKS[:2]}
    for r in rows:
        assert isinstance(r["passed"], bool) and r["stop_reason"]
        assert r["tokens_in"] > 0, "the run's metrics count the prompt tokens"
        if r["kind"] in ("answer", "readonly"):
            # no clause asks for a side effect: none is offered, and dispatch refuses any other
            assert r["side_effects"] == {"ledger_requests": 0, "chat_messages": 0, "reminders": 0, "report_files": 0}
    assert 0.0 <= summary["pass^1"] <= 1.0
    assert "pass^j" in (tasks.out / "report.md").read_text()
    assert (tasks.out / "pass_hat.png").stat().st_size > 0
