"""A column the query names that its table does not have, where exactly one column of that
table is the one meant: the query is run with that column, and the result says so.

Measured (Qwen2.5-Coder-1.5B on Chinook, "Which 5 countries brought in the most invoice revenue
in 2011?"): ``T2.CountryName`` of ``Customer AS T2`` was refused with "Did you mean Country?"
and the model wrote ``CountryName`` again three times, until the stall cap stopped the run. A
read-only query has no effect to undo, so the tool mends the one name it can mend with
certainty and tells the model what it ran (``repaired`` in the result, and its ``note``).

The match is strict: a word of the unknown name that is a column of that table, its other
words only fillers or the table's own name (``CountryName`` → ``Country``; ``customer_name`` of
``customers`` → ``name``; not ``CountryName`` of ``customers`` → ``name``), or a column at least 85 %
similar (``Totl`` → ``Total``), or the one column that is the name with a qualifier added
(``Country`` of Chinook's ``Invoice`` → ``BillingCountry``: measured, the model wrote ``Country``
three times after "Did you mean BillingCountry?"); two or more candidates, or a name whose table the query does
not say, are not guessed — the error with its "Did you mean …?" stands.
"""

from __future__ import annotations

import difflib
import re
import sqlite3
from typing import Any

from tools.builtin.database.schema import list_tables, table_columns
from tools.builtin.database.statement import editable_tree, quote_name, sqlite_dialect, where_scopes

#: Columns of one query mended at most (each mend reruns the query once).
MAX_REPAIRS = 3

_UNKNOWN_COLUMN = re.compile(r"no such column: (\S+)")
# words a column name adds to say its unit: the figure is not the one the bare name means
_UNITS = frozenset(
    {"cents", "cent", "pct", "percent", "ms", "sec", "secs", "seconds", "minutes", "mins", "hours", "days"}
    | {"kb", "mb", "gb", "bytes", "usd", "eur", "gbp", "kg", "km", "pence", "units", "thousands"}
)
# words a column name adds without meaning another thing ("CountryName", "region_code")
_FILLERS = frozenset({"name", "id", "code", "no", "num", "number", "key", "value", "val", "txt", "text"})


def _words(name: str) -> list[str]:
    """``CountryName`` → ["country", "name"]; ``customer_name`` → ["customer", "name"]."""
    spaced = re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", name)
    return [w.lower() for w in re.split(r"[_\W]+", spaced) if w]


def _candidate(name: str, columns: list[str], table: str, other_tables: set[str]) -> str | None:
    """The one column of ``columns`` that ``name`` means, or None (module docstring). A name
    with a word naming another table (``product_name`` in ``customers``, with a ``products``
    table) means that table's column: not guessed."""
    lowered = {c.lower(): c for c in columns}
    if name.lower() in lowered:
        return None
    all_words = _words(name)
    if any(w in other_tables or f"{w}s" in other_tables for w in all_words):
        return None
    words = [w for w in all_words if w in lowered]
    if len(set(words)) == 1:
        # every other word only repeats the table ("customer_name" of customers) or is a filler
        # ("CountryName" → Country); "CountryName" of customers is a country, not a customer's name
        rest = [w for w in all_words if w != words[0]]
        if all(w in _FILLERS or table in (w, f"{w}s") or w == table.rstrip("s") for w in rest):
            return lowered[words[0]]
        return None
    if words:
        return None  # two of its words are columns: not guessed
    close = difflib.get_close_matches(name.lower(), list(lowered), n=2, cutoff=0.85)
    if close:
        return lowered[close[0]] if len(close) == 1 and _misspelt(all_words, _words(lowered[close[0]])) else None
    return _qualified_column(all_words, columns, other_tables)


def _misspelt(words: list[str], column_words: list[str]) -> bool:
    """Whether a name of ``words`` is the column of ``column_words`` misspelt: word for word,
    each word the same or a letter or two off (``quantty`` → ``quantity``), never another word
    (measured: ``BillingDate`` of Chinook's Invoice, 87 % like ``BillingState``, ran as that text
    column and found nothing for December 2011)."""
    return len(words) == len(column_words) and all(
        a == b or difflib.SequenceMatcher(None, a, b).ratio() >= 0.8 for a, b in zip(words, column_words)
    )


def _qualified_column(words: list[str], columns: list[str], other_tables: set[str]) -> str | None:
    """The one column whose name is ``words`` with one qualifier word added (``Country`` of Chinook's
    ``Invoice`` → ``BillingCountry``; ``date`` → ``order_date``), or None. The added word must be
    neither a filler (``region`` → ``region_id`` is a key, not the region), a unit
    (``amount`` → ``amount_cents`` is a hundred times the figure asked for) nor another table's
    name (``name`` → ``product_name`` is another thing's name)."""
    wanted = set(words)
    found = []
    for column in columns:
        column_words = _words(column)
        extra = [w for w in column_words if w not in wanted]
        if not wanted <= set(column_words) or len(extra) != 1:
            continue  # one qualifier: "net_amount_cents" for "amount" is another figure
        w = extra[0]
        if w in _FILLERS or w in _UNITS or w in other_tables or f"{w}s" in other_tables:
            continue
        found.append(column)
    return found[0] if len(found) == 1 else None


