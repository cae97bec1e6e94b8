"""RetryQueue: persistent failed writes, capped retries, failures kept readable."""

from __future__ import annotations

import sqlite3

import pytest

from memory.queue import RetryQueue


@pytest.fixture
def queue(tmp_path) -> RetryQueue:
    return RetryQueue.in_dir(tmp_path, max_attempts=3)


async def test_enqueue_persists_across_instances(tmp_path):
    await RetryQueue.in_dir(tmp_path).enqueue("episodic.add", {"text": "x"}, RuntimeError("disk full"))
    (entry,) = await RetryQueue.in_dir(tmp_path).pending()
    assert (entry.op, entry.payload, entry.error, entry.attempts) == (
        "episodic.add",
        {"text": "x"},
        "RuntimeError: disk full",
        1,
    )


async def test_drain_removes_successes(queue):
    seen = []

    async def ok(op, payload):
        seen.append((op, payload))

    await queue.enqueue("a", {"n": 1}, "e")
    await queue.enqueue("a", {"n": 2}, "e")
    assert await queue.drain(ok) == 2
    assert seen == [("a", {"n": 1}), ("a", {"n": 2})]
    assert await queue.pending() == [] and await queue.failures() == []


async def test_failures_are_capped_and_stay_readable(queue):
    async def broken(op, payload):
        raise ConnectionError("still down")

    await queue.enqueue("episodic.add", {"n": 1}, "first failure")
    assert await queue.drain(broken) == 0  # attempt 2
    (entry,) = await queue.pending()
    assert entry.attempts == 2 and entry.error == "ConnectionError: still down"
    assert await queue.drain(broken) == 0  # attempt 3 = cap
    assert await queue.pending() == []
    (dead,) = await queue.failures()
    assert (dead.status, dead.attempts, dead.payload) == ("dead", 3, {"n": 1})

    calls = []

    async def counting(op, payload):
        calls.append(payload)

    assert await queue.drain(counting) == 0 and calls == []  # dead entries are not retried


async def test_one_failure_does_not_stop_the_others(queue):
    async def picky(op, payload):
        if payload["n"] == 1:
            raise ValueError("bad")

    for n in (1, 2, 3):
        await queue.enqueue("a", {"n": n}, "e")
    assert await queue.drain(picky) == 2
    assert [e.payload for e in await queue.pending()] == [{"n": 1}]


async def test_corrupt_payload_counts_as_a_failure(queue):
    await queue.enqueue("a", {"n": 1}, "e")
    with sqlite3.connect(queue.db.path) as db:
        db.execute("UPDATE memory_retry_queue SET payload = '{broken'")

    async def ok(op, payload):
        raise AssertionError("handler must not see a corrupt payload")

    assert await queue.drain(ok) == 0
    (entry,) = await queue.pending()
    assert entry.payload is None and entry.attempts == 2 and "not valid JSON" in entry.error
