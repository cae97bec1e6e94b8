"""Whether a query that found nothing found nothing because of its period, or despite it.

A query restricted to a period only (its WHERE compares nothing but date columns) that returns
no rows although those columns hold data in the period its SQL names did not find "no data":
a join on the wrong columns, or a date compared in the wrong format, excluded every row.
Measured (Qwen2.5-Coder-1.5B, the generated sales database): ``… JOIN sales_lines sl ON
p.product_id = sl.product WHERE sl.order_date LIKE '2026-11-%'`` returned no rows, and the
model answered "No data for this query" about a month that has a full month of sales.

:func:`unexpected_empty` says so, for the result's ``note`` and its ``unexpected_empty`` field
(DESIGN §5.5: an empty read marked so supports no claim of none). A query with any other
condition (a country, a status) may rightly find nothing: it is never marked.
"""

from __future__ import annotations

import re
from typing import Any

from tools.builtin.database.statement import parse_tree

# a month written in a string of the SQL ('2026-11', '2026-11-%', or its first day '2026-11-01', as
# a month's range starts), or a year compared on its own (strftime('%Y', d) = '2011'); another day
# or a time of day may rightly have no rows
_MONTH_LITERAL = re.compile(r"^\s*((?:19|20)\d\d)-(0[1-9]|1[0-2])(?:-01(?:[ T]00:00(?::00)?)?|-%|%)?\s*$")
_YEAR_LITERAL = re.compile(r"^\s*((?:19|20)\d\d)%?\s*$")


def _periods(tree: Any) -> list[str]:
    """The months (``YYYY-MM``) and years (``YYYY``) the WHERE clauses' strings name."""
    from sqlglot import exp

    out: list[str] = []
    for where in tree.find_all(exp.Where):
        for lit in where.find_all(exp.Literal):
            if not lit.is_string:
                continue
            m = _MONTH_LITERAL.match(lit.this)
            if m:
                out.append(f"{m[1]}-{m[2]}")
            elif y := _YEAR_LITERAL.match(lit.this):
                out.append(y[1])
    return out


def _only_dates_filtered(tree: Any, date_columns: set[str]) -> bool:
    """Every column a WHERE clause of ``tree`` names is a date column (by its name)."""
    from sqlglot import exp

    wheres = list(tree.find_all(exp.Where))
    if not wheres:
        return False
    names = {col.name.lower() for where in wheres for col in where.find_all(exp.Column)}
    return bool(names) and names <= date_columns


def unexpected_empty(sql: str, ranges: list[dict[str, Any]]) -> str | None:
    """Why an empty result of ``sql`` is not explained by its period (module docstring), or None.
    ``ranges``: the date ranges of the columns the SQL names (``dates.date_columns_in``: each
    ``{"column": "table.col", "min": "YYYY-MM-DD", "max": ...}``). Never raises."""
    tree = parse_tree(sql)  # None when sqlglot cannot read it: nothing to say then
    if tree is None:
        return None
    dated = [r for r in ranges if r.get("min") and r.get("max")]
    columns = {str(r["column"]).rsplit(".", 1)[-1].strip('"').lower() for r in dated}
    if not dated or not _only_dates_filtered(tree, columns):
        return None
    for period in _periods(tree):
        for r in dated:
            lo, hi = str(r["min"])[: len(period)], str(r["max"])[: len(period)]
            if lo <= period <= hi:
                return f"{r['column']} has data in {period}, the period the query names"
    return None
