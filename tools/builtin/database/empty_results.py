"""Whether a query that found nothing found nothing because of what it asked, or despite it.

A query restricted to a period only (its WHERE compares nothing but date columns) that returns
no rows although those columns hold data in the period its SQL names did not find "no data":
a join on the wrong columns, or a date compared in the wrong format, excluded every row.
Measured (Qwen2.5-Coder-1.5B, the generated sales database): ``… JOIN sales_lines sl ON
p.product_id = sl.product WHERE sl.order_date LIKE '2026-11-%'`` returned no rows, and the
model answered "No data for this query" about a month that has a full month of sales.

:func:`unexpected_empty` says so, for the result's ``note`` and its ``unexpected_empty`` field
(DESIGN §5.5: an empty read marked so supports no claim of none). A query with any other
condition (a country, a status) may rightly find nothing: it is not marked for its period.

:func:`unmatched_values` looks at those other conditions: a text column compared to a value no
row holds, while a row holds one that differs only in case, spacing or a letter or two
(``priority = 'urgent'`` where the rows say ``'Urgent'``), found nothing because of the spelling
— the note names the values that exist. A value with no near neighbour (``country = 'Japan'``
where no customer is in Japan) is an answer: nothing is marked.
"""

from __future__ import annotations

import difflib
import re
import sqlite3
from typing import Any

from tools.builtin.database.connection import Deadline
from tools.builtin.database.schema import list_tables, table_columns
from tools.builtin.database.statement import names_used, parse_tree, quote_name, where_scopes

#: Distinct values of a column read to find the near ones (a bounded sample, 2 s at most).
VALUE_SAMPLE = 500

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
    return period_with_data(sql, dated)


def period_with_data(sql: str, ranges: list[dict[str, Any]]) -> str | None:
    """``"<table.column> has data in <period>, the period the query names"`` when a month or
    year the WHERE clauses of ``sql`` name lies within one of ``ranges`` (as for
    :func:`unexpected_empty`), whatever else the query compares; else None. For an empty result
    with other conditions too: the period is not why it is empty (measured: an invented
    ``region = 'North America'`` filter got "Use a period with data" for a month with sales, and
    the model answered that there was no data for the period). Never raises."""
    tree = parse_tree(sql)
    if tree is None:
        return None
    dated = [r for r in ranges if r.get("min") and r.get("max")]
    for period in _periods(tree):
        for r in dated:
            lo, hi = str(r["min"])[: len(period)], str(r["max"])[: len(period)]
            if lo <= period <= hi:
                how = f" (it holds Unix timestamps: {r['month_sql']} gives a row's month)" if r.get("month_sql") else ""
                return f"{r['column']} has data in {period}, the period the query names{how}"
    return None


def _compared_values(tree: Any) -> list[tuple[str, str, str]]:
    """``(table, column name, text)`` of each ``column = 'text'``, ``column IN ('a', ...)`` and
    ``column LIKE 'text'`` (no wildcard) in the WHERE clauses of ``tree``; ``table`` is the
    table the column's qualifier names (an alias resolved: ``o.name`` of ``orders o``), lower
    case, or ``""`` when the column is unqualified."""
    from sqlglot import exp

    aliases = {t.alias_or_name.lower(): t.name.lower() for t in tree.find_all(exp.Table)}
    out: list[tuple[str, str, str]] = []
    for where in tree.find_all(exp.Where):
        for node in where.find_all(exp.EQ, exp.In, exp.Like):
            col = node.this if isinstance(node.this, exp.Column) else None
            if col is None and isinstance(node, exp.EQ) and isinstance(node.expression, exp.Column):
                col, values = node.expression, [node.this]
            elif isinstance(node, exp.In):
                values = list(node.expressions)
            else:
                values = [node.expression]
            if col is None:
                continue
            table = aliases.get(col.table.lower(), col.table.lower())
            out.extend(
                (table, col.name, v.this)
                for v in values
                if isinstance(v, exp.Literal) and v.is_string and v.this and "%" not in v.this and "_" not in v.this
            )
    return out


