"""Questions a user writes about their own SQLite database, for the ``data`` suite
(``python -m evals data --database PATH --questions FILE``): the file's loading and checks, its
placeholders filled from that database, and the truths computed on it. Pure: no graph, no model.

**The file** (JSON, or YAML when its name ends in ``.yaml``/``.yml``) is either a list of
questions or a mapping::

    {"date_column": "Orders.OrderDate",          # optional: dates the data (see below)
     "about": "free text: where the database comes from, its licence",   # optional, ignored
     "questions": [
       {"id": "customers-germany", "category": "count",
        "prompt": "How many customers do we have in Germany?",
        "sql": "SELECT COUNT(*) FROM Customers WHERE Country = 'Germany'"},
       {"id": "top-products", "category": "ranking", "expect": "names", "top": 3,
        "prompt": "Which 3 products sold the most units in {latest_year}?",
        "sql": "SELECT ProductName, SUM(Quantity) FROM ... GROUP BY 1 ORDER BY 2 DESC"}]}

Each question has the fields of :class:`evals.data_questions.Question` but ``db`` (the
database's file name stem): ``id`` (letters, digits, ``_ . -``; unique), ``category`` (one of
:data:`~evals.data_questions.CATEGORIES`), ``prompt``, ``sql`` (computing the truth on the
database), ``expect`` (``number`` — default —, ``names`` or ``none``), ``decimals`` (0–6, the
precision the prompt asks for) and ``top`` (≥ 1, for ``names``). Any other field is refused.

**Placeholders** in ``prompt`` and ``sql`` (``{{`` and ``}}`` for literal braces): today's
``{this_month_start}``, ``{last_month_start}``, ``{this_year_start}``, ``{last_year_start}``
(ISO dates), and the database's own latest period with data — ``{latest_month}`` ("May
2018"), ``{latest_ym}`` (``2018-05``), ``{prev_month}``, ``{prev_ym}``, ``{latest_year}``,
``{prev_year}`` — read as ``MAX`` of the date column: ``date_column`` when the file names one,
else the database's one column whose declared type or name says it holds dates. When that is
not exactly one column (or its latest value is not an ISO date), a question using such a
placeholder is refused with the placeholder named and the candidate columns listed.

Every problem raises :class:`QuestionsError` (a ``ValueError``: ``python -m evals`` prints it as
one line and exits 1) naming the file and the question id: a missing or unreadable file, bad
JSON/YAML, a bad or missing field, a duplicate id, an unknown placeholder, SQL that fails on the
database, or a truth that does not fit (``none`` whose count is not 0, ``number`` without a
number, fewer than ``top`` rows).
"""

from __future__ import annotations

import calendar
import contextlib
import datetime as dt
import json
import re
import sqlite3
import string
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from evals.data_questions import CATEGORIES, Question, Truth, truth

#: Placeholders read from the database's date column, and those counted from today.
DATA_PLACEHOLDERS = ("latest_month", "latest_ym", "prev_month", "prev_ym", "latest_year", "prev_year")
TODAY_PLACEHOLDERS = ("this_month_start", "last_month_start", "this_year_start", "last_year_start")
_DATE_TYPE = re.compile(r"date|time", re.IGNORECASE)
_DATE_NAME = re.compile(r"date|_at$|time", re.IGNORECASE)
_ISO_MONTH = re.compile(r"^(\d{4})-(\d{2})")


class QuestionsError(ValueError):
    """A questions file, or one of its questions, that cannot be used (the message says which)."""


class _Entry(BaseModel):
    """One question as written in the file (validated; unknown fields refused)."""

    model_config = ConfigDict(extra="forbid", strict=True)

    id: str = Field(min_length=1, pattern=r"^[\w.-]+$")  # names the run's transcript file
    category: str
    prompt: str = Field(min_length=1)
    sql: str = Field(min_length=1)
    expect: str = "number"
    decimals: int = Field(default=0, ge=0, le=6)
    top: int = Field(default=1, ge=1)

    @field_validator("category")
    @classmethod
    def _category(cls, value: str) -> str:
        if value not in CATEGORIES:
            raise ValueError(f"must be one of {', '.join(CATEGORIES)}")
        return value

    @field_validator("expect")
    @classmethod
    def _expect(cls, value: str) -> str:
        if value not in ("number", "names", "none"):
            raise ValueError("must be number, names or none")
        return value


