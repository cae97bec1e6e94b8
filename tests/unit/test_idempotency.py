"""Idempotency ledger (seed §2.2), in process: failed calls release the claim, cancellation, a
live owner elsewhere, expiry, the default in-memory ledger. Across processes (real executor,
restarts, dead owners, two processes): tests/integration/test_idempotency_processes.py."""

from __future__ import annotations

import asyncio
import os
import socket
import sqlite3

import pytest

from tools.idempotency import IdempotencyLedger, LedgerBusy
from tools.registry import ToolRegistry


async def test_failed_calls_release_the_claim_and_may_run_again(tmp_path):
    ledger = IdempotencyLedger(tmp_path / "l.db")
    runs = []

    async def flaky():
        runs.append(1)
        return {"status": "error"} if len(runs) == 1 else {"status": "ok"}

    try:
        r1, _ = await ledger.run_once("t", "r", flaky, keep=lambda r: r["status"] == "ok")
        r2, rep2 = await ledger.run_once("t", "r", flaky, keep=lambda r: r["status"] == "ok")
        r3, rep3 = await ledger.run_once("t", "r", flaky, keep=lambda r: r["status"] == "ok")
    finally:
        await ledger.aclose()
    assert (r1["status"], r2["status"], r3["status"]) == ("error", "ok", "ok")
    assert not rep2 and rep3 and len(runs) == 2


async def test_cancellation_releases_the_claim(tmp_path):
    ledger = IdempotencyLedger(tmp_path / "l.db")
    started = asyncio.Event()

    async def slow():
        started.set()
        await asyncio.sleep(30)
        return {}

    task = asyncio.create_task(ledger.run_once("t", "r", slow))
    await started.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task

    async def quick():
        return {"v": 1}

    try:
        assert await ledger.run_once("t", "r", quick) == ({"v": 1}, False)
    finally:
        await ledger.aclose()


@pytest.mark.slow  # waits out the live owner
async def test_a_live_owner_elsewhere_is_waited_for_then_busy(tmp_path):
    path = tmp_path / "l.db"
    ledger = IdempotencyLedger(path, wait_s=0.3)
    await ledger.count()
    con = sqlite3.connect(path)
    con.execute(
        "INSERT INTO tool_requests (tool, request_id, state, owner, created) VALUES ('t', 'r', 'running', ?, ?)",
        (f"{socket.gethostname()}:{os.getpid()}:other", 1e12),
    )
    con.commit()
    con.close()

    async def run():
        raise AssertionError("must not run while another owner holds the claim")

    try:
        with pytest.raises(LedgerBusy, match="still running"):
            await ledger.run_once("t", "r", run)
    finally:
        await ledger.aclose()


async def test_expire_forgets_a_tools_records(tmp_path):
    ledger = IdempotencyLedger(tmp_path / "l.db")

    async def run():
        return {"n": 1}

    try:
        await ledger.run_once("a", "1", run)
        await ledger.run_once("b", "1", run)
        assert await ledger.expire("a") == 1
        assert await ledger.get("a", "1") is None and await ledger.get("b", "1") == {"n": 1}
        assert (await ledger.run_once("a", "1", run))[1] is False  # runs again
    finally:
        await ledger.aclose()


async def test_default_registry_ledger_is_in_memory():
    reg = ToolRegistry()
    assert reg.ledger.path is None
