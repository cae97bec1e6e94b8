"""The period a report states: :func:`check_period` accepts YYYY, YYYY-MM, YYYY-MM-DD, a FROM..TO
range of months or days, or a one-line phrase naming a fixed period ('Q3 2026'); it refuses a
period relative to today ('last month', 上个月, 'le mois dernier' …) with the period the phrase
names today (:class:`RelativePeriodError`), since a saved report would be wrong from the next
month on. Used by ``generate_report`` (:mod:`tools.builtin.report`)."""

from __future__ import annotations

import datetime as dt
import itertools
import re
import unicodedata
from typing import Any

from tools.database_setting import DatabaseError
from tools.errors import InvalidValueError

MAX_PERIOD_CHARS = 100
PERIOD_FORMS = (
    "YYYY, YYYY-MM or YYYY-MM-DD, a range FROM..TO of months or of days (e.g. 2026-03..2026-05, "
    "2026-03-01..2026-03-15), or a short one-line phrase naming a fixed period such as 'Q3 2026'"
)
# a period relative to today: in a saved report it would be wrong from the next month on.
# Word edges treat "_" as a separator too ("last_month"); "-", "_", "." and spaces separate words.
_B1, _B2, _SEP = r"(?<![^\W_])", r"(?![^\W_])", r"[\s_.\-]*"
_EN_NUM = r"(?:[0-9]+|a|an|one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|few|couple(?:\s+of)?)"
_EN_UNIT = r"(?:day|week|weekend|fortnight|month|quarter|qtr|year|yr|fiscal[\s_-]+year|fy|business[\s_-]+day)s?"
_CJK_NUM = r"(?:(?<![0-9])[0-9]{1,3}|[一二三四五六七八九十两百几]+)"
# a span of months needs its counter: 三个月 / 3か月 (3月 is March)
_CJK_UNIT = r"(?:(?:个|か|ヶ|ヵ|カ|ケ)\s*月|个?季度|四半期|个?(?:周|星期|礼拜)|週間?|天|日|年)"
_FR_UNIT = r"(?:mois|ann[ée]es?|ans?|semaines?|trimestres?|semestres?|jours?)"
_ES_UNIT = r"(?:d[ií]as?|mes(?:es)?|semanas?|a[ñn]os?|trimestres?|semestres?)"
_DE_UNIT = r"(?:Monat(?:e|en|s)?|Woche(?:n)?|Jahr(?:e|en|es|s)?|Quartal(?:e|en|s)?|Tag(?:e|en)?|Halbjahr(?:e|es|s)?)"
_RELATIVE_PERIOD_RE = re.compile(
    # English: last/this/prev/next [N] unit, N units ago, today, year-to-date, ytd, ...
    rf"{_B1}(?:last|this|previous|prev|prior|current|past|next|coming|upcoming|recent|trailing|rolling)"
    rf"{_SEP}(?:{_EN_NUM}{_SEP})?{_EN_UNIT}{_B2}"
    rf"|{_B1}{_EN_NUM}{_SEP}{_EN_UNIT}{_SEP}(?:ago|back|earlier){_B2}"
    rf"|{_B1}(?:today|tonight|yesterday|tomorrow|now|recently|ytd|mtd|qtd|wtd|ttm|ltm"
    rf"|(?:(?:year|month|quarter|week){_SEP})?to{_SEP}date|so{_SEP}far){_B2}"
    # French
    rf"|{_B1}{_FR_UNIT}{_SEP}(?:derni(?:er|ère)s?|pass[ée]e?s?|pr[ée]c[ée]dente?s?|prochaine?s?|en\s+cours"
    rf"|courante?s?|actuel(?:le)?s?){_B2}"
    rf"|{_B1}(?:ce|cet|cette){_SEP}(?:mois|ann[ée]e|an|semaine|trimestre|semestre|jour){_B2}"
    rf"|{_B1}(?:[0-9]+{_SEP})?(?:derni(?:er|ère)s?|pr[ée]c[ée]dente?s?|prochaine?s?){_SEP}(?:[0-9]+{_SEP})?{_FR_UNIT}{_B2}"
    rf"|{_B1}(?:aujourd['’]hui|hier|demain|avant[\s-]hier|il{_SEP}y{_SEP}a(?:{_SEP}[0-9]+{_SEP}{_FR_UNIT})?|depuis{_SEP}le{_SEP}d[ée]but){_B2}"
    # Spanish
    rf"|{_B1}{_ES_UNIT}{_SEP}(?:pasad[oa]s?|anterior(?:es)?|actual|pr[óo]xim[oa]s?|que{_SEP}viene|en{_SEP}curso"
    rf"|corriente){_B2}"
    rf"|{_B1}(?:este|esta|estos|estas){_SEP}{_ES_UNIT}{_B2}"
    rf"|{_B1}(?:[úu]ltim[oa]s?|pr[óo]xim[oa]s?|pasad[oa]s?){_SEP}(?:[0-9]+{_SEP})?{_ES_UNIT}{_B2}"
    rf"|{_B1}(?:hoy|ayer|anteayer|ma[ñn]ana|hace{_SEP}(?:[0-9]+|un|una|unos|unas)(?:{_SEP}{_ES_UNIT})?|en{_SEP}lo{_SEP}que{_SEP}va){_B2}"
    # German
    rf"|{_B1}(?:letzte[nrms]?|vorige[nrms]?|diese[nrms]?|vergangene[nrms]?|n[äa]chste[nrms]?|kommende[nrms]?"
    rf"|laufende[nrms]?|aktuelle[nrms]?){_SEP}(?:[0-9]+{_SEP})?{_DE_UNIT}{_B2}"
    rf"|{_B1}(?:Vor(?:monat|jahr|woche|quartal|tag)\w*|heute|gestern|vorgestern|morgen|heuer|bisher"
    rf"|vor{_SEP}(?:[0-9]+|einem|einer|zwei|drei|vier|sechs|zwölf){_SEP}{_DE_UNIT}|seit{_SEP}(?:Jahres|Monats)beginn)"
    rf"{_B2}"
    # Chinese and Japanese: 上个月, 上一个月, 本年, 前月, 今年度; 最近一个月, 近30天; 三个月前, 3か月前; 至今
    r"|(?:上上|下下|上|下|本|这|今|去|明|前|来|先々?|昨|一昨)一?个?(?:月|季度|四半期|周|星期|礼拜|週|年度|财年|年|天|日)"
    rf"|(?:最近|近|过去|過去|直近){_CJK_NUM}?\s*{_CJK_UNIT}"
    rf"|{_CJK_NUM}\s*{_CJK_UNIT}(?:以)?前"
    r"|最近|近期|直近|至今|迄今|目前|年初至今|今期|来期",
    re.IGNORECASE,
)
# "last quarter of 2026", "dernier trimestre de 2026": the phrase names the period after all
_FIXED_AFTER_RE = re.compile(r"[\s_]+(?:of|in|de|del|du|des|von|vom|im)\s+\S", re.IGNORECASE)
# the unit a relative phrase names, tried in this order (a half-year has no unit here)
_UNIT_WORDS = (
    (None, r"semest|halbjahr|半年"),
    ("quarter", r"quarter|qtr|qtd|季|四半期|trimestre|quartal"),
    ("week", r"week|fortnight|wtd|周|星期|礼拜|週|semaine|semana|woche"),
    ("month", r"month|mtd|月|mois|mes|monat"),
    ("year", r"year|yr|ytd|fy|ttm|ltm|年|ann[ée]e|\ban|a[ñn]o|jahr|heuer"),
    (
        "day",
        r"day|today|tonight|yesterday|tomorrow|天|日|jour|hier|aujourd|demain|d[ií]a|hoy|ayer|ma[ñn]ana|tag|heute|gestern|morgen",
    ),
)
_NEXT_RE = re.compile(
    r"next|coming|upcoming|tomorrow|prochain|demain|pr[óo]xim|que.viene|ma[ñn]ana|n[äa]chst|kommend|morgen|下|明|来",
    re.IGNORECASE,
)
_THIS_RE = re.compile(
    r"\b(?:this|current|today|tonight|date|far|ytd|mtd|qtd|wtd|ce|cet|cette|cours|courante?|actuel(?:le)?|actual"
    r"|este|esta|hoy|aujourd|curso|corriente|va|diese[nrms]?|laufende[nrms]?|aktuelle[nrms]?|heute|heuer|bisher|seit"
    r"|depuis)\b|本|这|今|至今|迄今|目前",
    re.IGNORECASE,
)
_TO_DATE_RE = re.compile(r"date|far|ytd|mtd|qtd|wtd|lo.que.va|bisher|seit|depuis|至今|迄今|目前", re.IGNORECASE)
_AGO_RE = re.compile(r"ago|back|earlier|il.y.a|hace|\bvor\b|前$", re.IGNORECASE)
_COUNT_WORDS = {
    "a": 1,
    "an": 1,
    "one": 1,
    "un": 1,
    "una": 1,
    "einem": 1,
    "einer": 1,
    "two": 2,
    "zwei": 2,
    "couple": 2,
    "three": 3,
    "drei": 3,
    "few": 3,
    "four": 4,
    "vier": 4,
    "five": 5,
    "six": 6,
    "sechs": 6,
    "seven": 7,
    "eight": 8,
    "nine": 9,
    "ten": 10,
    "eleven": 11,
    "twelve": 12,
    "zwölf": 12,
}
_CJK_DIGITS = {"一": 1, "二": 2, "两": 2, "三": 3, "四": 4, "五": 5, "六": 6, "七": 7, "八": 8, "九": 9}