@dataclass(frozen=True)
class UserQuestions:
    """A loaded questions file: its ``questions`` (``db`` = the database's name) and the
    ``date_column`` it names (``(table, column)``, or ``None``: found in the database)."""

    path: Path
    db: str
    questions: tuple[Question, ...]
    date_column: tuple[str, str] | None = None


def database_name(database: Path) -> str:
    """The name a user database goes by in the report: its file name without the suffix."""
    return database.stem or database.name


def _read(path: Path) -> Any:
    if not path.is_file():
        raise QuestionsError(f"questions file {path} not found")
    text = path.read_text(encoding="utf-8")
    if path.suffix.lower() in (".yaml", ".yml"):
        try:
            import yaml
        except ImportError as exc:  # PyYAML comes with the dev server's dependencies, not required
            raise QuestionsError(f"questions file {path}: reading YAML needs PyYAML; write it as JSON") from exc
        try:
            return yaml.safe_load(text)
        except yaml.YAMLError as exc:
            raise QuestionsError(f"questions file {path} is not valid YAML: {' '.join(str(exc).split())}") from exc
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise QuestionsError(f"questions file {path} is not valid JSON: {exc}") from exc


def _field_errors(exc: ValidationError) -> str:
    return "; ".join(
        f"{'.'.join(str(p) for p in e['loc']) or 'question'}: {e['msg'].removeprefix('Value error, ')}"
        for e in exc.errors()
    )


def load_questions(path: Path, database: Path) -> UserQuestions:
    """Read and check ``path`` (see the module docstring) for the database ``database``.
    Raises :class:`QuestionsError` naming the file and the question (its id, or its position
    when the id itself is bad)."""
    raw = _read(path)
    date_column: tuple[str, str] | None = None
    if isinstance(raw, dict):
        unknown = sorted(set(raw) - {"questions", "date_column", "about"})
        if unknown:
            raise QuestionsError(
                f"questions file {path}: unknown key(s) {', '.join(unknown)} (keys: questions, date_column, about)"
            )
        column = raw.get("date_column")
        if column is not None:
            if not isinstance(column, str) or column.count(".") < 1:
                raise QuestionsError(f"questions file {path}: date_column must be 'Table.Column', not {column!r}")
            table, _, name = column.rpartition(".")
            date_column = (table, name)
        raw = raw.get("questions")
    if not isinstance(raw, list) or not raw:
        raise QuestionsError(
            f"questions file {path}: no questions (a list of questions, or a mapping with 'questions')"
        )
    db = database_name(database)
    questions: list[Question] = []
    for number, item in enumerate(raw, 1):
        where = f"question {number}" + (f" ({item['id']!r})" if isinstance(item, dict) and "id" in item else "")
        if not isinstance(item, dict):
            raise QuestionsError(f"questions file {path}, {where}: a question is a mapping of fields, not {item!r}")
        try:
            entry = _Entry.model_validate(item)
        except ValidationError as exc:
            raise QuestionsError(f"questions file {path}, {where}: {_field_errors(exc)}") from exc
        if any(q.id == entry.id for q in questions):
            raise QuestionsError(f"questions file {path}, {where}: id {entry.id!r} is used twice")
        questions.append(Question(db=db, **entry.model_dump()))
    return UserQuestions(path, db, tuple(questions), date_column)


def placeholders_used(q: Question) -> set[str]:
    """The ``{placeholders}`` of ``q``'s prompt and SQL. Raises :class:`QuestionsError` on a
    malformed one (an unmatched brace, an index or attribute)."""
    used: set[str] = set()
    for text in (q.prompt, q.sql):
        try:
            fields = [f for _, f, _, _ in string.Formatter().parse(text) if f is not None]
        except ValueError as exc:
            raise QuestionsError(f"question {q.id}: {exc} (write {{{{ and }}}} for literal braces)") from exc
        used |= set(fields)
    return used


def date_columns(con: sqlite3.Connection) -> list[tuple[str, str]]:
    """Columns of ``con``'s tables (not views) whose declared type or name says they hold dates."""
    out = []
    tables = [
        r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'")
    ]
    for table in tables:
        for _, name, declared, *_ in con.execute(f"PRAGMA table_info({_quote(table)})"):
            if _DATE_TYPE.search(declared or "") or _DATE_NAME.search(name):
                out.append((table, name))
    return out


