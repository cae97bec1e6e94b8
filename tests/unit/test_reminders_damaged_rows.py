"""One corrupt reminder row (bad action JSON, an impossible time, a garbage date) is listed as
damaged and skipped; the other reminders still list and fire."""

from __future__ import annotations

import datetime as dt
import sqlite3

import pytest
from typer.testing import CliRunner

from graph.cli import app
from tools.builtin.reminders import list_reminders, schedule_reminder
from tools.scheduler import due_reminders


def damage(path, reminder_id: int, column: str, value: str) -> None:
    con = sqlite3.connect(path / "reminders.db")
    con.execute(f"UPDATE reminders SET {column} = ? WHERE id = ?", (value, reminder_id))
    con.commit()
    con.close()


@pytest.mark.parametrize(
    ("column", "value"), [("action", "{broken"), ("action", "[1, 2]"), ("time", "99:99"), ("created_at", "not-a-date")]
)
def test_a_corrupt_reminder_does_not_stop_the_others(tmp_path, column, value):
    now = dt.datetime(2026, 1, 10)
    bad = schedule_reminder("broken one", 15, "09:00", data_dir=tmp_path, now=now)
    good = schedule_reminder("review sales", 15, "09:00", data_dir=tmp_path, now=now)
    damage(tmp_path, bad["id"], column, value)
    due = due_reminders(tmp_path, dt.datetime(2026, 1, 15, 9, 0))
    assert [d.reminder_id for d in due] == [good["id"]]
    listed = list_reminders(data_dir=tmp_path)["reminders"]
    assert [r["id"] for r in listed] == [bad["id"], good["id"]]
    result = CliRunner().invoke(app, ["reminders", "list", "--data-dir", str(tmp_path)], env={"COLUMNS": "200"})
    assert result.exit_code == 0 and "Traceback" not in result.output and "review sales" in result.output
