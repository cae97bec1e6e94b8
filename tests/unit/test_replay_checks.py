"""``python -m evals.replay_checks``: a data-suite report's answers checked again by this
tree's checks, its queries run again on the same database (no model)."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from evals.replay_checks import replay


def _report(tmp_path: Path, db: Path, runs: list[tuple[str, str, str, str]]) -> Path:
    """A report folder: ``runs`` of (id, verdict, sql, answer), each one query then the answer."""
    report = tmp_path / "report"
    (report / "transcripts").mkdir(parents=True)
    (report / "summary.json").write_text(json.dumps({"config": {"database": str(db)}}))
    lines = []
    for run_id, verdict, sql, answer in runs:
        transcript = f"transcripts/{run_id}.jsonl"
        events = [
            {"kind": "message", "role": "human", "content": "Who was our biggest customer by revenue in May 2025?"},
            {"kind": "message", "role": "ai", "content": "", "tool_calls": [{"id": "q1", "name": "query_database", "args": {"sql": sql}}]},
            {"kind": "message", "role": "tool", "name": "query_database", "content": "{}", "tool_call_id": "q1"},
            {"kind": "message", "role": "ai", "content": answer},
        ]  # fmt: skip
        (report / transcript).write_text("\n".join(json.dumps(e) for e in events))
        lines.append(
            json.dumps(
                {
                    "id": run_id,
                    "db": "sales",
                    "prompt": "Who was our biggest customer by revenue in May 2025?",
                    "verdict": verdict,
                    "answer": answer,
                    "stop_reason": "answered",
                    "transcript": transcript,
                }
            )
        )
    (report / "results.jsonl").write_text("\n".join(lines))
    return report


MAY = "order_date BETWEEN '2025-05-01' AND '2025-05-31'"
GROUPED = (
    f"SELECT customer, SUM(revenue) AS total FROM sales_lines WHERE {MAY} GROUP BY customer ORDER BY total DESC LIMIT 1"
)
ONE_LINE = f"SELECT customer FROM sales_lines WHERE {MAY} ORDER BY revenue DESC LIMIT 1"


def test_the_queries_run_again_and_the_answers_are_checked_again(tmp_path: Path, db: Path):
    from tools.builtin.database import query_database

    best = query_database(GROUPED, database=str(db))["rows"][0][0]
    line = query_database(ONE_LINE, database=str(db))["rows"][0][0]
    report = _report(tmp_path, db, [("a#1", "correct", GROUPED, best), ("b#1", "wrong", ONE_LINE, line)])
    runs = {r.id: r for r in replay(report, {}, tmp_path)}
    assert runs["a#1"].problems == []
    assert any("single rows" in p for p in runs["b#1"].problems), runs["b#1"]

    out = CliRunner().invoke(_app(), [str(report)])
    assert out.exit_code == 0, out.output
    assert "correct: 1 accepted, 0 sent back" in out.output and "wrong: 0 accepted, 1 sent back" in out.output


def test_an_unreadable_report_exits_1(tmp_path: Path):
    out = CliRunner().invoke(_app(), [str(tmp_path / "missing")])
    assert out.exit_code == 1 and "cannot replay" in out.output


def _app():
    import typer

    from evals.replay_checks import main

    app = typer.Typer()
    app.command()(main)
    return app