def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _month_start(day: dt.date, delta: int = 0) -> dt.date:
    idx = day.year * 12 + day.month - 1 + delta
    return dt.date(idx // 12, idx % 12 + 1, 1)


def placeholders(user: UserQuestions, database: Path, today: dt.date | None = None) -> tuple[dict[str, str], str]:
    """The placeholders ``user``'s questions may use on ``database``, and a note for the report
    (the date column and its latest month, or why the data placeholders are unavailable: then
    only today's are filled, and :func:`truths` refuses a question using one of the others)."""
    today = today or dt.date.today()
    values = {
        "this_month_start": _month_start(today).isoformat(),
        "last_month_start": _month_start(today, -1).isoformat(),
        "this_year_start": dt.date(today.year, 1, 1).isoformat(),
        "last_year_start": dt.date(today.year - 1, 1, 1).isoformat(),
    }
    with contextlib.closing(_connect(database)) as con:
        if user.date_column is not None:
            column = user.date_column
        else:
            found = date_columns(con)
            if len(found) != 1:
                listed = ", ".join(f"{t}.{c}" for t, c in found) or "none found"
                return values, f"no date column ({'several' if found else 'none'}: {listed}; set date_column)"
            column = found[0]
        table, name = column
        # checked first: SQLite reads a double-quoted name that is no column as a string literal
        columns = [r[1] for r in con.execute(f"PRAGMA table_info({_quote(table)})")]
        if name not in columns:
            what = f"no such column: {name} (columns: {', '.join(columns)})" if columns else f"no such table: {table}"
            raise QuestionsError(f"questions file {user.path}: date_column {table}.{name}: {what}")
        latest = con.execute(f"SELECT MAX({_quote(name)}) FROM {_quote(table)}").fetchone()[0]
    m = _ISO_MONTH.match(str(latest or ""))
    if not m:
        return values, f"date column {table}.{name} holds {latest!r} as its latest value, not an ISO date"
    y, mo = int(m.group(1)), int(m.group(2))
    py, pm = (y, mo - 1) if mo > 1 else (y - 1, 12)
    values |= {
        "latest_month": f"{calendar.month_name[mo]} {y}",
        "latest_ym": f"{y:04d}-{mo:02d}",
        "prev_month": f"{calendar.month_name[pm]} {py}",
        "prev_ym": f"{py:04d}-{pm:02d}",
        "latest_year": f"{y:04d}",
        "prev_year": f"{y - 1:04d}",
    }
    return values, f"dated by {table}.{name}, data up to {values['latest_month']}"


def _connect(database: Path) -> sqlite3.Connection:
    """``database`` read-only; :class:`QuestionsError` when it is missing or not SQLite."""
    if not database.is_file():
        raise QuestionsError(f"database {database} not found")
    con = sqlite3.connect(f"file:{database}?mode=ro", uri=True)
    try:
        con.execute("SELECT COUNT(*) FROM sqlite_master").fetchone()
    except sqlite3.DatabaseError as exc:
        con.close()
        raise QuestionsError(f"database {database} is not an SQLite database ({exc})") from exc
    return con


def truths(user: UserQuestions, database: Path, values: dict[str, str], note: str = "") -> dict[str, Truth]:
    """Every question's truth on ``database`` (read-only), all computed before any run.
    Raises :class:`QuestionsError` naming the question: an unknown placeholder, a date
    placeholder the database cannot fill (``note`` says why), SQL that fails, a truth that
    does not fit the data (:func:`evals.data_questions.truth`)."""
    _connect(database).close()  # missing or not SQLite: said so, not as a question's SQL failing
    out: dict[str, Truth] = {}
    for q in user.questions:
        for name in sorted(placeholders_used(q)):
            if name in values:
                continue
            if name in DATA_PLACEHOLDERS:
                raise QuestionsError(f"question {q.id}: placeholder {{{name}}} cannot be filled: {note}")
            known = ", ".join(f"{{{p}}}" for p in (*DATA_PLACEHOLDERS, *TODAY_PLACEHOLDERS))
            raise QuestionsError(f"question {q.id}: unknown placeholder {{{name}}} (placeholders: {known})")
        try:
            out[q.id] = truth(q, database, values)
        except sqlite3.Error as exc:
            raise QuestionsError(f"question {q.id}: its SQL failed on {database.name}: {exc}") from exc
        except (ValueError, TypeError, IndexError) as exc:  # no number, a count not 0, too few rows, no value column
            message = str(exc) if q.id in str(exc) else f"question {q.id}: {exc}"
            if isinstance(exc, IndexError) and q.expect == "names":
                message = f"question {q.id}: a names question's SQL returns (name, value) rows, best first"
            raise QuestionsError(message) from exc
    return out