def unmatched_values(con: sqlite3.Connection, sql: str) -> str | None:
    """Why an empty result of ``sql`` may be a misspelt value (module docstring), or None:
    ``"no row has customers.segment = 'enterprize'; it holds 'Enterprise', …"``. ``con`` must
    allow reading the tables ``sql`` names; bounded to 2 s. Never raises."""
    tree = parse_tree(sql)
    if tree is None:
        return None
    pairs = _compared_values(tree)
    if not pairs:
        return None
    used = names_used(sql)
    try:
        with Deadline(con, 2.0):
            tables = [t for t in list_tables(con) if t.lower() in used]
            for qualifier, column, value in pairs:
                # a qualified column is that table's ("o.name" of "orders o", not customers.name);
                # a qualifier naming no table (a CTE, a subquery's alias) leaves every table
                for table in [t for t in tables if t.lower() == qualifier] or tables:
                    names = [c[0] for c in table_columns(con, table) if c[0].lower() == column.lower()]
                    if not names:
                        continue
                    col, tab = quote_name(names[0]), quote_name(table)
                    if con.execute(f"SELECT 1 FROM {tab} WHERE {col} = ? LIMIT 1", (value,)).fetchone():
                        break  # the value exists: the emptiness is another condition's
                    rows = con.execute(
                        f"SELECT DISTINCT {col} FROM {tab} WHERE typeof({col}) = 'text' LIMIT {VALUE_SAMPLE}"
                    ).fetchall()
                    held = [str(r[0]) for r in rows]
                    folded = {h.casefold().strip(): h for h in held}
                    near = [folded[value.casefold().strip()]] if value.casefold().strip() in folded else []
                    near = near or difflib.get_close_matches(value, held, n=3, cutoff=0.8)
                    if near:
                        shown = ", ".join(repr(h) for h in near)
                        return f"no row has {table}.{names[0]} = {value!r}, while rows hold {shown}"
                    if other := _held_elsewhere(con, tables, (table, names[0]), value):
                        return f"no row has {table}.{names[0]} = {value!r}, while {other}"
                    break
    except sqlite3.Error:
        return None
    return None


def _held_elsewhere(con: sqlite3.Connection, tables: list[str], compared: tuple[str, str], value: str) -> str | None:
    """Which other text columns of ``tables`` hold ``value`` (any case): ``"agents.team holds
    'billing'"``, or None. A value compared with the wrong column (``full_name = 'billing'`` for
    "the billing team", measured on the embedded model) is no answer of none: the rows hold it
    under another column. At most 3 columns named."""
    found: list[str] = []
    for table in tables:
        for name, declared, *_ in table_columns(con, table):
            if (table, name) == compared or "int" in str(declared).lower() or "real" in str(declared).lower():
                continue
            col, tab = quote_name(name), quote_name(table)
            row = con.execute(f"SELECT {col} FROM {tab} WHERE {col} = ? COLLATE NOCASE LIMIT 1", (value,)).fetchone()
            if row:
                found.append(f"{table}.{name} holds {row[0]!r}")
                if len(found) == 3:
                    return "; ".join(found)
    return "; ".join(found) or None


