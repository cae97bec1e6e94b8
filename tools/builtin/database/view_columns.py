"""A view's computed column combined again with a column it is already computed from: the
query applies that column twice.

Measured (Qwen2.5-Coder-1.5B, Northwind held out): "total sales in May 2018, after discounts" →
``SUM(ExtendedPrice * (1 - Discount)) FROM Invoices``, where the view defines ``ExtendedPrice``
as ``UnitPrice*Quantity*(1-Discount)`` — the discount taken twice; on the generated sales
database ``SUM(revenue * quantity) FROM sales_lines`` (``revenue`` is ``quantity *
unit_price``) is its sibling. The figure is right for the SQL and wrong for the question, so
only the definitions can tell. :func:`reapplied_columns` reads them from ``sqlite_master``
(generic: no view or column name is expected).
"""

from __future__ import annotations

import sqlite3

from tools.builtin.database.connection import Deadline
from tools.builtin.database.statement import editable_tree, parse_tree, sqlite_dialect

#: Notes returned at most.
MAX_NOTES = 3


def _computed(definition: str) -> dict[str, tuple[str, set[str]]]:
    """``{lower-cased output column: (its expression as SQL, lower-cased columns it uses)}`` of
    a view's computed (not bare) columns; {} when the definition does not parse."""
    from sqlglot import exp

    tree = parse_tree(definition)
    select = tree.expression if isinstance(tree, exp.Create) else None
    if not isinstance(select, exp.Select):
        return {}
    out: dict[str, tuple[str, set[str]]] = {}
    for e in select.expressions:
        if isinstance(e, exp.Alias) and not isinstance(e.this, exp.Column):
            used = {c.name.lower() for c in e.this.find_all(exp.Column)}
            if used:
                out[e.alias.lower()] = (e.this.sql(dialect=sqlite_dialect()), used)
    return out


def reapplied_columns(con: sqlite3.Connection, sql: str) -> list[str]:
    """One sentence per selected expression of ``sql`` that combines a view's computed column
    with a column that column is already computed from (``Invoices.ExtendedPrice is
    ((UnitPrice * Quantity * (1 - Discount)) / 100) * 100: Discount is already applied in it``);
    [] when none or when it cannot tell (unparsable SQL, over 2 s). At most MAX_NOTES. Never
    raises."""
    from sqlglot import exp

    tree = editable_tree(sql)
    if tree is None:
        return []
    try:
        with Deadline(con, 2.0):
            views = {
                str(name).lower(): (str(name), _computed(str(definition)))
                for name, definition in con.execute("SELECT name, sql FROM sqlite_master WHERE type = 'view'")
                if definition
            }
    except sqlite3.Error:
        return []
    if not views:
        return []
    out: list[str] = []
    for select in tree.find_all(exp.Select):
        used = {t.alias_or_name.lower(): t.name.lower() for t in select.find_all(exp.Table)}
        in_views = [views[v] for v in dict.fromkeys(used.values()) if v in views]
        if not in_views:
            continue
        for expression in select.expressions:
            columns = [c for c in expression.find_all(exp.Column) if c.find_ancestor(exp.Select) is select]
            names = {c.name.lower(): c.name for c in columns}  # as the query writes them
            for column in columns:
                qualifier = used.get(column.table.lower()) if column.table else None
                for view, computed in in_views:
                    if qualifier and qualifier != view.lower():
                        continue
                    definition = computed.get(column.name.lower())
                    again = sorted(
                        names[n]
                        for n in (definition[1] if definition else set()) & names.keys()
                        if n != column.name.lower()
                    )
                    if definition and again:
                        note = (
                            f"{view}.{column.name} is {definition[0]}: "
                            f"{', '.join(again)} {'are' if len(again) > 1 else 'is'} already applied in it"
                        )
                        if note not in out:
                            out.append(note)
    return out[:MAX_NOTES]
