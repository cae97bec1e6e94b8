"""Reminder workers on one PostgreSQL (issue 22; DESIGN §5.4): several ``hermes reminders run``
and ``hermes serve`` processes, each with its own data directory (as on separate machines),
started together on one real PostgreSQL (pgserver), fire each reminder period exactly once — one
notice per reminder and period across all of their outputs, every firing claimed once (attempt
1, state done), no ``reminders.db`` anywhere — and a worker killed with kill -9 holding a claim
has its claim taken over by another worker (its lease, a session advisory lock, ended with it);
the schedule tools, run in the executor's worker, use the toolbox's database."""

from __future__ import annotations

import datetime as dt
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.integration.conftest import ROOT
from tests.support.processes import own_processes
from tools.builtin.reminders import schedule_reminder
from tools.reminder_history import delivery_history, firing_history
from tools.scheduler import due_reminders, mark_fired

pytestmark = pytest.mark.slow  # real hermes processes, a real PostgreSQL
HERMES = str(Path(sys.executable).parent / "hermes")
# nothing here needs a model: a reminder's notice is not a request
NO_MODEL = {"HERMES_MODEL": "no-model", "HERMES_BASE_URL": "http://127.0.0.1:9/v1", "OPENAI_API_KEY": "x"}
WORKERS = 3
REMINDERS = 4


def months_before(day: dt.datetime, n: int) -> dt.datetime:
    """The 2nd of the month ``n`` months before ``day``'s, at 09:00."""
    index = day.year * 12 + day.month - 1 - n
    return dt.datetime(index // 12, index % 12 + 1, 2, 9, 0)


def start_all(tmp_path: Path, url: str, *args: str) -> list[subprocess.Popen[str]]:
    """``hermes *args`` in :data:`WORKERS` processes at once, each on its own data directory."""
    procs = []
    for k in range(WORKERS):
        data = tmp_path / f"worker-{k}"
        data.mkdir(exist_ok=True)
        env = {**os.environ, **NO_MODEL, "HERMES_DATA_DIR": str(data), "HERMES_POSTGRES_URL": url}
        procs.append(
            subprocess.Popen(
                [HERMES, *args],
                cwd=ROOT,
                env=env,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
                start_new_session=True,
            )
        )
    return procs


def finish_all(procs: list[subprocess.Popen[str]], timeout: float = 240) -> list[str]:
    """Each process's stdout, after checking it exited 0 (killed on a timeout)."""
    outs = []
    for proc in procs:
        try:
            out, err = proc.communicate(timeout=timeout)
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
        assert proc.returncode == 0, out + err
        outs.append(" ".join(out.split()))
    return outs


def test_three_workers_on_one_postgres_fire_each_period_once(tmp_path, postgres_url):
    now = dt.datetime.now()
    made = [
        schedule_reminder(
            f"check the stock of shop {i}",
            1,
            "00:00",
            data_dir=tmp_path / "maker",
            now=months_before(now, 3),
            postgres_url=postgres_url,
        )
        for i in range(REMINDERS)
    ]
    last_month = months_before(now, 1)
    periods = [last_month.strftime("%Y-%m"), now.strftime("%Y-%m")]

    runs = finish_all(start_all(tmp_path, postgres_url, "reminders", "run", "--now", last_month.isoformat()))
    serves = finish_all(start_all(tmp_path, postgres_url, "serve", "--interval", "0.1", "--checks", "8"))
    said = " ".join(runs + serves)
    for r in made:
        for period in periods:
            # one notice per reminder and period, whichever worker won its claim
            assert said.count(f"notice Reminder ({period}): {r['text']}") == 1, said
    assert said.count("fired reminder") == REMINDERS * len(periods), said
    assert own_processes(HERMES) == []

    fired = firing_history(tmp_path, postgres_url=postgres_url)
    assert sorted((f["reminder_id"], f["period"]) for f in fired) == sorted((r["id"], p) for r in made for p in periods)
    assert {(f["state"], f["attempts"]) for f in fired} == {("done", 1)}  # claimed once, never taken over
    assert len(delivery_history(tmp_path, postgres_url=postgres_url)) == REMINDERS * len(periods)
    assert not list(tmp_path.rglob("reminders.db"))


CLAIMER = """
import os, sys, time, datetime as dt
from tools.scheduler import mark_fired
url, rid = sys.argv[1], int(sys.argv[2])
assert mark_fired("unused", rid, "2026-02", now=dt.datetime(2026, 2, 1, 9, 30), postgres_url=url)
print("claimed", flush=True)
time.sleep(600)  # mid-firing: killed here
"""


def test_a_claim_of_a_worker_killed_mid_firing_is_taken_over(tmp_path, postgres_url):
    r = schedule_reminder("x", 1, "09:00", data_dir=tmp_path, now=dt.datetime(2026, 1, 20), postgres_url=postgres_url)
    claimer = subprocess.Popen(
        [sys.executable, "-c", CLAIMER, postgres_url, str(r["id"])],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        assert claimer.stdout is not None and claimer.stdout.readline().strip() == "claimed"
        when = dt.datetime(2026, 2, 1, 9, 31)
        # alive (on PostgreSQL a pid says nothing: its lease says it runs): not due, not claimable
        assert due_reminders(tmp_path, when, postgres_url=postgres_url) == []
        assert not mark_fired(tmp_path, r["id"], "2026-02", now=when, owner="other", postgres_url=postgres_url)
    finally:
        os.killpg(claimer.pid, signal.SIGKILL)
        claimer.wait()
    # its session ended with it: the claim is due again and taken over once, same request id
    [due] = due_reminders(tmp_path, when, postgres_url=postgres_url)
    assert (due.period, due.attempt, due.request_id) == ("2026-02", 2, f"reminder:{r['id']}:2026-02")
    assert mark_fired(tmp_path, r["id"], "2026-02", now=when, owner="taker", postgres_url=postgres_url)
    assert not mark_fired(tmp_path, r["id"], "2026-02", now=when, owner="third", postgres_url=postgres_url)
    [row] = firing_history(tmp_path, postgres_url=postgres_url)
    assert (row["state"], row["attempts"]) == ("claimed", 2)


async def test_the_schedule_tools_in_the_executors_worker_use_the_toolboxs_postgres(
    tmp_path, postgres_url, monkeypatch
):
    """``schedule_reminder`` and ``list_reminders`` run in the subprocess executor's worker: with
    the toolbox opened on PostgreSQL (the URL given, not in the environment) they write and read
    the shared schedule, not ``reminders.db``; a model cannot name another database."""
    from tools.scheduler import stored_reminders
    from tools.toolbox import Toolbox

    monkeypatch.delenv("HERMES_POSTGRES_URL", raising=False)
    box = await Toolbox.open(tmp_path, postgres_url=postgres_url)
    try:
        made = await box.registry.call(
            "schedule_reminder", {"text": "water the plants", "day_of_month": 3, "time": "10:00"}, "r1"
        )
        listed = await box.registry.call("list_reminders", {}, "r2")
        sneaky = await box.registry.call(
            "schedule_reminder", {"text": "x", "postgres_url": "postgresql://elsewhere/db"}, "r3"
        )
    finally:
        await box.aclose()
    assert made.status == "ok" and listed.status == "ok", (made.error, listed.error)
    assert [r["text"] for r in listed.content["reminders"]] == ["water the plants"]
    assert [r["text"] for r in stored_reminders(tmp_path, postgres_url=postgres_url)] == ["water the plants"]
    assert sneaky.error_kind == "invalid_arguments"
    assert not (tmp_path / "reminders.db").exists()
