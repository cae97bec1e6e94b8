"""Which period a query's figures cover: :func:`find_undated` tells whether any condition of the
SQL restricts a date or period column of the tables it uses (generate_report refuses figures that
cover all dates under a report that names one period)."""

from __future__ import annotations

import collections
import sqlite3
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

from tools.builtin.database.connection import Deadline
from tools.builtin.database.dates import period_kind
from tools.builtin.database.schema import MAX_COLUMNS, list_tables, table_columns
from tools.builtin.database.statement import parse_tree, read_sql_or_none, sql_ref, strip_bom

if TYPE_CHECKING:
    from sqlglot import exp


@dataclass(frozen=True)
class Undated:
    """The date and period columns (``table.column`` with its :func:`period_kind`) of the
    tables a query uses, none of which its conditions restrict; ``grouped``: the query groups
    by one of them (a row per month, still of every month)."""

    columns: list[tuple[str, str]]
    grouped: bool = False


def _in_scope(node: exp.Expr) -> Iterator[exp.Expr]:
    """``node`` and what is under it, not entering nested queries (their conditions count on
    their own) — iterative: a deep expression must not exhaust the stack."""
    from sqlglot import exp

    stack = [node]
    while stack:
        current = stack.pop()
        yield current
        stack.extend(child for child in current.iter_expressions() if not isinstance(child, (exp.Query, exp.Subquery)))


def _restricted_columns(tree: exp.Expr) -> list[exp.Column]:
    """The columns compared in a condition of ``tree``: in WHERE, HAVING, JOIN ... ON, CASE WHEN
    / IIF and FILTER (WHERE ...) conditions, an operand of a comparison (=, <>, <, >, <=, >=,
    IS, BETWEEN, IN, LIKE, GLOB, REGEXP, MATCH). ``x IS [NOT] NULL`` restricts no period."""
    from sqlglot import exp

    found: list[exp.Column] = []
    for node in tree.find_all(exp.Where, exp.Having, exp.Join, exp.If):
        cond = node.args.get("on") if isinstance(node, exp.Join) else node.this
        if not isinstance(cond, exp.Expr):
            continue
        for pred in _in_scope(cond):
            if not isinstance(pred, exp.Predicate) or (
                isinstance(pred, exp.Is) and isinstance(pred.expression, exp.Null)
            ):
                continue
            found.extend(c for c in _in_scope(pred) if isinstance(c, exp.Column))
    return found


class _Sources:
    """What the columns of one parsed query can refer to: the database's tables and views it
    uses (by name and alias; the names of its WITH tables shadow them), and the expressions
    behind its column aliases (``SELECT strftime('%Y-%m', d) AS month``, ``WITH m(month) AS``)."""

    def __init__(self, tree: exp.Expr, table_names: list[str]) -> None:
        from sqlglot import exp

        by_lower = {t.lower(): t for t in table_names}
        ctes = {cte.alias_or_name.lower() for cte in tree.find_all(exp.CTE)}
        self.tables: list[str] = []
        self.aliases: dict[str, set[str]] = collections.defaultdict(set)
        for t in tree.find_all(exp.Table):
            name = t.name.lower()
            if not name or name in ctes or name not in by_lower:
                continue
            real = by_lower[name]
            if real not in self.tables:
                self.tables.append(real)
            self.aliases[t.alias_or_name.lower()].add(real)
        #: lower-cased column names of each table used (set by the caller once read)
        self.known: dict[str, set[str]] = {}
        self.exprs: dict[str, list[exp.Expr]] = collections.defaultdict(list)
        for alias in tree.find_all(exp.Alias):
            self.exprs[alias.alias.lower()].append(alias.this)
        for cte in tree.find_all(exp.CTE):
            names = cte.args["alias"].columns if cte.args.get("alias") else []
            body = cte.this
            if names and isinstance(body, exp.Select):
                for ident, expr in zip(names, body.expressions):
                    self.exprs[ident.name.lower()].append(expr)

    def resolve(self, col: exp.Column, depth: int = 0) -> set[tuple[str, str]]:
        """``(table, lower-cased column name)`` pairs ``col`` may be (checked against the real
        columns by the caller): the table its qualifier names, else every table used; through
        an alias, the columns of the aliased expression (three levels deep at most)."""
        from sqlglot import exp

        name, qualifier = col.name.lower(), col.table.lower()
        if qualifier in self.aliases:
            return {(t, name) for t in self.aliases[qualifier]}
        out = {(t, name) for t in self.tables}
        if not qualifier and any(name in self.known.get(t, ()) for t in self.tables):
            return out  # as in SQLite, a column of the tables wins over an alias of that name
        if depth < 3:
            for expr in self.exprs.get(name, []):
                for inner in expr.find_all(exp.Column):
                    out |= self.resolve(inner, depth + 1)
        return out


