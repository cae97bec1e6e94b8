"""Checkpoints on a real PostgreSQL (``HERMES_POSTGRES_URL``, graph/postgres.py): many sessions
creating the tables of a new database at once, a deleted thread's mirror moved aside, an
unreachable server as one clear line (API and CLI), and the URL's password kept out of messages.
The branch and CLI tests on both backends are in test_branches_sqlite.py; LangGraph's
conformance suite in test_checkpoint_conformance.py; 16 ``hermes run`` processes on a new
database in test_concurrency.py."""

from __future__ import annotations

import asyncio
import uuid

import psycopg
import pytest
from langchain_core.messages import AIMessage, HumanMessage
from typer.testing import CliRunner

import graph.postgres
from base.postgres_urls import redacted
from graph.builder import make_graph
from graph.checkpoints import checkpoints_file, open_checkpointer
from graph.cli import app
from graph.mirror import ThreadMirror
from graph.postgres import HermesPostgresSaver, PostgresUnavailable, open_postgres_checkpointer

pytestmark = pytest.mark.slow  # PostgreSQL starts for the session


def new_database(server_url: str) -> str:
    name = f"s_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(server_url, autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name}")
    return server_url.replace("/postgres?", f"/{name}?", 1)


async def test_eight_sessions_create_the_tables_of_a_new_database_at_once(postgres_server):
    """Measured before the fix: the stock ``AsyncPostgresSaver.setup()`` of 8 sessions at once
    failed in 35 of 40 (``UniqueViolation`` on ``pg_type`` / ``checkpoint_migrations``); a
    blocking ``pg_advisory_lock`` hung (``CREATE INDEX CONCURRENTLY`` waits for the waiters)."""
    for _ in range(5):
        url = new_database(postgres_server)

        async def one(i: int, url: str = url) -> str:
            async with open_postgres_checkpointer(url) as saver:
                cfg = await saver.aput(
                    {"configurable": {"thread_id": f"t{i}", "checkpoint_ns": ""}},
                    {
                        "v": 4,
                        "id": str(uuid.uuid4()),
                        "ts": "",
                        "channel_values": {},
                        "channel_versions": {},
                        "versions_seen": {},
                        "updated_channels": None,
                    },
                    {"source": "input", "step": -1},
                    {},
                )
                return str(cfg["configurable"]["thread_id"])

        done = await asyncio.wait_for(asyncio.gather(*(one(i) for i in range(8)), return_exceptions=True), 120)
        assert done == [f"t{i}" for i in range(8)]
        with psycopg.connect(url) as conn:
            row = conn.execute("SELECT count(*), max(v) FROM checkpoint_migrations").fetchone()
        assert row == (len(HermesPostgresSaver.MIGRATIONS), len(HermesPostgresSaver.MIGRATIONS) - 1)


async def test_a_turn_on_postgres_and_a_deleted_threads_mirror_moved_aside(scripted, data_dir, postgres_url):
    from graph.runner import run_turn

    ctx = scripted([AIMessage("stored in postgres")])
    await run_turn("hello", ctx.model_copy(update={"postgres_url": postgres_url}), "P", quiet=True)
    # run_turn opened the checkpointer from the setting; here it is given explicitly
    assert not checkpoints_file(data_dir).exists()
    mirror = ThreadMirror(data_dir)
    assert mirror.path("P").exists()
    async with open_checkpointer(checkpoints_file(data_dir), mirror_dir=data_dir, postgres=postgres_url) as saver:
        assert isinstance(saver, HermesPostgresSaver)
        state = await make_graph(checkpointer=saver).aget_state({"configurable": {"thread_id": "P"}})
        assert [m.content for m in state.values["messages"]][-1] == "stored in postgres"
        assert isinstance(state.values["messages"][0], HumanMessage)
        await saver.adelete_thread("P")
        assert await saver.aget_tuple({"configurable": {"thread_id": "P"}}) is None
    assert not mirror.path("P").exists() and mirror.path("P").with_name(mirror.path("P").name + ".deleted").exists()


async def test_an_unreachable_server_is_one_clear_error_without_the_password(tmp_path, monkeypatch):
    monkeypatch.setattr(graph.postgres, "CONNECT_TIMEOUT_S", 1.0)
    url = f"postgresql://hermes:s3cret@/hermes?host={tmp_path / 'no-server-here'}"
    assert redacted(url) == f"postgresql://hermes:***@/hermes?host={tmp_path / 'no-server-here'}"
    with pytest.raises(PostgresUnavailable) as caught:
        async with open_checkpointer(tmp_path / "unused.sqlite", postgres=url):
            pass
    assert "HERMES_POSTGRES_URL" in str(caught.value) and "s3cret" not in str(caught.value)
    assert "hermes:***@" in str(caught.value)


def test_the_cli_names_an_unreachable_server_in_one_line(tmp_path, monkeypatch):
    monkeypatch.setattr(graph.postgres, "CONNECT_TIMEOUT_S", 1.0)
    url = f"postgresql://hermes:s3cret@/hermes?host={tmp_path / 'no-server-here'}"
    monkeypatch.setenv("HERMES_POSTGRES_URL", url)
    result = CliRunner().invoke(app, ["branch", "list", "T", "--data-dir", str(tmp_path / "d")])
    assert result.exit_code == 1, result.output
    assert "cannot connect to PostgreSQL" in result.output and "HERMES_POSTGRES_URL" in result.output
    assert "Traceback" not in result.output and "s3cret" not in result.output
    # not the SQLite message: the checkpoints are not in the data directory
    assert "no checkpoints at" not in result.output


async def test_langgraph_dev_and_the_cli_share_a_thread_on_postgres(tmp_path, start_langgraph_dev, postgres_url):
    """The ``langgraph.json`` checkpointer (``server_checkpointer``) under the real ``langgraph
    dev`` stores in ``HERMES_POSTGRES_URL``; the CLI, with another data directory, reads the
    same thread from there."""
    from langgraph_sdk import get_client

    url, log_path = start_langgraph_dev(
        {"HERMES_DATA_DIR": str(tmp_path / "server-data"), "HERMES_POSTGRES_URL": postgres_url}
    )
    client = get_client(url=url)
    thread_id = (await client.threads.create(graph_id="agent"))["thread_id"]
    await client.threads.update_state(
        thread_id, {"messages": [{"role": "human", "content": "written by the server"}]}, as_node="write_memory"
    )
    assert "Using custom checkpointer: HermesPostgresSaver" in log_path.read_text(errors="replace")
    with psycopg.connect(postgres_url) as conn:
        row = conn.execute("SELECT count(*) FROM checkpoints WHERE thread_id = %s", (thread_id,)).fetchone()
    assert row is not None and row[0] >= 1
    assert not (tmp_path / "server-data" / "checkpoints.sqlite").exists()
    result = await asyncio.to_thread(  # the CLI runs its own event loop
        CliRunner().invoke,
        app,
        ["session", "show", thread_id, "--data-dir", str(tmp_path / "cli-data"), "--json"],
        env={"HERMES_POSTGRES_URL": postgres_url, "COLUMNS": "200"},
    )
    assert result.exit_code == 0, result.output
    assert "written by the server" in result.output
