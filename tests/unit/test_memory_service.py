"""MemoryService: write triggers, labelled recall, never-raising writes and the retry queue."""

from __future__ import annotations

import re
import sqlite3
from datetime import datetime, timedelta, timezone

import pytest

from memory.episodic.base import EpisodicEvent
from memory.service import MemoryService

LABEL = re.compile(
    r"^\[episodic · (task|preference|tool_recovery) · \d{4}-\d{2}-\d{2} · confidence \d\.\d\d · (direct|inferred)\] .+"
)


def turn(**overrides):
    args = dict(
        user_id="u",
        thread_id="t1",
        goal="Run the monthly sales report for 2026-10.",
        answer="Report saved to reports/sales-2026-10.md",
        tools_used=["query_database", "report_generator"],
        stop_reason=None,
        failed_then_succeeded=[],
    )
    args.update(overrides)
    return args


@pytest.fixture
def mem(tmp_path) -> MemoryService:
    return MemoryService(tmp_path / "data")


async def test_constructor_is_cheap(tmp_path):
    MemoryService(tmp_path / "data")
    assert not (tmp_path / "data").exists()


async def test_completed_task_is_recorded_and_recalled_with_labels(mem, tmp_path):
    assert await mem.record_turn(**turn()) == 1
    assert (tmp_path / "data" / "memory.db").exists()
    (line,) = await mem.recall("u", "sales report")
    assert LABEL.match(line), line
    assert line.startswith("[episodic · task · ")
    assert "confidence 0.90 · direct]" in line
    assert "sales report for 2026-10" in line and "query_database, report_generator" in line


async def test_all_triggers_of_one_turn(mem):
    written = await mem.record_turn(
        **turn(goal="Run the sales report. I prefer PDF reports.", failed_then_succeeded=["query_database"])
    )
    assert written == 3
    lines = await mem.recall("u", "", k=10)
    kinds = sorted(LABEL.match(line).group(1) for line in lines)
    assert kinds == ["preference", "task", "tool_recovery"]
    assert any("user preference: I prefer PDF reports." in line for line in lines)


async def test_nothing_to_record(mem):
    assert await mem.record_turn(**turn(answer="", tools_used=[], stop_reason="no_progress")) == 0
    assert await mem.recall("u", "sales") == []


async def test_stopped_task_with_tools_has_lower_confidence(mem):
    assert await mem.record_turn(**turn(stop_reason="max_tool_rounds")) == 1
    (line,) = await mem.recall("u", "sales")
    assert "stopped (max_tool_rounds) on task" in line and "confidence 0.70" in line


async def test_repeated_turn_is_not_written_twice(mem):
    assert await mem.record_turn(**turn()) == 1
    assert await mem.record_turn(**turn()) == 0  # K11: same text, same user
    assert len(await mem.recall("u", "", k=10)) == 1


async def test_recall_is_scoped_per_user_and_filters_kinds(mem):
    await mem.record_turn(**turn(goal="Sales report please. I prefer PDF reports."))
    assert await mem.recall("someone-else", "sales report") == []
    prefs = await mem.recall("u", "report", kinds=["preference"])
    assert len(prefs) == 1 and prefs[0].startswith("[episodic · preference · ")


async def test_recall_drops_records_below_the_confidence_threshold(mem):
    await mem.episodic.add(
        EpisodicEvent(user_id="u", kind="task", text="guessed: user likes sales charts", confidence=0.3, evidence="inferred")
    )
    await mem.episodic.add(
        EpisodicEvent(user_id="u", kind="task", text="inferred: user reviews sales weekly", confidence=0.8, evidence="inferred")
    )
    (line,) = await mem.recall("u", "sales")
    assert "confidence 0.80 · inferred]" in line


async def test_recall_prefers_recent_memories(mem):
    now = datetime(2026, 11, 29, tzinfo=timezone.utc)
    for days, text in [(20, "ran the sales report for 2026-09"), (2, "ran the sales report for 2026-11")]:
        await mem.episodic.add(
            EpisodicEvent(user_id="u", kind="task", text=text, confidence=0.9, created_at=now - timedelta(days=days))
        )
    lines = await mem.recall("u", "sales report", k=2, now=now)
    assert ["2026-11" in lines[0], "2026-09" in lines[1]] == [True, True]
    assert "· 2026-11-27 ·" in lines[0] and "· 2026-11-09 ·" in lines[1]


