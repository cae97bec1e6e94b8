"""Server authorisation under the REAL ``langgraph dev`` (``graph/auth.py``, ``langgraph.json``
``auth``), tokens mode with two users (alice, bob) and an admin (carol), over raw HTTP.

One table, :data:`ATTEMPTS`: what bob (the attacker) tries against alice's data, the system
assistants and the server's own settings, and what must come back. The README's security section
shows the same table (checked here). Every server-controlled ``Context`` field is tried on its own
in a run, a cron and an assistant; the admin can do what users cannot. Runs stop before the model
(``interrupt_before``), so no model is needed: every refusal happens when the request arrives.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import httpx
import pytest

from graph.auth import USER_SETTINGS, server_setting_reason
from graph.context import Context
from tests.integration.conftest import ROOT, server_cwd

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]
TOKENS = {"tok-alice-5e1d": "alice", "tok-bob-0c3a": "bob", "tok-carol-9a7f": "carol"}
ALICE, BOB, CAROL = ({"Authorization": f"Bearer {t}"} for t in TOKENS)
SECRET = "alice's secret: the Q3 price list is in /srv/prices"
NEVER = "0 0 1 1 *"  # a cron that does not fire during the test


@dataclass
class World:
    http: httpx.AsyncClient
    checkpoints: str  # the server's own checkpoints.sqlite
    thread: str = ""  # alice's thread, holding SECRET
    run: str = ""  # alice's run on it
    assistant: str = ""  # alice's own assistant
    cron: str = ""  # alice's cron
    agent: str = ""  # the system assistant of the agent graph
    reminders: str = ""  # the system assistant of the reminders graph


async def status(response: Awaitable[httpx.Response]) -> str:
    return str((await response).status_code)


def run_body(context: dict[str, Any] | None = None, **extra: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "assistant_id": "agent",
        "input": {"messages": [{"role": "human", "content": "what did alice say?"}]},
        "interrupt_before": ["call_model"],
        **extra,
    }
    if context is not None:
        body["context"] = context
    return body


async def listed(response: Awaitable[httpx.Response], key: str, value: str) -> str:
    r = await response
    if r.status_code != 200:
        return str(r.status_code)
    items = r.json()
    return "listed" if any(str(i.get(key)) == value for i in items) else "not listed"


async def store_get(w: World) -> str:
    r = await w.http.get("/store/items", params={"namespace": "memories.alice.episodic", "key": "note-a"}, headers=BOB)
    if r.status_code == 404 or (r.status_code == 200 and r.json() is None):
        return "not found"
    return "alice's item" if SECRET in r.text else f"{r.status_code} {r.text[:80]}"


async def store_search(w: World) -> str:
    r = await w.http.post("/store/items/search", json={"namespace_prefix": ["memories", "alice"]}, headers=BOB)
    items = r.json()["items"]
    return "alice's item" if SECRET in json.dumps(items) else f"{r.status_code} only his own"


async def store_delete(w: World) -> str:
    await w.http.request(
        "DELETE", "/store/items", json={"namespace": ["memories", "alice", "episodic"], "key": "note-a"}, headers=BOB
    )
    r = await w.http.get(
        "/store/items", params={"namespace": "memories.alice.episodic", "key": "note-a"}, headers=ALICE
    )
    return "alice's item kept" if SECRET in r.text else "deleted"


async def store_put(w: World) -> str:
    await w.http.put(
        "/store/items",
        json={"namespace": ["memories", "alice", "episodic"], "key": "planted", "value": {"text": "planted by bob"}},
        headers=BOB,
    )
    r = await w.http.get(
        "/store/items", params={"namespace": "memories.alice.episodic", "key": "planted"}, headers=ALICE
    )
    return "planted in alice's" if r.status_code == 200 and "planted by bob" in r.text else "not in alice's"


async def system_agent_untouched(w: World, patch: dict[str, Any]) -> str:
    def view(a: dict[str, Any]) -> tuple[Any, ...]:
        return a["name"], a["context"], a["config"], a["version"]

    before = view((await w.http.get(f"/assistants/{w.agent}", headers=ALICE)).json())
    code = await status(w.http.patch(f"/assistants/{w.agent}", json=patch, headers=BOB))
    after = view((await w.http.get(f"/assistants/{w.agent}", headers=ALICE)).json())
    return code if after == before else f"{code} changed"


async def move_to_maintenance(w: World) -> str:
    own = (await w.http.post("/assistants", json={"graph_id": "agent"}, headers=BOB)).json()["assistant_id"]
    return await status(w.http.patch(f"/assistants/{own}", json={"graph_id": "consolidate"}, headers=BOB))


async def forced_user(w: World, context: dict[str, Any]) -> str:
    thread = (await w.http.post("/threads", json={}, headers=BOB)).json()["thread_id"]
    r = await w.http.post(f"/threads/{thread}/runs", json=run_body(context), headers=BOB)
    if r.status_code != 200:
        return str(r.status_code)
    shown = (await w.http.get(f"/threads/{thread}/runs/{r.json()['run_id']}", headers=BOB)).json()
    context = shown["kwargs"]["context"]
    return f"runs as {context.get('user_id')}" + (" and alice" if "alice" in json.dumps(context) else "")


@dataclass(frozen=True)
class Attempt:
    resource: str
    attempt: str  # bob's attempt, as the README's table says it
    expected: str
    act: Callable[[World], Awaitable[str]]


ATTEMPTS: list[Attempt] = [
    Attempt("auth", "any request without a token", "401", lambda w: status(w.http.post("/threads/search", json={}))),
    Attempt(
        "auth",
        "Studio's `x-auth-scheme: langsmith` header, no token",
        "401",
        lambda w: status(w.http.post("/threads/search", json={}, headers={"x-auth-scheme": "langsmith"})),
    ),
    Attempt(
        "auth",
        "the in-process client's `/noauth` path prefix, no token",
        "401",
        lambda w: status(w.http.post("/noauth/threads/search", json={})),
    ),
    Attempt(
        "assistants",
        "update the system `agent` assistant's context (`base_url` → his server)",
        "403",
        lambda w: system_agent_untouched(w, {"context": {"base_url": "http://127.0.0.1:9/v1"}}),
    ),
    Attempt(
        "assistants",
        "rename the system `agent` assistant",
        "403",
        lambda w: system_agent_untouched(w, {"name": "bob's agent"}),
    ),
    Attempt(
        "assistants",
        "delete the system `reminders` assistant",
        "403",
        lambda w: status(w.http.delete(f"/assistants/{w.reminders}", headers=BOB)),
    ),
    Attempt(
        "assistants",
        "read alice's assistant",
        "404",
        lambda w: status(w.http.get(f"/assistants/{w.assistant}", headers=BOB)),
    ),
    Attempt(
        "assistants",
        "search assistants",
        "not listed",
        lambda w: listed(
            w.http.post("/assistants/search", json={"limit": 100}, headers=BOB), "assistant_id", w.assistant
        ),
    ),
    Attempt(
        "assistants",
        "update alice's assistant",
        "404",
        lambda w: status(w.http.patch(f"/assistants/{w.assistant}", json={"name": "mine"}, headers=BOB)),
    ),
    Attempt(
        "assistants",
        "delete alice's assistant",
        "404",
        lambda w: status(w.http.delete(f"/assistants/{w.assistant}", headers=BOB)),
    ),
    Attempt(
        "assistants",
        "create an assistant whose `config.configurable.database` is the server's checkpoints",
        "403",
        lambda w: status(
            w.http.post(
                "/assistants",
                json={"graph_id": "agent", "config": {"configurable": {"database": w.checkpoints}}},
                headers=BOB,
            )
        ),
    ),
    Attempt(
        "assistants",
        "create an assistant marked `metadata.created_by = system` (shown to everyone)",
        "403",
        lambda w: status(
            w.http.post("/assistants", json={"graph_id": "agent", "metadata": {"created_by": "system"}}, headers=BOB)
        ),
    ),
    Attempt(
        "assistants",
        "create an assistant of the `reminders` graph",
        "403",
        lambda w: status(w.http.post("/assistants", json={"graph_id": "reminders"}, headers=BOB)),
    ),
    Attempt("assistants", "move his own assistant to the `consolidate` graph", "403", move_to_maintenance),
    Attempt("threads", "read alice's thread", "404", lambda w: status(w.http.get(f"/threads/{w.thread}", headers=BOB))),
    Attempt(
        "threads",
        "read alice's thread state (her conversation)",
        "404",
        lambda w: status(w.http.get(f"/threads/{w.thread}/state", headers=BOB)),
    ),
    Attempt(
        "threads",
        "read alice's thread history",
        "404",
        lambda w: status(w.http.post(f"/threads/{w.thread}/history", json={}, headers=BOB)),
    ),
    Attempt(
        "threads",
        "search threads",
        "not listed",
        lambda w: listed(w.http.post("/threads/search", json={"limit": 100}, headers=BOB), "thread_id", w.thread),
    ),
    Attempt(
        "threads",
        "update alice's thread metadata (take it over)",
        "404",
        lambda w: status(w.http.patch(f"/threads/{w.thread}", json={"metadata": {"owner": "bob"}}, headers=BOB)),
    ),
    Attempt(
        "threads",
        "update alice's thread state",
        "404",
        lambda w: status(w.http.post(f"/threads/{w.thread}/state", json={"values": {}}, headers=BOB)),
    ),
    Attempt(
        "threads",
        "copy alice's thread",
        "409",
        lambda w: status(w.http.post(f"/threads/{w.thread}/copy", headers=BOB)),
    ),
    Attempt(
        "threads", "delete alice's thread", "404", lambda w: status(w.http.delete(f"/threads/{w.thread}", headers=BOB))
    ),
    Attempt(
        "threads",
        "create a thread with alice's thread id (`if_exists: do_nothing`)",
        "409",
        lambda w: status(w.http.post("/threads", json={"thread_id": w.thread, "if_exists": "do_nothing"}, headers=BOB)),
    ),
    Attempt(
        "runs",
        "start a run on alice's thread",
        "404",
        lambda w: status(w.http.post(f"/threads/{w.thread}/runs", json=run_body(), headers=BOB)),
    ),
    Attempt(
        "runs",
        "list the runs of alice's thread",
        "404",
        lambda w: status(w.http.get(f"/threads/{w.thread}/runs", headers=BOB)),
    ),
    Attempt(
        "runs",
        "read alice's run",
        "404",
        lambda w: status(w.http.get(f"/threads/{w.thread}/runs/{w.run}", headers=BOB)),
    ),
    Attempt(
        "runs",
        "cancel alice's run",
        "404",
        lambda w: status(w.http.post(f"/threads/{w.thread}/runs/{w.run}/cancel", headers=BOB)),
    ),
    Attempt(
        "runs",
        "delete alice's run",
        "404",
        lambda w: status(w.http.delete(f"/threads/{w.thread}/runs/{w.run}", headers=BOB)),
    ),
    Attempt(
        "runs",
        "run alice's assistant",
        "404",
        lambda w: status(w.http.post("/runs", json=run_body(assistant_id=w.assistant), headers=BOB)),
    ),
    Attempt(
        "runs",
        "run the `reminders` graph (fire every user's due reminders, `now` in the future)",
        "403",
        lambda w: status(
            w.http.post(
                "/runs", json={"assistant_id": "reminders", "input": {"now": "2099-01-01T00:00:00"}}, headers=BOB
            )
        ),
    ),
    Attempt(
        "run context",
        "`context.database` = the server's `checkpoints.sqlite` (read alice's conversation)",
        "403",
        lambda w: status(w.http.post("/runs", json=run_body({"database": w.checkpoints}), headers=BOB)),
    ),
    Attempt(
        "run context",
        "`config.configurable.base_url` instead of `context`",
        "403",
        lambda w: status(
            w.http.post(
                "/runs",
                json={**run_body(), "config": {"configurable": {"base_url": "http://127.0.0.1:9/v1"}}},
                headers=BOB,
            )
        ),
    ),
    Attempt(
        "run context",
        "`context.DATABASE` (the loader ignores case)",
        "403",
        lambda w: status(w.http.post("/runs", json=run_body({"DATABASE": w.checkpoints}), headers=BOB)),
    ),
    Attempt(
        "run context",
        "`context._env_prefix` (make the run ignore the server's settings)",
        "403",
        lambda w: status(w.http.post("/runs", json=run_body({"_env_prefix": "NONE_"}), headers=BOB)),
    ),
    Attempt(
        "run context",
        "`context.user_id` / `USER_ID` = alice (read her memories)",
        "runs as bob",
        lambda w: forced_user(w, {"user_id": "alice", "USER_ID": "alice"}),
    ),
    Attempt(
        "crons",
        "search crons",
        "not listed",
        lambda w: listed(w.http.post("/runs/crons/search", json={"limit": 100}, headers=BOB), "cron_id", w.cron),
    ),
    Attempt("crons", "read alice's cron", "404", lambda w: status(w.http.get(f"/runs/crons/{w.cron}", headers=BOB))),
    Attempt(
        "crons",
        "update alice's cron",
        "404",
        lambda w: status(w.http.patch(f"/runs/crons/{w.cron}", json={"schedule": "* * * * *"}, headers=BOB)),
    ),
    Attempt(
        "crons", "delete alice's cron", "404", lambda w: status(w.http.delete(f"/runs/crons/{w.cron}", headers=BOB))
    ),
    Attempt(
        "crons",
        "create a cron on alice's thread",
        "404",
        lambda w: status(
            w.http.post(
                f"/threads/{w.thread}/runs/crons", json={"assistant_id": "agent", "schedule": NEVER}, headers=BOB
            )
        ),
    ),
    Attempt(
        "crons",
        "create a cron whose context sets `mcp_config`",
        "403",
        lambda w: status(
            w.http.post(
                "/runs/crons",
                json={"assistant_id": "agent", "schedule": NEVER, "context": {"mcp_config": "/tmp/evil.json"}},
                headers=BOB,
            )
        ),
    ),
    Attempt(
        "crons",
        "schedule the `consolidate` graph",
        "403",
        lambda w: status(
            w.http.post("/runs/crons", json={"assistant_id": "consolidate", "schedule": NEVER}, headers=BOB)
        ),
    ),
    Attempt("store", "get alice's memory item", "not found", store_get),
    Attempt("store", "search alice's namespace", "200 only his own", store_search),
    Attempt("store", "put an item into alice's namespace", "not in alice's", store_put),
    Attempt("store", "delete alice's memory item", "alice's item kept", store_delete),
]


def changed(value: Any) -> Any:
    """A JSON value of the same kind as the server's ``value`` but different from it."""
    if isinstance(value, bool):
        return not value
    if isinstance(value, int | float):
        return value + 1
    if isinstance(value, list):
        return [*value, "x"]
    if isinstance(value, dict):
        return {**value, "x": "y"}
    return f"{value}-x"


