"""Tool selection: rank a registry's tools by relevance to the current request.

Every request carries the whole tool list, and a small model picks poorly among many similar
tools (measured on the probe set, ``evals/probe_tool_calls.py``). Ranking is BM25 over each
tool's name (weighted ×3: names are the strongest signal) and description, with a crude stem
(first 5 letters) so "reminders"/"remind" and "report"/"reports" meet. Pure, no I/O.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Sequence

from tools.spec import ToolSpec

_WORD = re.compile(r"[a-z0-9]+|[\u4e00-\u9fff]")
NAME_WEIGHT = 3
K1, B = 1.2, 0.75


def _terms(text: str) -> list[str]:
    return [w[:5] for w in _WORD.findall(text.lower().replace("_", " ")) if len(w) > 2 or not w.isascii()]


def rank_tools(specs: Sequence[ToolSpec], query: str) -> list[tuple[float, ToolSpec]]:
    """``(score, spec)`` for every spec, best first; ties keep the input order."""
    docs = [_terms(s.name) * NAME_WEIGHT + _terms(s.description) for s in specs]
    if not docs:
        return []
    avg = sum(map(len, docs)) / len(docs) or 1.0
    df = Counter(t for d in docs for t in set(d))
    q = set(_terms(query))
    scored = []
    for index, (spec, doc) in enumerate(zip(specs, docs)):
        tf = Counter(doc)
        score = 0.0
        for term in q & tf.keys():
            idf = math.log(1 + (len(docs) - df[term] + 0.5) / (df[term] + 0.5))
            score += idf * tf[term] * (K1 + 1) / (tf[term] + K1 * (1 - B + B * len(doc) / avg))
        scored.append((score, -index, spec))
    scored.sort(key=lambda x: (x[0], x[1]), reverse=True)
    return [(score, spec) for score, _, spec in scored]
