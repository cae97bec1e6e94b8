"""Whether a figure counts or averages the thing the question is about, or rows that repeat
it (DESIGN §5.5): the database tool says over which rows a COUNT or AVG ran and which keys
they repeat (``data.grain``, ``tools/builtin/database/grain.py``); the question says what it
counts ("how many orders", "per order", "in an order"). Pure; nothing here knows a tool."""

from __future__ import annotations

import re
from collections.abc import Sequence

from graph.answer_figures import Known, figures, supported
from graph.goal_results import Result, known_values, table_of

# what a question counts or averages over: "how many orders", "per order", "in an order",
# "does a ticket get"
_COUNTED = re.compile(r"(?i)\b(?:how\s+many|per|an?|each|every)\s+([^\W\d]+)(?:\s+([^\W\d]+))?")
# a second word that makes the thing counted a part of the first: "an order line" is a line
_PARTS = frozenset(
    {"line", "lines", "item", "items", "row", "rows", "entry", "entries", "detail", "details", "position"}
)
_KEY_WORDS = frozenset({"id", "no", "nr", "key", "ref", "number", "code"})


def _words_of(name: str) -> set[str]:
    spaced = re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", name)
    return {w.lower() for w in re.split(r"[_\W]+", spaced) if w} - _KEY_WORDS


def coarse_grain(answer: str, request: str, reads: Sequence[Result]) -> list[str]:
    """Why a figure of ``answer`` counts or averages rows, not what ``request`` counts: the
    read it comes from ran its COUNT or AVG over rows that repeat the key of the thing asked
    about (``data.grain``, set by the database tool: "how many orders" over 93 order lines
    holding 39 OrderIDs). One sentence per such read, [] when none. Measured (Northwind, held
    out): 93 orders for 39, an average freight of 96.20 per line for 78.24 per order."""
    nouns = {
        w.lower().removesuffix("es") if w.lower().endswith("ses") else w.lower().rstrip("s")
        for m in _COUNTED.finditer(request or "")
        for w in [m[2] if m[2] and m[2].lower() in _PARTS else m[1]]
    }
    if not nouns:
        return []
    stated = figures(answer)
    out: list[str] = []
    for r in reads:
        grain = r.data.get("grain") if isinstance(r.data, dict) else None
        if not isinstance(grain, dict) or not isinstance(grain.get("distinct"), dict):
            continue
        if not any(supported(f, Known(known_values(r, []))) for f in stated):
            continue  # the answer states none of this read's figures
        for key, distinct in grain["distinct"].items():
            noun = next((n for n in nouns if n in _words_of(str(key))), None)
            if noun:
                out.append(
                    f"the figure counts or averages {grain.get('rows')} rows that repeat {key} ({distinct} distinct), "
                    f"not {noun}s: count DISTINCT {key}, or average over one row per {key} (a subquery grouped by it)"
                )
                break
    return out


# a question that ranks: "the biggest customer", "which 5 artists earned the most"
_RANKS = re.compile(
    r"(?i)\b(?:most|top|biggest|largest|highest|best|greatest|leading|least|lowest|smallest|fewest|worst)\b"
)
# a question that asks for one row itself: "the largest single order", "one individual sale"
_SINGLE = re.compile(r"(?i)\b(?:single|individual)\b")


def _singular(word: str) -> str:
    word = word.lower()
    return word.removesuffix("es") if word.endswith(("ses", "xes")) else word.removesuffix("s")


