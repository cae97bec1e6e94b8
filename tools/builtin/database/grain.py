"""What one row of an aggregated read stands for: the rows a COUNT or AVG without GROUP BY ran
over, and how many distinct values each key column had among them.

Measured (Qwen2.5-Coder-1.5B; Northwind, held out): "How many orders did we ship to France in
2017?" → ``COUNT(*) FROM Invoices`` — a view with one row per order *line* — 93 (truth 39
orders); "the average freight charge per order" → ``AVG(Freight) FROM Invoices`` 96.20 (truth
78.24); on the generated sales database "how many units are in an order" → ``AVG(quantity)``
over order lines. Each figure is right for the rows it ran over and wrong for what was asked:
no check of figures against results can tell. :func:`row_grain` gives the answer check
(``graph/verification.py``) what it needs: ``{"rows": 2155, "distinct": {"OrderID": 830}}``
says that the 2,155 rows repeat OrderID, so they are not orders. Generic: keys are read from
the schema (primary and foreign keys, key-like names), never from expected names.
"""

from __future__ import annotations

import sqlite3
from typing import Any

from tools.builtin.database.connection import Deadline
from tools.builtin.database.schema import KEY_NAME, declared_keys, list_tables, table_columns
from tools.builtin.database.statement import editable_tree, sqlite_dialect

#: Key columns counted at most (each is one COUNT(DISTINCT …) in the same statement).
MAX_KEYS = 8


def row_grain(con: sqlite3.Connection, sql: str) -> dict[str, Any] | None:
    """``{"rows": n, "distinct": {key column: distinct values}}`` for a read whose top-level
    SELECT counts (``COUNT(*)``, ``COUNT(col)``) or averages without GROUP BY: ``n`` rows reached
    the aggregate, and each key column of its tables listed had fewer distinct values than that
    (the rows repeat it). None when there is no such aggregate, no key repeats, or it cannot
    tell (unparsable SQL, over 2 s). ``con`` must allow reading and the schema pragmas. Never
    raises."""
    from sqlglot import exp

    tree = editable_tree(sql)
    if not isinstance(tree, exp.Select) or tree.args.get("group"):
        return None
    aggregates = [
        a for e in tree.expressions for a in e.find_all(exp.Count, exp.Avg) if not isinstance(a.this, exp.Distinct)
    ]
    if not aggregates:
        return None
    sources = [t for t in tree.find_all(exp.Table) if t.find_ancestor(exp.Select) is tree]
    try:
        real = {t.lower(): t for t in list_tables(con)}
        keys: list[tuple[str, str]] = []  # (alias or table as the query names it, column)
        for source in sources:
            table = real.get(source.name.lower())
            if table is None:
                continue
            fks = {c.lower() for _, cols, _ in declared_keys(con, table) for c in cols}
            for name, _, _, pk in table_columns(con, table):
                if pk or name.lower() in fks or KEY_NAME.search(name):
                    keys.append((source.alias_or_name, name))
        keys = list(dict.fromkeys(keys))[:MAX_KEYS]
        if not keys:
            return None
        tree.set(
            "expressions",
            [exp.Count(this=exp.Star())]
            + [exp.Count(this=exp.Distinct(expressions=[exp.column(c, table=q)])) for q, c in keys],
        )
        for arg in ("order", "limit", "offset"):
            tree.set(arg, None)
        probe = tree.sql(dialect=sqlite_dialect())
        with Deadline(con, 2.0):
            row = con.execute(probe).fetchone()
    except (sqlite3.Error, ValueError):
        return None
    if row is None or not row[0]:
        return None
    rows = int(row[0])
    repeated = {c: int(n) for (_, c), n in zip(keys, row[1:]) if n and int(n) < rows}
    return {"rows": rows, "distinct": repeated} if repeated else None


def ranked_rows(con: sqlite3.Connection, sql: str) -> dict[str, Any] | None:
    """``{"rows": n, "repeated": [{"column": output name, "source": "table.column", "distinct":
    m}]}`` for a read that ranks
    single rows (top-level ORDER BY … LIMIT, no GROUP BY, no aggregate): ``n`` rows were ranked
    and each selected column listed repeats among them, so its top rows are the largest single
    rows of a value, not the value with the largest total. Measured (generated sales database):
    "Who was our biggest customer by revenue in November 2026?" → ``SELECT customers.name FROM
    customers JOIN sales_lines … ORDER BY sales_lines.revenue DESC LIMIT 1``, the customer of the
    largest order line (the biggest customer by total was another). ``table`` is the table the
    column belongs to (as stored, a view's name when read from one), or the name the query gives
    when it cannot tell. None when the read is not such a ranking, nothing repeats, or it cannot
    tell (unparsable SQL, over 2 s). Never raises."""
    from sqlglot import exp

    tree = editable_tree(sql)
    if (
        not isinstance(tree, exp.Select)
        or tree.args.get("group")
        or not tree.args.get("order")
        or not tree.args.get("limit")
        or any(e.find(exp.AggFunc, exp.Window) for e in tree.expressions)
    ):
        return None
    selected = [(e.alias_or_name, e.unalias()) for e in tree.expressions if isinstance(e.unalias(), exp.Column)]
    columns = [c for _, c in selected][:MAX_KEYS]
    if not columns:
        return None
    try:
        aliases = {
            t.alias_or_name.lower(): t.name for t in tree.find_all(exp.Table) if t.find_ancestor(exp.Select) is tree
        }
        real = {t.lower(): t for t in list_tables(con)}
        named: list[str] = []
        for column in columns:
            table = aliases.get(column.table.lower(), column.table) if column.table else ""
            if not table and len(aliases) == 1:
                table = next(iter(aliases.values()))
            named.append(f"{real.get(table.lower(), table)}.{column.name}" if table else column.name)
        tree.set(
            "expressions",
            [exp.Count(this=exp.Star())] + [exp.Count(this=exp.Distinct(expressions=[c.copy()])) for c in columns],
        )
        for arg in ("order", "limit", "offset", "distinct"):
            tree.set(arg, None)
        with Deadline(con, 2.0):
            row = con.execute(tree.sql(dialect=sqlite_dialect())).fetchone()
    except (sqlite3.Error, ValueError):
        return None
    if row is None or not row[0]:
        return None
    rows = int(row[0])
    repeated = [
        {"column": output, "source": name, "distinct": int(n)}
        for (output, _), name, n in zip(selected, named, row[1:])
        if n and int(n) < rows
    ]
    return {"rows": rows, "repeated": repeated} if repeated else None
