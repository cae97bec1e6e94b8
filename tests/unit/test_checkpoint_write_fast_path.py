"""A checkpoint write that succeeds at once costs no retry machinery (issue 19: building
tenacity's retrier for each of a turn's ~21 writes was ~2 % of its CPU); a transient lock still
enters the retry loop (test_checkpoint_lock_retry.py holds the retry's behaviour)."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any, TypedDict

import pytest
from langgraph.graph import END, START, StateGraph

from graph import checkpoints
from graph.checkpoints import open_checkpointer


class _S(TypedDict):
    n: int


def _graph(saver: Any) -> Any:
    g = StateGraph(_S)
    g.add_node("one", lambda s: {"n": s["n"] + 1})
    g.add_edge(START, "one")
    g.add_edge("one", END)
    return g.compile(checkpointer=saver)


@pytest.fixture
def retriers(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    built: list[str] = []
    real = checkpoints.retry_locked

    def counting(conn: Any, lock: Any, what: str) -> Any:
        built.append(what)
        return real(conn, lock, what)

    monkeypatch.setattr(checkpoints, "retry_locked", counting)
    return built


async def test_writes_that_succeed_build_no_retrier(tmp_path: Path, retriers: list[str]) -> None:
    async with open_checkpointer(tmp_path / "checkpoints.sqlite") as saver:
        cfg: Any = {"configurable": {"thread_id": "t1"}}
        assert await _graph(saver).ainvoke({"n": 1}, cfg) == {"n": 2}
        assert len([s async for s in saver.alist(cfg)]) >= 3  # input, one, and the start
    assert [w for w in retriers if w in ("aput", "aput_writes")] == []


async def test_a_locked_write_enters_the_retry_loop(
    tmp_path: Path, retriers: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("graph.checkpoints.random.random", lambda: 0.0)  # the first pause: 0.05 s
    async with open_checkpointer(tmp_path / "checkpoints.sqlite") as saver:
        conn: Any = saver.conn
        execute = conn.execute
        failures = [1]

        def locked_once(sql: str, *args: Any, **kwargs: Any) -> Any:
            if sql.lstrip().upper().startswith("INSERT OR REPLACE INTO CHECKPOINTS") and failures[0]:
                failures[0] -= 1
                raise sqlite3.OperationalError("database is locked")
            return execute(sql, *args, **kwargs)

        monkeypatch.setattr(conn, "execute", locked_once)
        cfg: Any = {"configurable": {"thread_id": "t1"}}
        assert await _graph(saver).ainvoke({"n": 1}, cfg) == {"n": 2}
        assert failures == [0]
    assert "aput" in retriers