def unmatched_joins(con: sqlite3.Connection, sql: str) -> str | None:
    """A join condition of ``sql`` that no pair of rows meets although both tables have rows,
    with what each side holds: ``"the join p.product_id = sl.product matches no rows
    (products.product_id holds 1, 2, 3; sales_lines.product holds 'Laptop Pro 14', …)"``, or
    None. An equality of two columns that never holds is a join on the wrong columns (measured:
    the embedded model joined a product's id to its name and answered "no data"). Bounded to
    2 s; never raises."""
    from sqlglot import exp

    tree = parse_tree(sql)
    if tree is None:
        return None
    aliases = {t.alias_or_name.lower(): t.name for t in tree.find_all(exp.Table)}
    real = {t.lower(): t for t in list_tables(con)} if aliases else {}
    try:
        with Deadline(con, 2.0):
            for join in tree.find_all(exp.Join):
                on = join.args.get("on")
                for eq in on.find_all(exp.EQ) if on is not None else []:
                    left, right = eq.this, eq.expression
                    if not (isinstance(left, exp.Column) and isinstance(right, exp.Column)):
                        continue
                    sides = []
                    for column in (left, right):
                        table = real.get(aliases.get(column.table.lower(), column.table).lower())
                        if table is None:
                            break
                        sides.append((table, column.name))
                    if len(sides) != 2 or sides[0][0] == sides[1][0]:
                        continue
                    (ta, ca), (tb, cb) = sides
                    qa, qb = f"{quote_name(ta)}.{quote_name(ca)}", f"{quote_name(tb)}.{quote_name(cb)}"
                    hit = con.execute(
                        f"SELECT 1 FROM {quote_name(ta)} JOIN {quote_name(tb)} ON {qa} = {qb} LIMIT 1"
                    ).fetchone()
                    if hit:
                        continue
                    held = []
                    for t, c in sides:
                        vals = con.execute(
                            f"SELECT DISTINCT {quote_name(c)} FROM {quote_name(t)} WHERE {quote_name(c)} IS NOT NULL LIMIT 3"
                        ).fetchall()
                        if not vals:
                            break  # an empty table: nothing to match, no wrong join
                        held.append(f"{t}.{c} holds " + ", ".join(repr(v[0]) for v in vals) + ", …")
                    if len(held) == 2:
                        return f"the join {left.sql()} = {right.sql()} matches no rows ({'; '.join(held)})"
    except sqlite3.Error:
        return None
    return None


def other_conditions(sql: str, ranges: list[dict[str, Any]]) -> list[str]:
    """The comparisons in the WHERE clauses of ``sql`` that name no date column of ``ranges``
    (``["region = 'North America'"]``), as SQL text, at most 5. Never raises."""
    from sqlglot import exp

    tree = parse_tree(sql)
    if tree is None:
        return []
    dates = {str(r["column"]).rsplit(".", 1)[-1].strip('"').lower() for r in ranges}
    kinds = (exp.EQ, exp.NEQ, exp.In, exp.Like, exp.GT, exp.GTE, exp.LT, exp.LTE, exp.Is)
    out: list[str] = []
    for where in tree.find_all(exp.Where):
        for node in where.find_all(*kinds):
            names = {c.name.lower() for c in node.find_all(exp.Column)}
            if names and not names & dates and (text := node.sql()) not in out:
                out.append(text)
    return out[:5]


# an ISO-shaped date or month in a string the WHERE compares ('2026-11', '2026-11-%', '2026-11-01')
_ISO_LITERAL = re.compile(r"^\s*%?(19|20)\d\d-(0[1-9]|1[0-2])")
_DATE_FUNCTIONS = frozenset({"strftime", "date", "datetime", "julianday", "unixepoch", "timestamp"})


