"""The explicit-note trigger (seed §4.2, the user states it explicitly): "please remember: X"
is kept as a ``note`` memory in the user's words, with no tool call needed; questions about
memory and one-off instructions are not notes."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from memory.embeddings import HashEmbedder
from memory.episodic.lance import LanceEpisodicStore
from memory.policy import NOTE_CONFIDENCE
from memory.service import MemoryService
from memory.task_outcome import TurnEvidence
from memory.triggers import detect_notes

NOW = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)


@pytest.mark.parametrize(
    "text",
    [
        "Please remember: the project code is K-42.",
        "Remember that the office moved to Berlin.",
        "Note that invoices are due on the 5th.",
        "Can you remember my locker number is 17?",
        "Keep in mind the client prefers calls on Fridays.",
        "For the record, the budget is 12,000 EUR.",
        "请记住：项目代号是K-42。",
        "覚えておいて：会議は火曜日です。",
    ],
)
def test_requests_to_remember_a_fact_are_notes(text):
    assert detect_notes(text) == [text]


@pytest.mark.parametrize(
    "text",
    [
        "Do you remember the code?",
        "Remember when we met in March?",
        "Summarise last month's sales into a report.",
        "Remember this time only: short answers.",
        "",
    ],
)
def test_questions_one_offs_and_tasks_are_not_notes(text):
    assert detect_notes(text) == []


async def test_a_note_without_any_tool_is_written_and_recalled_in_the_users_words(tmp_path):
    mem = MemoryService(tmp_path / "data", episodic=LanceEpisodicStore(tmp_path / "data" / "ep.lance", HashEmbedder()))
    try:
        plan = mem.plan_turn(
            user_id="u",
            thread_id="t1",
            goal="Please remember: the project code is K-42.",
            answer="Noted.",
            tools_used=[],
            stop_reason=None,
            failed_then_succeeded=[],
            evidence=TurnEvidence(),
        )
        counts = await mem.write_plan(plan, now=NOW)
        assert counts["episodes"] == 1
        (note,) = await mem.episodic.list("u", kinds=["note"])
        assert note.text == "user note: Please remember: the project code is K-42."
        assert note.confidence == NOTE_CONFIDENCE
        lines = await mem.recall("u", "what is the project code?", now=NOW)
        assert any("K-42" in line for line in lines), lines
    finally:
        await mem.aclose()