def single_row_ranking(answer: str, request: str, reads: Sequence[Result]) -> list[str]:
    """Why a name of ``answer`` tops single rows, not the thing ``request`` ranks: the read it
    comes from ordered rows one by one (``data.ranked_rows``, set by the database tool: ORDER BY
    … LIMIT without GROUP BY) and the column the name comes from repeats among them, while the
    request ranks that thing ("the biggest customer", "which 5 artists earned the most") — the
    top row is the largest single line, not the largest total. One sentence per such read, []
    when none. Measured (generated sales database): "Who was our biggest customer by revenue in
    November 2026?" answered with the customer of the largest order line."""
    if not _RANKS.search(request or "") or _SINGLE.search(request or ""):
        return []
    asked = {_singular(w) for w in re.findall(r"[^\W\d_]+", request)}
    lowered = answer.lower()
    out: list[str] = []
    for r in reads:
        ranking = r.data.get("ranked_rows") if isinstance(r.data, dict) else None
        table = table_of(r.data)
        if not isinstance(ranking, dict) or not isinstance(ranking.get("repeated"), list) or table is None:
            continue
        columns, rows = table
        for repeated in ranking["repeated"]:
            if not isinstance(repeated, dict) or repeated.get("column") not in columns:
                continue
            at = columns.index(str(repeated["column"]))
            named = [v for row in rows if at < len(row) and isinstance(v := row[at], str) and v.strip()]
            source = str(repeated.get("source") or repeated["column"])
            table_name, _, column_name = source.rpartition(".")
            # the column's own words first: sales_lines.customer ranks customers, not sales
            words = [*_words_of(column_name), *_words_of(table_name)]
            noun = next((_singular(w) for w in words if _singular(w) in asked), None)
            if noun and any(n.lower() in lowered for n in named):
                out.append(
                    f"the answer ranks {ranking.get('rows')} single rows, in which {source} repeats "
                    f"({repeated.get('distinct')} distinct): its top row is one row of a {noun}, not the {noun} "
                    f"with the largest total — GROUP BY {source} and order by the SUM (or COUNT) of the figure"
                )
                break
    return out


def reapplied_figures(answer: str, reads: Sequence[Result]) -> list[str]:
    """Why a figure of ``answer`` is computed twice over: its read combined a view's computed
    column with a column it is already computed from (``data.reapplied``, set by the database
    tool: "Invoices.ExtendedPrice is UnitPrice * Quantity * (1 - Discount): Discount is already
    applied in it"). The tool's sentences for each read whose figures the answer states, [] when
    none. Measured (Northwind, held out): May 2018's sales after discounts 11,879 for 18,334 (the
    discount taken twice, with a second condition besides)."""
    stated = figures(answer)
    out: list[str] = []
    for r in reads:
        notes = r.data.get("reapplied") if isinstance(r.data, dict) else None
        if not isinstance(notes, list) or not notes:
            continue
        if any(supported(f, Known(known_values(r, []))) for f in stated):
            out += [f"the figure's read applies a column twice — {n}" for n in notes if isinstance(n, str)]
    return out[:2]


def one_of_many(answer: str, request: str, reads: Sequence[Result]) -> list[str]:
    """Why a figure of ``answer`` is no answer for the one figure ``request`` asks: the only
    reads that hold it returned several rows of figures with no label (a row per group: ``AVG(x)
    … GROUP BY order_id``), and it is the value of one of them — not a figure over all of them.
    A request that ranks ("the highest", "most") may take one row; so may a read whose rows are
    labelled (a month, a name): the answer then names which. One sentence per such figure, []
    when none. Measured (Qwen2.5-Coder-1.5B, generated sales database): "On average, how many
    units are in an order?" → ``SELECT AVG(quantity) FROM order_items GROUP BY order_id`` (610
    rows) → "approximately 1.67", the second row's value."""
    if _RANKS.search(request or ""):
        return []
    single = [r for r in reads if (t := table_of(r.data)) is None or len(t[1]) <= 1]
    many = []
    for r in reads:
        table = table_of(r.data)
        if table is None or len(table[1]) <= 1:
            continue
        cells = [v for row in table[1] for v in row]
        if any(isinstance(v, str) for v in cells):
            continue  # labelled rows: which one is meant is stated by the label
        many.append(
            (r, table, Known([float(v) for v in cells if isinstance(v, (int, float)) and not isinstance(v, bool)]))
        )
    if not many:
        return []
    out: list[str] = []
    said = Known([v for f in figures(request or "") for v, _ in f.readings])  # "in 2026", "5 customers"
    for fig in figures(answer):
        if supported(fig, said) or any(supported(fig, Known(known_values(r, []))) for r in single):
            continue
        holder = next(((r, t) for r, t, known in many if supported(fig, known)), None)
        if holder is not None:
            r, (_, rows) = holder
            count = r.data.get("row_count", len(rows)) if isinstance(r.data, dict) else len(rows)
            out.append(
                f"{fig.text} is the value of one of the {count} rows of a read that returns a row per group; the "
                "request asks for one figure over all of them: compute it in SQL (an aggregate over those rows, "
                "e.g. SELECT AVG(x) FROM (SELECT … AS x … GROUP BY …))"
            )
    return out[:2]
