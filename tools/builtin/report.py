"""``generate_report``: a Markdown analysis report whose every figure comes from a read-only
query the caller gives (no fixed SQL, no assumed schema). Runs inside the executor's worker
process (cwd = data_dir); the database is the injected ``database`` argument, like
``query_database`` (:mod:`tools.builtin.database`).

Reports are never overwritten: ``reports/<slug>.md``, then ``<slug>-v2.md``, ``-v3`` … in the
run's thread workspace (the injected ``workspace``, ``<data_dir>/threads/<thread>/``:
:mod:`tools.executors.workspace`), so one thread's (one user's) reports are not another's.
"""

from __future__ import annotations

import datetime as dt
import re
import time
from pathlib import Path
from typing import Any

from tools.builtin.database.connection import QUERY_TIME_LIMIT_S, connect_readonly, database_file, time_limit
from tools.builtin.database.execution import execute_query
from tools.builtin.database.period_scope import find_undated, restrict_to
from tools.builtin.database.periods import (
    LATEST,
    data_columns,
    latest_month,
    latest_title,
    month_before,
    period_resolution,
)
from tools.builtin.database.statement import quote_back, strip_bom
from tools.builtin.report_period import (
    PERIOD_FORMS,
    PeriodError,
    RelativePeriodError,
    check_period,
    not_one_line,
    relative_phrase,
)
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
#: ``period`` values asking for the latest full month with data (the report's title says so).
LATEST_PERIODS = frozenset({LATEST, "latest month", "latest month with data", "latest-month"})
#: Request words that already ask for the latest period with data: a refusal of a period without
#: data names them (``InvalidValueError.allowed_by``), so such a request is not asked again.
LATEST_REQUESTED = (
    r"\b(latest|newest|most[\s-]+recent|last[\s-]+available|latest[\s-]+available)\b",
    r"\bwhatever\b.{0,40}\b(latest|last|recent)\b",
    (
        r"最新|最近一个有数据|dernier(e|s)?\s+(mois\s+)?disponible|plus\s+r[ée]cent|m[áa]s\s+reciente|[úu]ltimo\s+disponible"
        r"|neueste|aktuellste"
    ),
)


def _no_data_refusal(
    con: Any, sqls: list[str], asked: str, message: str, today: dt.date, *, named_only: bool = False
) -> PeriodError:
    """The refusal of ``asked`` (a period without data), ``message`` its text, with the structured
    fields the graph keys on (DESIGN §5.6): ``period="latest"`` to send instead, the sentence
    saying why, the question to ask the user before a side effect goes on with it, and
    :data:`LATEST_REQUESTED` (a request that already asks for the latest needs no question)."""
    best = latest_month(data_columns(con, sqls, today, named_only=named_only))
    month = best.latest_full_month if best is not None else None
    if best is None or month is None or month == asked:
        return PeriodError(message)
    ends = (
        f"Your data ends in {month}"
        if (best.last or "")[:7] == month
        else f"The latest full month of your data is {month}"
    )
    reason = f"{ends}; there is none for {asked}." if asked else f"{ends}; the report's queries found no data."
    return PeriodError(
        message,
        suggestion={"period": LATEST},
        reason=reason,
        question=f"{reason} Shall I report {month} instead (titled as the latest month with data)? (yes/no)",
        allowed_by=LATEST_REQUESTED,
    )


def slugify(title: str) -> str:
    """File-name stem of a title: lower case, runs of anything but letters/digits → ``-``,
    at most 60 characters; ``report`` when nothing is left."""
    slug = re.sub(r"[\W_]+", "-", title.lower(), flags=re.UNICODE).strip("-")
    return slug[:60].strip("-") or "report"


