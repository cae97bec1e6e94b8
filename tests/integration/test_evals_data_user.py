"""The ``data`` suite on a user's own database end to end (``--database`` / ``--questions``),
against a scripted OpenAI-compatible model (wiring, not quality): the question runs through the
real runner (graph, SQLite checkpoints, subprocess executor, real tools) with the user's file as
the database, and is scored against the truth computed on that file."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from starlette.requests import Request
from starlette.responses import JSONResponse

from evals.harness import EvalConfig, run_suite
from tests.support.openai_stub import OpenAIStub

pytestmark = pytest.mark.slow

SQL = "SELECT COUNT(*) FROM \"Shop Sales\" WHERE substr(sold_on, 1, 7) = '{latest_ym}'"
QUESTION = {"id": "sales-latest", "category": "period-sum", "prompt": "How many sales did we make in {latest_month}?",
            "sql": SQL}  # fmt: skip


class ReadThenAnswer(OpenAIStub):
    """Reads with the truth's own SQL (the month filled in), then answers with the tool's result."""

    async def _completions(self, request: Request) -> JSONResponse:
        body = await request.json()
        with self._lock:
            self.requests.append(body)
        messages = body.get("messages") or []
        results = [m for m in messages if m.get("role") == "tool"]
        message: dict[str, Any] = {
            "role": "assistant",
            "content": "From the data: " + str((results or [{}])[-1].get("content"))[:1500],
        }
        if not results:
            call = {"id": "call-1", "type": "function",
                    "function": {"name": "query_database", "arguments": json.dumps({"sql": SQL.format(latest_ym="2018-05")})}}  # fmt: skip
            message = {"role": "assistant", "content": None, "tool_calls": [call]}
        choice = {"index": 0, "message": message, "finish_reason": "tool_calls" if "tool_calls" in message else "stop"}
        return JSONResponse({"id": f"chatcmpl-{len(self.requests)}", "object": "chat.completion", "created": 0,
                             "model": body.get("model", "stub"), "choices": [choice],
                             "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}})  # fmt: skip


@pytest.mark.timeout(600)
async def test_a_users_question_runs_on_the_users_database(tmp_path: Path, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "x")
    db = tmp_path / "my shop.db"
    with sqlite3.connect(db) as con:
        con.execute('CREATE TABLE "Shop Sales" (id INTEGER PRIMARY KEY, sold_on DATE, amount REAL)')
        con.executemany('INSERT INTO "Shop Sales" (sold_on, amount) VALUES (?, ?)',
                        [("2018-04-30", 1.0)] + [("2018-05-0" + str(d), 2.0) for d in range(1, 8)])  # fmt: skip
    con.close()
    questions = tmp_path / "questions.json"
    questions.write_text(json.dumps([QUESTION]))
    with ReadThenAnswer() as stub:
        cfg = EvalConfig(suite="data", model="stub", base_url=stub.base_url, database=db, questions=questions,
                         out=tmp_path / "out")  # fmt: skip
        report = await run_suite(cfg)
    [row] = [json.loads(line) for line in (report.out / "results.jsonl").read_text().splitlines()]
    assert (row["db"], row["prompt"], row["truth"]) == ("my shop", "How many sales did we make in May 2018?", "7")
    assert row["tools_called"].get("query_database") == 1, row
    assert row["verdict"] == "correct", (row["answer"], row["stop_reason"], row["why"])
    assert "| stub @ " in (report.out / "report.md").read_text()
