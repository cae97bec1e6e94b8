"""Figures as an answer writes them, and the numbers a tool result holds (DESIGN §5.5).

Pure parsing for :mod:`graph.verification`: :func:`figures` reads the numbers a text states
(thousands separators — ``1,234`` ``1.234`` ``1 234`` ``1'234`` —, decimal commas, currency
signs, ``%``, ``k`` / ``million`` / 万 / 亿, full-width digits; dates and times by their parts;
list markers and digits inside names are not figures); :func:`values_in` the numbers a JSON
value holds; :func:`supported` whether a figure is a rounding of one of them.
"""

from __future__ import annotations

import bisect
import functools
import math
import re
import unicodedata
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

_SCALES = {
    "k": 1e3,
    "thousand": 1e3,
    "千": 1e3,
    "m": 1e6,
    "mn": 1e6,
    "million": 1e6,
    "millions": 1e6,
    "mio": 1e6,
    "百万": 1e6,
    "万": 1e4,
    "b": 1e9,
    "bn": 1e9,
    "billion": 1e9,
    "billions": 1e9,
    "亿": 1e8,
}
_DATE = re.compile(
    r"(?<![\d.,])((?:19|20)\d\d)([-/])(0?[1-9]|1[0-2])(?:\2(0?[1-9]|[12]\d|3[01]))?(?![\d])"
    r"|(?<![\d.,])((?:19|20)\d\d)\.(0?[1-9]|1[0-2])\.(0?[1-9]|[12]\d|3[01])(?![\d])"
    r"|(\d{4})年(\d{1,2})月(?:(\d{1,2})日)?"
)
_TIME = re.compile(r"(?<![\d:])(\d{1,2}):(\d{2})(?::\d{2})?(?![\d:])")
# a time of day by the clock's words: "9 AM", "9:30 p.m.", "9 o'clock", "9h", "9 Uhr", "9点", "9時"
# (measured: the 1.5B model's "every month at 9 AM" for a reminder stored as 09:00 was refused)
_CLOCK = re.compile(
    r"(?<![\d:.,])(\d{1,2})(?:[:h.](\d{2}))?\s?"
    r"(?:(?P<half>[aApP])\.?\s?[mM]\.?(?![A-Za-z])|o'clock\b|o’clock\b|h(?![A-Za-z])|Uhr\b|heures?\b|点|時)"
)
# [^\S\n]: blanks within the line (\s would run over every following newline at each line start)
# ... and the label of a step of the answer's own ("Step 1:", "Option 2.", "Étape 3 :")
_LIST_MARKER = re.compile(
    r"(?m)(?:^|[:：])[^\S\n]*(?:[-*•][^\S\n]*)?\(?\d{1,3}[.)、](?=\s|[^\d\s])(?![\d])|#\d{1,3}\b"
    r"|\b(?:step|option|phase|stage|schritt|[ée]tape|paso)[^\S\n]\d{1,2}(?=[^\S\n]?[:.)](?!\d))",
    re.IGNORECASE,
)
_FIGURE = re.compile(
    r"(?<![A-Za-z0-9_.,'])"
    r"(?P<number>\d{1,3}(?:(?:,|\.|\u00a0|\u202f| |'|’)\d{3})+(?:[.,]\d+)?|\d+(?:[.,]\d+)?)"
    r"(?P<scale>\s?(?:%|percent\b|per\s?cent\b|thousand\b|millions?\b|billions?\b|mio\b|mn\b|bn\b|[kKmMbB](?![A-Za-z])"
    r"|千|万|亿|百万))?"
    r"(?![A-Za-z0-9_]|[.,]\d)"
)


@dataclass(frozen=True)
class Figure:
    """A number as written: ``text``, the values it may mean (each with the unit of its last
    shown digit: the rounding it allows), ``percent`` when it is one."""

    text: str
    readings: tuple[tuple[float, float], ...]
    percent: bool = False
    part: bool = False  # of a date or a time


def _readings(number: str) -> list[tuple[float, float]]:
    """(value, unit of the last shown digit) for each way ``number`` may be read."""
    plain = re.sub(r"[\u00a0\u202f '’]", "", number)
    out: list[tuple[float, float]] = []

    # float() of the digits, not int(): a run of thousands of digits (a hash, a serial) raises
    # in int() and overflows a float; such a reading is no figure and is dropped below
    def integer(digits: str) -> None:
        value = float(digits)
        zeros = len(digits) - len(digits.rstrip("0")) if value else 0
        out.append((value, 10.0 ** min(zeros, 300)))

    def decimal(whole: str, frac: str) -> None:
        out.append((float(f"{whole or '0'}.{frac}"), 10.0 ** -min(len(frac), 300)))

    if "," in plain and "." in plain:
        dec = "," if plain.rfind(",") > plain.rfind(".") else "."
        whole, _, frac = plain.rpartition(dec)
        decimal(re.sub(r"[,.]", "", whole), frac)
    elif "," in plain or "." in plain:
        sep = "," if "," in plain else "."
        parts = plain.split(sep)
        if len(parts) > 2:  # 1,234,567 / 1.234.567
            integer("".join(parts))
        else:
            whole, frac = parts
            decimal(whole, frac)
            if len(frac) == 3 and 1 <= len(whole) <= 3 and whole != "0":
                integer(whole + frac)  # 1,234 in English, 1.234 in German
    else:
        integer(plain)
    return [(v, u) for v, u in out if math.isfinite(v)]


