"""``graph/memory_store.py``: Hermes's memories as a LangGraph ``BaseStore`` (in process; the
real server is tests/integration/test_memory_auth_dev.py), and the auth helpers of
``graph/auth.py`` that need no server."""

from __future__ import annotations

import json

import pytest

from graph.auth import load_tokens, user_for_token
from graph.memory_store import HermesMemoryStore
from memory.embeddings import HashEmbedder
from memory.episodic.base import EpisodicEvent
from memory.episodic.lance import LanceEpisodicStore
from memory.service import MemoryService


@pytest.fixture
async def store(tmp_path):
    mem = MemoryService(
        tmp_path / "data", episodic=LanceEpisodicStore(tmp_path / "data" / "episodic.lance", HashEmbedder())
    )
    for user, goal in (("alice", "I prefer PDF reports."), ("bob", "I prefer markdown reports.")):
        await mem.write_plan(mem.plan_turn(user, "t", goal, "ok", [], None, []))
    yield HermesMemoryStore(lambda: mem), mem
    await mem.aclose()


async def test_search_lists_both_layers_of_one_user(store):
    s, _ = store
    items = await s.asearch(("memories", "alice"), limit=20)
    assert {i.namespace for i in items} == {("memories", "alice", "episodic"), ("memories", "alice", "semantic")}
    assert not any("markdown" in json.dumps(i.value) for i in items)
    facts = await s.asearch(("memories", "alice", "semantic"))
    assert [(f.value["predicate"], f.value["object"]) for f in facts] == [("prefers_format", "pdf")]


async def test_query_filter_get_and_offset(store):
    s, _ = store
    hits = await s.asearch(("memories", "bob"), query="markdown reports")
    assert hits and all(h.score is not None for h in hits)
    prefs = await s.asearch(("memories", "bob", "episodic"), filter={"kind": "preference"})
    assert (
        len(prefs) == 1 and (await s.aget(("memories", "bob", "episodic"), prefs[0].key)).value["kind"] == "preference"
    )
    assert await s.aget(("memories", "alice", "episodic"), prefs[0].key) is None  # bob's id, alice's namespace
    assert len(await s.asearch(("memories", "bob"), limit=1, offset=1)) == 1


async def test_put_a_note_and_delete_forgets(store):
    s, mem = store
    await s.aput(("memories", "alice", "episodic"), "n1", {"text": "standup is at 9"})
    assert (await mem.episodic.get("alice", "n1")).kind == "note"
    fact = (await s.asearch(("memories", "alice", "semantic")))[0]
    await s.adelete(("memories", "alice", "semantic"), fact.key)
    assert await mem.semantic.facts("alice") == []
    with pytest.raises(ValueError, match="derived from episodes"):
        await s.aput(("memories", "alice", "semantic"), "x", {"object": "pdf"})
    with pytest.raises(ValueError, match="no memory namespace"):
        await s.aget(("memories", "alice", "dreams"), "x")


async def test_namespaces_and_other_namespaces_pass_through(store):
    s, _ = store
    await s.aput(("notes", "misc"), "k", {"v": 1})
    assert (await s.aget(("notes", "misc"), "k")).value == {"v": 1}
    names = await s.alist_namespaces(prefix=("memories",))
    assert ("memories", "alice", "episodic") in names and ("memories", "bob", "semantic") in names
    assert await s.alist_namespaces(prefix=("memories", "alice"), max_depth=2) == [("memories", "alice")]
    assert ("notes", "misc") in await s.alist_namespaces()
    assert await s.abatch([]) == []


async def test_store_api_ignores_an_unknown_event_id(store):
    s, mem = store
    await mem.episodic.add_many([EpisodicEvent(user_id="alice", kind="note", text="x", confidence=1.0, id="e1")])
    await s.adelete(("memories", "alice", "episodic"), "nope")  # no error
    assert await mem.episodic.get("alice", "e1") is not None


def test_token_table_inline_or_file(tmp_path):
    assert load_tokens("") == {}
    assert load_tokens('{"t1": "alice"}') == {"t1": "alice"}
    path = tmp_path / "tokens.json"
    path.write_text('{"t2": "bob"}')
    assert load_tokens(str(path)) == {"t2": "bob"}
    for bad in ("{not json", '{"t": 3}', str(tmp_path / "missing.json")):
        with pytest.raises(ValueError, match="HERMES_AUTH_TOKENS"):
            load_tokens(bad)
    assert user_for_token("t1", {"t1": "alice", "t2": "bob"}) == "alice"
    assert user_for_token("t3", {"t1": "alice"}) is None
