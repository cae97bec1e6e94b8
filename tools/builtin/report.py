"""``generate_report``: a Markdown analysis report whose every figure comes from a read-only
query the caller gives (no fixed SQL, no assumed schema). Runs inside the executor's worker
process (cwd = data_dir); the database is the injected ``database`` argument, like
``query_database`` (:mod:`tools.builtin.database`).

Reports are never overwritten: ``reports/<slug>.md``, then ``<slug>-v2.md``, ``-v3`` …
"""

from __future__ import annotations

import datetime as dt
import re
import time
from pathlib import Path
from typing import Any

from tools.builtin.database import (
    QUERY_TIME_LIMIT_S,
    DatabaseError,
    connect_readonly,
    database_file,
    execute_query,
    time_limit,
    undated_columns,
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


def slugify(title: str) -> str:
    """File-name stem of a title: lower case, runs of anything but letters/digits → ``-``,
    at most 60 characters; ``report`` when nothing is left."""
    slug = re.sub(r"[\W_]+", "-", title.lower(), flags=re.UNICODE).strip("-")
    return slug[:60].strip("-") or "report"


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
    DatabaseError — and writes nothing — when the database is missing or invalid, a query is
    refused or fails, a ``period`` is stated but a query does not filter on any date column of
    its tables (its figures would cover every date), or every query returned no data (the message names the latest period with
    data of the date columns the queries use).
    """
    title = (title or "").strip()
    if not title or len(title) > MAX_TITLE_CHARS:
        raise DatabaseError(f"title must be 1-{MAX_TITLE_CHARS} characters")
    checked = _check_queries(queries)
    period = (period or "").strip()
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
            if period and (undated := undated_columns(con, q["sql"])):
                # a report that states a period must not show all-time figures under it
                # (measured: Qwen2.5-Coder-1.5B's "2026-11" report summed every month)
                col = undated[0]
                span = re.fullmatch(r"(\d{4}-\d{2}-\d{2})\.\.(\d{4}-\d{2}-\d{2})", period)
                if re.fullmatch(r"\d{4}-\d{2}", period):
                    example = f"WHERE strftime('%Y-%m', {col}) = '{period}'"
                elif span:
                    example = f"WHERE date({col}) BETWEEN '{span[1]}' AND '{span[2]}'"
                else:
                    example = f"a WHERE condition on {col}"
                raise DatabaseError(
                    f"query {i} ({q['label']!r}) has no condition on a date ({', '.join(undated[:3])}), so its "
                    f"figures cover every date, not the report's period {period!r}; nothing was written. "
                    f"Add {example} (or leave the period out)"
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
