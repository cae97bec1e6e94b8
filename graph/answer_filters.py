"""A value the request names that no read of the goal restricted to (DESIGN §5.5).

Measured (Qwen2.5-Coder-1.5B, a support-desk database): "How many replies did customers send
in October 2026?" → a count of every reply of the month → "Customers sent 187 replies", agents'
replies included (111 were customers'). The figure is in the result: no check of figures sees
it. A data tool may say which few values the categorical columns of its tables hold
(``data.categories``: ``{"ticket_replies.author": ["agent", "customer"]}``; the database tools
do, ``tools/builtin/database/categories.py``). When the request names one of those values
("customers") and no read of the goal compared with it (a quoted literal or a short argument)
or returned it in its rows (grouped by it), the answer does not answer the request.

Words are compared case- and accent-blind, a trailing plural "s" ignored ("customers" /
'customer'); a value of several words needs all of them in the request.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Mapping, Sequence

from graph.answer_figures import Known, figures, names_period, supported
from graph.answer_names import missing_names
from graph.goal_results import Result, known_values, strings_of, table_of

# values too common to be what a request means by them
_GENERIC = frozenset({"yes", "no", "true", "false", "none", "null", "other", "unknown", "all", "any", "n/a", "na"})
# a value compared in SQL ('Japan', '%Japan%'); the SQL text itself is no value
_SQL_TEXT = re.compile(r"\bselect\b[\s\S]*\bfrom\b", re.IGNORECASE)
_SQL_LITERAL = re.compile(r"'((?:[^']|'')*)'")


def _fold(text: str) -> str:
    text = unicodedata.normalize("NFKD", text.casefold())
    return "".join(c for c in text if not unicodedata.combining(c))


def _stems(text: str) -> list[str]:
    words = re.findall(r"[^\W\d_]+", _fold(text))
    return [w[:-1] if len(w) > 3 and w.endswith("s") and not w.endswith("ss") else w for w in words]


def _argument_values(read: Result) -> list[str]:
    """The values a call asked for: quoted literals of a query's SQL, short string arguments."""
    out: list[str] = []
    for text in strings_of(read.args):
        if _SQL_TEXT.search(text):
            out += [v.replace("''", "'") for v in _SQL_LITERAL.findall(text)]
        elif len(text) <= 60:
            out.append(text)
    return out


def _compared(read: Result) -> list[str]:
    """The values ``read`` compared with: quoted literals of a query's SQL, short string
    arguments of any other call, and the text cells of its rows (a read grouped by the value)."""
    out = _argument_values(read)
    table = table_of(read.data)
    if table is not None:
        out += [v for row in table[1] for v in row if isinstance(v, str)]
    return out


def unfiltered_values(request: str, reads: Sequence[Result]) -> list[str]:
    """``["'customer' (ticket_replies.author)", …]``: values of the reads' ``categories`` that
    the ``request`` names and that no read in ``reads`` compared with or returned (module
    docstring); [] when every one was. At most 3."""
    asked = set(_stems(request))
    compared = [set(_stems(v)) for r in reads for v in _compared(r)]
    out: list[str] = []
    for read in reads:
        held = read.data.get("categories") if isinstance(read.data, Mapping) else None
        if not isinstance(held, Mapping):
            continue
        for column, values in held.items():
            for value in values if isinstance(values, list) else []:
                stems = _stems(str(value))
                if not stems or len("".join(stems)) < 3 or _fold(str(value)).strip() in _GENERIC:
                    continue
                if not set(stems) <= asked:
                    continue
                if any(set(stems) <= c for c in compared):
                    continue
                item = f"'{value}' ({column})"
                if item not in out:
                    out.append(item)
    return out[:3]


# words of a date column's name that say nothing of which date it is ("OrderDate" is the order's)
_DATE_WORDS = frozenset({"date", "time", "at", "on", "dt", "ts", "timestamp", "datetime", "day", "when"})


def _column_words(ref: str) -> set[str]:
    column = ref.rpartition(".")[2].strip('"')
    spaced = re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", column)
    return set(_stems(spaced.replace("_", " "))) - _DATE_WORDS


def _named(words: set[str], asked: set[str]) -> bool:
    # a shared stem of 4 letters: "shipped" / "ShippedDate", "opened" / "opened_at"
    return bool(words) and all(any(w[:4] == a[:4] for a in asked if len(a) >= 4) or w in asked for w in words)


def extra_date_conditions(answer: str, request: str, reads: Sequence[Result]) -> list[str]:
    """Why a figure of ``answer`` may rest on a date condition nobody asked for: its read
    compared two or more date columns with values (``data.date_conditions``, set by the
    database tool) and the request names at most one of them by its words ("sales in May 2018"
    names neither OrderDate nor RequiredDate; "tickets opened in November and closed in
    December" names both). One sentence per such read whose values the answer states, [] when
    none. Measured (Qwen2.5-Coder-1.5B, Northwind held out): ``WHERE OrderDate LIKE '2018-05-%'
    AND RequiredDate > '2018-05-31'`` → 11,879 as May's sales (18,334)."""
    asked = set(_stems(request or ""))
    stated = figures(answer)
    out: list[str] = []
    for read in reads:
        conditions = read.data.get("date_conditions") if isinstance(read.data, Mapping) else None
        if not isinstance(conditions, list) or len(conditions) < 2:
            continue
        unnamed = [str(c) for c in conditions if not _named(_column_words(str(c)), asked)]
        if len(conditions) - len(unnamed) >= 2 or not unnamed:
            continue  # the request names two of them: two periods asked
        if not any(supported(f, Known(known_values(read, []))) for f in stated):
            continue
        out.append(
            f"the read restricts {len(conditions)} dates ({', '.join(map(str, conditions))}) where the request "
            f"names one period: a condition on {', '.join(unnamed)} was not asked for — restrict only the date "
            "the question is about"
        )
    return out[:2]