def figures(text: str) -> list[Figure]:
    """The figures ``text`` states (module docstring: what is and is not a figure), dates and
    times as their parts."""
    text = text or ""
    # a long text (the answer) is read by several checks of one verdict: parsed once
    return list(_long_figures(text)) if len(text) > 2000 else _figures(text)


@functools.lru_cache(maxsize=8)
def _long_figures(text: str) -> tuple[Figure, ...]:
    return tuple(_figures(text))


def _figures(text: str) -> list[Figure]:
    text = unicodedata.normalize("NFKC", text)
    found: list[Figure] = []

    def date_parts(m: re.Match[str]) -> str:
        found.extend(
            Figure(part, ((float(int(part)), 1.0),), part=True) for part in m.groups() if part and part not in "-/"
        )
        return " "

    def clock_parts(m: re.Match[str]) -> str:
        hour = int(m[1])
        half = (m["half"] or "").lower()
        if half and 1 <= hour <= 12:
            hour = hour % 12 + (12 if half == "p" else 0)  # 12 AM is 00, 12 PM is 12
        found.append(Figure(m[1], ((float(hour), 1.0),), part=True))
        if m[2]:
            found.append(Figure(m[2], ((float(int(m[2])), 1.0),), part=True))
        return " "

    text = _DATE.sub(date_parts, text)
    text = _CLOCK.sub(clock_parts, text)
    text = _TIME.sub(date_parts, text)
    text = _LIST_MARKER.sub(" ", text)
    for m in _FIGURE.finditer(text):
        scale_word = (m.group("scale") or "").strip().lower()
        percent = scale_word in ("%", "percent", "per cent", "percent", "percent") or scale_word.startswith("per")
        factor = 1.0 if percent or not scale_word else _SCALES.get(scale_word.replace(" ", ""), 1.0)
        readings = tuple((v * factor, u * factor) for v, u in _readings(m.group("number")))
        if readings:
            found.append(Figure(m.group(0).strip(), readings, percent))
    return found


def values_in(
    value: Any, out: list[float] | None = None, depth: int = 0, counts: bool = True, parts: list[float] | None = None
) -> list[float]:
    """Every number a JSON value holds: numbers, numbers written in its strings (all readings,
    dates by parts — into ``parts`` when given), and (``counts``) the length of each list (a
    count of listed items)."""
    out = [] if out is None else out
    if depth > 12:
        return out
    if isinstance(value, bool) or value is None:
        return out
    if isinstance(value, float):
        if math.isfinite(value):
            out.append(value)
    elif isinstance(value, int):
        if abs(value) < 10**308:  # JSON holds integers no float holds (float() would raise)
            out.append(float(value))
    elif isinstance(value, str):
        for fig in figures(value):
            if fig.part and parts is not None:
                parts.extend(v for v, _ in fig.readings)
            else:
                out.extend(v for v, _ in fig.readings)
    elif isinstance(value, list):
        if counts:
            out.append(float(len(value)))
        for item in value:
            values_in(item, out, depth + 1, counts, parts)
    elif isinstance(value, Mapping):
        for item in value.values():
            values_in(item, out, depth + 1, counts, parts)
    return out


class Known:
    """The numbers figures may come from, their magnitudes sorted once, so that
    :func:`supported` finds a figure's candidates by bisection: an answer of thousands of
    figures against a result of thousands of numbers is checked in milliseconds, not minutes.
    Non-finite values are left out."""

    __slots__ = ("values",)

    def __init__(self, values: Iterable[float]) -> None:
        self.values: list[float] = sorted(abs(v) for v in values if math.isfinite(v))

    def near(self, low: float, high: float) -> list[float]:
        """The magnitudes in ``[low, high]``."""
        return self.values[bisect.bisect_left(self.values, low) : bisect.bisect_right(self.values, high)]


