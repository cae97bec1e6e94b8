"""SqliteEpisodicStore: K11 dedupe, relevance × time decay, kind filter, expiry, bad rows."""

from __future__ import annotations

import sqlite3
from datetime import datetime, timedelta, timezone

import pytest

from memory.episodic.base import EpisodicEvent, EpisodicStore, time_decay
from memory.episodic.sqlite import SqliteEpisodicStore, fts_query

NOW = datetime(2026, 11, 29, 12, 0, tzinfo=timezone.utc)
DOG = "The dog is a domesticated descendant of the wolf."


def ev(text: str, *, user: str = "u", kind: str = "task", days_ago: float = 0.0, **kw) -> EpisodicEvent:
    return EpisodicEvent(
        user_id=user, kind=kind, text=text, created_at=NOW - timedelta(days=days_ago), confidence=0.9, **kw
    )


@pytest.fixture
def store(tmp_path) -> SqliteEpisodicStore:
    return SqliteEpisodicStore.in_dir(tmp_path)


def rows(store: SqliteEpisodicStore) -> list[tuple]:
    with sqlite3.connect(store.db.path) as db:
        return db.execute("SELECT id, user_id, text, expired_at FROM episodic_events ORDER BY rowid").fetchall()


async def test_store_satisfies_protocol(store):
    assert isinstance(store, EpisodicStore)


async def test_constructor_touches_no_file(tmp_path):
    SqliteEpisodicStore.in_dir(tmp_path / "later")
    assert not (tmp_path / "later").exists()


# --- K11 --------------------------------------------------------------------------------------


async def test_k11_same_text_twice_is_a_noop_returning_the_first_id(store):
    first = ev(DOG)
    second = ev(DOG)
    assert await store.add(first) == first.id
    assert await store.add(second) == first.id
    assert [r[0] for r in rows(store)] == [first.id]


@pytest.mark.parametrize(
    "variant",
    [
        "the dog is a domesticated descendant of the wolf.",
        "THE DOG IS A DOMESTICATED DESCENDANT OF THE WOLF.",
        "  The dog  is a\tdomesticated\ndescendant of the wolf.  ",
    ],
)
async def test_k11_case_and_whitespace_variants_are_the_same_memory(store, variant):
    first = ev(DOG)
    await store.add(first)
    assert await store.add(ev(variant)) == first.id
    assert len(rows(store)) == 1


async def test_k11_duplicate_keeps_the_original_record_untouched(store):
    first = ev(DOG, days_ago=3, metadata={"thread_id": "t1"})
    await store.add(first)
    await store.add(ev(DOG.upper(), kind="preference", metadata={"thread_id": "t2"}))
    (hit,) = await store.search("u", "dog wolf", k=5, now=NOW)
    assert hit.event == first  # kind, timestamp and metadata of the first write survive


async def test_k11_different_users_are_not_deduped(store):
    a, b = ev(DOG, user="alice"), ev(DOG, user="bob")
    assert await store.add(a) == a.id
    assert await store.add(b) == b.id
    assert {r[1] for r in rows(store)} == {"alice", "bob"}
    assert [h.event.id for h in await store.search("bob", "wolf", now=NOW)] == [b.id]


async def test_k11_different_text_is_a_new_memory(store):
    await store.add(ev(DOG))
    await store.add(ev("The cat is not a descendant of the wolf."))
    assert len(rows(store)) == 2


async def test_k11_nothing_is_deleted_by_many_duplicate_writes(store):
    kept = [ev("first memory"), ev("second memory")]
    for e in kept:
        await store.add(e)
    for _ in range(3):
        await store.add(ev("FIRST   memory"))
        await store.add(ev("Second Memory"))
    assert [r[0] for r in rows(store)] == [e.id for e in kept]
    assert all(r[3] is None for r in rows(store))


# --- ranking ----------------------------------------------------------------------------------


def test_time_decay_halves_every_half_life():
    assert time_decay(NOW, NOW, 7) == 1.0
    assert time_decay(NOW - timedelta(days=7), NOW, 7) == pytest.approx(0.5)
    assert time_decay(NOW - timedelta(days=14), NOW, 7) == pytest.approx(0.25)
    assert time_decay(NOW + timedelta(days=3), NOW, 7) == 1.0  # the future is not "fresher"
    with pytest.raises(ValueError):
        time_decay(NOW, NOW, 0)


async def test_older_event_ranks_lower_at_equal_relevance(store):
    old = ev("ran the monthly sales report with query_database", days_ago=10)
    new = ev("ran the monthly sales report using query_database", days_ago=1)
    await store.add(old)  # inserted first, so insertion order cannot explain the result
    await store.add(new)
    hits = await store.search("u", "monthly sales report", k=2, now=NOW)
    assert [h.event.id for h in hits] == [new.id, old.id]
    assert hits[0].relevance == pytest.approx(hits[1].relevance)
    assert hits[1].decay == pytest.approx(0.5 ** (10 / 7))
    assert hits[0].score > hits[1].score


async def test_half_life_is_configurable(tmp_path):
    store = SqliteEpisodicStore.in_dir(tmp_path, half_life_days=1)
    await store.add(ev("cleaned the data with a python script", days_ago=2))
    (hit,) = await store.search("u", "python script", now=NOW)
    assert hit.decay == pytest.approx(0.25)