def read_for(read: Result, text: str) -> bool:
    """Whether an empty ``read`` can support a "none" in ``text`` (the claim and the request):
    a read given arguments read what they asked for; a read called with none lists one whole
    collection, whose emptiness says nothing of anything else — its tool's name must share a
    word with ``text`` ("You have no notes" after a ``list_notes`` tool) when ``text`` has words
    in its letters (Latin; a text in another script is not compared). Measured
    (Qwen2.5-Coder-1.5B): twice its queries failed, then a tool listing reminders came back empty and
    the model answered "There are no orders shipped with DHL" / "There were no invoices issued
    last month" — right by chance here, a false "none" on any database that holds them."""
    if not isinstance(read.args, Mapping) or any(s.strip() for s in strings_of(read.args)):
        return True  # given arguments (or they are not known)
    named = set(_stems(read.name.replace("_", " ")))
    said = {w for w in _stems(text) if w.isascii()}
    # a text in another script ("没有任何笔记" after read_notes) cannot be compared by words
    return not said or bool(named & said)


def invented_filters(read: Result, known: str) -> list[str]:
    """The values ``read`` filtered on that neither the request nor another read of the goal
    holds (``known``): "none" found for a value the model made up is no "none" for the question.
    Measured (Qwen2.5-Coder-1.5B): "What was total revenue in October 2026?" → ``… WHERE
    order_date LIKE '2026-10-%' AND region = 'North America'`` (no such region) → "There is no
    data for the period asked." A value is a short string argument, or a quoted literal of a
    query's SQL; dates, numbers and patterns' wildcards are left out (a period is checked as
    figures)."""
    words = [v.strip("%_ ") for v in _argument_values(read)]
    worded = [
        v for v in words if re.search(r"[^\W\d_]{2,}", v) and not re.fullmatch(r"[\d\s:%_./-]*[TtZz]?[\d\s:%_./-]*", v)
    ]
    candidates = missing_names([v for v in worded if not _is_period_text(v)], known)
    held = set(re.findall(r"\w+", unicodedata.normalize("NFKC", known).casefold()))
    return [v for v in candidates if not all(_loosely_held(w, held) for w in re.findall(r"\w+", v.casefold()))]


def _loosely_held(word: str, held: set[str]) -> bool:
    """``word`` or a form of it is in ``held`` (a shared stem: 'tablet' / 'tablets', 'urgent' /
    'urgently'), for words of 4 letters or more; shorter words must be there as they are."""
    if word in held or len(word) < 4:
        return word in held
    return any(
        len(w) >= 4 and (w.startswith(word[: max(4, len(word) - 2)]) or word.startswith(w[: max(4, len(w) - 2)]))
        for w in held
    )


# SQLite's time strings and modifiers ('now', 'start of month', '-1 month', 'weekday 0'): a
# period relative to today, no value of the data (measured: strftime('%Y-%m', 'now') made the
# "none" of "How many orders have come in this month?" rest on an invented filter 'now')
_SQLITE_TIME = re.compile(
    r"(?:now|localtime|utc|unixepoch|auto|subsec|julianday|start of (?:day|month|year)|weekday \d"
    r"|[+-]?\s*\d+(?:\.\d+)?\s+(?:day|hour|minute|second|month|year)s?)",
    re.IGNORECASE,
)


def _is_period_text(value: str) -> bool:
    """A strftime format, a SQLite time string or modifier, or a date written with month words
    ('%Y-%m', 'now', 'start of month', 'Oct 2026'): no value."""
    return (
        value.startswith("%")
        or bool(_SQLITE_TIME.fullmatch(value.strip()))
        or (bool(figures(value)) and names_period(value))
    )


def invented_figures(answer: str, request: str, reads: Sequence[Result]) -> list[str]:
    """Why what ``answer`` states may answer another question: the read that holds a figure or
    a name of it filtered on values neither the request nor any other read of the goal holds
    (:func:`invented_filters`). One sentence per such read, [] when none. Measured
    (Qwen2.5-Coder-1.5B, support-desk database): "How many replies did customers send in October
    2026?" → ``COUNT(ticket_no) FROM tickets WHERE priority = 'high' AND opened_at LIKE
    '2026-10%'`` → "Customers sent 13 high priority tickets in October 2026." — the figure is in
    the result, the question is not the one asked."""
    stated = figures(answer)
    lowered = _fold(answer)
    out: list[str] = []
    for read in reads:
        if read.empty:
            continue
        # what the rows of the goal's other reads returned ("Cleo Park", found first, then
        # filtered on); not their category lists (every value of a column) nor a read sent
        # again word for word (measured: the same query twice made 'high' its own support)
        rows = [table_of(r.data) for r in reads if r.args != read.args and not r.empty]
        returned = [str(v) for table in rows if table for row in table[1] for v in row if isinstance(v, str)]
        made_up = invented_filters(read, "\n".join([request, *returned]))
        if not made_up:
            continue
        table = table_of(read.data)
        names = [v for row in table[1] for v in row if isinstance(v, str) and len(v) >= 3] if table else []
        if any(supported(f, Known(known_values(read, []))) for f in stated) or any(_fold(n) in lowered for n in names):
            listed = ", ".join(f"'{v}'" for v in made_up[:3])
            out.append(  # one sentence per read; the same read sent twice says it once (below)
                f"the read it comes from filtered on {listed}, which the request does not name: it answers another "
                "question — read again with only the conditions asked"
            )
    return list(dict.fromkeys(out))[:2]
