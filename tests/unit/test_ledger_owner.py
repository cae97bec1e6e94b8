"""A claim whose owner process died while another process got its pid (pids wrap at 32768 on a
default Linux: within minutes on a busy machine) is the claim of a dead owner — taken over, or
stated as unknown — not a live one to wait for until ``LedgerBusy``. Cross-process cases:
tests/integration/test_idempotency_processes.py, tests/integration/test_repeat_after_crash.py."""

from __future__ import annotations

import os
import socket
import sqlite3

from tools.claim_owners import new_owner, owner_alive
from tools.idempotency import IdempotencyLedger


def reused_pid_owner() -> str:
    """An owner id naming a live pid (this process) with another process's start time."""
    return f"{socket.gethostname()}:{os.getpid()}:dead0000:12.34"


def claim(path, owner: str) -> None:
    con = sqlite3.connect(path)
    con.execute(
        "INSERT INTO tool_requests (tool, request_id, state, owner, created) VALUES ('post', 'r', 'running', ?, "
        "strftime('%s','now'))",
        (owner,),
    )
    con.commit()
    con.close()


def test_owner_ids_carry_the_start_time():
    mine = new_owner()
    assert owner_alive(mine)
    assert not owner_alive(reused_pid_owner())
    assert owner_alive(f"{socket.gethostname()}:{os.getpid()}:old")  # an older id: the pid alone


async def test_a_reused_pid_does_not_keep_a_dead_claim_alive(tmp_path):
    path = tmp_path / "idempotency.db"
    ledger = IdempotencyLedger(path, wait_s=0.5)
    await ledger.count()  # creates the table
    claim(path, reused_pid_owner())
    ran: list[str] = []

    async def effect():
        ran.append("posted")
        return {"posted": True}

    try:
        record, replayed = await ledger.run_once(
            "post", "r", effect, lost=lambda why: {"status": "unknown", "why": why}
        )
    finally:
        await ledger.aclose()
    assert ran == [] and replayed  # never sent again: its outcome is unknown
    assert record["status"] == "unknown" and "stopped mid-call" in record["why"]