def foreign_date_text(con: sqlite3.Connection, sql: str) -> str | None:
    """Why an empty result of ``sql`` may be a date written otherwise than ISO, or None:
    ``"orders.placed holds dates written like '05.11.2026', '17.10.2026' (not YYYY-MM-DD) …"``.
    A WHERE clause that applies SQLite's date functions to such a column (NULL for every row) or
    compares it with an ISO date or month matches no row whatever the data, so the read is no
    evidence of none: a database from a spreadsheet or another locale stores '05.11.2026' or
    '11/05/2026' (``dates.period_kind`` "month-text"). ``con`` must allow reading the tables
    ``sql`` names and the schema pragmas; bounded to 2 s. Never raises."""
    from sqlglot import exp

    from tools.builtin.database.dates import period_kind

    tree = parse_tree(sql)
    if tree is None:
        return None
    used = names_used(sql)
    compared: set[str] = set()
    for where in tree.find_all(exp.Where):
        for col in where.find_all(exp.Column):
            parent = col.parent
            in_function = any(
                isinstance(a, exp.Func) and (a.sql_name().lower() in _DATE_FUNCTIONS or isinstance(a, exp.TimeToStr))
                for a in _ancestors(col, where)
            )
            literals = [n for n in (parent.find_all(exp.Literal) if parent is not None else []) if n.is_string]
            if in_function or any(_ISO_LITERAL.match(lit.this) for lit in literals):
                compared.add(col.name.lower())
    if not compared:
        return None
    try:
        with Deadline(con, 2.0):
            for table in list_tables(con):
                if table.lower() not in used:
                    continue
                for name, declared, *_ in table_columns(con, table):
                    if name.lower() not in compared or period_kind(con, table, name, declared) != "month-text":
                        continue
                    q, tab = quote_name(name), quote_name(table)
                    shown = [
                        str(r[0]) for r in con.execute(f"SELECT DISTINCT {q} FROM {tab} WHERE {q} IS NOT NULL LIMIT 3")
                    ]
                    listed = ", ".join(repr(v) for v in shown)
                    return (
                        f"{table}.{name} holds dates written like {listed} (not YYYY-MM-DD): SQLite's date "
                        "functions give NULL on them and a comparison with an ISO date or month matches none"
                    )
    except sqlite3.Error:
        return None
    return None


def _ancestors(node: Any, stop: Any) -> list[Any]:
    out = []
    while node is not None and node is not stop:
        node = node.parent
        out.append(node)
    return out


def unmatched_memberships(con: sqlite3.Connection, sql: str) -> str | None:
    """A ``col IN (SELECT other FROM t …)`` of ``sql`` whose column never holds any value of
    ``t.other`` (whatever the subquery's own conditions), with what each side holds:
    ``"ticket_replies.author never holds a value of agents.agent_id (author holds 'agent',
    'customer'; agent_id holds 1, 2, 3)"``, or None. Measured (Qwen2.5-Coder-1.5B, "characters
    agents wrote"): ``author IN (SELECT agent_id FROM agents)`` — a text role compared with ids —
    found nothing and "… is None" was answered. Bounded to 2 s; never raises."""
    from sqlglot import exp

    tree = parse_tree(sql)
    if tree is None:
        return None
    try:
        with Deadline(con, 2.0):
            real = {t.lower(): t for t in list_tables(con)}
            for where, aliases in where_scopes(tree):
                for node in where.find_all(exp.In):
                    sub, col = node.args.get("query"), node.this
                    inner = sub.this if isinstance(sub, exp.Subquery) else sub
                    if not isinstance(col, exp.Column) or not isinstance(inner, exp.Select):
                        continue
                    picked, sources = inner.expressions, list(inner.find_all(exp.Table))
                    if len(picked) != 1 or not isinstance(picked[0], exp.Column) or len(sources) != 1:
                        continue
                    owners = {aliases.get(col.table.lower())} if col.table else set(aliases.values())
                    outer = real.get(next(iter(owners)) or "") if len(owners) == 1 else None
                    other = real.get(sources[0].name.lower())
                    if outer is None or other is None:
                        continue
                    a, b = quote_name(col.name), quote_name(picked[0].name)
                    ta, tb = quote_name(outer), quote_name(other)
                    if not con.execute(f"SELECT 1 FROM {ta} WHERE {a} IS NOT NULL LIMIT 1").fetchone():
                        continue  # no values on that side: nothing to compare
                    if con.execute(f"SELECT 1 FROM {ta} WHERE {a} IN (SELECT {b} FROM {tb}) LIMIT 1").fetchone():
                        continue
                    held_a = [repr(r[0]) for r in con.execute(f"SELECT DISTINCT {a} FROM {ta} LIMIT 3")]
                    held_b = [repr(r[0]) for r in con.execute(f"SELECT DISTINCT {b} FROM {tb} LIMIT 3")]
                    return (
                        f"{outer}.{col.name} never holds a value of {other}.{picked[0].name} ({col.name} holds "
                        f"{', '.join(held_a)}; {picked[0].name} holds {', '.join(held_b)})"
                    )
    except sqlite3.Error:
        return None
    return None
