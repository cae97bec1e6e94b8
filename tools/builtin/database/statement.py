"""One SQL statement read and checked: sqlglot's SQLite tokenizer tells strings, quoted names
and comments from code (:class:`SqlScan`), :func:`check_select` admits one SELECT / WITH / VALUES
statement, and names are quoted back as SQL (:func:`identifier`) or in error messages
(:func:`quote_back`). Reading is linear in the SQL's length and bounded by MAX_SQL_CHARS."""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

from tools.database_setting import DatabaseError
from tools.results import cut_text

if TYPE_CHECKING:
    from collections.abc import Iterator

    from sqlglot import exp
    from sqlglot.dialects.dialect import Dialect
    from sqlglot.tokenizer_core import Token

#: Characters of a name or SQL fragment quoted back in an error message at most.
MAX_ECHO_CHARS = 200


#: Characters of SQL read at most: check_select refuses longer SQL, so reading one stays in tens
#: of milliseconds (the tools' own schemas cap ``sql`` at 4,000 characters).
MAX_SQL_CHARS = 100_000

# Every SQLite keyword (sqlite.org/lang_keywords.html). An unquoted keyword is not a name the SQL
# uses (a table called "order" is named only when quoted), and a name that is one is quoted in
# hints.
_KEYWORDS = frozenset(
    """ABORT ACTION ADD AFTER ALL ALTER ALWAYS ANALYZE AND AS ASC ATTACH AUTOINCREMENT BEFORE BEGIN
    BETWEEN BY CASCADE CASE CAST CHECK COLLATE COLUMN COMMIT CONFLICT CONSTRAINT CREATE CROSS CURRENT
    CURRENT_DATE CURRENT_TIME CURRENT_TIMESTAMP DATABASE DEFAULT DEFERRABLE DEFERRED DELETE DESC
    DETACH DISTINCT DO DROP EACH ELSE END ESCAPE EXCEPT EXCLUDE EXCLUSIVE EXISTS EXPLAIN FAIL FILTER
    FIRST FOLLOWING FOR FOREIGN FROM FULL GENERATED GLOB GROUP GROUPS HAVING IF IGNORE IMMEDIATE IN
    INDEX INDEXED INITIALLY INNER INSERT INSTEAD INTERSECT INTO IS ISNULL JOIN KEY LAST LEFT LIKE
    LIMIT MATCH MATERIALIZED NATURAL NO NOT NOTHING NOTNULL NULL NULLS OF OFFSET ON OR ORDER OTHERS
    OUTER OVER PARTITION PLAN PRAGMA PRECEDING PRIMARY QUERY RAISE RANGE RECURSIVE REFERENCES REGEXP
    REINDEX RELEASE RENAME REPLACE RESTRICT RETURNING RIGHT ROLLBACK ROW ROWS SAVEPOINT SELECT SET
    TABLE TEMP TEMPORARY THEN TIES TO TRANSACTION TRIGGER UNBOUNDED UNION UNIQUE UPDATE USING VACUUM
    VALUES VIEW VIRTUAL WHEN WHERE WINDOW WITH WITHOUT""".split()
)
#: sqlglot token types of literals (their text is data, never code or a name).
_LITERAL_TOKENS = frozenset(
    {"STRING", "NATIONAL_STRING", "HEX_STRING", "BIT_STRING", "BYTE_STRING", "RAW_STRING"}
    | {"HEREDOC_STRING", "UNICODE_STRING", "NUMBER"}
)
_WORD_RE = re.compile(r"[\w$]+")
_BARE_NAME_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


@dataclass(frozen=True)
class SqlScan:
    """One read of an SQL text: its tokens (strings, quoted names and comments told apart by
    sqlglot's SQLite tokenizer), the ``(source, tokens)`` of each ``;``-separated statement that
    holds code, the lower-cased names its code uses (tables, columns, aliases; quoted or bare, not
    keywords nor function names), and ``code``: the tokens again with every string as ``''``,
    every quoted name as ``""`` and the comments left out."""

    tokens: tuple[Token, ...]
    statements: tuple[tuple[str, tuple[Token, ...]], ...]
    names: frozenset[str]
    code: str


@functools.cache
def sqlite_dialect() -> Dialect:
    # imported on first use: the worker process starts for every call (tools/executors/worker.py)
    # and describe_database never reads SQL
    from sqlglot.dialects.sqlite import SQLite

    return SQLite()


@functools.lru_cache(maxsize=4)
def read_sql(sql: str) -> SqlScan:
    """The :class:`SqlScan` of ``sql``, in time linear in its length. Raises DatabaseError when it
    is longer than MAX_SQL_CHARS or has an unterminated string, quoted name or ``/*`` comment.
    Cached: an error message reads the same SQL several times."""
    if len(sql) > MAX_SQL_CHARS:
        raise DatabaseError(
            f"the SQL is {len(sql):,} characters long, over the limit of {MAX_SQL_CHARS:,}; send one shorter SELECT"
        )
    from sqlglot.errors import TokenError

    try:
        tokens = tuple(sqlite_dialect().tokenize(sql))
    except TokenError:
        raise DatabaseError("the SQL has an unterminated string, quoted name or /* comment") from None
    statements: list[tuple[str, tuple[Token, ...]]] = []
    names: set[str] = set()
    code: list[str] = []
    start = 0
    current: list[Token] = []
    for i, tok in enumerate(tokens):
        kind = tok.token_type.name
        if kind == "SEMICOLON":
            if current:
                statements.append((sql[start : tok.start], tuple(current)))
            start, current = tok.end + 1, []
            code.append(";")
            continue
        current.append(tok)
        if kind in _LITERAL_TOKENS:
            code.append("''" if kind != "NUMBER" else tok.text)
        elif kind == "IDENTIFIER":
            names.add(tok.text.lower())
            code.append('""')
        else:
            code.append(sql[tok.start : tok.end + 1])
            called = i + 1 < len(tokens) and tokens[i + 1].token_type.name == "L_PAREN"
            if _WORD_RE.fullmatch(tok.text) and tok.text.upper() not in _KEYWORDS and not called:
                names.add(tok.text.lower())
    if current:
        statements.append((sql[start:], tuple(current)))
    return SqlScan(tokens, tuple(statements), frozenset(names), " ".join(code))


