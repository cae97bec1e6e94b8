"""Running one checked SELECT: under the deadline, at most MAX_ROWS rows with bounded cells and
the true ``row_count``; a result without data carries a note with the dates the data does have
(:func:`tools.builtin.database.dates.no_data_note`). Shared by ``query_database`` and
``generate_report``."""

from __future__ import annotations

import re
import sqlite3
from typing import Any

from tools.builtin.database.connection import (
    QUERY_TIME_LIMIT_S,
    Deadline,
    read_authorizer,
    schema_authorizer,
    time_limit,
)
from tools.builtin.database.dates import no_data_note
from tools.builtin.database.empty_results import (
    foreign_date_text,
    other_conditions,
    period_with_data,
    unexpected_empty,
    unmatched_joins,
    unmatched_memberships,
    unmatched_values,
)
from tools.builtin.database.errors import sql_error
from tools.builtin.database.hints import null_time_strings
from tools.builtin.database.repairs import (
    MAX_REPAIRS,
    repair_compared_column,
    repair_join,
    repair_scalar_subquery,
    repair_unknown_column,
)
from tools.builtin.database.statement import check_select, read_sql_or_none
from tools.database_setting import DatabaseError

#: Rows returned by query_database at most; ``row_count`` still gives the full count.
MAX_ROWS = 500


#: Characters kept of a text cell; blobs become "<N bytes>".
MAX_CELL_CHARS = 300


_AGGREGATE_RE = re.compile(r"\b(count|sum|total|avg|min|max|group_concat)\s*\(", re.IGNORECASE)


def _cell(value: Any) -> Any:
    if isinstance(value, (bytes, bytearray, memoryview)):
        return f"<{len(value)} bytes>"
    if isinstance(value, str) and len(value) > MAX_CELL_CHARS:
        return value[:MAX_CELL_CHARS] + "…"
    return value


def run_select(
    con: sqlite3.Connection, body: str, *, max_rows: int = MAX_ROWS, time_limit_s: float | None = None
) -> dict[str, Any]:
    """Run the checked statement ``body`` on ``con``. Returns ``{columns, rows (<= max_rows,
    cells bounded), row_count, truncated}``; when the rows beyond ``max_rows`` could not all be
    counted in time, ``row_count`` is a lower bound and ``row_count_exact`` is False. Raises
    DatabaseError for refused or bad SQL and for a query over the time limit."""
    limit = time_limit(QUERY_TIME_LIMIT_S) if time_limit_s is None else time_limit_s
    with Deadline(con, limit) as deadline:
        try:
            cur = con.execute(body)
            columns = [d[0] for d in cur.description or []]
            rows = [[_cell(v) for v in r] for r in cur.fetchmany(max_rows)]
        except sqlite3.Error as exc:
            if deadline.hit:
                raise DatabaseError(
                    f"query stopped after {limit:g} s (time limit): it scans or generates too much. "
                    "Narrow it with WHERE, aggregate with GROUP BY, or add LIMIT"
                ) from None
            error = sql_error(exc, con, body)
            error.sqlite_error = str(exc)  # type: ignore[attr-defined]  # what repairs.py reads
            raise error from None
        extra, exact = 0, True
        if len(rows) == max_rows:
            try:
                while batch := cur.fetchmany(10_000):
                    extra += len(batch)
            except sqlite3.Error as exc:
                if not deadline.hit:
                    raise sql_error(exc, con, body) from None
                exact = False
    out: dict[str, Any] = {
        "columns": columns,
        "rows": rows,
        "row_count": len(rows) + extra,
        "truncated": extra > 0 or not exact,
    }
    if not exact:
        out["row_count_exact"] = False
        out["note"] = (
            f"more than {out['row_count']} rows; counting stopped at the {limit:g} s time "
            "limit. Aggregate or filter the query to get totals"
        )
    return out


def is_empty_result(result: dict[str, Any], sql: str) -> bool:
    """True when a result carries no data: no rows, or a single row of NULLs, or (for an
    aggregate query) a single row of NULLs and zeros (COUNT over no rows)."""
    rows = result.get("rows") or []
    if not rows:
        return True
    if len(rows) != 1:
        return False
    values = rows[0]
    if all(v is None for v in values):
        return True
    scan = read_sql_or_none(sql)  # a count( in a string or a comment is no aggregate
    return bool(_AGGREGATE_RE.search(scan.code if scan else sql)) and all(v is None or v == 0 for v in values)


def _as_sets(con: sqlite3.Connection, body: str, repaired: list[str]) -> str:
    """``body`` with every ``x = (SELECT …)`` whose subquery returns several rows as ``x IN
    (SELECT …)`` (:func:`repair_scalar_subquery`), what changed appended to ``repaired``."""
    con.set_authorizer(read_authorizer)  # the subqueries are the model's SQL: reading only
    try:
        mended = repair_scalar_subquery(con, body)
    finally:
        con.set_authorizer(schema_authorizer)
    if not mended:
        return body
    repaired.append(mended[1])
    return check_select(mended[0])