@pytest.fixture
def world_env(tmp_path, monkeypatch) -> dict[str, str]:
    env = {
        "HERMES_DATA_DIR": os.path.relpath(tmp_path / "data", server_cwd(tmp_path)),
        "HERMES_EMBEDDINGS": "hash",
        "HERMES_AUTH_TOKENS": json.dumps(TOKENS),
        "HERMES_AUTH_ADMINS": "carol",
    }
    for k, v in env.items():  # so that Context() here sees the server's settings
        monkeypatch.setenv(k, v)
    return env


async def firing_cron(
    http: httpx.AsyncClient, who: dict[str, str], graph: str, context: dict[str, Any], **body: Any
) -> str:
    """A thread of ``who`` with a cron firing every minute on ``graph`` with ``context``; its id."""
    thread = (await http.post("/threads", json={}, headers=who)).json()["thread_id"]
    payload = {**body, "assistant_id": graph, "schedule": "* * * * *", "context": context}
    r = await http.post(f"/threads/{thread}/runs/crons", json=payload, headers=who)
    assert r.status_code == 200, r.text
    return thread


async def fired(http: httpx.AsyncClient, who: dict[str, str], thread: str) -> dict[str, Any]:
    """The first run a cron started on ``thread`` (waits for the server's cron scheduler: it fires
    on the minute; the deadline only bounds a broken scheduler)."""
    deadline = time.monotonic() + 200
    while time.monotonic() < deadline:
        runs = (await http.get(f"/threads/{thread}/runs", headers=who)).json()
        if runs:
            return runs[-1]
        await asyncio.sleep(2)
    raise AssertionError(f"no cron run on thread {thread} within 200 s")