def _month_before(today: dt.date) -> str:
    first = today.replace(day=1)
    return (first - dt.timedelta(days=1)).strftime("%Y-%m")


def _month_span(year: int, month: int) -> tuple[dt.date, dt.date]:
    """First and last day of month ``month`` of ``year`` (``month`` may run past 1-12)."""
    y, m = divmod(year * 12 + month - 1, 12)
    first = dt.date(y, m + 1, 1)
    ny, nm = divmod(y * 12 + m + 1, 12)
    return first, dt.date(ny, nm + 1, 1) - dt.timedelta(days=1)


def _unit_span(today: dt.date, unit: str, k: int) -> tuple[dt.date, dt.date]:
    """First and last day of the ``unit`` (day, week from Monday, month, quarter, year) ``k``
    units after the one holding ``today`` (k < 0: before)."""
    if unit == "day":
        day = today + dt.timedelta(days=k)
        return day, day
    if unit == "week":
        monday = today - dt.timedelta(days=today.weekday()) + dt.timedelta(weeks=k)
        return monday, monday + dt.timedelta(days=6)
    if unit == "month":
        return _month_span(today.year, today.month + k)
    if unit == "quarter":
        first_month = (today.month - 1) // 3 * 3 + 1 + 3 * k
        return _month_span(today.year, first_month)[0], _month_span(today.year, first_month + 2)[1]
    return dt.date(today.year + k, 1, 1), dt.date(today.year + k, 12, 31)


