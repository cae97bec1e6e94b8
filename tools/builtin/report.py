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

from tools.builtin.database import (
    QUERY_TIME_LIMIT_S,
    DatabaseError,
    connect_readonly,
    database_file,
    execute_query,
    find_undated,
    time_limit,
)

#: Queries per report.
MAX_QUERIES = 8
#: Rows of each query shown in the report and returned in the result.
REPORT_ROWS = 50
#: Seconds all the report's queries may take together (the tool's executor limit is 30 s;
#: lowered under a tighter tool timeout, see :func:`tools.builtin.database.time_limit`).
REPORT_TIME_LIMIT_S = 20.0
MAX_TITLE_CHARS = 200
MAX_LABEL_CHARS = 120
MAX_SQL_CHARS = 4000
MAX_VERSIONS = 1000
MAX_PERIOD_CHARS = 100
PERIOD_FORMS = (
    "YYYY, YYYY-MM or YYYY-MM-DD, a range FROM..TO of months or of days (e.g. 2026-03..2026-05, "
    "2026-03-01..2026-03-15), or a short one-line phrase naming a fixed period such as 'Q3 2026'"
)
# a period relative to today: in a saved report it would be wrong from the next month on
_RELATIVE_PERIOD_RE = re.compile(
    r"\b(?:last|this|previous|prior|current|past|next|coming)\s+(?:\d+\s+)?"
    r"(?:day|week|month|quarter|year|fiscal\s+year)s?\b"
    r"|\b(?:today|yesterday|tomorrow|ytd|mtd|qtd|year[\s-]to[\s-]date|month[\s-]to[\s-]date)\b"
    r"|\b(?:le\s+)?mois\s+(?:dernier|pr[ée]c[ée]dent|en\s+cours)\b|\bcette\s+ann[ée]e\b"
    r"|\b(?:el\s+)?mes\s+(?:pasado|anterior|actual)\b|\beste\s+(?:mes|a[ñn]o)\b"
    r"|\b(?:letzte[nrms]?|vorige[nrms]?|diese[nrms]?)\s+(?:Monat|Woche|Jahr|Quartal)s?\b|\bVormonat\b"
    r"|上个?月|上月|本月|这个月|今年|去年|上季度|本季度|上周|本周|今天|昨天|先月|今月|今年度|昨年|先週|今週",
    re.IGNORECASE,
)


def _month_before(today: dt.date) -> str:
    first = today.replace(day=1)
    return (first - dt.timedelta(days=1)).strftime("%Y-%m")


_YEAR_RE = re.compile(r"\d{4}")
_MONTH_RE = re.compile(r"(\d{4})-(\d{2})")
_DAY_RE = re.compile(r"\d{4}-\d{2}-\d{2}")
# a date-like part of a phrase: YYYY-M[-D] or YYYY/M[/D], checked like the ISO forms
_DATE_PART_RE = re.compile(r"(?<![\w.])(\d{4})([-/])(\d{1,2})(?:\2(\d{1,2}))?(?![\w])")
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


def check_period(period: Any) -> tuple[str, str]:
    r"""``(period, form)`` of a report's period, stripped: form ``""`` (none stated), ``"year"``
    (YYYY), ``"month"`` (YYYY-MM), ``"day"`` (YYYY-MM-DD), ``"months"`` / ``"days"`` (FROM..TO,
    both ends of one form, FROM <= TO) or ``"text"`` (a phrase such as 'last month' or 'Q3
    2026'; a date inside it, written YYYY-MM[-DD] or YYYY/MM[/DD], must exist, and two joined
    as a range — 'to', 'until', '–' — must not run backwards). Raises DatabaseError saying the
    expected forms for anything else: a month 13, a day that does not exist, a reversed range,
    a line break or control character, Markdown characters (``* ` | # < > [ ] \``), over
    MAX_PERIOD_CHARS characters."""
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
    if _YEAR_RE.fullmatch(period):
        return period, "year"
    if re.fullmatch(r"[\d\-\s.]+", period) and ".." in period:
        start, _, end = (part.strip() for part in period.partition(".."))
        if ".." in end or not start or not end:
            raise _bad_period(period, "a range is FROM..TO with one '..'")
        (form_a, a), (form_b, b) = _iso_part(period, start), _iso_part(period, end)
        if form_a != form_b:
            raise _bad_period(period, f"both ends of a range must be months or both days, got {a} and {b}")
        if a > b:
            raise _bad_period(period, f"the range ends ({b}) before it starts ({a})")
        return f"{a}..{b}", form_a + "s"
    if re.fullmatch(r"[\d\-]+", period):
        return period, _iso_part(period, period)[0]
    # a phrase: its dates must exist, and a range in it must not run backwards
    parts = list(_DATE_PART_RE.finditer(period))
    for m in parts:
        if m[2] == "/" or len(m[3]) != 2 or (m[4] is not None and len(m[4]) != 2):
            raise _bad_period(period, f"write {m[0]!r} as YYYY-MM or YYYY-MM-DD")
        _iso_part(period, m[0])
    if ".." in period:
        raise _bad_period(period, "a range is FROM..TO with ISO ends (YYYY-MM or YYYY-MM-DD)")
    if not parts and _RELATIVE_PERIOD_RE.search(period):
        today = dt.date.today()
        raise DatabaseError(
            f"period {period[:60]!r} is relative to today ({today.isoformat()}); a saved report names the "
            f"period it covers: write {_month_before(today)} for last month, or YYYY, YYYY-MM-DD, FROM..TO"
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
        label, sql = q["label"].strip(), q["sql"].strip()
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
    :func:`tools.builtin.database.find_undated` — a GROUP BY month alone does not, even for a
    period of several months), or every query returned no data (the message names the latest
    period with data of the date columns the queries use).
    """
    title = title.strip() if isinstance(title, str) else ""
    if not title or len(title) > MAX_TITLE_CHARS:
        raise DatabaseError(f"title must be 1-{MAX_TITLE_CHARS} characters")
    _one_line("title", title)
    period, form = check_period(period)
    checked = _check_queries(queries)
    notes = (notes or "").strip()
    path = database_file(database)
    con = connect_readonly(path, schema=True)
    results: list[dict[str, Any]] = []
    budget = time_limit(REPORT_TIME_LIMIT_S, 0.7)
    deadline = time.monotonic() + budget
    try:
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
                names = ", ".join(c for c, _ in undated.columns[:3])
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
    out_path, version = _write_new(Path(data_dir) / "reports", slugify(title), "\n".join(lines))

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
    return {"path": str(out_path), "version": version, "title": title, "period": period, "queries": summary}
