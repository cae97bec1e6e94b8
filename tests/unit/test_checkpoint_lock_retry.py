"""A transient "database is locked" from SQLite does not lose a turn (issue 23, kind 1).

SQLite answers ``SQLITE_BUSY`` at once, without waiting out the busy timeout, in some WAL cases
(a stale read snapshot, a WAL being reset by another process); under load that killed ``hermes
run`` processes inside ``aput`` and left their threads with no checkpoint. The saver's writes
(graph/checkpoints.py: ``retry_locked``) roll back and retry. Here the connection answers
"database is locked" to the first writes of each kind; the graph's run still completes and
every checkpoint reads back."""

from __future__ import annotations

import asyncio
import sqlite3
from typing import TypedDict

import pytest
from langgraph.graph import END, START, StateGraph

from graph import checkpoints
from graph.checkpoints import is_transient_lock, open_checkpointer


class _S(TypedDict):
    n: int


def _graph(saver):
    g = StateGraph(_S)
    g.add_node("one", lambda s: {"n": s["n"] + 1})
    g.add_node("two", lambda s: {"n": s["n"] * 10})
    g.add_edge(START, "one")
    g.add_edge("one", "two")
    g.add_edge("two", END)
    return g.compile(checkpointer=saver)


def _flaky(conn, failures: dict[str, int], message: str = "database is locked"):
    """Make ``conn.execute``/``executemany`` raise ``message`` for the first N statements that
    start with each key of ``failures`` (a fresh SQLITE_BUSY at statement time)."""
    execute, executemany = conn.execute, conn.executemany
    seen: list[str] = []

    def check(sql: str) -> None:
        for prefix, left in failures.items():
            if sql.lstrip().upper().startswith(prefix) and left > 0:
                failures[prefix] = left - 1
                seen.append(prefix)
                raise sqlite3.OperationalError(message)

    def flaky_execute(sql, *args, **kwargs):
        check(sql)
        return execute(sql, *args, **kwargs)

    def flaky_executemany(sql, *args, **kwargs):
        check(sql)
        return executemany(sql, *args, **kwargs)

    conn.execute, conn.executemany = flaky_execute, flaky_executemany
    return seen


def _recorded_pauses(monkeypatch) -> list[float]:
    """The seconds of every ``asyncio.sleep`` from here on, each returned at once (after a
    ``sleep(0)``: still a yield to the loop). The saver's pause before each retry is 0.05 s plus
    up to 1 s of jitter, paid for real it made these tests ~1 s each."""
    pauses: list[float] = []
    real_sleep = asyncio.sleep

    async def pause(delay: float, result=None):
        pauses.append(delay)
        return await real_sleep(0, result)

    monkeypatch.setattr(asyncio, "sleep", pause)
    return pauses


@pytest.mark.parametrize("message", ["database is locked", "database table is locked", "database is busy"])
async def test_a_locked_write_is_retried_and_the_turn_is_kept(tmp_path, monkeypatch, message):
    monkeypatch.setattr(checkpoints, "LOCK_RETRY_S", 10.0)
    pauses = _recorded_pauses(monkeypatch)
    async with open_checkpointer(tmp_path / "checkpoints.sqlite") as saver:
        seen = _flaky(
            saver.conn, {"INSERT OR REPLACE INTO CHECKPOINTS": 2, "INSERT OR REPLACE INTO WRITES": 2}, message
        )
        app = _graph(saver)
        cfg = {"configurable": {"thread_id": "t1"}}
        out = await app.ainvoke({"n": 1}, cfg)
        assert out == {"n": 20}
        assert seen.count("INSERT OR REPLACE INTO CHECKPOINTS") == 2  # the failures happened
        assert len([p for p in pauses if p >= 0.05]) == len(seen)  # each retry after a pause
        state = await app.aget_state(cfg)
        assert state.values == {"n": 20} and state.next == ()
        history = [s async for s in app.aget_state_history(cfg)]
        assert len(history) >= 4  # input, one, two and the start: every step kept


async def test_other_errors_are_not_retried(tmp_path):
    async with open_checkpointer(tmp_path / "checkpoints.sqlite") as saver:
        _flaky(saver.conn, {"INSERT OR REPLACE INTO CHECKPOINTS": 1}, "disk I/O error")
        with pytest.raises(sqlite3.OperationalError, match="disk I/O error"):
            await _graph(saver).ainvoke({"n": 1}, {"configurable": {"thread_id": "t1"}})


async def test_a_lock_that_never_clears_ends_in_the_error(tmp_path, monkeypatch):
    monkeypatch.setattr(checkpoints, "LOCK_RETRY_S", 0.3)
    async with open_checkpointer(tmp_path / "checkpoints.sqlite") as saver:
        _flaky(saver.conn, {"INSERT OR REPLACE INTO CHECKPOINTS": 10_000})
        with pytest.raises(sqlite3.OperationalError, match="locked"):
            await _graph(saver).ainvoke({"n": 1}, {"configurable": {"thread_id": "t1"}})


def test_transient_lock_errors_are_told_apart():
    assert is_transient_lock(sqlite3.OperationalError("database is locked"))
    assert is_transient_lock(sqlite3.OperationalError("database table is locked: checkpoints"))
    assert not is_transient_lock(sqlite3.OperationalError("no such table: checkpoints"))
    assert not is_transient_lock(sqlite3.DatabaseError("file is not a database"))
    assert not is_transient_lock(ValueError("database is locked"))