def supported(fig: Figure, known: Sequence[float] | Known) -> bool:
    """Whether ``fig`` is one of ``known`` (numbers, or a :class:`Known` built once for many
    figures) as written: rounded to its last shown digit or cut there; a percentage also
    against a ratio (12 % of 0.12)."""
    known = known if isinstance(known, Known) else Known(known)
    for value, unit in fig.readings:
        targets = [value, value / 100.0] if fig.percent else [value]
        units = [unit, unit / 100.0] if fig.percent else [unit]
        for target, u in zip(targets, units, strict=True):
            # a superset of the window the test below accepts (its tolerance grows with a)
            slack = u / 2 + 2e-9 * max(1.0, abs(target) + u) + 1e-9
            for a in known.near(target - slack, target + max(u, slack)):
                tolerance = u / 2 + 1e-9 * max(1.0, a)
                # rounded to the shown digit, or cut there (1234.56 shown as 1234.5)
                if abs(a - target) <= tolerance or target <= a < target + u:
                    return True
    return False


# a period named in words or figures: a year, a month, a quarter, a relative period (EN, FR, DE,
# ES, ZH, JA) — a figure asked "for" it must come from a read restricted to it
_PERIOD = re.compile(
    r"(?<!\d)(?:19|20)\d\d(?!\d)|\bQ[1-4]\b"
    r"|\b(?:jan(?:uary)?|feb(?:ruary)?|march|apr(?:il)?|june?|july?|aug(?:ust)?|sept?(?:ember)?|oct(?:ober)?"
    r"|nov(?:ember)?|dec(?:ember)?|janvier|février|fevrier|avril|juin|juillet|août|aout|septembre|octobre"
    r"|novembre|décembre|decembre|januar|februar|märz|maerz|juni|juli|oktober|dezember|enero|febrero|marzo"
    r"|abril|mayo|junio|julio|agosto|septiembre|octubre|noviembre|diciembre)\b"
    r"|\b(?:last|this|previous|past|current|next)\s+(?:week|month|quarter|year|fiscal\s+year)\b"
    r"|\b(?:yesterday|today|year[- ]to[- ]date|ytd)\b"
    r"|\b(?:mois|année|annee|semaine|trimestre)\s+(?:dernier|derni[eè]re|pass[ée]e?|en\s+cours|pr[ée]c[ée]dent)"
    r"|\bce(?:tte)?\s+(?:mois|année|annee|semaine)\b|\bhier\b|\baujourd'hui\b"
    r"|\b(?:letzte[nmr]?|vorige[nmr]?|diese[nmr]?|vergangene[nmr]?)\s+(?:Monat|Jahr|Woche|Quartal)\b|\bgestern\b|\bheute\b"
    r"|\b(?:el|la|este|esta)\s+(?:mes|año|semana|trimestre)(?:\s+(?:pasad[oa]|anterior))?\b|\bayer\b|\bhoy\b"
    r"|上个?月|本月|这个月|去年|今年|上周|本周|昨天|今天|(?<!\d)\d{1,2}[^\S\n]*月|先月|今月|昨年|先週|今週|昨日|今日",
    re.IGNORECASE,
)


def names_period(text: str) -> bool:
    """True when ``text`` (a request) names a period: a year, a month (EN/FR/DE/ES, ``2026-11``,
    ``11月``), a quarter, or a relative one ("last month", "le mois dernier", "letzten Monat",
    "el mes pasado", 上个月, 先月, "yesterday")."""
    return bool(_PERIOD.search(unicodedata.normalize("NFKC", text or "")))


# words only an English sentence has: its separators are "," for thousands and "." for decimals
_ENGLISH = re.compile(r"\b(?:the|is|was|were|are|of|our|we|in|and|total|there|have|has)\b", re.IGNORECASE)
_AMBIGUOUS = re.compile(r"\d{1,3}([,.])\d{3}")


def in_english(found: list[Figure], text: str) -> list[Figure]:
    """``found`` (the figures of ``text``) with each ambiguous number ("38,620", "1.234") read only
    as English writes it when ``text`` is English (two or more of its common words): "38,620" is
    38620 there, never 38.62. Measured (Qwen2.5-Coder-1.5B): SUM(Total) = 38.62 answered as
    "$38,620", accepted on the decimal-comma reading."""
    if len(_ENGLISH.findall(text or "")) < 2:
        return found
    out: list[Figure] = []
    for fig in found:
        m = _AMBIGUOUS.search(fig.text)
        if fig.part or m is None or len(fig.readings) < 2 or len(_AMBIGUOUS.findall(fig.text)) != 1:
            out.append(fig)
            continue
        # English: the comma groups thousands (the larger reading), the dot marks decimals
        pick = max if m[1] == "," else min
        out.append(Figure(fig.text, (pick(fig.readings, key=lambda r: r[0]),), fig.percent, fig.part))
    return out