def _as_period(unit: str, lo: dt.date, hi: dt.date, single: bool) -> str:
    """``lo``..``hi`` in the form check_period accepts for ``unit``."""
    if unit == "day" and lo == hi:
        return lo.isoformat()
    if unit == "year" and single:
        return str(lo.year)
    if unit == "month" and single:
        return f"{lo:%Y-%m}"
    if unit in ("week", "day"):
        return f"{lo.isoformat()}..{hi.isoformat()}"
    return f"{lo:%Y-%m}..{hi:%Y-%m}"


_UNIT_FORM = {
    "day": "a day is YYYY-MM-DD",
    "week": "a week is a range FROM..TO of its days",
    "month": "a month is YYYY-MM",
    "quarter": "a quarter is a range FROM..TO of its months",
    "year": "a year is YYYY",
}


def _count(text: str) -> int:
    """The number of units a relative phrase names (``the past 3 months``, 近30天), 1 if none."""
    if m := re.search(r"[0-9]+", text):
        return max(1, min(int(m[0]), 1000))
    if m := re.search(r"[一二两三四五六七八九]", text):
        return _CJK_DIGITS[m[0]] * (10 if "十" in text[m.end() : m.end() + 1] else 1)
    if "十" in text:
        return 10
    for word in re.findall(r"[^\W\d_]+", text.lower()):
        if word in _COUNT_WORDS:
            return _COUNT_WORDS[word]
    return 1


def _relative_value(phrase: str, today: dt.date) -> tuple[str, str]:
    """``(period, unit)`` the relative ``phrase`` names today, in the form check_period accepts
    for its unit (``("2026-11", "month")`` for 'last month'); ``("", "")`` when it names no unit."""
    unit = next((u for u, words in _UNIT_WORDS if re.search(words, phrase, re.IGNORECASE)), None)
    if unit is None:
        return "", ""
    n = _count(phrase)
    if _AGO_RE.search(phrase):
        lo, hi = _unit_span(today, unit, -n)
        return _as_period(unit, lo, hi, single=True), unit
    if _TO_DATE_RE.search(phrase):
        lo, hi = _unit_span(today, unit, 0)[0], today
        return _as_period("day", lo, hi, single=False), unit
    if _NEXT_RE.search(phrase):
        lo, hi = _unit_span(today, unit, 1)[0], _unit_span(today, unit, n)[1]
        return _as_period(unit, lo, hi, single=n == 1), unit
    if _THIS_RE.search(phrase):
        lo, hi = _unit_span(today, unit, 0)
        return _as_period(unit, lo, hi, single=True), unit
    lo, hi = _unit_span(today, unit, -n)[0], _unit_span(today, unit, -1)[1]
    return _as_period(unit, lo, hi, single=n == 1), unit