def repair_unknown_column(con: sqlite3.Connection, sql: str, error: str) -> tuple[str, str] | None:
    """``(sql with the column mended, what was mended)`` for SQLite's ``"no such column: X"``
    ``error`` on ``sql``, or None when no single column is certainly meant. ``con`` must allow
    the schema pragmas. Never raises."""
    from sqlglot import exp

    m = _UNKNOWN_COLUMN.search(error)
    tree = editable_tree(sql)
    if m is None or tree is None:
        return None
    qualifier, _, bare = m[1].rpartition(".")
    try:
        real = {t.lower(): t for t in list_tables(con)}
        aliases = {t.alias_or_name.lower(): t.name.lower() for t in tree.find_all(exp.Table)}
        if qualifier:
            table = real.get(aliases.get(qualifier.lower(), qualifier.lower()))
            if table is None:
                return None  # a subquery's or CTE's alias: its columns are not a table's
            columns = [c[0] for c in table_columns(con, table)]
        else:
            used = [real[t] for t in set(aliases.values()) if t in real]
            if len(used) != 1:
                return None  # which table an unqualified name belongs to is not certain
            table, columns = used[0], [c[0] for c in table_columns(con, used[0])]
    except sqlite3.Error:
        return None
    meant = _candidate(bare, columns, table.lower(), {t for t in real if t != table.lower()})
    if meant is None:
        return None
    hits: list[Any] = [
        c for c in tree.find_all(exp.Column) if c.name.lower() == bare.lower() and c.table.lower() == qualifier.lower()
    ]
    if not hits:
        return None
    for col in hits:
        col.set("this", exp.to_identifier(meant))
    told = f"{qualifier + '.' if qualifier else ''}{bare}"
    return tree.sql(dialect=sqlite_dialect()), f"{told} → {table}.{meant}"


def _texts(rows: list[tuple[Any, ...]]) -> list[str]:
    return [r[0] for r in rows if isinstance(r[0], str) and r[0].strip() and not r[0].strip()[:1].isdigit()]


def repair_join(con: sqlite3.Connection, sql: str) -> tuple[str, str] | None:
    """``(sql with one join column replaced, what was replaced)`` when a join condition of ``sql``
    meets no pair of rows and the text values one side holds are all held by exactly one column
    of the other side's table (``p.product_id = sl.product``, where ``sl.product`` holds product
    names and ``products.name`` holds them: ``p.name = sl.product``), or None. Text values only:
    numbers shared by chance (ids, quantities) are no evidence. ``con`` must allow reading the
    tables and the schema pragmas. Never raises."""
    from sqlglot import exp

    tree = editable_tree(sql)
    if tree is None:
        return None
    try:
        real = {t.lower(): t for t in list_tables(con)}
        aliases = {t.alias_or_name.lower(): t.name.lower() for t in tree.find_all(exp.Table)}
        for join in tree.find_all(exp.Join):
            on = join.args.get("on")
            for eq in on.find_all(exp.EQ) if on is not None else []:
                sides = [eq.this, eq.expression]
                if not all(isinstance(c, exp.Column) and c.table for c in sides):
                    continue
                named = [aliases.get(c.table.lower(), c.table.lower()) for c in sides]
                if not all(n in real for n in named) or named[0] == named[1]:
                    continue
                tables = [real[n] for n in named]
                left, right = (f"{quote_name(t)}.{quote_name(c.name)}" for t, c in zip(tables, sides))
                tl, tr = (quote_name(t) for t in tables)
                if con.execute(f"SELECT 1 FROM {tl} JOIN {tr} ON {left} = {right} LIMIT 1").fetchone():
                    continue
                found: list[tuple[int, str]] = []
                for fixed in (0, 1):
                    other = 1 - fixed
                    col, tab = quote_name(sides[fixed].name), quote_name(tables[fixed])
                    sample = _texts(
                        con.execute(f"SELECT DISTINCT {col} FROM {tab} WHERE {col} IS NOT NULL LIMIT 3").fetchall()
                    )
                    if len(sample) < 2:
                        continue
                    marks = ", ".join("?" * len(sample))
                    for name, *_ in table_columns(con, tables[other]):
                        qn, qt = quote_name(name), quote_name(tables[other])
                        n = con.execute(
                            f"SELECT COUNT(DISTINCT {qn}) FROM {qt} WHERE {qn} IN ({marks})", sample
                        ).fetchone()[0]
                        if n == len(sample):
                            found.append((other, name))
                if len(found) != 1:
                    continue
                which, name = found[0]
                was = eq.sql()
                sides[which].set("this", exp.to_identifier(name))
                return tree.sql(dialect=sqlite_dialect()), f"the join {was} (no row met it) → {eq.sql()}"
    except sqlite3.Error:
        return None
    return None