#: Columns the period check samples at most per query (beside its 2 s deadline).
MAX_PERIOD_SAMPLES = 60


def find_undated(con: sqlite3.Connection, sql: str) -> Undated | None:
    """The period check of generate_report: :class:`Undated` when the tables and views ``sql``
    uses have date or period columns (:func:`period_kind`) and none of its conditions restricts
    one; None when it restricts one, its tables have none, or the check cannot tell (not one
    statement, over MAX_SQL_CHARS, a view is broken or endless: the query itself then reports
    what is wrong). SQL that sqlglot cannot parse but SQLite may run is checked by name only:
    a date or period column its code (not a string or comment) names counts as restricted.

    The rule: only a condition counts — a comparison in WHERE, JOIN ... ON, HAVING, CASE WHEN /
    IIF or FILTER (WHERE ...) with the column, or an expression of it (``strftime('%Y-%m',
    d)``, an alias of one), as an operand. Naming the column in the SELECT list, in GROUP BY or
    ORDER BY, in a comment or in a string does not: a ``GROUP BY strftime('%Y-%m', d)`` gives a
    row per month but of every month, so even for a period of several months it needs a WHERE
    (or HAVING) on the months wanted. ``d IS [NOT] NULL`` restricts nothing. A condition in any
    subquery counts (the check does not follow which rows reach the result). ``con`` must allow
    the schema pragmas; at most MAX_PERIOD_SAMPLES columns are sampled, within 2 s."""
    from sqlglot import exp

    if not isinstance(sql, str):
        return None
    sql = strip_bom(sql)
    scan = read_sql_or_none(sql)
    if scan is None or len(scan.statements) != 1:
        return None
    tree = parse_tree(sql)
    try:
        # sampling a view runs it: bounded, and a broken or endless view means "cannot tell"
        with Deadline(con, 2.0):
            table_names = list_tables(con)
            sources = _Sources(tree, table_names) if tree is not None else None
            # a syntax sqlglot does not parse (SQLite may still run it): the tables its code
            # names, and any of their date columns its code names counts as restricted
            used = sources.tables if sources else [t for t in table_names if t.lower() in scan.names]
            if not used:
                return None
            columns = {t: {c[0].lower(): c for c in table_columns(con, t)} for t in used}
            if sources:
                sources.known = {t: set(cols) for t, cols in columns.items()}
            budget = [MAX_PERIOD_SAMPLES]
            kinds: dict[tuple[str, str], str | None] = {}

            def kind_of(table: str, name: str) -> str | None:
                if (table, name) not in kinds:
                    col = columns[table].get(name)
                    if col is None or budget[0] <= 0:
                        kinds[(table, name)] = None
                    else:
                        budget[0] -= 1
                        kinds[(table, name)] = period_kind(con, table, col[0], col[1])
                return kinds[(table, name)]

            if tree is not None and sources is not None:
                restricted = [pair for col in _restricted_columns(tree) for pair in sorted(sources.resolve(col))]
            else:
                restricted = [(t, n) for t in used for n in columns[t] if n in scan.names]
            if any(kind_of(t, n) for t, n in restricted):
                return None
            undated = [
                (t, name, kind) for t in used for name in list(columns[t])[:MAX_COLUMNS] if (kind := kind_of(t, name))
            ]
            if not undated:
                return None
            grouped_by: set[tuple[str, str]] = set()
            if tree is not None and sources is not None:
                for group in tree.find_all(exp.Group):
                    for col in _grouped_columns(group):
                        grouped_by |= sources.resolve(col)
    except sqlite3.Error:
        return None
    return Undated(
        [(sql_ref(t, columns[t][n][0]), kind) for t, n, kind in undated],
        grouped=any((t, n) in grouped_by for t, n, _ in undated),
    )


