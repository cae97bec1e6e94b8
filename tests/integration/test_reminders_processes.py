"""Reminders (DESIGN §5.4) with real processes: two runner processes fire a reminder once, a
dead runner's claim (a real exited process) is taken over with the same request id, and the
CLI run 1000 times posts once (in process, but tens of seconds). The rest:
tests/unit/test_reminders.py."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from graph import resources
from graph.cli import app
from graph.context import Context
from tests.conftest import FakeToolbox

# the clock helper, the side-effect test tool and the CLI runner are the unit module's (one definition)
from tests.unit.test_reminders import at, post_tool, runner
from tools.builtin.reminders import schedule_reminder
from tools.idempotency import IdempotencyLedger
from tools.registry import ToolRegistry
from tools.scheduler import (
    call_tool_action,
    due_reminders,
    fire_due,
    mark_fired,
)

pytestmark = pytest.mark.slow  # real runner processes; 1000 CLI runs


# -- the reminder model -------------------------------------------------------------------------


# -- once per period ------------------------------------------------------------------------


# -- racing runners ---------------------------------------------------------------------------


RACER = """
import asyncio, datetime as dt, os, sys, time
from tools.scheduler import fire_due
data_dir, effects, start = sys.argv[1], sys.argv[2], float(sys.argv[3])
async def fire(due):
    with open(effects, "a") as f:
        f.write(f"{os.getpid()} {due.request_id}\\n")
    return {"ok": True, "detail": "wrote"}
while time.time() < start:
    time.sleep(0.001)
for _ in range(20):
    for f in asyncio.run(fire_due(data_dir, dt.datetime(2026, 12, 1, 9, 30), fire)):
        print(f.status)
"""


def test_two_runner_processes_fire_once(tmp_path):
    import time

    # an action, so firing calls ``fire`` (a plain reminder only delivers its notice)
    action = {"kind": "task", "task": "write the sales report"}
    schedule_reminder("send the report", 1, "09:00", action=action, data_dir=tmp_path, now=at(2026, 8, 20))
    effects = tmp_path / "effects.txt"
    root = Path(__file__).resolve().parents[2]
    start = time.time() + 1.5  # both processes imported and waiting: they start together
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", RACER, str(tmp_path), str(effects), str(start)],
            cwd=root,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(2)
    ]
    outs = []
    try:
        for p in procs:
            out, err = p.communicate(timeout=60)
            assert p.returncode == 0, err
            outs.append(out.split())
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    assert effects.read_text().splitlines()[0].endswith("reminder:1:2026-12")
    assert len(effects.read_text().splitlines()) == 1
    statuses = outs[0] + outs[1]
    assert statuses.count("fired") == 1 and set(statuses) <= {"fired", "skipped"}


# -- tool actions through a real registry ---------------------------------------------------


async def test_a_dead_runners_claim_is_taken_over_with_the_same_request_id(tmp_path):
    effects: list = []
    ledger = IdempotencyLedger.in_data_dir(tmp_path)
    registry = ToolRegistry(ledger=ledger)
    registry.register(*post_tool(effects))
    try:
        schedule_reminder(
            "post",
            1,
            "09:00",
            action={"kind": "tool", "tool": "post_note", "args": {"channel": "p", "text": "t"}},
            data_dir=tmp_path,
            now=at(2026, 11, 20),
        )
        [due] = due_reminders(tmp_path, at(2026, 12, 1, 10))
        dead = subprocess.run(
            [sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True, check=True
        ).stdout.strip()
        import socket

        assert mark_fired(tmp_path, 1, "2026-12", now=at(2026, 12, 1, 10), owner=f"{socket.gethostname()}:{dead}:x")
        await call_tool_action(registry, due)  # it posted, then died before recording the outcome
        [again] = due_reminders(tmp_path, at(2026, 12, 1, 10, 5))
        assert again.attempt == 2 and again.request_id == due.request_id
        [f] = await fire_due(tmp_path, at(2026, 12, 1, 10, 5), lambda d: call_tool_action(registry, d))
        assert f.status == "fired" and f.result["replayed"] and len(effects) == 1
        # a live runner's claim is left alone
        [jan] = due_reminders(tmp_path, at(2027, 1, 1, 10))
        assert mark_fired(tmp_path, 1, jan.period, now=at(2027, 1, 1, 10))
        assert due_reminders(tmp_path, at(2027, 1, 1, 10, 1)) == []
    finally:
        await ledger.aclose()


# -- the CLI ----------------------------------------------------------------------------------


@pytest.mark.timeout(600)  # 1000 CLI runs in process: ~20 s idle, minutes on a loaded 2-core machine
def test_cli_reminders_run_1000_times_posts_once(tmp_path, monkeypatch):
    # stored directly, not by a request: the channel is allowed by configuration (re-checked at firing)
    monkeypatch.setenv("HERMES_ALLOWED_DESTINATIONS", '["p"]')
    effects: list = []
    schedule_reminder(
        "post",
        1,
        "09:00",
        action={"kind": "tool", "tool": "post_note", "args": {"channel": "p", "text": "t"}},
        data_dir=tmp_path,
        now=at(2026, 11, 20),
    )
    box = FakeToolbox()
    box.registry.register(*post_tool(effects))
    codes = set()
    for _ in range(1000):
        resources.set_toolbox(Context(model="m", data_dir=str(tmp_path)), box)
        codes.add(
            runner.invoke(
                app, ["reminders", "run", "--now", "2026-12-01T09:30", "--data-dir", str(tmp_path), "--json"]
            ).exit_code
        )
    assert codes == {0} and len(effects) == 1


# -- the reminders graph, in process ----------------------------------------------------------
