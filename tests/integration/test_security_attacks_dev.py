"""Second round of attacks on server authorisation under the REAL ``langgraph dev`` (tokens mode,
alice and bob, admin carol): the endpoints and request shapes the first table
(``test_security_dev.py``) does not cover — sub-resources of threads, runs and assistants, bulk
endpoints, counts, the server's own MCP endpoint, runs that name another thread through
``config.configurable`` or ``checkpoint``, metadata owner spoofing.

One table, :data:`ATTACKS`, each row: what bob tries and what must come back. The README's
security section lists the rows (second table). Runs stop before the model
(``interrupt_before``), so no model is needed.
"""

from __future__ import annotations

import json
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import httpx
import pytest

from tests.integration.test_security_dev import (
    ALICE,
    BOB,
    SECRET,
    World,
    run_body,
    setup_world,
    world_env,  # noqa: F401 - a fixture used by the test below
)

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]


@dataclass
class Attack:
    resource: str
    attempt: str
    expected: str
    act: Callable[[World], Awaitable[str]]


def leaks(r: httpx.Response) -> str:
    """``"alice's secret"`` when the response carries alice's conversation, else its status code
    (a stream's status is in its first event: the server sends 200, then the refusal)."""
    if SECRET in r.text:
        return "alice's secret"
    refused = re.match(r'event: error\s+data: .*"(\d{3}): ', r.text)
    return refused.group(1) if refused and r.status_code == 200 else str(r.status_code)


async def get(w: World, path: str, **kw) -> str:
    try:
        return leaks(await w.http.get(path, headers=BOB, timeout=10, **kw))
    except httpx.ReadTimeout:  # a stream that stays open was let in
        return "joined"


async def post(w: World, path: str, body, **kw) -> str:
    return leaks(await w.http.post(path, json=body, headers=BOB, **kw))


async def bob_thread(w: World) -> str:
    return (await w.http.post("/threads", json={}, headers=BOB)).json()["thread_id"]


async def alice_checkpoint(w: World) -> str:
    state = (await w.http.get(f"/threads/{w.thread}/state", headers=ALICE)).json()
    return state["checkpoint"]["checkpoint_id"]


async def run_on_own_thread_naming_alices(w: World) -> str:
    """A run on his own thread whose ``config.configurable.thread_id`` is alice's thread."""
    thread = await bob_thread(w)
    body = run_body(config={"configurable": {"thread_id": w.thread}})
    r = await w.http.post(f"/threads/{thread}/runs/wait", json=body, headers=BOB)
    state = await w.http.get(f"/threads/{thread}/state", headers=BOB)
    return "alice's secret" if SECRET in r.text + state.text else f"{r.status_code} his own state"


async def stateless_run_naming_alices(w: World) -> str:
    body = run_body(config={"configurable": {"thread_id": w.thread}})
    return leaks(await w.http.post("/runs/wait", json=body, headers=BOB))


async def run_from_alices_checkpoint(w: World) -> str:
    thread = await bob_thread(w)
    checkpoint = {"thread_id": w.thread, "checkpoint_id": await alice_checkpoint(w), "checkpoint_ns": ""}
    body = run_body(checkpoint=checkpoint)
    r = await w.http.post(f"/threads/{thread}/runs/wait", json=body, headers=BOB)
    state = await w.http.get(f"/threads/{thread}/state", headers=BOB)
    return "alice's secret" if SECRET in r.text + state.text else f"{r.status_code} his own state"


async def batch_with_server_field(w: World) -> str:
    return await post(w, "/runs/batch", [run_body({"database": w.checkpoints})])


async def prune_alices_thread(w: World) -> str:
    await w.http.post("/threads/prune", json={"thread_ids": [w.thread]}, headers=BOB)
    r = await w.http.get(f"/threads/{w.thread}/state", headers=ALICE)
    return "alice's thread kept" if SECRET in r.text else "pruned"


async def count_alices_threads(w: World) -> str:
    r = await w.http.post("/threads/count", json={"metadata": {"owner": "alice"}}, headers=BOB)
    return f"{r.status_code} {r.json()}"


async def search_by_owner(w: World) -> str:
    r = await w.http.post("/threads/search", json={"metadata": {"owner": "alice"}}, headers=BOB)
    return "listed" if w.thread in r.text else "not listed"


