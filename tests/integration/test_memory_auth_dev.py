"""Per-user memory under the REAL ``langgraph dev`` server (``langgraph.json`` ``auth`` and
``store``; ``graph/auth.py``, ``graph/memory_store.py``), through ``langgraph_sdk``:

* tokens mode (``HERMES_AUTH_TOKENS``): no token or a wrong one → 401; a run started by alice
  recalls alice's memories even when its context names bob; bob cannot read alice's thread;
  the store API shows alice her own memories only (a namespace naming bob gives hers or
  nothing), and she can add and forget her memories there;
* local mode (no tokens): no header needed, the run's ``context.user_id`` names the owner as
  before, and the store API lists and forgets memories of user "default".
"""

from __future__ import annotations

import json
import os

import httpx
import pytest
from langgraph_sdk import get_client

from graph import resources
from graph.context import Context
from memory.episodic.base import EpisodicEvent
from tests.integration.conftest import server_cwd

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]
TOKENS = {"tok-alice-1f9c": "alice", "tok-bob-77ab": "bob"}


async def seed(data_dir, events: dict[str, list[str]]) -> dict[str, list[str]]:
    ids: dict[str, list[str]] = {}
    for user, texts in events.items():
        mem = resources.get_memory(Context(data_dir=str(data_dir), embeddings="hash", user_id=user))
        ids[user] = await mem.episodic.add_many(
            [EpisodicEvent(user_id=user, kind="preference", text=t, confidence=0.9) for t in texts]
        )
        await mem.write_plan(
            mem.plan_turn(user, "seed", texts[0].removeprefix("user preference: "), "ok", [], None, [])
        )
    await resources.aclose_resources()
    return ids


def relative(path, tmp_path) -> str:
    """``path`` relative to the server's cwd (like the default ``.hermes``)."""
    return os.path.relpath(path, server_cwd(tmp_path))


def client(url: str, token: str | None = None):
    return get_client(url=url, headers={"Authorization": f"Bearer {token}"} if token else None)


async def recalled(c, text: str, user_in_context: str) -> tuple[str, list[str]]:
    thread = await c.threads.create()
    await c.runs.wait(
        thread["thread_id"],
        "agent",
        input={"messages": [{"role": "human", "content": text}]},
        context={"user_id": user_in_context},
        interrupt_before=["call_model"],
    )
    state = await c.threads.get_state(thread["thread_id"])
    return thread["thread_id"], state["values"]["memory_context"]


async def test_tokens_mode_isolates_users_in_runs_threads_and_the_store_api(tmp_path, start_langgraph_dev):
    data_dir = tmp_path / "data"
    ids = await seed(
        data_dir,
        {"alice": ["user preference: I prefer PDF reports."], "bob": ["user preference: I prefer markdown reports."]},
    )
    url, log_path = start_langgraph_dev(
        {
            "HERMES_DATA_DIR": relative(data_dir, tmp_path),
            "HERMES_EMBEDDINGS": "hash",
            "HERMES_AUTH_TOKENS": json.dumps(TOKENS),
        }
    )
    async with httpx.AsyncClient(base_url=url) as raw:
        assert (await raw.post("/threads", json={})).status_code == 401  # no token
        assert (await raw.post("/threads", json={}, headers={"Authorization": "Bearer nope"})).status_code == 401
        assert (await raw.post("/store/namespaces", json={})).status_code == 401
    alice, bob = client(url, "tok-alice-1f9c"), client(url, "tok-bob-77ab")

    # a run of alice's recalls alice's memories, even when its context names bob
    thread_id, lines = await recalled(alice, "Write the monthly sales report", user_in_context="bob")
    assert any("pdf" in x.lower() for x in lines), lines
    assert not any("markdown" in x.lower() for x in lines), lines
    _, lines = await recalled(bob, "Write the monthly sales report", user_in_context="alice")
    assert any("markdown" in x.lower() for x in lines) and not any("pdf" in x.lower() for x in lines), lines
    # alice's thread is not bob's to read
    with pytest.raises(httpx.HTTPStatusError) as info:
        await bob.threads.get_state(thread_id)
    assert info.value.response.status_code == 404
    assert thread_id not in {t["thread_id"] for t in await bob.threads.search(limit=100)}

    # the store API: alice sees her own memories only
    mine = (await alice.store.search_items(("memories", "alice"), limit=50))["items"]
    assert mine and {tuple(i["namespace"])[1] for i in mine} == {"alice"}
    assert any(i["key"] == ids["alice"][0] for i in mine)
    theirs = (await alice.store.search_items(("memories", "bob"), limit=50))["items"]
    assert all(tuple(i["namespace"])[1] == "alice" for i in theirs)  # rewritten to hers
    assert not any("markdown" in json.dumps(i["value"]).lower() for i in theirs)
    assert await alice.store.get_item(("memories", "bob", "episodic"), ids["bob"][0]) is None  # not hers
    spaces = (await alice.store.list_namespaces(prefix=["memories"]))["namespaces"]
    assert spaces and {tuple(n)[1] for n in spaces} == {"alice"}
    hits = (await alice.store.search_items(("memories", "alice"), query="PDF reports"))["items"]
    assert hits and hits[0]["score"] is not None

    # ... and edits them: a note in, a memory out
    await alice.store.put_item(("memories", "alice", "episodic"), "note-1", {"text": "the team meets on Fridays"})
    note = await alice.store.get_item(("memories", "alice", "episodic"), "note-1")
    assert note["value"]["text"] == "the team meets on Fridays" and note["value"]["kind"] == "note"
    await alice.store.delete_item(("memories", "alice", "episodic"), ids["alice"][0])
    await alice.store.delete_item(("memories", "bob", "episodic"), ids["bob"][0])  # lands on hers: no-op
    mem = resources.get_memory(Context(data_dir=str(data_dir), embeddings="hash"))
    assert await mem.episodic.get("alice", ids["alice"][0]) is None
    assert await mem.episodic.get("bob", ids["bob"][0]) is not None  # bob's untouched
    await resources.aclose_resources()
    assert "BlockingError" not in log_path.read_text(errors="replace")


async def test_local_mode_needs_no_header_and_keeps_context_user_ids(tmp_path, start_langgraph_dev):
    data_dir = tmp_path / "data"
    ids = await seed(
        data_dir,
        {
            "default": ["user preference: I prefer PDF reports."],
            "carol": ["user preference: I prefer markdown reports."],
        },
    )
    url, _ = start_langgraph_dev({"HERMES_DATA_DIR": relative(data_dir, tmp_path), "HERMES_EMBEDDINGS": "hash"})
    anyone = client(url)
    _, lines = await recalled(anyone, "Write the monthly sales report", user_in_context="carol")
    assert any("markdown" in x.lower() for x in lines), lines  # as before: the context names the user
    items = (await anyone.store.search_items(("memories", "default"), limit=50))["items"]
    assert any(i["key"] == ids["default"][0] for i in items)
    spaces = {tuple(n) for n in (await anyone.store.list_namespaces(prefix=["memories"]))["namespaces"]}
    assert ("memories", "default", "episodic") in spaces and ("memories", "carol", "semantic") in spaces
    await anyone.store.delete_item(("memories", "default", "episodic"), ids["default"][0])
    assert await anyone.store.search_items(("memories", "default", "episodic"), filter={"kind": "preference"}) == {
        "items": []
    }