async def setup_world(http: httpx.AsyncClient, tmp_path) -> World:
    w = World(http, str(tmp_path / "data" / "checkpoints.sqlite"))
    system = {
        a["graph_id"]: a["assistant_id"] for a in (await http.post("/assistants/search", json={}, headers=ALICE)).json()
    }
    w.agent, w.reminders = system["agent"], system["reminders"]
    w.thread = (await http.post("/threads", json={}, headers=ALICE)).json()["thread_id"]
    r = await http.post(
        f"/threads/{w.thread}/runs/wait",
        json=run_body() | {"input": {"messages": [{"role": "human", "content": SECRET}]}},
        headers=ALICE,
    )
    assert r.status_code == 200, r.text
    w.run = (await http.get(f"/threads/{w.thread}/runs", headers=ALICE)).json()[0]["run_id"]
    r = await http.post("/assistants", json={"graph_id": "agent", "context": {"temperature": 0.3}}, headers=ALICE)
    assert r.status_code == 200, r.text  # a user setting is hers to set
    w.assistant = r.json()["assistant_id"]
    r = await http.post("/runs/crons", json={"assistant_id": "agent", "schedule": NEVER, "input": {}}, headers=ALICE)
    assert r.status_code == 200, r.text
    w.cron = r.json()["cron_id"]
    r = await http.put(
        "/store/items",
        json={"namespace": ["memories", "alice", "episodic"], "key": "note-a", "value": {"text": SECRET}},
        headers=ALICE,
    )
    assert r.status_code in (200, 204), r.text
    return w


