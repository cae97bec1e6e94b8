"""Relative dates are made absolute when a memory is written (issue 26): "Yesterday I sent the
Q3 report" / 昨天… was stored as "yesterday …", and a later question naming the date found
nothing. ``memory.dates.resolve_relative_dates`` adds the date; the memory service applies it
to every event a turn writes. Every language of the write triggers: EN/ZH/JA/ES/FR/DE."""

from __future__ import annotations

from datetime import date, datetime, timedelta

import pytest

from memory.dates import resolve_relative_dates
from tests.unit.test_memory_service import make, write

WRITTEN = datetime(2026, 12, 3, 10, 0)  # a Thursday


@pytest.mark.parametrize(
    "text, expected",
    [
        ("Yesterday I sent the Q3 report", "Yesterday (2026-12-02) I sent the Q3 report"),
        ("昨天我发了第三季度报告", "昨天 (2026-12-02)我发了第三季度报告"),
        ("昨日、Q3レポートを送りました", "昨日 (2026-12-02)、Q3レポートを送りました"),
        ("Ayer envié el informe", "Ayer (2026-12-02) envié el informe"),
        ("Hier, j'ai envoyé le rapport", "Hier (2026-12-02), j'ai envoyé le rapport"),
        ("Gestern habe ich den Bericht geschickt", "Gestern (2026-12-02) habe ich den Bericht geschickt"),
        ("the day before yesterday we met", "the day before yesterday (2026-12-01) we met"),
        ("一昨日は会議でした", "一昨日 (2026-12-01)は会議でした"),
        ("前天开会了", "前天 (2026-12-01)开会了"),
        ("I'll send it tomorrow", "I'll send it tomorrow (2026-12-04)"),
        ("yesterday's meeting ran long", "yesterday's (2026-12-02) meeting ran long"),
        ("last Saturday we went hiking", "last Saturday (2026-11-28) we went hiking"),
        ("上周六我们去爬山", "上周六 (2026-11-28)我们去爬山"),
        ("3 days ago the server crashed", "3 days ago (2026-11-30) the server crashed"),
        ("3天前服务器宕机", "3天前 (2026-11-30)服务器宕机"),
        ("hace 3 días", "hace 3 días (2026-11-30)"),
        ("il y a 2 jours", "il y a 2 jours (2026-12-01)"),
        ("vor 5 Tagen", "vor 5 Tagen (2026-11-28)"),
        ("last week we shipped", "last week (week of 2026-11-23) we shipped"),
        ("letzte Woche", "letzte Woche (week of 2026-11-23)"),
        ("last month sales dropped", "last month (2026-11) sales dropped"),
        ("上个月销售下降", "上个月 (2026-11)销售下降"),
        ("先月の売上", "先月 (2026-11)の売上"),
        ("el mes pasado", "el mes pasado (2026-11)"),
        ("l'année dernière", "l'année dernière (2025)"),
        ("去年我们去了日本", "去年 (2025)我们去了日本"),
    ],
)
def test_relative_dates_get_their_absolute_date(text, expected):
    assert resolve_relative_dates(text, WRITTEN) == expected


def test_month_and_year_arithmetic_crosses_the_year():
    assert resolve_relative_dates("last month", date(2026, 1, 15)) == "last month (2025-12)"
    assert resolve_relative_dates("next month", date(2026, 12, 15)) == "next month (2027-01)"
    assert resolve_relative_dates("yesterday", date(2026, 3, 1)) == "yesterday (2026-02-28)"


@pytest.mark.parametrize(
    "text", ["on Monday we meet", "Guten Morgen", "the report of 2026-11", "", "nothing relative here"]
)
def test_what_is_not_a_relative_date_is_left_as_written(text):
    assert resolve_relative_dates(text, WRITTEN) == text


def test_resolving_twice_changes_nothing():
    once = resolve_relative_dates("Yesterday I sent it; last month too.", WRITTEN)
    assert resolve_relative_dates(once, WRITTEN) == once


async def test_a_note_with_yesterday_is_found_by_its_date(tmp_path):
    mem = make(tmp_path)
    try:
        day = (datetime.now().astimezone().date() - timedelta(days=1)).isoformat()
        await write(
            mem, goal="Please remember: yesterday I sent the Q3 report to the board.", tools_used=[], answer="Noted."
        )
        (note,) = [e for e in await mem.episodic.list("u") if e.kind == "note"]
        assert f"yesterday ({day}) I sent the Q3 report" in note.text
        hits = await mem.episodic.search("u", f"what did I send on {day}", k=3, mode="keyword")
        assert hits and hits[0].event.id == note.id
    finally:
        await mem.aclose()