def _one_line(what: str, text: str) -> None:
    if not_one_line(text):
        raise DatabaseError(
            f"{what} must be one line of text: {text[:60]!r} holds a line break or another control character"
        )


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
    (:func:`tools.builtin.database.periods.latest_title`); a period relative to today ("last
    month") becomes the period it names today (``2026-11``), the title naming it. Raises
    PeriodError for a relative period naming no unit ("recently"), and for a period with no rows
    in those columns — naming the latest month with
    data, the period to send and the condition to add (:func:`period_resolution`)."""
    sqls = [q["sql"] for q in checked]
    if relative is not None:
        named = relative.named
        months = _months_of(named, check_period(named, today=today)[1]) if named else None
        if months and (resolution := period_resolution(con, sqls, relative.period, months, today)):
            # what it names today has no data: say what does, not "write <a month without data>"
            raise _no_data_refusal(
                con,
                sqls,
                named,
                f"no report written: the period is relative to today ({today.isoformat()}), and {resolution}",
                today,
            )
        if not named:
            raise relative
        # resolved against today, here: the saved report names the period it covers (never
        # "last month", wrong from the next month on) and the call needs no second round
        # (measured: Qwen2.5-Coder-1.5B sent "last month" again after the refusal, 3 times of 4)
        return (title if named in title else f"{title} — {named}"), named, check_period(named, today=today)[1]
    if latest:
        best = latest_month(data_columns(con, sqls, today))
        if best is None or best.latest_full_month is None:
            raise PeriodError(
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
        raise _no_data_refusal(
            con, sqls, period, f"no report written: the period {resolution}", today, named_only=named_only
        )
    if form == "month" and period < month_before(today):
        # the latest month with data, stated by the caller while last month has none: titled so
        # like period="latest", so it never passes for last month's report ("last month's sales"
        # answered with a December 2011 report, say)
        best = latest_month(data_columns(con, sqls, today, named_only=named_only))
        if best is not None and best.latest_full_month == period:
            return latest_title(title, period, today)[: MAX_TITLE_CHARS + 80], period, form
    return title, period, form


def generate_report(
    title: str,
    queries: list[dict[str, str]],
    period: str = "",
    notes: str = "",
    *,
    database: str = "",
    data_dir: Path,
    workspace: Path | None = None,
) -> dict[str, Any]:
    """Run each of ``queries`` (1-8 ``{"label", "sql"}``, single read-only SELECTs, through the
    same code as query_database) on the configured database and write the Markdown report
    ``workspace/reports/<slug of title>.md`` (``-v2``, ``-v3`` … when that exists; ``workspace``
    is the run's thread folder the executor injects, ``data_dir`` when called without one).
    Without a ``period``, a period relative to today that the title names ("… last month") is
    the period.

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
    if not (period.strip() if isinstance(period, str) else period) and (phrase := relative_phrase(title)):
        # a title naming a relative period ("Support tickets report last month") is the report's
        # period: resolved and checked like a stated one (measured: such a report was written
        # with no period, and its post named none)
        period = phrase
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
            restricted, mended, assumed = None, "", []
            undated = find_undated(con, q["sql"]) if period else None
            if undated:
                # a report that states a period must not show all-time figures under it
                # (measured: Qwen2.5-Coder-1.5B's "2026-11" report summed every month); the
                # condition the refusal would ask for is applied and stated when it is plain
                # (measured: the 1.5B model sent the refused call back word for word three times)
                col, kind = undated.columns[0]
                example = _period_example(col, kind, period, form)
                if example.startswith("WHERE ") and (restricted := restrict_to(q["sql"], col, example[6:])):
                    mended = f"{example[6:]} added (the report's period; the query had no date condition)"
                    if len(undated.columns) > 1:
                        others = ", ".join(c for c, _ in undated.columns[:3])
                        assumed = [f"{col} is the date of the report's period (of {others})"]
            if undated and restricted is None:
                col, kind = undated.columns[0]
                col = quote_back(col)
                names = ", ".join(quote_back(c) for c, _ in undated.columns[:3])
                grouped = (
                    " (its GROUP BY gives a row per period, but of every period: restrict the ones wanted)"
                    if undated.grouped
                    else ""
                )
                raise PeriodError(
                    f"query {i} ({q['label']!r}) has no condition on a date ({names}), so its "
                    f"figures cover every date, not the report's period {period!r}{grouped}; nothing was "
                    f"written. Add {_period_example(col, kind, period, form)} (or leave the period out)"
                )
            try:
                res = execute_query(
                    con,
                    restricted or q["sql"],
                    max_rows=REPORT_ROWS,
                    time_limit_s=min(time_limit(QUERY_TIME_LIMIT_S), left),
                )
            except DatabaseError as exc:
                raise DatabaseError(f"query {i} ({q['label']!r}) failed, nothing was written: {exc}") from None
            if restricted:
                res = {
                    **res,
                    "sql_run": res.get("sql_run") or restricted,
                    "repaired": [mended, *res.get("repaired", [])],
                }
                if assumed:
                    res["assumed"] = [*assumed, *res.get("assumed", [])]
            results.append({**q, **res})
        if all(r.get("no_data") for r in results):
            notes_seen = list(dict.fromkeys(r["note"] for r in results))
            message = "no report written: none of the queries found data. " + " ".join(notes_seen)
            # no period stated and every query restricts a date: the same refusal as for a stated
            # period without data (a stated period has data here, or it was refused above)
            sqls = [q["sql"] for q in checked]
            dated = not period and not any(find_undated(con, sql) for sql in sqls)
            refusal = _no_data_refusal(con, sqls, "", message, today) if dated else None
            raise refusal if refusal is not None and refusal.suggestion else DatabaseError(message)
    finally:
        con.close()

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
        if r.get("repaired"):
            # the figures are the mended query's: the report shows what ran, and that it was mended
            lines += [f"_Ran as mended by the tool: {_fmt('; '.join(r['repaired']))}._", ""]
        if r.get("assumed"):
            lines += [f"_Read as: {_fmt('; '.join(r['assumed']))}._", ""]
        lines += ["```sql", r.get("sql_run") or r["sql"], "```", ""]
    lines += ["## Figures in this report rest on these queries", ""]
    for i, r in enumerate(results, 1):
        lines.append(
            f"{i}. {_fmt(r['label'])} ({r['row_count']} row{'s' if r['row_count'] != 1 else ''}): "
            f"`{' '.join((r.get('sql_run') or r['sql']).split())}`"
        )
    lines.append("")
    # the file is named by the title without the latest-month remark
    out_path, version = _write_new(
        Path(workspace or data_dir) / "reports", slugify(title.split(" (latest month")[0]), "\n".join(lines)
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
        for key in ("sql_run", "repaired", "assumed"):
            if r.get(key):
                item[key] = r[key]
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