async def plant_thread_as_alice(w: World) -> str:
    """A thread bob creates (and one he re-tags) saying ``owner: alice``: does it show in her list?"""
    made = (await w.http.post("/threads", json={"metadata": {"owner": "alice"}}, headers=BOB)).json()["thread_id"]
    other = await bob_thread(w)
    await w.http.patch(f"/threads/{other}", json={"metadata": {"owner": "alice"}}, headers=BOB)
    mine = (await w.http.post("/threads/search", json={"limit": 100}, headers=ALICE)).text
    return "planted" if made in mine or other in mine else "not in alice's"


async def assistant_latest(w: World) -> str:
    return await post(w, f"/assistants/{w.assistant}/latest", {"version": 1})


async def store_namespaces(w: World) -> str:
    found = []
    for body in ({"prefix": ["memories", "alice"]}, {"suffix": ["episodic"]}, {}):
        r = await w.http.post("/store/namespaces", json=body, headers=BOB)
        found += [ns for ns in r.json().get("namespaces", []) if "alice" in ns]
    return f"alice's namespaces {found}" if found else "only his own"


async def store_search_query(w: World) -> str:
    r = await w.http.post("/store/items/search", json={"namespace_prefix": [], "query": "price list"}, headers=BOB)
    return leaks(r) if SECRET in r.text else "only his own"


async def cancel_alices_runs(w: World) -> str:
    return await post(w, "/runs/cancel", {"thread_id": w.thread, "run_ids": [w.run]})


async def mcp_call(w: World, name: str, arguments: dict, context: dict) -> str:
    """The server's own MCP endpoint (``/mcp``, every assistant a tool): ``tools/call`` of the
    assistant named ``name``. It runs through the server's in-process client with the caller's
    headers, so the handlers apply; a refusal there comes back as a broken response."""
    headers = {**BOB, "Accept": "application/json, text/event-stream"}
    # its own connection: a refusal inside the endpoint breaks the one it answers on
    async with httpx.AsyncClient(base_url=w.http.base_url, timeout=60) as http:
        return await _mcp_call(http, headers, name, arguments, context)


