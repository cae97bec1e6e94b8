"""``hermes migrate --to postgres`` (graph/migration.py) on a real PostgreSQL (pgserver, the
package's ``postgres_server``): a data directory with a thread of three branches (rollback,
switch, fork: the CLI's own commands), a thread stopped at an ``interrupt()``, episodic memories
of two users (one of them expired), ledger records and reminders (one fired, one period in flight)
is copied; every thread's history and
branch tree is read before (SQLite) and after (PostgreSQL) and compared, checkpoint by
checkpoint (id, parent, values, metadata, pending writes with their ``task_path`` and ``idx``)
and through the commands (``branch list``, ``branch show``, ``session show``). The migrated
threads go on on PostgreSQL (a turn on the active branch, a resume of the interrupt); the ledger
replays its records there, the reminder's in-flight period is taken over under its request id,
a memory hidden by a rollback stays hidden (the branch origins); a second migration copies
nothing."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import operator
import re
import sqlite3
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any

import psycopg
import pytest
from langchain_core.messages import AIMessage, SystemMessage
from langgraph.graph import END, START, StateGraph
from langgraph.types import Command, interrupt
from typer.testing import CliRunner
from typing_extensions import TypedDict

from graph import resources
from graph.checkpoints import checkpoints_file, open_checkpointer
from graph.cli import app
from memory.branch_origins import BranchOrigins
from memory.episodic.base import EpisodicEvent
from tests.conftest import FakeToolbox, tool_call
from tools.builtin.reminders import list_reminders, schedule_reminder
from tools.idempotency import IdempotencyLedger
from tools.ledger_postgres import PostgresLedger
from tools.reminder_claims import mark_fired, record_delivery, record_outcome, request_id_for
from tools.reminder_due import due_reminders
from tools.reminder_history import delivery_history, firing_history

pytestmark = pytest.mark.slow  # PostgreSQL starts for the session; several CLI turns


class AskState(TypedDict):
    log: Annotated[list[str], operator.add]


def ask_graph(checkpointer):
    """start → ask (``interrupt()``) → done: a thread left waiting for its answer."""

    def ask(state: AskState) -> dict:
        return {"log": [f"answer={interrupt({'question': 'go on?'})}"]}

    def done(state: AskState) -> dict:
        return {"log": ["done"]}

    g = StateGraph(AskState)
    g.add_node(ask)
    g.add_node(done)
    g.add_edge(START, "ask")
    g.add_edge("ask", "done")
    g.add_edge("done", END)
    return g.compile(checkpointer=checkpointer)


async def checkpoints(data_dir: Path, postgres: str) -> dict[tuple[str, str, str], dict[str, Any]]:
    """Every checkpoint of every thread, read with the saver's own ``alist`` (``postgres`` "":
    the data directory's SQLite file)."""
    out: dict[tuple[str, str, str], dict[str, Any]] = {}
    async with open_checkpointer(checkpoints_file(data_dir), postgres=postgres) as saver:
        async for item in saver.alist(None):
            c = item.config["configurable"]
            out[(c["thread_id"], c["checkpoint_ns"], c["checkpoint_id"])] = {
                "parent": (item.parent_config or {}).get("configurable", {}).get("checkpoint_id"),
                "checkpoint": item.checkpoint,
                "metadata": {k: v for k, v in item.metadata.items() if k != "writes"},
                "writes": item.pending_writes,
            }
    return out


def sqlite_write_rows(data_dir: Path) -> set[tuple]:
    con = sqlite3.connect(checkpoints_file(data_dir))
    try:
        return set(
            con.execute("SELECT thread_id, checkpoint_ns, checkpoint_id, task_id, task_path, idx, channel FROM writes")
        )
    finally:
        con.close()


def postgres_counts(url: str) -> dict[str, int]:
    with psycopg.connect(url) as conn:
        return {
            t: conn.execute(f"SELECT count(*) FROM {t}").fetchone()[0]  # type: ignore[index]
            for t in ("checkpoints", "checkpoint_blobs", "checkpoint_writes", "hermes_tool_requests", "hermes_episodic")
        }