async def test_every_cross_user_attempt_is_refused_and_the_admin_can(tmp_path, world_env, start_langgraph_dev):
    url, log_path = start_langgraph_dev(world_env)
    async with httpx.AsyncClient(base_url=url, timeout=60) as http:
        w = await setup_world(http, tmp_path)

        results = {a.attempt: await a.act(w) for a in ATTEMPTS}
        wrong = {a.attempt: (results[a.attempt], a.expected) for a in ATTEMPTS if results[a.attempt] != a.expected}
        assert not wrong, f"attempt: (got, expected): {json.dumps(wrong, indent=1)}"

        # each server-controlled field, alone, in a run, a cron and an assistant: 403 naming it
        server = Context().model_dump()
        fields = [n for n in Context.model_fields if server_setting_reason(n)]
        assert {"database", "base_url", "data_dir", "mcp_config", "model", "api_key_env"} <= set(fields)
        refused: dict[str, list[str]] = {}
        for name in fields:
            context = {name: changed(server[name])}
            for where, request in (
                ("run", http.post("/runs", json=run_body(context), headers=BOB)),
                (
                    "cron",
                    http.post(
                        "/runs/crons",
                        json={"assistant_id": "agent", "schedule": NEVER, "context": context},
                        headers=BOB,
                    ),
                ),
                ("assistant", http.post("/assistants", json={"graph_id": "agent", "context": context}, headers=BOB)),
            ):
                r = await request
                if r.status_code != 403 or name not in r.json()["detail"]:
                    refused.setdefault(name, []).append(f"{where}: {r.status_code} {r.text[:120]}")
        assert not refused, refused

        # what users may do: user settings, the server's own value of a server field, read the system assistants
        allowed = dict.fromkeys(("max_tool_rounds", "max_repeated_calls"), 1) | {"temperature": 0.5}
        r = await http.post("/runs", json=run_body({**allowed, "data_dir": server["data_dir"]}), headers=BOB)
        assert r.status_code == 200, r.text
        assert (await http.get(f"/assistants/{w.agent}", headers=BOB)).status_code == 200
        assert set(Context.model_fields) >= USER_SETTINGS

        # the admin (HERMES_AUTH_ADMINS) changes the system assistant, sets server fields and runs the maintenance graphs
        r = await http.patch(f"/assistants/{w.agent}", json={"context": {"max_tool_rounds": 3}}, headers=CAROL)
        assert r.status_code == 200 and r.json()["context"] == {"max_tool_rounds": 3}, r.text
        r = await http.post("/runs", json=run_body({"database": w.checkpoints}), headers=CAROL)
        assert r.status_code == 200, r.text
        # crons fire through the same handlers, as their creator: carol's (admin, a maintenance graph,
        # a server field) and bob's (his context names alice) both fire; bob's runs as bob
        carol_thread = await firing_cron(
            http, CAROL, "consolidate", {"database": w.checkpoints, "tool_timeout_s": 5.0}, input={}
        )
        bob_thread = await firing_cron(http, BOB, "agent", {"user_id": "alice", "temperature": 0.1}, **run_body())
        # ... but is no reader of alice's data
        assert (await http.get(f"/threads/{w.thread}/state", headers=CAROL)).status_code == 404
        r = await http.post("/assistants", json={"graph_id": "agent", "name": "carol's"}, headers=CAROL)
        assert (await http.delete(f"/assistants/{r.json()['assistant_id']}", headers=BOB)).status_code == 404
        assert (await http.delete(f"/assistants/{w.reminders}", headers=CAROL)).status_code in (200, 204)

        carol_run, bob_run = await fired(http, CAROL, carol_thread), await fired(http, BOB, bob_thread)
        assert carol_run["kwargs"]["context"]["database"] == w.checkpoints
        assert bob_run["kwargs"]["context"]["user_id"] == "bob" and "alice" not in json.dumps(
            bob_run["kwargs"]["context"]
        )

        # alice's own things still work for her
        assert SECRET in (await http.get(f"/threads/{w.thread}/state", headers=ALICE)).text
        assert (await http.get(f"/runs/crons/{w.cron}", headers=ALICE)).status_code == 200
        assert (await http.patch(f"/assistants/{w.assistant}", json={"name": "hers"}, headers=ALICE)).status_code == 200
    assert "BlockingError" not in log_path.read_text(errors="replace")


def test_readme_security_table_lists_every_attempt():
    """The README's table of attempts is this test's table (same attempts, same results)."""
    readme = (ROOT / "README.md").read_text()
    section = readme[readme.index("## Security") :]
    rows = set(re.findall(r"^\| *([^|]+?) *\| *([^|]+?) *\| *([^|]+?) *\|$", section, flags=re.MULTILINE))
    missing = [a for a in ATTEMPTS if (a.resource, a.attempt, a.expected) not in rows]
    assert not missing, "\n".join(f"| {a.resource} | {a.attempt} | {a.expected} |" for a in missing)
