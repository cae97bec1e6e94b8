"""``hermes serve`` fires a due reminder as a notice, once (issue 27; DESIGN §5.4), in real
processes: the reminder's text is delivered to the user and recorded (``hermes reminders
history``), never run as a request (no new reminder, no model call: the model here is an
endpoint that refuses connections), a later check or a restarted ``serve`` in the same period
fires nothing, and ``serve`` stops by itself after ``--checks`` with exit 0 and leaves no process.
With ``hermes reminders run`` in the two months before, the reminder fired three times gives
three deliveries and no new reminder."""

from __future__ import annotations

import datetime as dt
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.integration.conftest import ROOT
from tests.support.processes import own_processes
from tools.builtin.reminders import schedule_reminder

pytestmark = pytest.mark.slow  # real hermes processes
HERMES = str(Path(sys.executable).parent / "hermes")
# a firing that ran the reminder's text as a request would need a model: this one refuses
NO_MODEL = {"HERMES_MODEL": "no-model", "HERMES_BASE_URL": "http://127.0.0.1:9/v1", "OPENAI_API_KEY": "x"}
#: The flagship demo's reminder: firing it once ran this text as a request and scheduled a second one.
TEXT = "remind me every month to send the sales report"


def hermes(data: Path, *args: str, timeout: float = 180) -> subprocess.CompletedProcess[str]:
    """Run ``hermes *args`` on ``data`` to its end (its own session, killed on a timeout)."""
    env = {**os.environ, **NO_MODEL, "HERMES_DATA_DIR": str(data)}
    proc = subprocess.Popen(
        [HERMES, *args],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        out, err = proc.communicate(timeout=timeout)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, 9)
            proc.wait()
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def months_before(day: dt.datetime, n: int) -> dt.datetime:
    """The 2nd of the month ``n`` months before ``day``'s, at 09:00."""
    index = day.year * 12 + day.month - 1 - n
    return dt.datetime(index // 12, index % 12 + 1, 2, 9, 0)


def history(data: Path) -> list[dict]:
    out = hermes(data, "reminders", "history", "--json")
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def test_hermes_serve_delivers_a_due_reminder_once_as_a_notice_and_stops_cleanly(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    now = dt.datetime.now()
    made = schedule_reminder(TEXT, 1, "00:00", data_dir=data, now=months_before(now, 3))
    assert made["action"]["kind"] == "notify"
    # the two months before: fired by `hermes reminders run` at their own clock
    for n in (2, 1):
        run = hermes(data, "reminders", "run", "--now", months_before(now, n).isoformat(), "--json")
        assert run.returncode == 0, run.stdout + run.stderr
        assert [f["status"] for f in json.loads(run.stdout.strip().splitlines()[-1])["firings"]] == ["fired"]

    # this month: `hermes serve` on the real clock, several checks, then it stops by itself
    serve = hermes(data, "serve", "--interval", "0.2", "--checks", "6")
    assert serve.returncode == 0, serve.stdout + serve.stderr
    period = f"{now.year:04d}-{now.month:02d}"
    said = " ".join(serve.stdout.split())
    assert said.count(f"notice Reminder ({period}): {TEXT}") == 1, serve.stdout
    assert said.count("fired reminder") == 1 and "failed" not in said, serve.stdout
    assert own_processes(HERMES) == []  # nothing left running

    # recorded: one delivery per period, newest first, the notice only (no action ran)
    rows = history(data)
    assert [r["period"] for r in rows] == [
        period,
        months_before(now, 1).strftime("%Y-%m"),
        months_before(now, 2).strftime("%Y-%m"),
    ]
    assert all(r["reminder_id"] == made["id"] and r["outcome"] == "delivered" for r in rows)
    assert rows[0]["message"] == f"Reminder ({period}): {TEXT}"
    # firing three times created no reminder; the one reminder lists its three deliveries
    listed = hermes(data, "reminders", "list", "--json")
    assert listed.returncode == 0, listed.stderr
    reminders = json.loads(listed.stdout)
    assert [r["id"] for r in reminders] == [made["id"]]
    assert reminders[0]["last_fired_period"] == period and len(reminders[0]["deliveries"]) == 3

    # a restarted serve in the same period fires nothing more
    again = hermes(data, "serve", "--interval", "0.2", "--checks", "3")
    assert again.returncode == 0 and "Reminder (" not in again.stdout, again.stdout + again.stderr
    assert len(history(data)) == 3