def _relative_hint(phrase: str, today: dt.date) -> str:
    """What to write instead of the relative ``phrase`` (the part of a period that is
    relative): the period it names today, in the form of its unit, when the phrase names a unit;
    always the general forms with last month as the example."""
    general = f"write {_month_before(today)} for last month, or YYYY, YYYY-MM-DD, FROM..TO"
    value, unit = _relative_value(phrase, today)
    plain = not any(r.search(phrase) for r in (_AGO_RE, _TO_DATE_RE, _NEXT_RE, _THIS_RE))
    if not value or (unit == "month" and plain and _count(phrase) == 1):
        return general
    form = _UNIT_FORM[unit] if ".." not in value or unit in ("week", "quarter") else "a range FROM..TO"
    return f"write {value} for {phrase[:40]!r} ({form}); in general {general}"


class PeriodError(DatabaseError, InvalidValueError):
    """A report's ``period`` is refused (malformed, relative to today, without data, or not
    restricted by a query): the message says the period or condition to send instead."""


class RelativePeriodError(PeriodError):
    """A period relative to today ('last month'): ``named`` is the period it names today
    (``YYYY-MM``, ``YYYY``, a day or a FROM..TO range; "" when it names no unit)."""

    def __init__(self, message: str, period: str, named: str) -> None:
        super().__init__(message)
        self.period, self.named = period, named


def relative_phrase(period: str) -> str:
    """The first part of ``period`` (or of any text: a report's title) relative to today ("" when
    none): 'last month', 上个月 and 'le mois dernier' are, 'last quarter of 2026' is not."""
    for m in _RELATIVE_PERIOD_RE.finditer(period):
        if not _FIXED_AFTER_RE.match(period, m.end()):
            return m[0]
    return ""


def _non_ascii_digits(text: str) -> str:
    """``text`` with every decimal digit other than ASCII 0-9 (２, 𝟚, ٢ ...) written as one,
    or "" when it holds none."""
    if all(ch.isascii() or unicodedata.decimal(ch, None) is None for ch in text):
        return ""
    return "".join(
        str(unicodedata.decimal(ch)) if not ch.isascii() and unicodedata.decimal(ch, None) is not None else ch
        for ch in text
    )


_YEAR_RE = re.compile(r"[0-9]{4}")
_MONTH_RE = re.compile(r"([0-9]{4})-([0-9]{2})")
_DAY_RE = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}")
# a date-like part of a phrase: YYYY-M[-D] or YYYY/M[/D], checked like the ISO forms
_DATE_PART_RE = re.compile(r"(?<![\w.])([0-9]{4})([-/])([0-9]{1,2})(?:\2([0-9]{1,2}))?(?![\w])")
_RANGE_WORD_RE = re.compile(r"\s*(?:\.\.|–|—|\bto\b|\buntil\b|\bthrough\b|\s-\s)\s*", re.IGNORECASE)
# Unicode categories of line breaks, control and format characters
_NOT_IN_A_LINE = {"Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp"}
# would break the report's "Period: **...**" line
_MARKDOWN_CHARS = set("*`|#<>[]\\")


def not_one_line(text: str) -> bool:
    """``text`` holds a line break or another control or format character."""
    return any(unicodedata.category(ch) in _NOT_IN_A_LINE for ch in text)


def _bad_period(period: str, why: str) -> PeriodError:
    return PeriodError(f"period {period[:60]!r} is not valid: {why}. Give {PERIOD_FORMS}, or leave the period out")


def _iso_part(period: str, text: str) -> tuple[str, str]:
    """``(form, text)`` of one ISO end of a period: ``("month", "2026-03")`` or ``("day",
    "2026-03-15")``; raises DatabaseError naming what is wrong."""
    if _MONTH_RE.fullmatch(text):
        if not 1 <= int(text[5:]) <= 12:
            raise _bad_period(period, f"{text} has no month {text[5:]} (months are 01-12)")
        return "month", text
    if _DAY_RE.fullmatch(text):
        try:
            dt.date.fromisoformat(text)
        except ValueError:
            raise _bad_period(period, f"{text} is no date of the calendar") from None
        return "day", text
    raise _bad_period(period, f"{text!r} is neither YYYY-MM nor YYYY-MM-DD")