def test_migrate_copies_every_thread_with_its_branch_tree_memories_and_ledger(
    scripted, data_dir, postgres_url, monkeypatch
):
    monkeypatch.delenv("HERMES_POSTGRES_URL", raising=False)
    monkeypatch.setenv("HERMES_EMBEDDINGS", "hash")  # memory vectors without the model: CPU
    box = FakeToolbox()
    box.add("plan_a", lambda: {"ok": False})
    box.add("plan_b", lambda: {"ok": True})
    ctx = scripted(
        [
            AIMessage("Hello, ready."),
            tool_call("plan_a", {}, "ca"),
            AIMessage("Approach A failed."),
            tool_call("plan_b", {}, "cb"),
            AIMessage("Approach B worked."),
            AIMessage("Forked reply."),
            AIMessage("Still on the fork."),
        ],
        box,
    )
    model = scripted.models[ctx.model]
    runner = CliRunner()
    dd = ["--data-dir", str(data_dir)]

    def hermes(*args: str, code: int = 0) -> str:
        resources.set_toolbox(ctx, box)  # each CLI run closes the toolbox at exit
        result = runner.invoke(app, list(args), env={"COLUMNS": "200"})
        assert result.exit_code == code, result.output
        assert "Traceback" not in result.output
        return result.output

    # --- a data directory on SQLite: thread S with three branches, thread K at an interrupt
    run = ["--thread", "S", "--model", ctx.model, *dd]
    hermes("run", "hello there", *run)
    hermes("run", "solve it with approach A", *run)
    head_a = json.loads(hermes("branch", "list", "S", *dd, "--json"))["heads"][0]["head"]
    first_end = re.findall(r"([0-9a-f]{8}) step +\d+ write_memory", hermes("branch", "show", "S", *dd, "--compact"))[0]
    hermes("branch", "rollback", "S", first_end, *dd)
    hermes("run", "solve it with approach B", *run)
    hermes("branch", "switch", "S", head_a[-8:], *dd)
    hermes("branch", "fork", "S", first_end, "something else entirely", "--model", ctx.model, *dd)

    async def build_rest() -> None:
        async with open_checkpointer(checkpoints_file(data_dir)) as saver:
            await ask_graph(saver).ainvoke({"log": ["start"]}, {"configurable": {"thread_id": "K"}})
        memory = resources.get_memory(ctx)
        await memory.episodic.add_many(
            [
                EpisodicEvent(user_id="alice", kind="note", text="Alice prefers CSV reports.", confidence=0.9),
                EpisodicEvent(
                    user_id="bob",
                    kind="task",
                    text="Bob ran the monthly sales report.",
                    confidence=0.8,
                    metadata={"thread_id": "S"},
                ),
                EpisodicEvent(
                    user_id="bob",
                    kind="note",
                    text="An old note.",
                    confidence=0.8,
                    created_at=datetime(2020, 1, 1, tzinfo=UTC),
                ),
            ]
        )
        assert await memory.episodic.expire(older_than_days=365) == 1
        for obj, is_entity in (("CSV", False), ("Acme", True)):
            done = await memory.semantic.upsert(
                "alice",
                "Alice",
                "prefers" if not is_entity else "works_at",
                obj,
                object_is_entity=is_entity,
                confidence=0.9,
            )
            assert done.fact is not None, done
        # the memory's branch origins: a turn's memories on S's active branch, another's hidden
        # (its turn rolled back), one record restated from a second turn
        origins = BranchOrigins.in_dir(data_dir)
        for message in ("m-kept", "m-rolled-back"):
            await origins.record("S", message)
        await origins.restate("mem-1", "S", "m-kept")
        assert (await origins.sync("S", {"m-kept"})).origins == {("S", "m-rolled-back")}
        await resources.aclose_resources()
        ledger = IdempotencyLedger.in_data_dir(data_dir)
        for i in range(3):
            await ledger.run_once("post_message", f"r{i}", functools.partial(_record, i))
        await ledger.run_once(
            "post_message", "lost", lambda: _record(9), keep=lambda r: False, uncertain=lambda r: True
        )
        await ledger.aclose()

    asyncio.run(build_rest())
    # reminders: one fired for October (its notice delivered), its November period in flight
    # (claimed by a process that is gone once the directory moves), one never fired; made in
    # September (``now``), so that October is their first period whatever day the test runs
    made = datetime(2026, 9, 20, 12, 0)
    first = schedule_reminder("Send the monthly report", 5, "09:00", data_dir=data_dir, now=made, postgres_url="")["id"]
    schedule_reminder("Pay the rent", 1, "08:00", data_dir=data_dir, now=made, postgres_url="")
    assert mark_fired(data_dir, first, "2026-10", postgres_url="")
    assert not record_outcome(data_dir, first, "2026-10", ok=True, postgres_url="")  # done: no retry
    [due] = [
        d for d in due_reminders(data_dir, datetime(2026, 12, 6, 9, 30), postgres_url="") if d.reminder_id == first
    ]
    record_delivery(data_dir, due, outcome="delivered", postgres_url="")
    assert mark_fired(data_dir, first, "2026-11", postgres_url="")
    schedule_before = (
        list_reminders(data_dir=data_dir, postgres_url=""),
        firing_history(data_dir, postgres_url=""),
        delivery_history(data_dir, postgres_url=""),
    )
    before = asyncio.run(checkpoints(data_dir, ""))
    threads = {key[0] for key in before}
    assert threads == {"S", "K"} and len(before) > 20
    assert any(ch == "__interrupt__" for item in before.values() for _, ch, _ in item["writes"])
    views = {
        "list": hermes("branch", "list", "S", *dd, "--json"),
        "show": hermes("branch", "show", "S", *dd),
        "session": hermes("session", "show", "S", *dd, "--json"),
        "ask": hermes("session", "show", "K", *dd, "--json"),
    }
    assert len(json.loads(views["list"])["heads"]) == 3

    async def memories(url: str) -> dict[str, list[Any]]:
        service = resources.get_memory(ctx.model_copy(update={"postgres_url": url}))
        store = service.episodic
        try:
            users = {e.user_id for e in await store.recent(datetime(1970, 1, 1, tzinfo=UTC), limit=1000)}
            facts = {f"facts:{u}": await service.semantic.facts(u, limit=1000) for u in users}
            return facts | {
                u: sorted(
                    (
                        e.id,
                        e.text,
                        e.kind,
                        e.created_at,
                        e.confidence,
                        e.evidence,
                        json.dumps(e.metadata, sort_keys=True),
                    )
                    for e in await store.list(u, limit=1000)
                )
                for u in users
            }
        finally:
            await resources.aclose_resources()

    memories_before = asyncio.run(memories(""))
    assert {"alice", "bob"} <= set(memories_before) and len(memories_before["facts:alice"]) == 2

    # --- the migration
    out = json.loads(hermes("migrate", "--to", "postgres", *dd, "--postgres-url", postgres_url, "--json"))
    n_writes = sum(len(item["writes"]) for item in before.values())
    n_events = sum(len(v) for k, v in memories_before.items() if not k.startswith("facts:"))
    assert out["threads"] == 2 and out["checkpoints_copied"] == len(before) and out["checkpoints_present"] == 0
    assert out["writes_copied"] == n_writes
    assert out["episodic_copied"] == n_events and out["episodic_expired_left"] == 1
    assert out["ledger_copied"] == 4 and out["ledger_present"] == 0
    assert out["semantic_copied"]["semantic_facts"] == 2 and out["semantic_copied"]["semantic_entities"] == 2
    with contextlib.closing(sqlite3.connect(data_dir / "memory.db")) as con:
        origin_rows = {t: con.execute(f"SELECT count(*) FROM {t}").fetchone()[0] for t in out["origins_copied"]}
    assert out["origins_copied"] == origin_rows and origin_rows["memory_origins"] >= 2

    async def hidden(origins: BranchOrigins) -> Any:
        try:
            return await origins.inactive()
        finally:
            await origins.close()

    moved = asyncio.run(hidden(BranchOrigins.on_postgres(postgres_url)))
    assert moved == asyncio.run(hidden(BranchOrigins.in_dir(data_dir))) and ("S", "m-rolled-back") in moved
    assert (out["reminders_copied"], out["firings_copied"], out["deliveries_copied"]) == (2, 2, 1)
    schedule_after = (
        list_reminders(data_dir=data_dir, postgres_url=postgres_url),
        firing_history(data_dir, postgres_url=postgres_url),
        delivery_history(data_dir, postgres_url=postgres_url),
    )
    assert schedule_after == schedule_before

    # --- every checkpoint the same: id, parent, values, metadata, pending writes (task_path, idx)
    after = asyncio.run(checkpoints(data_dir, postgres_url))
    assert after.keys() == before.keys()
    for key, item in before.items():
        assert after[key] == item, key
    with psycopg.connect(postgres_url) as conn:
        pg_rows = set(
            conn.execute(
                "SELECT thread_id, checkpoint_ns, checkpoint_id, task_id, task_path, idx, channel FROM checkpoint_writes"
            )
        )
    assert pg_rows == sqlite_write_rows(data_dir)
    assert asyncio.run(memories(postgres_url)) == memories_before

    # --- the same through the commands, on PostgreSQL from another data directory
    monkeypatch.setenv("HERMES_POSTGRES_URL", postgres_url)
    elsewhere = ["--data-dir", str(data_dir / "elsewhere")]
    assert hermes("branch", "list", "S", *elsewhere, "--json") == views["list"]
    assert hermes("branch", "show", "S", *elsewhere) == views["show"]
    assert json.loads(hermes("session", "show", "S", *elsewhere, "--json")) == json.loads(views["session"])
    assert json.loads(hermes("session", "show", "K", *elsewhere, "--json")) == json.loads(views["ask"])

    # --- idempotent: a second run copies nothing, the tables keep their rows
    counts = postgres_counts(postgres_url)
    again = json.loads(hermes("migrate", "--to", "postgres", *dd, "--json"))  # URL from the setting
    assert (again["checkpoints_copied"], again["writes_copied"], again["episodic_copied"], again["ledger_copied"]) == (
        0,
        0,
        0,
        0,
    )
    assert again["checkpoints_present"] == len(before) and again["episodic_present"] == n_events
    assert again["ledger_present"] == 4
    assert (again["reminders_copied"], again["reminders_present"], again["firings_copied"]) == (0, 2, 0)
    assert again["reminders_conflicting"] == [] and set(again["semantic_copied"].values()) == {0}
    assert set(again["origins_copied"].values()) == {0}
    assert postgres_counts(postgres_url) == counts

    # --- the threads go on on PostgreSQL: a turn on the active branch, the interrupt resumed
    hermes("run", "and then?", *run)
    prompt = " ".join(str(m.content) for m in model.seen[-1] if not isinstance(m, SystemMessage))
    assert "something else entirely" in prompt and "approach A" not in prompt and "approach B" not in prompt

    async def resume_and_replay() -> None:
        async with open_checkpointer(checkpoints_file(data_dir), postgres=postgres_url) as saver:
            result = await ask_graph(saver).ainvoke(Command(resume="yes"), {"configurable": {"thread_id": "K"}})
        assert result["log"] == ["start", "answer=yes", "done"]
        ledger = PostgresLedger(postgres_url)
        try:
            ran: list[int] = []

            async def effect() -> dict[str, Any]:
                ran.append(1)
                return await _record(1)

            record, replayed = await ledger.run_once("post_message", "r1", effect)
            assert replayed and ran == [] and record == await _record(1)
            assert await ledger.state("post_message", "lost") == "unknown"
        finally:
            await ledger.aclose()

    asyncio.run(resume_and_replay())
    # the November claim's owner holds no lease on PostgreSQL: taken over under the same request
    # id (the ledger record of its effect, if any, is found); October stays fired; a new
    # reminder gets an id past the copied ones
    assert not mark_fired(data_dir, first, "2026-10", postgres_url=postgres_url)
    assert mark_fired(data_dir, first, "2026-11", postgres_url=postgres_url)
    november = [f for f in firing_history(data_dir, first, postgres_url=postgres_url) if f["period"] == "2026-11"]
    assert november[0]["attempts"] == 2 and november[0]["request_id"] == request_id_for(first, "2026-11")
    new = schedule_reminder("Water the plants", 3, "07:00", data_dir=data_dir, postgres_url=postgres_url)
    assert new["id"] > max(r["id"] for r in schedule_before[0]["reminders"])


