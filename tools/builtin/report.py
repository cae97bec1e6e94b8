"""``generate_report``: a Markdown analysis report whose every figure comes from a read-only
query the caller gives (no fixed SQL, no assumed schema). Runs inside the executor's worker
process (cwd = data_dir); the database is the injected ``database`` argument, like
``query_database`` (:mod:`tools.builtin.database`).

Reports are never overwritten: ``reports/<slug>.md``, then ``<slug>-v2.md``, ``-v3`` …
"""

from __future__ import annotations

import datetime as dt
import itertools
import re
import time
import unicodedata
from pathlib import Path
from typing import Any

from tools.builtin.database.connection import QUERY_TIME_LIMIT_S, connect_readonly, database_file, time_limit
from tools.builtin.database.execution import execute_query
from tools.builtin.database.period_scope import find_undated
from tools.builtin.database.periods import LATEST, data_columns, latest_month, latest_title, period_resolution
from tools.builtin.database.statement import quote_back, strip_bom
from tools.builtin.report_share import share
from tools.database_setting import DatabaseError

#: Queries per report.
MAX_QUERIES = 8
#: Rows of each query shown in the report and returned in the result.
REPORT_ROWS = 50
#: Seconds all the report's queries may take together (the tool's executor limit is 30 s;
#: lowered under a tighter tool timeout, see :func:`tools.builtin.database.connection.time_limit`).
REPORT_TIME_LIMIT_S = 20.0
MAX_TITLE_CHARS = 200
MAX_LABEL_CHARS = 120
MAX_SQL_CHARS = 4000
MAX_VERSIONS = 1000
MAX_PERIOD_CHARS = 100
#: ``period`` values asking for the latest full month with data (the report's title says so).
LATEST_PERIODS = frozenset({LATEST, "latest month", "latest month with data", "latest-month"})
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


class RelativePeriodError(DatabaseError):
    """A period relative to today ('last month'): ``named`` is the period it names today
    (``YYYY-MM``, ``YYYY``, a day or a FROM..TO range; "" when it names no unit)."""

    def __init__(self, message: str, period: str, named: str) -> None:
        super().__init__(message)
        self.period, self.named = period, named


def _relative_part(period: str) -> str:
    """The first part of ``period`` relative to today ("" when none): 'last month' is, 'last
    quarter of 2026' is not."""
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


def slugify(title: str) -> str:
    """File-name stem of a title: lower case, runs of anything but letters/digits → ``-``,
    at most 60 characters; ``report`` when nothing is left."""
    slug = re.sub(r"[\W_]+", "-", title.lower(), flags=re.UNICODE).strip("-")
    return slug[:60].strip("-") or "report"


def _not_one_line(text: str) -> bool:
    """``text`` holds a line break or another control or format character."""
    return any(unicodedata.category(ch) in _NOT_IN_A_LINE for ch in text)


def _one_line(what: str, text: str) -> None:
    if _not_one_line(text):
        raise DatabaseError(
            f"{what} must be one line of text: {text[:60]!r} holds a line break or another control character"
        )


def _bad_period(period: str, why: str) -> DatabaseError:
    return DatabaseError(f"period {period[:60]!r} is not valid: {why}. Give {PERIOD_FORMS}, or leave the period out")


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
    if _not_one_line(period):
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
    if not parts and (relative := _relative_part(period)):
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


def _period_example(col: str, kind: str, period: str, form: str) -> str:
    """A WHERE condition restricting ``col`` to ``period`` (a phrase when the form or the
    column's kind has no simple one)."""
    if kind == "text":
        lo, _, hi = period.partition("..")
        if form == "month":
            return f"WHERE strftime('%Y-%m', {col}) = '{period}'"
        if form == "year":
            return f"WHERE strftime('%Y', {col}) = '{period}'"
        if form == "day":
            return f"WHERE date({col}) = '{period}'"
        if form == "months":
            return f"WHERE strftime('%Y-%m', {col}) BETWEEN '{lo}' AND '{hi}'"
        if form == "days":
            return f"WHERE date({col}) BETWEEN '{lo}' AND '{hi}'"
    if kind == "epoch":
        return f"a WHERE condition on {col} (it holds Unix timestamps: date({col}, 'unixepoch'))"
    return f"a WHERE condition on {col}"


def _check_queries(queries: Any) -> list[dict[str, str]]:
    if not isinstance(queries, list) or not 1 <= len(queries) <= MAX_QUERIES:
        raise DatabaseError(
            f"queries must be a list of 1-{MAX_QUERIES} items {{label, sql}}, "
            f"got {type(queries).__name__} of {len(queries) if isinstance(queries, list) else '?'}"
        )
    out = []
    for i, q in enumerate(queries, 1):
        if not isinstance(q, dict) or not isinstance(q.get("label"), str) or not isinstance(q.get("sql"), str):
            raise DatabaseError(f'query {i} must be an object {{"label": str, "sql": str}}')
        label, sql = q["label"].strip(), strip_bom(q["sql"])
        if not label or not sql:
            raise DatabaseError(f"query {i} needs a non-empty label and sql")
        if len(label) > MAX_LABEL_CHARS or len(sql) > MAX_SQL_CHARS:
            raise DatabaseError(
                f"query {i}: label at most {MAX_LABEL_CHARS} and sql at most {MAX_SQL_CHARS} characters"
            )
        out.append({"label": label, "sql": sql})
    return out


