"""Tool selection: rank a registry's tools by relevance to the current request.

Every request carries the whole tool list, and a small model picks poorly among many similar
tools (measured on the probe set, ``evals/probe_tool_calls.py``). Ranking is BM25 (``bm25s``,
Lucene's variant: ``idf = ln(1 + (N - df + 0.5) / (df + 0.5))``, ``k1`` 1.2, ``b`` 0.75) over each
tool's name (weighted ×3: names are the strongest signal) and description, with a crude stem
(first 5 letters) so "reminders"/"remind" and "report"/"reports" meet. Pure, no I/O.
"""

from __future__ import annotations

import logging
import re
import threading
from collections.abc import Sequence

import bm25s
from tqdm import tqdm

from tools.spec import ToolSpec

# bm25s builds a tqdm bar (disabled) on every index; tqdm's first bar in a process creates a
# multiprocessing lock, which writes to the resource tracker: a blocking call that
# `langgraph dev` refuses inside the event loop (BlockingError). A thread lock is all tqdm
# needs here (no bars cross processes).
tqdm.set_lock(threading.RLock())
logging.getLogger("bm25s").setLevel(logging.WARNING)  # "Building index from tokens" per call

_WORD = re.compile(r"[a-z0-9]+|[\u4e00-\u9fff]")
NAME_WEIGHT = 3
K1, B = 1.2, 0.75


def _terms(text: str) -> list[str]:
    return [w[:5] for w in _WORD.findall(text.lower().replace("_", " ")) if len(w) > 2 or not w.isascii()]


def rank_tools(specs: Sequence[ToolSpec], query: str) -> list[tuple[float, ToolSpec]]:
    """``(score, spec)`` for every spec, best first; ties keep the input order. A score is the
    BM25 sum over the query's distinct terms (0 when none occurs in the tool)."""
    if not specs:
        return []
    query_terms = sorted(set(_terms(query)))
    scores = [0.0] * len(specs)
    if query_terms:
        index = bm25s.BM25(method="lucene", k1=K1, b=B, dtype="float64")
        index.index([_terms(s.name) * NAME_WEIGHT + _terms(s.description) for s in specs], show_progress=False)
        scores = index.get_scores(query_terms).tolist()
    order = sorted(range(len(specs)), key=lambda i: -scores[i])  # stable: ties keep the input order
    return [(float(scores[i]), specs[i]) for i in order]