# --- failures ---------------------------------------------------------------------------------


async def test_failed_write_is_queued_then_flushed(mem, monkeypatch):
    real_add = mem.episodic.add

    async def broken_add(event):
        raise RuntimeError("store unavailable")

    monkeypatch.setattr(mem.episodic, "add", broken_add)
    written = await mem.record_turn(**turn(goal="Run the sales report. I prefer PDF."))
    assert written == 0
    pending = await mem.queue.pending()
    assert [p.payload["kind"] for p in pending] == ["task", "preference"]
    assert all(p.error == "RuntimeError: store unavailable" for p in pending)

    assert await mem.flush_retry_queue() == 0  # still broken: stays queued, attempts counted
    assert [p.attempts for p in await mem.queue.pending()] == [2, 2]

    monkeypatch.setattr(mem.episodic, "add", real_add)
    assert await mem.flush_retry_queue() == 2
    assert await mem.queue.pending() == []
    lines = await mem.recall("u", "sales report PDF", k=5)
    assert sorted(LABEL.match(x).group(1) for x in lines) == ["preference", "task"]
    # The replayed event keeps its original id and timestamp, and replaying again is a no-op.
    assert await mem.flush_retry_queue() == 0


async def test_partial_failure_counts_only_real_writes(mem, monkeypatch):
    real_add = mem.episodic.add

    async def flaky_add(event):
        if event.kind == "preference":
            raise RuntimeError("boom")
        return await real_add(event)

    monkeypatch.setattr(mem.episodic, "add", flaky_add)
    assert await mem.record_turn(**turn(goal="Sales report. I prefer PDF.")) == 1
    assert [p.payload["kind"] for p in await mem.queue.pending()] == ["preference"]


async def test_transient_lock_is_retried_in_process(mem, monkeypatch):
    real_add = mem.episodic.add
    calls = []

    async def locked_once(event):
        calls.append(event.id)
        if len(calls) == 1:
            raise sqlite3.OperationalError("database is locked")
        return await real_add(event)

    monkeypatch.setattr(mem.episodic, "add", locked_once)
    assert await mem.record_turn(**turn()) == 1
    assert len(calls) == 2 and await mem.queue.pending() == []


async def test_record_turn_never_raises_even_if_the_queue_is_broken(mem, monkeypatch):
    async def broken(*args, **kwargs):
        raise RuntimeError("down")

    monkeypatch.setattr(mem.episodic, "add", broken)
    monkeypatch.setattr(mem.queue, "enqueue", broken)
    assert await mem.record_turn(**turn()) == 0


async def test_record_turn_never_raises_on_bad_input(mem):
    assert await mem.record_turn(**turn(user_id="")) == 0


async def test_unreadable_database_gives_empty_recall_and_no_exception(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    (data / "memory.db").write_bytes(b"this is not a sqlite database" * 100)
    mem = MemoryService(data)
    assert await mem.recall("u", "sales") == []
    assert await mem.record_turn(**turn()) == 0
    assert await mem.flush_retry_queue() == 0


async def test_corrupt_row_does_not_break_recall(mem):
    await mem.record_turn(**turn())
    with sqlite3.connect(mem.episodic.db.path) as db:
        cur = db.execute(
            "INSERT INTO episodic_events (id, user_id, kind, text, content_hash, created_at, confidence, metadata)"
            " VALUES ('bad', 'u', 'task', 'sales report gone wrong', 'h', '2026-13-45', 0.9, '{oops')"
        )
        db.execute("INSERT INTO episodic_fts (rowid, body) VALUES (?, 'sales report gone wrong')", (cur.lastrowid,))
    (line,) = await mem.recall("u", "sales report", k=5)
    assert "sales report for 2026-10" in line


async def test_no_blocking_io_in_the_event_loop(mem):
    """``langgraph dev`` runs blockbuster, which raises BlockingError on blocking I/O."""
    blockbuster = pytest.importorskip("blockbuster")
    with blockbuster.blockbuster_ctx():
        assert await mem.record_turn(**turn(goal="Sales report. I prefer PDF.")) == 2
        assert len(await mem.recall("u", "sales report PDF")) == 2
        assert await mem.flush_retry_queue() == 0