async def _record(i: int) -> dict[str, Any]:
    return {"ok": True, "message_id": i}


def test_reminders_of_a_second_directory_keep_their_ids_where_they_can(data_dir, postgres_url, monkeypatch):
    """The database already holds another directory's reminders 1 and 2. This directory's
    reminder 1 has a period in flight: under another id its take-over would use another request
    id (the ledger would not know its action ran), so it is not copied and is reported. Its
    reminder 2 (only fired periods) gets a new id with its firing; its reminder 3 keeps its id.
    A second run finds both copies by their content."""
    from graph.migration import MigrationReport, copy_reminders

    monkeypatch.delenv("HERMES_POSTGRES_URL", raising=False)
    other = data_dir.parent / "other"
    for text in ("Water the plants", "Call the bank"):
        schedule_reminder(text, 2, "07:00", data_dir=other, postgres_url=postgres_url)
    mine = [
        schedule_reminder(text, 5, "09:00", data_dir=data_dir, postgres_url="")["id"]
        for text in ("Send the monthly report", "Pay the rent", "Back up the laptop")
    ]
    assert mine == [1, 2, 3]
    for rid in (1, 2):
        assert mark_fired(data_dir, rid, "2026-10", postgres_url="")
        record_outcome(data_dir, rid, "2026-10", ok=True, postgres_url="")
    assert mark_fired(data_dir, 1, "2026-11", postgres_url="")  # in flight

    report = MigrationReport()
    copy_reminders(data_dir, postgres_url, report)
    assert (report.reminders_copied, report.reminders_present, report.reminders_conflicting) == (2, 0, [1])
    stored = {r["text"]: r["id"] for r in list_reminders(data_dir=other, postgres_url=postgres_url)["reminders"]}
    assert stored == {"Water the plants": 1, "Call the bank": 2, "Back up the laptop": 3, "Pay the rent": 4}
    [fired] = firing_history(data_dir, 4, postgres_url=postgres_url)
    assert (fired["period"], fired["state"]) == ("2026-10", "done")
    assert not mark_fired(data_dir, 4, "2026-10", postgres_url=postgres_url)  # fired stays fired

    again = MigrationReport()
    copy_reminders(data_dir, postgres_url, again)
    assert (again.reminders_copied, again.reminders_present, again.firings_copied) == (0, 2, 0)
    assert again.reminders_conflicting == [1]
    new = schedule_reminder("Renew the domain", 9, "10:00", data_dir=other, postgres_url=postgres_url)
    assert new["id"] == 5


def test_migrate_without_a_url_or_to_another_target_says_so(data_dir, monkeypatch):
    monkeypatch.delenv("HERMES_POSTGRES_URL", raising=False)
    runner = CliRunner()
    result = runner.invoke(app, ["migrate", "--to", "postgres", "--data-dir", str(data_dir)])
    assert result.exit_code == 1 and "--postgres-url" in result.output
    result = runner.invoke(app, ["migrate", "--to", "mysql", "--data-dir", str(data_dir), "--postgres-url", "x"])
    assert result.exit_code == 1 and "only target is postgres" in result.output