def execute_query(
    con: sqlite3.Connection, sql: str, *, max_rows: int = MAX_ROWS, time_limit_s: float | None = None
) -> dict[str, Any]:
    """check_select + run_select on an open connection (``schema=True``), plus ``note`` and
    ``data_range`` when the result holds no data. Shared by query_database and generate_report."""
    body = check_select(sql)
    repaired: list[str] = []
    body = _as_sets(con, body, repaired)
    while True:
        con.set_authorizer(read_authorizer)  # the model's SQL never gets the schema pragmas
        try:
            result = run_select(con, body, max_rows=max_rows, time_limit_s=time_limit_s)
            break
        except DatabaseError as err:
            con.set_authorizer(schema_authorizer)
            mend = len(repaired) < MAX_REPAIRS and repair_unknown_column(con, body, getattr(err, "sqlite_error", ""))
            if not mend:
                raise
            body = check_select(mend[0])  # one column renamed: still the same read-only statement
            repaired.append(mend[1])
            body = _as_sets(con, body, repaired)
        finally:
            con.set_authorizer(schema_authorizer)
    assumed: list[str] = []
    for repair in (repair_join, repair_compared_column):
        # a join no row meets, or a text compared in a column that never holds it, where the
        # column meant is certain: read-only, so run it (measured: the 1.5B model sent the unmet
        # join three times, and the comparison with the wrong column twice)
        if not is_empty_result(result, body) or not (mended := repair(con, body)):
            continue
        sets: list[str] = []
        retry = _as_sets(con, check_select(mended[0]), sets)
        con.set_authorizer(read_authorizer)
        try:
            again = run_select(con, retry, max_rows=max_rows, time_limit_s=time_limit_s)
        except DatabaseError:
            again = None
        finally:
            con.set_authorizer(schema_authorizer)
        if again is not None and not is_empty_result(again, retry):
            result, body = again, retry
            repaired.extend([mended[1], *sets])
            if repair is repair_compared_column:
                # a reading of the request, not a spelling: the answer must say it (DESIGN §5.5)
                assumed.append(mended[1])
    if is_empty_result(result, body):
        if null := null_time_strings(con, body):
            # a comparison with NULL found nothing: no evidence of none, and the model's fix is SQL
            raise DatabaseError(f"The query found nothing because {null}")
        result["no_data"] = True
        why = "it returned no rows" if not result["rows"] else "its values are NULL or 0 (no rows matched)"
        result["note"], ranges = no_data_note(con, body, why)
        if ranges:
            result["data_range"] = ranges
        if joined := unmatched_joins(con, body) or unmatched_memberships(con, body):
            # two columns that never hold the same value (a join, an IN of a subquery): the
            # comparison, not the data, is empty
            result["unexpected_empty"] = joined
            result["note"] = (
                f"No rows: {joined}. Compare columns that hold the same values (describe_database shows "
                "the keys) and query again; do not tell the user there is none."
            )
        elif foreign := foreign_date_text(con, body):
            # dates stored as '05.11.2026': the comparison, not the data, is empty
            result["unexpected_empty"] = foreign
            result["note"] = (
                f"No rows: {foreign}. Compare the text as it is written (LIKE on its month and year as "
                "the rows write them), or rebuild YYYY-MM-DD with substr(), and query again; do not tell "
                "the user there is none."
            )
        elif spelt := unmatched_values(con, body):
            # a value spelt as no row spells it: the rows exist under its near neighbour
            result["unexpected_empty"] = spelt
            result["note"] = (
                f"No rows: {spelt}. Compare the column that holds it, with the value as the rows spell it, "
                "and query again; "
                "do not tell the user there is none."
            )
        elif despite := unexpected_empty(body, ranges):
            # the period has data: the join or the date format excluded every row (DESIGN §5.5)
            result["unexpected_empty"] = despite
            result["note"] = (
                f"No rows, although {despite}: a join on the wrong columns or a date compared in the "
                "wrong format excluded every row. Check the join columns and the date format with "
                "describe_database and query again; do not tell the user there is no data for it."
            )
        elif in_period := period_with_data(body, ranges):
            # other conditions emptied it, which may be the answer (no customer in Japan) or a
            # filter the request never named: say which, not "use a period with data"
            others = ", ".join(other_conditions(body, ranges)) or "the rest of the WHERE clause"
            result["note"] = (
                f"No rows, although {in_period}: the query's other conditions ({others}) match no row in it. "
                "If the user asked for those conditions, the answer is that there are none; if not, "
                "query again without them. Never invent figures."
            )
    if assumed:
        result["assumed"] = assumed
    if repaired:
        # the model sees what ran: a mended name it never wrote must not pass unnoticed
        result["repaired"] = repaired
        result["sql_run"] = body
        told = f"Ran with {'; '.join(repaired)}: the query as written named a column its table does not have, joined on columns that never meet, compared a value in a column that never holds it or compared with a subquery of several rows. SQL run: {body}"
        result["note"] = told + (f" {result['note']}" if result.get("note") else "")
    return result