def read_sql_or_none(sql: str) -> SqlScan | None:
    """:func:`read_sql`, or None when ``sql`` cannot be read (hints then have nothing to say)."""
    try:
        return read_sql(sql)
    except DatabaseError:
        return None


def names_used(sql: str) -> frozenset[str]:
    """Lower-cased names the code of ``sql`` uses (see :class:`SqlScan`); empty when unreadable."""
    scan = read_sql_or_none(sql)
    return scan.names if scan else frozenset()


def identifier(name: str) -> str:
    """``name`` as SQL: bare when it is a plain ASCII word and not a keyword, else double-quoted."""
    return name if _BARE_NAME_RE.fullmatch(name) and name.upper() not in _KEYWORDS else quote_name(name)


def sql_ref(table: str, column: str) -> str:
    return f"{identifier(table)}.{identifier(column)}"


@functools.lru_cache(maxsize=4)
def parse_tree(sql: str) -> exp.Expr | None:
    """The syntax tree of ``sql`` (sqlglot, SQLite dialect), or None when it is not a single
    statement sqlglot can parse (too long, unterminated, a syntax it does not know, nesting too
    deep): the checks that need it then cannot tell. Cached and shared by every reader: never
    edit it (:func:`editable_tree` gives a copy to edit)."""
    scan = read_sql_or_none(sql)
    if scan is None or len(scan.statements) != 1:
        return None
    try:
        trees = sqlite_dialect().parser().parse(list(scan.statements[0][1]), sql)
    except Exception:  # noqa: BLE001 - ParseError, RecursionError on deep nesting, ...: cannot tell
        return None
    trees = [t for t in trees if t is not None]
    return trees[0] if len(trees) == 1 else None


def where_scopes(tree: exp.Expr) -> Iterator[tuple[exp.Expr, dict[str, str]]]:
    """Each WHERE clause of ``tree`` with the tables of its own SELECT: ``(where, {alias or
    name: table name})``, lower case (a subquery's WHERE sees its own FROM, not the outer one)."""
    from sqlglot import exp  # not at the top: `hermes --help` loads no SQL parser

    for where in tree.find_all(exp.Where):
        scope = where.find_ancestor(exp.Select)
        in_scope = [t for t in tree.find_all(exp.Table) if t.find_ancestor(exp.Select) is scope]
        yield where, {t.alias_or_name.lower(): t.name.lower() for t in in_scope}


def editable_tree(sql: str) -> exp.Expr | None:
    """A copy of :func:`parse_tree`'s tree of ``sql`` to edit (a repair rewrites a column), or
    None. Editing the cached tree itself made the same SQL sent again parse as the edited one:
    the repair found nothing left to mend and the second call failed where the first ran."""
    tree = parse_tree(sql)
    return tree.copy() if tree is not None else None


def quote_name(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def strip_bom(sql: str) -> str:
    """``sql`` without a leading byte-order mark (U+FEFF; text saved by some editors starts with
    one) and the white space around it: the tokenizer would read it as part of the first word."""
    return sql.strip().lstrip("\ufeff").strip()


def quote_back(text: str, limit: int = MAX_ECHO_CHARS) -> str:
    """What an error message quotes back of a name or SQL the caller gave: ``text`` itself, or
    its first ``limit`` characters with the project's one truncation mark
    (``tools.results.cut_text``) — a 99 kB name must not come back whole."""
    return text if len(text) <= limit else cut_text(text, limit)


def check_select(sql: str) -> str:
    """The statement to run (without a trailing ``;``) if ``sql`` is a single SELECT / WITH /
    VALUES statement of at most MAX_SQL_CHARS characters; raise DatabaseError with the reason
    otherwise. A ``;`` inside a string, a quoted name or a comment does not count as a second
    statement."""
    if not isinstance(sql, str):
        raise DatabaseError(
            f"sql must be a string holding one SELECT statement, got {type(sql).__name__}"
            + (" (send the SQL as text)" if isinstance(sql, (bytes, bytearray)) else "")
        )
    sql = strip_bom(sql)
    if not sql.strip():
        raise DatabaseError("sql is empty; send one SELECT statement")
    statements = read_sql(sql).statements
    if not statements:
        raise DatabaseError("sql holds only comments; send one SELECT statement")
    if len(statements) > 1:
        raise DatabaseError("only one statement is allowed (remove the extra ';' and what follows)")
    source, tokens = statements[0]
    first = tokens[0]
    word = first.text.upper() if first.token_type.name != "IDENTIFIER" and _WORD_RE.fullmatch(first.text) else ""
    if word not in ("SELECT", "WITH", "VALUES"):
        raise DatabaseError(
            f"only a single read-only SELECT (or WITH ... SELECT) statement is allowed, got "
            f"{quote_back(word) or source.strip()[:20]!r}; this tool cannot write, ATTACH or run PRAGMA"
        )
    return source.strip()
