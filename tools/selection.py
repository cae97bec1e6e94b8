"""Tool selection: rank a registry's tools by relevance to the current request.

Every request carries the whole tool list, and a small model picks poorly among many similar
tools (measured on the probe set, ``evals/probe_tool_calls.py``). Ranking is BM25 (``bm25s``,
Lucene's variant: ``idf = ln(1 + (N - df + 0.5) / (df + 0.5))``, ``k1`` 1.2, ``b`` 0.75) over each
tool's name (weighted ×3: names are the strongest signal) and description, with a crude stem
(first 5 letters) so "reminders"/"remind" and "report"/"reports" meet. Pure, no I/O. The index
of a tool list is built once and kept (:data:`INDEX_CACHE_SIZE` lists, least recently used
dropped): a turn ranks the same tools several times (each model call, the verifier), and
building costs ~10× scoring (bench_overhead, issue 19).

Health (seed §5.3, "the model sees candidates in score order where it chooses between them"):
with a ``health`` look-up (``ToolRegistry.health``: the Toolbox's MCP servers' scores and circuit
breakers), tools whose relevance is a near-tie — within ``NEAR_TIE`` (20 %) of the best score
of their run, walking down from the top — are reordered so that a tool whose server(s) are all
parked by their breaker comes last, and the others follow their server's seed score
(``tools.mcp.scoring``), best first. Tools with no health (builtin tools) keep their places; a
clear relevance lead is never overturned by health. A parked tool stays offered (it may be the
only one for the need) with its :attr:`ToolHealth.note` appended to its description.
"""

from __future__ import annotations

import logging
import re
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import bm25s
from cachetools import LRUCache
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
#: Relevance scores within this fraction of the best score of their run are a near-tie.
NEAR_TIE = 0.2
#: BM25 indexes kept, one per distinct tool list (names and descriptions).
INDEX_CACHE_SIZE = 32

_indexes: LRUCache[tuple[tuple[str, str], ...], bm25s.BM25] = LRUCache(INDEX_CACHE_SIZE)
_indexes_lock = threading.Lock()


@dataclass(frozen=True)
class ToolHealth:
    """How well the server(s) behind one tool serve now.

    score      seed score of the best server that is not parked (``tools.mcp.scoring``:
               ``0.4 / (latency_ema_s + 0.1) + 0.6 * success``; higher is better)
    available  False when every server of the tool is parked by its circuit breaker (a call
               fails at once, unsent)
    note       what the model is told about an unavailable tool (appended to its description)
    """

    score: float
    available: bool = True
    note: str = ""


#: ``tool name -> ToolHealth`` (None: no health known, e.g. a builtin tool).
HealthOf = Callable[[str], ToolHealth | None]


def _terms(text: str) -> list[str]:
    return [w[:5] for w in _WORD.findall(text.lower().replace("_", " ")) if len(w) > 2 or not w.isascii()]


def _index(specs: Sequence[ToolSpec]) -> bm25s.BM25:
    """The BM25 index of ``specs``' names and descriptions (cached by that text: a spec
    whose description changes, e.g. a health note, gets a fresh index). Scoring only reads
    it, so one index serves every caller."""
    key = tuple((s.name, s.description) for s in specs)
    with _indexes_lock:
        index = _indexes.get(key)
    if index is None:
        index = bm25s.BM25(method="lucene", k1=K1, b=B, dtype="float64")
        index.index([_terms(name) * NAME_WEIGHT + _terms(text) for name, text in key], show_progress=False)
        with _indexes_lock:
            _indexes[key] = index
    return index


def rank_tools(specs: Sequence[ToolSpec], query: str, health: HealthOf | None = None) -> list[tuple[float, ToolSpec]]:
    """``(score, spec)`` for every spec, best first; ties keep the input order. A score is the
    BM25 sum over the query's distinct terms (0 when none occurs in the tool). With ``health``,
    near-ties are ordered by health and unavailable tools carry a note (:func:`by_health`)."""
    if not specs:
        return []
    query_terms = sorted(set(_terms(query)))
    scores = [0.0] * len(specs)
    if query_terms:
        scores = _index(specs).get_scores(query_terms).tolist()
    order = sorted(range(len(specs)), key=lambda i: -scores[i])  # stable: ties keep the input order
    ranked = [(float(scores[i]), specs[i]) for i in order]
    return ranked if health is None else by_health(ranked, health)


def by_health(ranked: Sequence[tuple[float, ToolSpec]], health: HealthOf) -> list[tuple[float, ToolSpec]]:
    """``ranked`` (best first, as :func:`rank_tools` returns it) with each run of near-ties
    (scores ≥ ``(1 - NEAR_TIE)`` × the run's first score) reordered by health: the places held by
    tools with a health go to those tools, available before unavailable, then higher
    :attr:`ToolHealth.score` first (stable); tools without a health keep their places. An
    unavailable tool's spec is a copy with its note appended to the description."""
    known = {spec.name: health(spec.name) for _, spec in ranked}
    out = list(ranked)
    start = 0
    while start < len(out):
        end = start + 1
        while end < len(out) and out[end][0] >= out[start][0] * (1 - NEAR_TIE):
            end += 1
        slots = [i for i in range(start, end) if known[out[i][1].name] is not None]

        def key(i: int) -> tuple[bool, float]:
            h = known[out[i][1].name]
            assert h is not None
            return (not h.available, -h.score)

        moved = [out[i] for i in sorted(slots, key=key)]
        for slot, item in zip(slots, moved, strict=True):
            out[slot] = item
        start = end
    return [(score, _noted(spec, known[spec.name])) for score, spec in out]


def _noted(spec: ToolSpec, h: ToolHealth | None) -> ToolSpec:
    if h is None or h.available or not h.note:
        return spec
    return spec.model_copy(update={"description": f"{spec.description} ({h.note})"})