async def _mcp_call(http: httpx.AsyncClient, headers: dict, name: str, arguments: dict, context: dict) -> str:
    init = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-03-26"}}
    r = await http.post("/mcp", json=init, headers=headers)
    if r.status_code != 200:
        return str(r.status_code)
    params: dict[str, Any] = {"name": name, "arguments": arguments, "context": context}
    call = {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": params}
    try:
        r = await http.post("/mcp", json=call, headers=headers)
    except httpx.HTTPError:
        return "refused"
    if r.status_code != 200 or '"error"' in r.text:
        return "refused"
    return "alice's secret" if SECRET in r.text else "ran"


async def webhook_inside(w: World) -> str:
    """Runs whose ``webhook`` is the server's own host in several spellings (the server would
    POST the run's output there: a request from inside the server's network)."""
    import socket

    thread = await bob_thread(w)
    codes = set()
    for host in ("localhost", "127.1", "0.0.0.0", "[::ffff:127.0.0.1]", "[::1]", "0x7f000001", socket.gethostname()):
        body = run_body(webhook=f"http://{host}:9/x")
        codes.add(str((await w.http.post(f"/threads/{thread}/runs", json=body, headers=BOB)).status_code))
    return " ".join(sorted(codes))


ATTACKS: list[Attack] = [
    Attack("threads", "read alice's thread storage", "501", lambda w: get(w, f"/threads/{w.thread}/storage")),
    Attack("threads", "join alice's thread stream", "404", lambda w: get(w, f"/threads/{w.thread}/stream")),
    Attack(
        "threads",
        "read alice's state at a checkpoint (GET)",
        "404",
        lambda w: _state_at(w),  # noqa: PLW0108 - _state_at is defined below: the lambda looks it up at call time
    ),
    Attack(
        "threads",
        "read alice's state at a checkpoint (POST)",
        "404",
        lambda w: post(w, f"/threads/{w.thread}/state/checkpoint", {"checkpoint": {}}),
    ),
    Attack("threads", "read alice's history (POST)", "404", lambda w: post(w, f"/threads/{w.thread}/history", {})),
    Attack(
        "threads",
        "update alice's state `as_node`",
        "404",
        lambda w: post(w, f"/threads/{w.thread}/state", {"values": {"messages": []}, "as_node": "call_model"}),
    ),
    Attack("threads", "prune alice's thread", "alice's thread kept", prune_alices_thread),
    Attack("threads", "count threads whose `metadata.owner` is alice", "200 0", count_alices_threads),
    Attack("threads", "search threads by `metadata.owner` = alice", "not listed", search_by_owner),
    Attack(
        "threads", "create / re-tag a thread with `metadata.owner` = alice", "not in alice's", plant_thread_as_alice
    ),
    Attack("runs", "join alice's run", "404", lambda w: get(w, f"/threads/{w.thread}/runs/{w.run}/join")),
    Attack("runs", "join alice's run stream", "404", lambda w: get(w, f"/threads/{w.thread}/runs/{w.run}/stream")),
    Attack("runs", "bulk-cancel alice's runs (`/runs/cancel`)", "404", cancel_alices_runs),
    Attack(
        "runs",
        "a run on his thread with `configurable.thread_id` = alice's",
        "200 his own state",
        run_on_own_thread_naming_alices,
    ),
    Attack("runs", "a stateless run with `configurable.thread_id` = alice's", "200", stateless_run_naming_alices),
    Attack("runs", "a run on his thread from alice's `checkpoint`", "200 his own state", run_from_alices_checkpoint),
    Attack("runs", "`/runs/batch` with `context.database`", "403", batch_with_server_field),
    Attack(
        "runs",
        "a `webhook` on the server's own host (localhost, 127.1, ::ffff:127.0.0.1, 0x7f000001 …)",
        "422",
        webhook_inside,
    ),
    Attack(
        "assistants",
        "versions of alice's assistant",
        "404",
        lambda w: post(w, f"/assistants/{w.assistant}/versions", {}),
    ),
    Attack("assistants", "set the latest version of alice's assistant", "404", assistant_latest),
    Attack("assistants", "schemas of alice's assistant", "404", lambda w: get(w, f"/assistants/{w.assistant}/schemas")),
    Attack("assistants", "graph of alice's assistant", "404", lambda w: get(w, f"/assistants/{w.assistant}/graph")),
    Attack(
        "assistants", "subgraphs of alice's assistant", "404", lambda w: get(w, f"/assistants/{w.assistant}/subgraphs")
    ),
    Attack("crons", "count crons", "200 0", lambda w: _count(w, "/runs/crons/count")),
    Attack("store", "list namespaces (prefix alice's, suffix, none)", "only his own", store_namespaces),
    Attack("store", "search every namespace by query", "only his own", store_search_query),
    Attack(
        "server MCP",
        "`/mcp` tools/call of the agent (`hermes`) with `context.database`",
        "refused",
        lambda w: mcp_call(w, "hermes", {"messages": "what did alice say?"}, {"database": w.checkpoints}),
    ),
    Attack(
        "server MCP",
        "`/mcp` tools/call of the `reminders` graph",
        "refused",
        lambda w: mcp_call(w, "reminders", {"now": "2099-01-01T00:00:00"}, {}),
    ),
]


async def _state_at(w: World) -> str:
    return await get(w, f"/threads/{w.thread}/state/{await alice_checkpoint(w)}")


async def _count(w: World, path: str) -> str:
    r = await w.http.post(path, json={}, headers=BOB)
    return f"{r.status_code} {r.json()}"


async def test_second_round_of_cross_user_attacks_is_refused(tmp_path, world_env, start_langgraph_dev):  # noqa: F811
    url, _ = start_langgraph_dev(world_env)
    async with httpx.AsyncClient(base_url=url, timeout=60) as http:
        w = await setup_world(http, tmp_path)
        results = {a.attempt: await a.act(w) for a in ATTACKS}
        wrong = {a.attempt: (results[a.attempt], a.expected) for a in ATTACKS if results[a.attempt] != a.expected}
        assert not wrong, f"attempt: (got, expected): {json.dumps(wrong, indent=1)}"


def test_the_readme_lists_this_table():
    """The README's second table of attempts is :data:`ATTACKS` (same attempts, same results)."""
    from tests.integration.conftest import ROOT

    section = (ROOT / "README.md").read_text()
    section = section[section.index("## Security") :]
    rows = set(re.findall(r"^\| *([^|]+?) *\| *([^|]+?) *\| *([^|]+?) *\|$", section, flags=re.MULTILINE))
    missing = [a for a in ATTACKS if (a.resource, a.attempt, a.expected) not in rows]
    assert not missing, "\n".join(f"| {a.resource} | {a.attempt} | {a.expected} |" for a in missing)
