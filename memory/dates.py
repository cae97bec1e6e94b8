"""Relative dates made absolute when a memory is written (issue 26; DESIGN §4.4).

"Yesterday I sent the Q3 report" stored as such is useless a week later: a question naming the
date ("what did I send on 2026-12-02?") finds nothing, and "yesterday" now means another day.
:func:`resolve_relative_dates` keeps the user's words and adds the absolute date after each
relative expression, computed from the time the message was written:

    "Yesterday I sent the Q3 report"  (written 2026-12-03)
    → "Yesterday (2026-12-02) I sent the Q3 report"

Days give ``YYYY-MM-DD``, weeks ``week of YYYY-MM-DD`` (its Monday), months ``YYYY-MM``, years
``YYYY``. Languages: those of the write triggers (``memory.triggers``): English, Chinese,
Japanese, Spanish, French, German. Rule-based and pure: no I/O, no model. What it does not
resolve (a bare weekday "on Monday": past or next?) is left as written.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from datetime import date, datetime, timedelta

_Resolver = Callable[[re.Match[str], date], str | None]

_WEEKDAYS_EN = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
_WEEKDAYS_ZH = "一二三四五六日"
_NUMBERS_ZH = {"一": 1, "两": 2, "二": 2, "三": 3, "四": 4, "五": 5, "六": 6, "七": 7, "八": 8, "九": 9, "十": 10}


def _day(d: date) -> str:
    return d.isoformat()


def _week(d: date) -> str:
    return f"week of {(d - timedelta(days=d.weekday())).isoformat()}"


def _month(d: date, shift: int) -> str:
    index = d.year * 12 + d.month - 1 + shift
    return f"{index // 12:04d}-{index % 12 + 1:02d}"


def _year(d: date, shift: int) -> str:
    return f"{d.year + shift:04d}"


def _count(text: str) -> int | None:
    text = text.strip()
    if text.isdigit():
        return int(text)
    if text in _NUMBERS_ZH:
        return _NUMBERS_ZH[text]
    words = {"a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7}
    return words.get(text.lower())


def _ago(unit: str, n: int, today: date) -> str:
    unit = unit.lower()
    if unit.startswith(("day", "día", "dia", "jour", "tag", "天", "日")):
        return _day(today - timedelta(days=n))
    if unit.startswith(("week", "semana", "semaine", "woche", "周", "星期", "週")):
        return _week(today - timedelta(weeks=n))
    if unit.startswith(("month", "mes", "mois", "monat", "个月", "月", "か月", "ヶ月")):
        return _month(today, -n)
    return _year(today, -n)


def _last_weekday(target: int, today: date) -> date:
    """The most recent ``target`` weekday strictly before ``today`` (0 = Monday)."""
    back = (today.weekday() - target) % 7 or 7
    return today - timedelta(days=back)


_DAY_WORDS: dict[str, int] = {
    # English
    "the day before yesterday": -2,
    "the day after tomorrow": 2,
    "yesterday": -1,
    "today": 0,
    "tonight": 0,
    "tomorrow": 1,
    # Chinese / Japanese
    "前天": -2,
    "昨天": -1,
    "今天": 0,
    "明天": 1,
    "后天": 2,
    "一昨日": -2,
    "昨日": -1,
    "今日": 0,
    "明日": 1,
    "明後日": 2,
    # Spanish / French / German
    "anteayer": -2,
    "ayer": -1,
    "hoy": 0,
    "pasado mañana": 2,
    "avant-hier": -2,
    "hier": -1,
    "aujourd'hui": 0,
    "après-demain": 2,
    "demain": 1,
    "vorgestern": -2,
    "gestern": -1,
    "heute": 0,
    "übermorgen": 2,
}
_PERIOD_WORDS: dict[str, tuple[str, int]] = {
    # (unit, shift)
    "last week": ("week", -1),
    "this week": ("week", 0),
    "next week": ("week", 1),
    "last month": ("month", -1),
    "this month": ("month", 0),
    "next month": ("month", 1),
    "last year": ("year", -1),
    "this year": ("year", 0),
    "next year": ("year", 1),
    "上周": ("week", -1),
    "上星期": ("week", -1),
    "上个星期": ("week", -1),
    "这周": ("week", 0),
    "本周": ("week", 0),
    "下周": ("week", 1),
    "上个月": ("month", -1),
    "上月": ("month", -1),
    "这个月": ("month", 0),
    "本月": ("month", 0),
    "下个月": ("month", 1),
    "去年": ("year", -1),
    "今年": ("year", 0),
    "明年": ("year", 1),
    "先週": ("week", -1),
    "今週": ("week", 0),
    "来週": ("week", 1),
    "先月": ("month", -1),
    "今月": ("month", 0),
    "来月": ("month", 1),
    "昨年": ("year", -1),
    "来年": ("year", 1),
    "la semana pasada": ("week", -1),
    "el mes pasado": ("month", -1),
    "el año pasado": ("year", -1),
    "la semaine dernière": ("week", -1),
    "le mois dernier": ("month", -1),
    "l'année dernière": ("year", -1),
    "letzte woche": ("week", -1),
    "letzten monat": ("month", -1),
    "letztes jahr": ("year", -1),
}


def _cjk(words: Iterable[str]) -> list[str]:
    """The words written in CJK script (no word boundaries around them)."""
    return [w for w in words if not any(c.isascii() or c in "àâçéèêëîïôûùüÿñæœäößáíóú" for c in w)]


def _latin(words: Iterable[str]) -> list[str]:
    words = list(words)
    return [w for w in words if w not in _cjk(words)]


def _alternation(words: list[str]) -> str:
    return "|".join(re.escape(w) for w in sorted(words, key=len, reverse=True))


def _word(m: re.Match[str]) -> str:
    word = m.group(0).lower()
    return word.removesuffix("'s")


def _resolve_day(m: re.Match[str], today: date) -> str | None:
    return _day(today + timedelta(days=_DAY_WORDS[_word(m)]))


def _resolve_period(m: re.Match[str], today: date) -> str | None:
    unit, shift = _PERIOD_WORDS[_word(m)]
    if unit == "week":
        return _week(today + timedelta(weeks=shift))
    return _month(today, shift) if unit == "month" else _year(today, shift)


def _resolve_ago(m: re.Match[str], today: date) -> str | None:
    n = _count(m.group("n"))
    return None if n is None else _ago(m.group("unit"), n, today)


def _resolve_weekday_en(m: re.Match[str], today: date) -> str | None:
    target = _WEEKDAYS_EN.index(m.group("day").lower())
    if m.group("which").lower() == "last":
        return _day(_last_weekday(target, today))
    ahead = (target - today.weekday()) % 7 or 7
    return _day(today + timedelta(days=ahead))


def _resolve_weekday_zh(m: re.Match[str], today: date) -> str | None:
    target = _WEEKDAYS_ZH.index(m.group("day").replace("天", "日"))
    monday = today - timedelta(days=today.weekday())
    shift = {"上": -1, "这": 0, "本": 0, "下": 1}[m.group("which")]
    return _day(monday + timedelta(weeks=shift, days=target))


# Latin-script words need word boundaries; CJK ones cannot have them. Longest first, so "the
# day before yesterday" wins over "yesterday" and 一昨日 over 昨日.
_RULES: tuple[tuple[re.Pattern[str], _Resolver], ...] = (
    (
        re.compile(
            r"\b(?P<n>\d+|an?|one|two|three|four|five|six|seven)\s+(?P<unit>days?|weeks?|months?|years?)\s+ago\b",
            re.IGNORECASE,
        ),
        _resolve_ago,
    ),
    (
        re.compile(r"\b(?:hace|il\s+y\s+a|vor)\s+(?P<n>\d+)\s+(?P<unit>d[ií]as|semanas|meses|años|jours|semaines|mois|ans|tagen|wochen|monaten|jahren)\b", re.IGNORECASE),
        _resolve_ago,
    ),
    (re.compile(r"(?P<n>\d+|[一两二三四五六七八九十])\s*(?P<unit>天|个?星期|周|个月|年)前"), _resolve_ago),
    (re.compile(r"(?P<n>\d+)\s*(?P<unit>日|週間|か月|ヶ月|年)前"), _resolve_ago),
    (re.compile(r"\b(?P<which>last|next)\s+(?P<day>" + "|".join(_WEEKDAYS_EN) + r")\b", re.IGNORECASE), _resolve_weekday_en),
    (re.compile(r"(?P<which>[上这本下])(?:个)?(?:周|星期|礼拜)(?P<day>[一二三四五六日天])"), _resolve_weekday_zh),
    (re.compile(r"(?<![\w'])(?:" + _alternation(_latin(_PERIOD_WORDS)) + r")(?:'s)?(?![\w'])", re.IGNORECASE), _resolve_period),
    (re.compile(_alternation(_cjk(_PERIOD_WORDS))), _resolve_period),
    (re.compile(r"(?<![\w'-])(?:" + _alternation(_latin(_DAY_WORDS)) + r")(?:'s)?(?![\w'-])", re.IGNORECASE), _resolve_day),
    (re.compile(_alternation(_cjk(_DAY_WORDS))), _resolve_day),
)  # fmt: skip
# Already absolute: "yesterday (2026-12-02)" is not annotated twice.
_ANNOTATED = re.compile(r"\s*\((?:week of )?\d{4}(?:-\d{2}){0,2}\)")


def resolve_relative_dates(text: str, written_at: datetime | date) -> str:
    """``text`` with the absolute date added in parentheses after each relative date
    expression (module docstring), resolved against ``written_at`` (the message's time; a
    ``datetime`` is taken in its own time zone — pass the user's local time). Expressions
    already followed by a date are left alone, so resolving twice changes nothing. Never
    raises; ``text`` unchanged when it has none."""
    if not text:
        return text
    today = written_at.date() if isinstance(written_at, datetime) else written_at
    spans: list[tuple[int, int, str]] = []
    for pattern, resolve in _RULES:
        for m in pattern.finditer(text):
            if any(m.start() < end and start < m.end() for start, end, _ in spans):
                continue  # inside a longer expression already resolved
            if _ANNOTATED.match(text, m.end()):
                continue
            value = resolve(m, today)
            if value:
                spans.append((m.start(), m.end(), value))
    for _start, end, value in sorted(spans, reverse=True):
        text = f"{text[:end]} ({value}){text[end:]}"
    return text


__all__ = ["resolve_relative_dates"]
