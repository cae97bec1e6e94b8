"""The episodic stores share one search (``memory.episodic.hybrid.HybridSearch``, a template
method): the query checks, the candidates per half and the fusion are written once, each
backend fetches its halves (review finding D1/D2: three parallel copies had drifted)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime

from memory.embeddings import HashEmbedder
from memory.episodic.base import EpisodicEvent
from memory.episodic.hybrid import Candidates, HybridSearch, SearchQuery
from memory.episodic.lance import LanceEpisodicStore
from memory.episodic.postgres import PostgresEpisodicStore
from memory.episodic.weaviate import WeaviateEpisodicStore

NOW = datetime(2026, 10, 1, tzinfo=UTC)


def test_every_backend_searches_through_the_shared_template():
    for store in (LanceEpisodicStore, PostgresEpisodicStore, WeaviateEpisodicStore):
        assert store.search is HybridSearch.search, store


class Halves(HybridSearch):
    """A backend of two fixed halves that records what it was asked."""

    def __init__(self) -> None:
        self.embedder = HashEmbedder(16)
        self.alpha = 0.5
        self.half_life_days = 14.0
        self.candidates = 50
        self.calls: list[tuple[str, SearchQuery]] = []
        self.dog = EpisodicEvent(user_id="u", kind="note", text="the dog barks", confidence=0.9, created_at=NOW)
        self.cat = EpisodicEvent(user_id="u", kind="note", text="a cat sleeps", confidence=0.9, created_at=NOW)

    async def _keyword_half(self, q: SearchQuery) -> Candidates:
        self.calls.append(("keyword", q))
        return {self.dog.id: (self.dog, 3.0)}

    async def _vector_half(self, q: SearchQuery, vector: Sequence[float]) -> Candidates:
        assert len(vector) == 16  # the query, embedded by the template
        self.calls.append(("vector", q))
        return {self.dog.id: (self.dog, 0.9), self.cat.id: (self.cat, 0.95)}


class SequentialHalves(Halves):
    """The same halves fetched one after the other (a backend on one connection)."""

    concurrent_halves = False


async def test_nothing_searchable_asks_no_half():
    store = Halves()
    assert await store.search("u", "?!", now=NOW) == []
    assert await store.search("u", "dog", kinds=[], now=NOW) == []
    assert await store.search("u", "dog", k=0, now=NOW) == []
    assert store.calls == []


async def test_the_halves_get_one_query_and_their_hits_are_fused():
    store = Halves()
    hits = await store.search("u", "dog", k=7, kinds=["note"], now=NOW)
    assert [name for name, _ in store.calls] == ["keyword", "vector"]
    q = store.calls[0][1]
    assert (q.user_id, q.terms, q.k, q.kinds, q.limit, q.now, q.mode) == ("u", ["dog"], 7, ["note"], 50, NOW, "hybrid")
    # the dog is in both halves: fusion ranks it above the cat, found by the vector half alone
    assert [h.event.text for h in hits] == ["the dog barks", "a cat sleeps"]
    assert hits[0].keyword == 1.0 and hits[0].vector is not None


async def test_a_mode_asks_only_its_half_and_a_sequential_backend_keeps_the_order():
    store = SequentialHalves()
    await store.search("u", "dog", mode="keyword", now=NOW)
    await store.search("u", "dog", mode="vector", now=NOW)
    await store.search("u", "dog", now=NOW)
    assert [name for name, _ in store.calls] == ["keyword", "vector", "keyword", "vector"]