async def test_more_relevant_beats_slightly_newer(store):
    relevant = ev("weekly sales report for the sales team, sales by region", days_ago=2)
    other = ev("changed the printer settings", days_ago=1)
    await store.add(other)
    await store.add(relevant)
    hits = await store.search("u", "sales report", k=5, now=NOW)
    assert [h.event.id for h in hits] == [relevant.id]  # keyword search: no match, no hit


async def test_empty_query_ranks_by_recency(store):
    events = [ev(f"event number {i}", days_ago=d) for i, d in enumerate([5, 1, 3])]
    for e in events:
        await store.add(e)
    hits = await store.search("u", "  ", k=3, now=NOW)
    assert [h.event.id for h in hits] == [events[1].id, events[2].id, events[0].id]


async def test_k_limits_results(store):
    for i in range(5):
        await store.add(ev(f"report {i} generated"))
    assert len(await store.search("u", "report", k=2, now=NOW)) == 2
    assert await store.search("u", "report", k=0, now=NOW) == []


async def test_chinese_text_is_searchable(store):
    e = ev("用户在2025年1月10日运行了数据清洗任务，使用了Python脚本")
    await store.add(e)
    await store.add(ev("用户喜欢简洁的回复"))
    hits = await store.search("u", "数据清洗", k=1, now=NOW)
    assert [h.event.id for h in hits] == [e.id]


async def test_stemming_matches_plural(store):
    e = ev("I prefer PDF reports")
    await store.add(e)
    assert [h.event.id for h in await store.search("u", "report", now=NOW)] == [e.id]


@pytest.mark.parametrize("query", ['sales" OR x', "NEAR(sales", "sales*", "kind:task", "AND", '"'])
async def test_fts_syntax_in_queries_is_inert(store, query):
    await store.add(ev("sales report"))
    await store.search("u", query, now=NOW)  # must not raise sqlite3.OperationalError


def test_fts_query_quotes_terms_and_drops_punctuation():
    assert fts_query('sales" OR x') == '"sales" OR "or" OR "x"'
    assert fts_query("?!") is None


# --- kind filter ------------------------------------------------------------------------------


async def test_kind_filter(store):
    task = ev("report generated as markdown", kind="task")
    pref = ev("user preference: markdown report", kind="preference")
    fix = ev("tool report_generator failed then succeeded, markdown", kind="tool_recovery")
    for e in (task, pref, fix):
        await store.add(e)
    only_pref = await store.search("u", "markdown report", k=5, kinds=["preference"], now=NOW)
    assert [h.event.id for h in only_pref] == [pref.id]
    two = await store.search("u", "markdown", k=5, kinds=["task", "tool_recovery"], now=NOW)
    assert {h.event.id for h in two} == {task.id, fix.id}
    assert await store.search("u", "markdown", k=5, kinds=[], now=NOW) == []
    assert len(await store.search("u", "markdown", k=5, kinds=None, now=NOW)) == 3


# --- expiry -----------------------------------------------------------------------------------


async def test_expire_retires_old_events_without_deleting(store):
    old = ev("old sales report", days_ago=31)
    fresh = ev("fresh sales report", days_ago=29)
    await store.add(old)
    await store.add(fresh)
    assert await store.expire(now=NOW) == 1
    assert await store.expire(now=NOW) == 0  # idempotent
    assert [h.event.id for h in await store.search("u", "sales report", k=5, now=NOW)] == [fresh.id]
    assert len(rows(store)) == 2  # archived, not deleted
    assert await store.count("u") == 1
    assert await store.count("u", include_expired=True) == 2


async def test_expire_custom_age(store):
    await store.add(ev("a", days_ago=5))
    await store.add(ev("b", days_ago=1))
    assert await store.expire(older_than_days=3, now=NOW) == 1


async def test_search_hides_events_past_validity_even_before_expire_runs(store):
    await store.add(ev("ancient sales report", days_ago=45))
    assert await store.search("u", "sales report", now=NOW) == []


async def test_expired_text_can_be_recorded_again(store):
    old = ev(DOG, days_ago=40)
    await store.add(old)
    await store.expire(now=NOW)
    again = ev(DOG)
    assert await store.add(again) == again.id
    assert [h.event.id for h in await store.search("u", "wolf", now=NOW)] == [again.id]


# --- robustness -------------------------------------------------------------------------------


async def test_corrupt_rows_are_skipped(store):
    good = ev("sales report for October")
    await store.add(good)
    with sqlite3.connect(store.db.path) as db:
        for rid, created, meta, kind in [
            ("bad-json", NOW.isoformat(), "{not json", "task"),
            ("bad-date", "yesterday-ish", "{}", "task"),
            ("bad-kind", NOW.isoformat(), "{}", "gossip"),
        ]:
            cur = db.execute(
                "INSERT INTO episodic_events (id, user_id, kind, text, content_hash, created_at, confidence,"
                " metadata) VALUES (?, 'u', ?, ?, ?, ?, 0.9, ?)",
                (rid, kind, f"sales report {rid}", rid, created, meta),
            )
            db.execute("INSERT INTO episodic_fts (rowid, body) VALUES (?, ?)", (cur.lastrowid, f"sales report {rid}"))
    hits = await store.search("u", "sales report", k=5, now=NOW)
    assert [h.event.id for h in hits] == [good.id]
