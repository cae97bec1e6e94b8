"""Whether a figure counts or averages the thing the question is about, or rows that repeat
it (DESIGN §5.5): the database tool says over which rows a COUNT or AVG ran and which keys
they repeat (``data.grain``, ``tools/builtin/database/grain.py``); the question says what it
counts ("how many orders", "per order", "in an order"). Pure; nothing here knows a tool."""

from __future__ import annotations

import re
from collections.abc import Sequence

from graph.answer_figures import Known, figures, supported
from graph.goal_results import Result, known_values

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
