"""What a flagship run's post must carry (issue 18, "shared content carries the substance"): the
message a run posted about the report it wrote states the report's **period**, at least
:data:`MIN_FIGURES` **figures** of the report (all of them when it has fewer) and **where the
report is** (its path, or its file name) — not a description of the act ("I have posted the
report …").

The truth is the report file itself (Markdown written by ``generate_report``): its ``Period:``
line and the numbers in its result tables. A figure of the message counts when it equals a
figure of the report or is a rounding of one to the digits the message shows (thousands
separators ignored; a part of a date, a time, a path or a name is no figure).

    post_problems(post_text, report_path) -> [problem, ...]   # [] = carries the substance
"""

from __future__ import annotations

import calendar
import re
from pathlib import Path

#: Figures of the report a post must state at least (all, when the report has fewer).
MIN_FIGURES = 2
_PERIOD = re.compile(r"^Period: \*\*(.+?)\*\*", re.MULTILINE)
_CELL_NUMBER = re.compile(r"-?\d{1,3}(?:,\d{3})+(?:\.\d+)?|-?\d+(?:\.\d+)?")
# a figure in running text: not a part of a date, a time, a version, a path or a name
_TEXT_NUMBER = re.compile(r"(?<![\w.:/\\-])-?\d+(?:\.\d+)?(?![\w:/\\-]|\.\d)")
_SEPARATOR = re.compile(r"(?<=\d)[,\u202f\u00a0'](?=\d{3}(?!\d))")


def report_period(text: str) -> str:
    """The report's ``Period: **…**`` ("" when it states none)."""
    found = _PERIOD.search(text)
    return found.group(1).strip() if found else ""


def report_figures(text: str) -> list[float]:
    """The numbers in the report's result tables (cells that are a number; header and
    separator rows, text cells and ``NULL`` are not), distinct, in order."""
    figures: list[float] = []
    for line in text.splitlines():
        if not line.startswith("|") or re.fullmatch(r"\|[\s\-:|]+\|?", line.strip()):
            continue
        for raw in line.strip().strip("|").split("|"):
            cell = raw.strip()
            if _CELL_NUMBER.fullmatch(cell):
                value = float(cell.replace(",", ""))
                if value not in figures:
                    figures.append(value)
    return figures


def text_figures(text: str) -> list[tuple[float, int]]:
    """The figures a message states as ``(value, decimals shown)``."""
    plain = _SEPARATOR.sub("", text or "")
    return [(float(n), len(n.partition(".")[2])) for n in _TEXT_NUMBER.findall(plain)]


def _month_words(period: str) -> list[str]:
    """Other spellings of a ``YYYY-MM`` period: "December 2011", "Dec 2011"."""
    m = re.fullmatch(r"(\d{4})-(\d{2})", period)
    if not m or not 1 <= int(m[2]) <= 12:
        return []
    month = int(m[2])
    return [f"{calendar.month_name[month]} {m[1]}", f"{calendar.month_abbr[month]} {m[1]}"]


def post_problems(post: str, report: Path) -> list[str]:
    """What ``post`` (the text posted about ``report``) lacks of the report: its period, its
    figures (:data:`MIN_FIGURES`), its path. Empty: the post carries the substance."""
    text = report.read_text(errors="replace")
    problems: list[str] = []
    period = report_period(text)
    # the period in the path's file name ("sales-report-2011-12.md") is not the message saying it
    low = (post or "").replace(str(report), " ").replace(report.name, " ").lower()
    if not period:
        problems.append("the report states no period")
    elif period.lower() not in low and not any(w.lower() in low for w in _month_words(period)):
        problems.append(f"post lacks the report's period {period!r}")
    figures = report_figures(text)
    stated = text_figures(post)
    matched = {v for v in figures for f, d in stated if abs(f - v) <= 0.5 * 10**-d + 1e-9}
    want = min(MIN_FIGURES, len(figures))
    if len(matched) < want:
        problems.append(f"post states {len(matched)} of the report's figures (want {want} of {figures[:6]})")
    if str(report) not in post and report.name not in post:
        problems.append(f"post lacks the report's path ({report.name})")
    return problems


__all__ = ["MIN_FIGURES", "post_problems", "report_figures", "report_period", "text_figures"]