def _grouped_columns(group: exp.Expr) -> Iterator[exp.Column]:
    """The columns a GROUP BY groups by, ``GROUP BY 1`` read as the first selected expression."""
    from sqlglot import exp

    select = group.parent
    for expr in group.expressions:
        grouped = expr
        if isinstance(expr, exp.Literal) and expr.is_int and isinstance(select, exp.Select):
            position = int(expr.this) - 1
            if 0 <= position < len(select.expressions):
                grouped = select.expressions[position]
        yield from grouped.find_all(exp.Column)


def undated_columns(con: sqlite3.Connection, sql: str) -> list[str]:
    """``table.column`` of every date or period column of the tables ``sql`` uses when no
    condition of ``sql`` restricts any of them — its figures then cover all dates, whatever
    period a report claims; ``[]`` when it restricts one, its tables have none, or the check
    cannot tell. See :func:`find_undated` for what counts as a restriction."""
    found = find_undated(con, sql)
    return [c for c, _ in found.columns] if found else []


def dated_conditions(con: sqlite3.Connection, sql: str) -> list[str]:
    """``table.column`` of each date or period column that a condition of ``sql`` compares
    with a value (``OrderDate LIKE '2018-05-%'``, ``strftime('%Y', d) = '2011'``; not a
    comparison of two columns, ``ShippedDate > RequiredDate``), each once — when there
    are two or more; [] otherwise or when it cannot tell (unparsable SQL, over 2 s). Measured
    (Qwen2.5-Coder-1.5B, Northwind held out): "total sales in May 2018" read ``WHERE OrderDate
    LIKE '2018-05-%' AND RequiredDate > '2018-05-31'`` — a second period nobody asked for, whose
    figure the answer then stated."""
    from sqlglot import exp

    tree = parse_tree(strip_bom(sql)) if isinstance(sql, str) else None
    if tree is None:
        return []
    try:
        with Deadline(con, 2.0):
            sources = _Sources(tree, list_tables(con))
            columns = {t: {c[0].lower(): c for c in table_columns(con, t)} for t in sources.tables}
            sources.known = {t: set(cols) for t, cols in columns.items()}
            found: list[str] = []
            for node in tree.find_all(exp.Where, exp.Having):
                for pred in _in_scope(node.this):
                    if not isinstance(pred, exp.Predicate) or isinstance(pred, (exp.And, exp.Or)):
                        continue
                    used = {c.name.lower() for c in _in_scope(pred) if isinstance(c, exp.Column)}
                    if len(used) != 1 or isinstance(pred, exp.Is):
                        continue  # two columns compared, or IS [NOT] NULL: no value
                    col = next(c for c in _in_scope(pred) if isinstance(c, exp.Column))
                    for table, name in sorted(sources.resolve(col)):
                        held = columns.get(table, {}).get(name)
                        if held and period_kind(con, table, held[0], held[1]):
                            ref = sql_ref(table, held[0])
                            if ref not in found:
                                found.append(ref)
                            break
    except sqlite3.Error:
        return []
    return found if len(found) >= 2 else []


def restrict_to(sql: str, column: str, condition: str) -> str | None:
    """``sql`` with ``condition`` (SQL over ``column``, a ``table.column`` reference as
    :class:`Undated` gives it) ANDed to its top-level WHERE, the table named as the query names
    it (its alias); None when that cannot be done plainly: not one SELECT (a UNION), or the
    table is not among the top-level SELECT's own sources (only inside a subquery)."""
    import sqlglot
    from sqlglot import exp

    from tools.builtin.database.statement import editable_tree, sqlite_dialect

    tree = editable_tree(sql)
    try:
        ref = sqlglot.parse_one(column, read=sqlite_dialect())
        cond = sqlglot.parse_one(condition, read=sqlite_dialect())
    except sqlglot.errors.ParseError:
        return None
    if not isinstance(tree, exp.Select) or not isinstance(ref, exp.Column) or not ref.table:
        return None
    sources = [t for t in tree.find_all(exp.Table) if t.find_ancestor(exp.Select) is tree]
    source = next((t for t in sources if t.name.lower() == ref.table.lower()), None)
    if source is None:
        return None
    for col in cond.find_all(exp.Column):
        if col.name.lower() == ref.name.lower() and col.table.lower() == ref.table.lower():
            col.set("table", exp.to_identifier(source.alias_or_name))
    return tree.where(cond, copy=False).sql(dialect=sqlite_dialect())
