"""The baselines Hermes's memory is measured against: plain BM25 over a conversation's raw turns
for retrieval (:class:`RawTurnBM25`), and the last turns of the conversation in as many tokens
as the memory block for answers (:func:`last_turns_window`)."""

from __future__ import annotations

from datetime import datetime

from evals.locomo.data import turn_text
from memory.retrieval import approx_tokens
from memory.text import keyword_tokens


class RawTurnBM25:
    """The baseline the memory stack must beat: plain BM25 (``bm25s``, Lucene scoring, English
    stop words, Hermes's tokenizer) over one conversation's raw turns (``turn_text``), top-k,
    no embeddings, no dates, no decay."""

    def __init__(self, turns: list[tuple[int, datetime, dict]]) -> None:
        import bm25s  # only the eval needs it here
        from bm25s.stopwords import STOPWORDS_EN

        self._stop = frozenset(STOPWORDS_EN)
        self.ids = [t["dia_id"] for _, _, t in turns]
        self.index = bm25s.BM25()
        self.index.index([self._tokens(turn_text(t)) or ["_"] for _, _, t in turns], show_progress=False)

    def _tokens(self, text: str) -> list[str]:
        return [w for w in keyword_tokens(text) if w not in self._stop]

    def search(self, question: str, k: int) -> list[str]:
        """The ``dia_id`` of the best ``k`` turns for ``question`` (those scoring > 0)."""
        terms = list(dict.fromkeys(self._tokens(question)))
        if not terms:
            return []
        scores = self.index.get_scores(terms)
        return [self.ids[i] for i in scores.argsort()[::-1][:k] if scores[i] > 0]


def last_turns_window(lines: list[str], budget: int) -> list[str]:
    """The last-N-turns baseline at ``budget`` tokens: the most recent ``lines`` (chronological
    turn lines, the newest last) taken from the end while their token sum stays ≤ ``budget``,
    then the next older line cut short (``…``) to the tokens left, as the memory block cuts its
    long lines; returned **newest first** (the arm's own rank order, as the memory block lists
    its lines by relevance). Tokens are counted as the memory block's are
    (``memory.retrieval.approx_tokens`` per line, summed), so the window holds as many tokens as
    the block it is compared with, never more."""
    picked: list[str] = []
    used = 0
    for line in reversed(lines):
        cost = approx_tokens(line)
        if used + cost <= budget:
            picked.append(line)
            used += cost
            continue
        left = budget - used
        cut = line[: 4 * left]  # ~4 characters a token; shortened until it fits
        while cut and approx_tokens(cut.rstrip() + "…") > left:
            cut = cut[:-8]
        if cut.strip():
            picked.append(cut.rstrip() + "…")
        break
    return picked