def check_period(period: Any, *, today: dt.date | None = None) -> tuple[str, str]:
    r"""``(period, form)`` of a report's period, stripped: form ``""`` (none stated), ``"year"``
    (YYYY), ``"month"`` (YYYY-MM), ``"day"`` (YYYY-MM-DD), ``"months"`` / ``"days"`` (FROM..TO,
    both ends of one form, FROM <= TO) or ``"text"`` (a phrase such as 'Q3
    2026'; a date inside it, written YYYY-MM[-DD] or YYYY/MM[/DD], must exist, and two joined
    as a range — 'to', 'until', '–' — must not run backwards). Raises DatabaseError saying the
    expected forms for anything else: a month 13, a day that does not exist, a reversed range,
    a line break or control character, Markdown characters (``* ` | # < > [ ] \``), over
    MAX_PERIOD_CHARS characters, digits other than ASCII 0-9 (the message gives the ASCII
    form), or a phrase relative to ``today`` (default: the date today) such as 'last month',
    'this year', '近30天' (the message gives the period it names today in the form of its unit:
    YYYY for a year, YYYY-MM for a month, YYYY-MM-DD for a day, FROM..TO for a quarter or a
    week)."""
    if period is None:
        return "", ""
    if not isinstance(period, str):
        raise DatabaseError(f"period must be a string ({PERIOD_FORMS}), got {type(period).__name__}")
    period = period.strip()
    if not period:
        return "", ""
    if len(period) > MAX_PERIOD_CHARS:
        raise _bad_period(period, f"it is {len(period)} characters long, at most {MAX_PERIOD_CHARS}")
    if not_one_line(period):
        raise _bad_period(period, "it holds a line break or another control character; a period is one line")
    if bad := sorted(set(period) & _MARKDOWN_CHARS):
        raise _bad_period(period, f"it holds {' '.join(bad)}, which would break the report's Markdown")
    if ascii_form := _non_ascii_digits(period):
        # the ISO forms, and the strftime() conditions a period is checked with, use 0-9 only
        raise _bad_period(period, f"write its digits as ASCII 0-9: {ascii_form[:60]!r}")
    if _YEAR_RE.fullmatch(period):
        return period, "year"
    if re.fullmatch(r"[0-9\-\s.]+", period) and ".." in period:
        start, _, end = (part.strip() for part in period.partition(".."))
        if ".." in end or not start or not end:
            raise _bad_period(period, "a range is FROM..TO with one '..'")
        (form_a, a), (form_b, b) = _iso_part(period, start), _iso_part(period, end)
        if form_a != form_b:
            raise _bad_period(period, f"both ends of a range must be months or both days, got {a} and {b}")
        if a > b:
            raise _bad_period(period, f"the range ends ({b}) before it starts ({a})")
        return f"{a}..{b}", form_a + "s"
    if re.fullmatch(r"[0-9\-]+", period):
        return period, _iso_part(period, period)[0]
    # a phrase: its dates must exist, and a range in it must not run backwards
    parts = list(_DATE_PART_RE.finditer(period))
    for m in parts:
        if m[2] == "/" or len(m[3]) != 2 or (m[4] is not None and len(m[4]) != 2):
            raise _bad_period(period, f"write {m[0]!r} as YYYY-MM or YYYY-MM-DD")
        _iso_part(period, m[0])
    if ".." in period:
        raise _bad_period(period, "a range is FROM..TO with ISO ends (YYYY-MM or YYYY-MM-DD)")
    if not parts and (relative := relative_phrase(period)):
        today = today or dt.date.today()
        raise RelativePeriodError(
            f"period {period[:60]!r} is relative to today ({today.isoformat()}); a saved report names the "
            f"period it covers: {_relative_hint(relative, today)}",
            period,
            _relative_value(relative, today)[0],
        )
    for left, right in itertools.pairwise(parts):
        between = period[left.end() : right.start()]
        if _RANGE_WORD_RE.fullmatch(between) and len(left[0]) == len(right[0]) and left[0] > right[0]:
            raise _bad_period(period, f"the range ends ({right[0]}) before it starts ({left[0]})")
    return period, "text"
