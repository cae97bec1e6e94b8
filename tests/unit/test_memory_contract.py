"""The episodic store contract: one suite, every backend (``memory.episodic.base``).

``EpisodicContract`` holds the tests; a backend subclasses it and provides ``make_store``.
Here: the embedded LanceDB store (on disk, in ``tmp_path``). The Weaviate store runs the same
suite in ``tests/integration/test_memory_weaviate_contract.py`` against a real server when
``WEAVIATE_URL`` is set. Embeddings are deterministic test embedders (no model): the ranking
contract, not the embedding model, is under test.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from memory.embeddings import HashEmbedder
from memory.episodic.base import EpisodicEvent, EpisodicStore, EventKind
from memory.episodic.lance import LanceEpisodicStore

NOW = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)
DOG = "The dog is a domesticated descendant of the wolf."


class TableEmbedder(HashEmbedder):
    """Hash vectors, except texts listed in ``table`` (their fixed direction); counts calls."""

    def __init__(self, table: dict[str, list[float]] | None = None, dim: int = 16) -> None:
        super().__init__(dim)
        self.table = table or {}
        self.embedded: list[str] = []

    def embed_one(self, text: str) -> list[float]:
        self.embedded.append(text)
        if text in self.table:
            vec = list(self.table[text]) + [0.0] * (self.dim - len(self.table[text]))
            norm = sum(v * v for v in vec) ** 0.5
            return [v / norm for v in vec]
        return super().embed_one(text)


def ev(text: str, user: str = "u", kind: EventKind = "note", days_ago: float = 0.0, **kw) -> EpisodicEvent:
    return EpisodicEvent(
        user_id=user,
        kind=kind,
        text=text,
        confidence=kw.pop("confidence", 0.9),
        created_at=NOW - timedelta(days=days_ago),
        **kw,
    )


def texts(hits) -> list[str]:
    return [h.event.text for h in hits]


class EpisodicContract:
    """Subclasses define ``make_store(path, embedder) -> EpisodicStore``."""

    async def make_store(self, tmp_path, embedder) -> EpisodicStore:  # pragma: no cover - abstract
        raise NotImplementedError

    @pytest.fixture
    async def embedder(self):
        return TableEmbedder()

    @pytest.fixture
    async def store(self, tmp_path, embedder):
        store = await self.make_store(tmp_path, embedder)
        yield store
        await store.close()

    async def search(self, store, query: str, user: str = "u", **kw):
        return await store.search(user, query, kw.pop("k", 5), now=kw.pop("now", NOW), **kw)

    # --- writes -----------------------------------------------------------------------------

    async def test_round_trip_keeps_every_field(self, store):
        event = ev(
            "ran the data-cleaning script",
            kind="task",
            evidence="inferred",
            metadata={"thread_id": "t1", "tools": ["python"]},
            confidence=0.75,
        )
        assert await store.add(event) == event.id
        got = await store.get("u", event.id)
        assert got is not None and got.model_dump() == event.model_dump()
        assert await store.get("v", event.id) is None  # another user's id reads nothing

    async def test_k11_the_same_memory_twice_is_one_memory_and_no_second_embedding(self, store, embedder):
        first = await store.add(ev(DOG))
        calls = len(embedder.embedded)
        again = await store.add(ev("  the DOG is a domesticated   descendant of the wolf. "))
        assert again == first
        assert len(embedder.embedded) == calls  # found before any embedding (model) call
        assert await store.count("u") == 1
        ids = await store.add_many([ev("alpha note"), ev("Alpha  note"), ev(DOG)])
        assert ids[0] == ids[1] and ids[2] == first
        assert await store.count("u") == 2
        assert texts(await self.search(store, "wolf")) == [DOG]  # nothing deleted

    async def test_same_text_for_two_users_is_two_memories(self, store):
        a = await store.add(ev(DOG, user="u"))
        b = await store.add(ev(DOG, user="v"))
        assert a != b and await store.count("u") == 1 and await store.count("v") == 1
        assert await store.count() == 2

    # --- per-user isolation -----------------------------------------------------------------

    async def test_users_never_see_each_other(self, store):
        await store.add_many([ev("alice likes green tea", user="alice"), ev("bob likes black coffee", user="bob")])
        assert texts(await self.search(store, "likes", user="alice")) == ["alice likes green tea"]
        assert texts(await self.search(store, "coffee", user="alice")) == []
        assert await store.list("alice") and all(e.user_id == "alice" for e in await store.list("alice"))
        assert await store.list("nobody") == []
        bob_id = (await store.list("bob"))[0].id
        assert await store.forget("alice", bob_id) is False and await store.count("bob") == 1

    async def test_quotes_in_user_ids_and_kinds_are_data_not_syntax(self, store):
        await store.add(ev("secret of o'brien", user="o'brien"))
        await store.add(ev("secret of x", user="x"))
        assert texts(await self.search(store, "secret", user="o'brien")) == ["secret of o'brien"]
        assert await self.search(store, "secret", user="x' OR '1'='1") == []
        assert await self.search(store, "secret", user="x", kinds=["note' OR '1'='1"]) == []

    # --- keyword half: CJK, emoji, nothing searchable ---------------------------------------

    @pytest.mark.parametrize(
        "stored, query",
        [
            ("我喜欢喝茶", "喝茶"),
            ("我们今天讨论了人工智能的未来", "人工智能"),
            ("明日は東京で会議があります", "東京"),
            ("오늘 회의는 서울에서 합니다", "서울"),
            ("party time 🎉 with the team", "🎉"),
            ("thumbs up 👍🏽 from the manager", "👍"),
        ],
    )
    async def test_cjk_and_emoji_are_found_in_the_keyword_half(self, store, stored, query):
        await store.add_many([ev(stored), ev("an unrelated english sentence about reports")])
        assert texts(await self.search(store, query, mode="keyword")) == [stored]
        assert texts(await self.search(store, query))[0] == stored

    @pytest.mark.parametrize(
        "query, exact, other",
        [
            ("😂😂", "that meme 😂 was the best", "so sad today 😭"),
            ("😂", "that meme 😂 was the best", "so sad today 😭"),
            ("🎉 👍", "launch day 🎉 👍 all green", "rocket 🚀 launch"),
            ("★★★", "hotel rated ★ by the team", "hotel rated ☆ by the press"),
            ("👍🏽", "approved 👍 by the manager", "rejected 👎 by the manager"),
        ],
    )
    async def test_a_symbol_only_query_ranks_the_exact_symbol_first(self, tmp_path, query, exact, other):
        """Issue 23 kind 3: the vector half puts another emoji nearer than the exact one; the
        keyword half ranks right. With no word token in the query the exact match decides (it
        is the older memory here, so recency cannot be what puts it first)."""
        emb = TableEmbedder({query: [1, 0, 0], other: [1, 0.05, 0], exact: [0.2, 1, 0]})
        store = await self.make_store(tmp_path / "sym", emb)
        try:
            await store.add_many([ev(exact, days_ago=3), ev(other, days_ago=0)])
            assert texts(await self.search(store, query))[0] == exact
            assert texts(await self.search(store, query, mode="keyword")) == [exact]
        finally:
            await store.close()

    async def test_a_query_with_words_and_symbols_keeps_the_hybrid(self, tmp_path):
        """The sibling that must not change: a word in the query keeps the vector half's say."""
        emb = TableEmbedder({"canine 🐶": [1, 0, 0], DOG: [0.95, 0.3, 0], "quarterly revenue 🐶": [0, 1, 0]})
        store = await self.make_store(tmp_path / "mixed", emb)
        try:
            await store.add_many([ev(DOG), ev("quarterly revenue 🐶")])
            hits = await self.search(store, "canine 🐶")
            assert {h.event.text for h in hits} == {DOG, "quarterly revenue 🐶"}
            assert all(h.vector is not None for h in hits if h.event.text == DOG)
        finally:
            await store.close()

    @pytest.mark.parametrize("query", ["", "   ", "!!!", "？？。", "...", "\n\t"])
    async def test_a_query_with_nothing_searchable_is_empty_never_everything(self, store, query):
        await store.add_many([ev(DOG), ev("我喜欢喝茶"), ev("party 🎉")])
        for mode in ("hybrid", "keyword", "vector"):
            assert await self.search(store, query, mode=mode) == []

    async def test_english_words_match_their_inflections(self, store):
        await store.add(ev("the user generated three monthly reports"))
        assert texts(await self.search(store, "report", mode="keyword")) == ["the user generated three monthly reports"]

    # --- vector half and fusion ---------------------------------------------------------------

    async def test_vector_half_finds_a_paraphrase_without_shared_words(self, tmp_path):
        emb = TableEmbedder({"canine ancestry": [1, 0, 0], DOG: [0.95, 0.3, 0], "quarterly revenue": [0, 1, 0]})
        store = await self.make_store(tmp_path / "p", emb)
        try:
            await store.add_many([ev(DOG), ev("quarterly revenue")])
            assert texts(await self.search(store, "canine ancestry", mode="keyword")) == []
            assert texts(await self.search(store, "canine ancestry", mode="vector"))[0] == DOG
            assert texts(await self.search(store, "canine ancestry")) == [DOG]  # revenue is under the floor
        finally:
            await store.close()

    async def test_hybrid_ranks_a_both_halves_match_above_a_keyword_only_match(self, tmp_path):
        emb = TableEmbedder(
            {
                "sales report": [1, 0],
                "monthly sales report for October": [1, 0.1],
                "sales of the bakery, report to follow": [0, 1],
            }
        )
        store = await self.make_store(tmp_path / "h", emb)
        try:
            await store.add_many([ev("sales of the bakery, report to follow"), ev("monthly sales report for October")])
            hits = await self.search(store, "sales report")
            assert texts(hits) == ["monthly sales report for October", "sales of the bakery, report to follow"]
            assert hits[0].score > hits[1].score > 0
        finally:
            await store.close()

    # --- filters, decay, validity -------------------------------------------------------------

    async def test_kind_filter(self, store):
        await store.add_many([ev("report task done", kind="task"), ev("report preference stated", kind="preference")])
        assert texts(await self.search(store, "report", kinds=["task"])) == ["report task done"]
        assert len(await self.search(store, "report", kinds=["task", "preference"])) == 2
        assert await self.search(store, "report", kinds=[]) == []

    async def test_time_range_filter(self, store):
        await store.add_many(
            [ev("report one", days_ago=10), ev("report two", days_ago=5), ev("report three", days_ago=1)]
        )
        hits = await self.search(store, "report", since=NOW - timedelta(days=6), until=NOW - timedelta(days=2))
        assert texts(hits) == ["report two"]
        listed = await store.list("u", since=NOW - timedelta(days=6))
        assert [e.text for e in listed] == ["report three", "report two"]

    async def test_time_decay_ranks_the_newer_of_two_equal_matches_first(self, store):
        await store.add_many([ev("weekly report sent", days_ago=20), ev("weekly report done", days_ago=1)])
        hits = await self.search(store, "weekly report")
        assert texts(hits) == ["weekly report done", "weekly report sent"]
        assert hits[0].decay > hits[1].decay

    async def test_events_past_validity_are_not_searched_and_expire_retires_them(self, store):
        await store.add_many([ev("old report", days_ago=40), ev("new report", days_ago=2)])
        assert texts(await self.search(store, "report")) == ["new report"]
        assert await store.expire(30, now=NOW) == 1
        assert await store.expire(30, now=NOW) == 0
        assert await store.count("u") == 1
        again = await store.add(ev("old report"))  # the text may be remembered again
        assert texts(await self.search(store, "old report", k=1)) == ["old report"]
        assert (await store.get("u", again)).created_at == NOW

    async def test_list_is_newest_first_and_limited(self, store):
        await store.add_many([ev(f"note {i}", days_ago=10 - i) for i in range(5)])
        assert [e.text for e in await store.list("u", limit=2)] == ["note 4", "note 3"]
        assert await store.list("u", kinds=[]) == []

    async def test_forget_removes_for_good(self, store):
        _, drop = await store.add_many([ev("keep this report"), ev("drop this report")])
        assert await store.forget("u", drop) is True
        assert await store.forget("u", drop) is False
        assert texts(await self.search(store, "report")) == ["keep this report"]
        assert await store.get("u", drop) is None and await store.count("u") == 1

    async def test_a_new_store_on_the_same_place_reads_what_was_written(self, tmp_path, embedder, store):
        await store.add(ev(DOG))
        other = await self.make_store(tmp_path, embedder)
        try:
            assert texts(await self.search(other, "wolf")) == [DOG]
        finally:
            await other.close()