def repair_compared_column(con: sqlite3.Connection, sql: str) -> tuple[str, str] | None:
    """``(sql with one compared column replaced, what was replaced)`` when a WHERE clause of
    ``sql`` compares a column with a text no row of its table holds there, and exactly one
    other text column of that same table holds it (any case; the rows' spelling is used):
    ``full_name = 'billing'`` of ``agents``, where ``agents.team`` holds ``'billing'`` →
    ``team = 'billing'``, or None. Measured (Qwen2.5-Coder-1.5B, "the average CSAT of tickets
    handled by the billing team"): the note "agents.team holds 'billing'" was read and the same
    SQL sent again, then "No data found". A column of another table holding the text is not
    this table's attribute: not guessed. ``con`` must allow reading the tables and the schema
    pragmas; bounded to 2 s. Never raises."""
    from sqlglot import exp

    from tools.builtin.database.connection import Deadline

    tree = editable_tree(sql)
    if tree is None:
        return None
    try:
        with Deadline(con, 2.0):
            real = {t.lower(): t for t in list_tables(con)}
            for where, aliases in where_scopes(tree):
                for eq in where.find_all(exp.EQ):
                    col, lit = eq.this, eq.expression
                    if isinstance(lit, exp.Column) and isinstance(col, exp.Literal):
                        col, lit = lit, col
                    if not (
                        isinstance(col, exp.Column) and isinstance(lit, exp.Literal) and lit.is_string and lit.this
                    ):
                        continue
                    if col.table:
                        named = aliases.get(col.table.lower())
                    else:
                        named = next(iter(set(aliases.values()))) if len(set(aliases.values())) == 1 else None
                    table = real.get(named or "")
                    if table is None:
                        continue
                    columns = table_columns(con, table)
                    if not any(c[0].lower() == col.name.lower() for c in columns):
                        continue
                    tab = quote_name(table)
                    if con.execute(
                        f"SELECT 1 FROM {tab} WHERE {quote_name(col.name)} = ? LIMIT 1", (lit.this,)
                    ).fetchone():
                        continue  # the value is there: the emptiness is another condition's
                    holders: list[tuple[str, str]] = []
                    for name, declared, *_ in columns:
                        if name.lower() == col.name.lower() or re.search(r"(?i)int|real|floa|doub|num|dec", declared):
                            continue
                        row = con.execute(
                            f"SELECT {quote_name(name)} FROM {tab} WHERE {quote_name(name)} = ? COLLATE NOCASE LIMIT 1",
                            (lit.this,),
                        ).fetchone()
                        if row:
                            holders.append((name, str(row[0])))
                    if len(holders) != 1:
                        continue
                    name, spelled = holders[0]
                    was = eq.sql(dialect=sqlite_dialect())
                    col.set("this", exp.to_identifier(name))
                    lit.replace(exp.Literal.string(spelled))
                    return (
                        tree.sql(dialect=sqlite_dialect()),
                        f"{was} (no {table} row holds it there) → {eq.sql(dialect=sqlite_dialect())}",
                    )
    except sqlite3.Error:
        return None
    return None


def repair_scalar_subquery(con: sqlite3.Connection, sql: str) -> tuple[str, str] | None:
    """``(sql with x = (SELECT …) as x IN (SELECT …), what was replaced)`` when such a
    subquery returns more than one row, or None. SQLite compares with the subquery's first row
    alone and says nothing, so ``agent_id = (SELECT agent_id FROM agents WHERE team = 'billing')``
    averages one agent's tickets of a team of four: a figure, wrong, that no check can tell from
    a right one. A correlated subquery (it names the outer query's columns) cannot run alone and
    is left as written. ``con`` must allow reading; bounded to 2 s. Never raises."""
    from sqlglot import exp

    from tools.builtin.database.connection import Deadline

    tree = editable_tree(sql)
    if tree is None:
        return None
    changed: list[str] = []
    try:
        with Deadline(con, 2.0):
            for eq in list(tree.find_all(exp.EQ)):
                sub, other = eq.expression, eq.this
                if isinstance(other, exp.Subquery):
                    sub, other = other, sub
                if not isinstance(sub, exp.Subquery) or isinstance(other, exp.Subquery):
                    continue
                inner = sub.this.sql(dialect=sqlite_dialect())
                try:
                    rows = con.execute(f"SELECT 1 FROM ({inner}) LIMIT 2").fetchall()
                except sqlite3.Error:
                    continue  # correlated, or not a plain SELECT: as written
                if len(rows) < 2:
                    continue
                was = eq.sql(dialect=sqlite_dialect())
                eq.replace(exp.In(this=other.copy(), query=sub.copy()))
                changed.append(f"{was[:120]} (its subquery returns several rows; = compares with the first only) → IN")
    except sqlite3.Error:
        return None
    if not changed:
        return None
    return tree.sql(dialect=sqlite_dialect()), "; ".join(changed)
