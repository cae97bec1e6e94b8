"""Which facts a request sees: ranking by keyword overlap (:func:`rank_facts`) and visibility
across a session's branches (:func:`visible`). Pure: no I/O."""

from __future__ import annotations

from collections.abc import Collection, Sequence

from memory.semantic_model import Fact
from memory.text import keyword_tokens


def rank_facts(facts: Sequence[Fact], query: str, k: int) -> list[Fact]:
    """The ``k`` facts sharing most keyword tokens with ``query`` (× confidence; facts about
    the user first on ties); none when the query has nothing searchable."""
    terms = set(keyword_tokens(query))
    if not terms or k <= 0:
        return []
    scored = []
    for fact in facts:
        words = set(keyword_tokens(f"{fact.subject_name} {fact.predicate.replace('_', ' ')} {fact.object}"))
        overlap = len(terms & words)
        if overlap:
            scored.append((overlap * fact.confidence + (0.1 if fact.subject == "user" else 0.0), fact))
    scored.sort(key=lambda x: x[0], reverse=True)
    return [f for _, f in scored[:k]]


def visible(
    fact: Fact,
    thread_id: str | None,
    visible_origins: set[str] | None,
    inactive: Collection[tuple[str, str]] = (),
) -> bool:
    """False for a fact this session (``thread_id``) stated on a message that is not on the
    active branch (``visible_origins``), and for a fact of any session whose origin is in
    ``inactive`` ((thread id, message id) pairs off their session's active branch); True
    otherwise (other sessions' active branches, unbound facts)."""
    if not fact.origin:
        return True
    thread, _, message = fact.origin.partition("\x00")
    if (thread, message) in inactive:
        return False
    if not thread_id or visible_origins is None:
        return True
    return thread != thread_id or message in visible_origins