class TestLanceContract(EpisodicContract):
    async def make_store(self, tmp_path, embedder) -> EpisodicStore:
        return LanceEpisodicStore(tmp_path / "episodic.lance", embedder, optimize_every=3)


async def test_lance_store_refuses_another_embedders_table(tmp_path):
    from memory.episodic.lance_errors import EmbedderMismatch

    store = LanceEpisodicStore(tmp_path / "e", HashEmbedder(16))
    await store.add(ev(DOG))
    other = LanceEpisodicStore(tmp_path / "e", HashEmbedder(32))
    with pytest.raises(EmbedderMismatch, match="16-dimensional"):
        await other.search("u", "dog")


async def test_lance_optimize_compacts_and_builds_the_vector_index_past_the_threshold(tmp_path):
    store = LanceEpisodicStore(tmp_path / "o", HashEmbedder(16), optimize_every=0, vector_index_min_rows=300)
    for i in range(3):  # three commits: three fragments
        await store.add_many([ev(f"batch {i} note {j} about reports") for j in range(100)])
    table = await store._table()
    assert (await table.stats())["fragment_stats"]["num_fragments"] == 3
    done = await store.optimize()
    assert done["vector_index"] == 300
    assert (await table.stats())["fragment_stats"]["num_fragments"] == 1
    assert texts(await store.search("u", "batch 2 note 7", k=1, now=NOW))[0].startswith("batch 2 note 7")