def _fmt(value: Any) -> str:
    if value is None:
        return "NULL"
    if isinstance(value, bool):
        return str(value)
    if isinstance(value, float):
        return f"{value:,.2f}"
    text = str(value)
    return text.replace("|", "\\|").replace("\r", " ").replace("\n", " ")


def _table(columns: list[str], rows: list[list[Any]]) -> list[str]:
    if not columns:
        return ["(the query returned no columns)"]
    numeric = [
        bool(rows) and all(isinstance(r[i], (int, float)) or r[i] is None for r in rows) for i in range(len(columns))
    ]
    lines = [
        "| " + " | ".join(_fmt(c) for c in columns) + " |",
        "|" + "|".join("---:" if numeric[i] else "---" for i in range(len(columns))) + "|",
    ]
    lines += ["| " + " | ".join(_fmt(v) for v in r) + " |" for r in rows]
    return lines


def _write_new(out_dir: Path, slug: str, text: str) -> tuple[Path, int]:
    """Create ``<slug>.md`` or the first free ``<slug>-vN.md`` (exclusive create: never
    overwrites, also against a concurrent writer). Returns (path, version)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    for version in range(1, MAX_VERSIONS + 1):
        path = out_dir / (f"{slug}.md" if version == 1 else f"{slug}-v{version}.md")
        try:
            with open(path, "x", encoding="utf-8") as fh:
                fh.write(text)
        except FileExistsError:
            continue
        return path, version
    raise DatabaseError(f"{MAX_VERSIONS} versions of reports/{slug}.md exist already; choose another title")


def _months_of(period: str, form: str) -> tuple[str, str] | None:
    """First and last month (``YYYY-MM``) of a period of an ISO form; None for a phrase."""
    lo, _, hi = period.partition("..")
    hi = hi or lo
    if form == "year":
        return f"{lo}-01", f"{lo}-12"
    if form in ("month", "months", "day", "days"):
        return lo[:7], hi[:7]
    return None


def _resolve_period(
    con: Any,
    checked: list[dict[str, str]],
    title: str,
    period: str,
    form: str,
    latest: bool,
    relative: RelativePeriodError | None,
    today: dt.date,
) -> tuple[str, str, str]:
    """``(title, period, form)`` the report is written with: ``period="latest"`` becomes the
    latest full month with data of the queries' date columns, the title saying so
    (:func:`tools.builtin.database.periods.latest_title`). Raises DatabaseError for a relative
    period and for a stated period with no rows in those columns — naming the latest month with
    data, the period to send and the condition to add (:func:`period_resolution`)."""
    sqls = [q["sql"] for q in checked]
    if relative is not None:
        named = relative.named
        months = _months_of(named, check_period(named, today=today)[1]) if named else None
        if months and (resolution := period_resolution(con, sqls, relative.period, months, today)):
            # what it names today has no data: say what does, not "write <a month without data>"
            raise DatabaseError(
                f"no report written: the period is relative to today ({today.isoformat()}), and {resolution}"
            )
        raise relative
    if latest:
        best = latest_month(data_columns(con, sqls, today))
        if best is None or best.latest_full_month is None:
            raise DatabaseError(
                f'period "{LATEST}" is the latest full month with data of the date columns the queries read, '
                f"but their tables have no date column with a full month of data; give the period as {PERIOD_FORMS}"
            )
        month = best.latest_full_month
        return latest_title(title, month, today)[: MAX_TITLE_CHARS + 80], month, "month"
    months = _months_of(period, form) if period else None
    # dated queries: only the date columns they name decide (a month-text column may restrict)
    named_only = months is not None and not any(find_undated(con, sql) for sql in sqls)
    if months is not None and (
        resolution := period_resolution(con, sqls, period, months, today, named_only=named_only)
    ):
        raise DatabaseError(f"no report written: the period {resolution}")
    return title, period, form


def generate_report(
    title: str, queries: list[dict[str, str]], period: str = "", notes: str = "", *, database: str = "", data_dir: Path
) -> dict[str, Any]:
    """Run each of ``queries`` (1-8 ``{"label", "sql"}``, single read-only SELECTs, through the
    same code as query_database) on the configured database and write the Markdown report
    ``data_dir/reports/<slug of title>.md`` (``-v2``, ``-v3`` … when that exists).

    Returns ``{"path", "version", "title", "period", "queries": [{"label", "sql", "columns",
    "rows" (<= REPORT_ROWS), "row_count"}]}`` (plus ``note`` on a query without data). Raises
    DatabaseError — and writes nothing — when the title is not one line of 1-MAX_TITLE_CHARS
    characters, the ``period`` is not one of the forms :func:`check_period` accepts (the message
    says which are), the database is missing or invalid, a query is refused or fails, a
    ``period`` is stated but a query restricts none of the date or period columns of its tables
    (its figures would cover every date; what counts as a restriction:
    :func:`tools.builtin.database.period_scope.find_undated` — a GROUP BY month alone does not, even for a
    period of several months), or every query returned no data (the message names the latest
    period with data of the date columns the queries use).
    """
    title = title.strip() if isinstance(title, str) else ""
    if not title or len(title) > MAX_TITLE_CHARS:
        raise DatabaseError(f"title must be 1-{MAX_TITLE_CHARS} characters")
    _one_line("title", title)
    today = dt.date.today()
    latest = isinstance(period, str) and period.strip().lower() in LATEST_PERIODS
    relative: RelativePeriodError | None = None
    try:
        period, form = ("", "") if latest else check_period(period, today=today)
    except RelativePeriodError as exc:
        relative, period, form = exc, "", ""
    checked = _check_queries(queries)
    notes = (notes or "").strip()
    path = database_file(database)
    con = connect_readonly(path, schema=True)
    results: list[dict[str, Any]] = []
    budget = time_limit(REPORT_TIME_LIMIT_S, 0.7)
    deadline = time.monotonic() + budget
    try:
        # a period without data: the refusal carries the latest month with data, the period to
        # send and the condition to add, so the next call succeeds (never a silent substitute)
        title, period, form = _resolve_period(con, checked, title, period, form, latest, relative, today)
        for i, q in enumerate(checked, 1):
            left = deadline - time.monotonic()
            if left <= 0.5:
                raise DatabaseError(
                    f"the report's queries took over {budget:g} s together; "
                    f"stopped before query {i} ({q['label']!r}): simplify them"
                )
            if period and (undated := find_undated(con, q["sql"])):
                # a report that states a period must not show all-time figures under it
                # (measured: Qwen2.5-Coder-1.5B's "2026-11" report summed every month)
                col, kind = undated.columns[0]
                col = quote_back(col)
                names = ", ".join(quote_back(c) for c, _ in undated.columns[:3])
                grouped = (
                    " (its GROUP BY gives a row per period, but of every period: restrict the ones wanted)"
                    if undated.grouped
                    else ""
                )
                raise DatabaseError(
                    f"query {i} ({q['label']!r}) has no condition on a date ({names}), so its "
                    f"figures cover every date, not the report's period {period!r}{grouped}; nothing was "
                    f"written. Add {_period_example(col, kind, period, form)} (or leave the period out)"
                )
            try:
                res = execute_query(
                    con, q["sql"], max_rows=REPORT_ROWS, time_limit_s=min(time_limit(QUERY_TIME_LIMIT_S), left)
                )
            except DatabaseError as exc:
                raise DatabaseError(f"query {i} ({q['label']!r}) failed, nothing was written: {exc}") from None
            results.append({**q, **res})
    finally:
        con.close()
    if all(r.get("no_data") for r in results):
        notes_seen = list(dict.fromkeys(r["note"] for r in results))
        raise DatabaseError("no report written: none of the queries found data. " + " ".join(notes_seen))

    lines = [
        f"# {title}",
        "",
        f"Period: **{period}**" if period else "Period: not stated",
        "",
        f"Source: `{path.name}` (read-only), generated {dt.datetime.now().astimezone():%Y-%m-%d %H:%M %Z}".rstrip(),
        "",
    ]
    if notes:
        lines += ["## Notes", "", notes, ""]
    for r in results:
        lines += [f"## {_fmt(r['label'])}", ""]
        if r.get("no_data"):
            lines += [f"_{r['note']}_", ""]
        if r["rows"] or not r.get("no_data"):
            lines += _table(r["columns"], r["rows"])
            if r["row_count"] > len(r["rows"]):
                lines += ["", f"_Showing {len(r['rows'])} of {r['row_count']} rows._"]
            lines.append("")
        lines += ["```sql", r["sql"], "```", ""]
    lines += ["## Figures in this report rest on these queries", ""]
    for i, r in enumerate(results, 1):
        lines.append(
            f"{i}. {_fmt(r['label'])} ({r['row_count']} row{'s' if r['row_count'] != 1 else ''}): "
            f"`{' '.join(r['sql'].split())}`"
        )
    lines.append("")
    # the file is named by the title without the latest-month remark
    out_path, version = _write_new(
        Path(data_dir) / "reports", slugify(title.split(" (latest month")[0]), "\n".join(lines)
    )

    summary = []
    for r in results:
        item = {
            "label": r["label"],
            "sql": r["sql"],
            "columns": r["columns"],
            "rows": r["rows"],
            "row_count": r["row_count"],
        }
        if r.get("note"):
            item["note"] = r["note"]
        summary.append(item)
    # ``share`` right after the path: a result cut for the prompt keeps its head
    return {
        "path": str(out_path),
        "share": share(title, period, str(out_path), results),
        "version": version,
        "title": title,
        "period": period,
        "queries": summary,
    }
