"""The episodic contract suite (``tests/unit/test_memory_contract.py``) on PostgreSQL + pgvector
(``memory.episodic.postgres``), against the real PostgreSQL 16 that ``pgserver`` starts
(``postgres_server`` in ``conftest.py``; pgvector 0.6.2 ships with it). Each test has a
database of its own; each store place (``tmp_path`` and its sub-folders) is a table of its own,
so a second store on the same place reads the first one's rows.
"""

from __future__ import annotations

import hashlib

import pytest

from memory.embeddings import HashEmbedder
from memory.episodic.base import EpisodicStore
from memory.episodic.lance_errors import EmbedderMismatch
from memory.episodic.postgres import PostgresEpisodicStore
from tests.unit.test_memory_contract import DOG, NOW, EpisodicContract, ev, texts

pytestmark = [pytest.mark.slow, pytest.mark.timeout(120)]


def table_for(place) -> str:
    return "ep_" + hashlib.sha1(str(place).encode()).hexdigest()[:12]


class TestPostgresContract(EpisodicContract):
    @pytest.fixture(autouse=True)
    def _database(self, postgres_url):
        self.url = postgres_url

    async def make_store(self, tmp_path, embedder) -> EpisodicStore:
        return PostgresEpisodicStore(self.url, embedder, table=table_for(tmp_path))


async def test_postgres_store_refuses_another_embedders_table(postgres_url):
    store = PostgresEpisodicStore(postgres_url, HashEmbedder(16), table="ep_dim")
    other = PostgresEpisodicStore(postgres_url, HashEmbedder(32), table="ep_dim")
    try:
        await store.add(ev(DOG))
        with pytest.raises(EmbedderMismatch, match="16-dimensional"):
            await other.search("u", "dog")
    finally:
        await store.close()
        await other.close()


async def test_two_stores_writing_the_same_memory_at_once_store_it_once(postgres_url):
    """K11 across processes/hosts: concurrent writers of one text for one user get one id
    (the live-hash unique index + ON CONFLICT DO NOTHING), not two rows."""
    import asyncio

    stores = [PostgresEpisodicStore(postgres_url, HashEmbedder(16), table="ep_race") for _ in range(4)]
    try:
        for s in stores:  # connect and create the table first: the race is on the rows
            await s.count()
        ids = await asyncio.gather(*(s.add(ev(DOG)) for s in stores))
        assert len(set(ids)) == 1
        assert await stores[0].count("u") == 1
        assert texts(await stores[1].search("u", "wolf", now=NOW)) == [DOG]
    finally:
        for s in stores:
            await s.close()


async def test_a_lost_session_costs_no_recall_and_no_write(postgres_url):
    """The server dropped the store's session (a restart, an administrator's terminate): the
    next search and write reconnect and succeed, and what was stored before is still there."""
    import psycopg

    store = PostgresEpisodicStore(postgres_url, HashEmbedder(16), table="ep_lost")
    try:
        await store.add(ev(DOG))

        async def drop_sessions() -> None:
            async with await psycopg.AsyncConnection.connect(postgres_url, autocommit=True) as admin:
                await admin.execute(
                    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                    "WHERE datname = current_database() AND pid <> pg_backend_pid()"
                )

        await drop_sessions()
        assert texts(await store.search("u", "wolf", now=NOW)) == [DOG]
        await drop_sessions()
        await store.add(ev("the cat sat on the mat"))
        assert await store.count("u") == 2
    finally:
        await store.close()


async def test_two_workers_with_their_own_data_directories_share_episodic_memory(postgres_url, tmp_path):
    """``HERMES_POSTGRES_URL`` set: what one worker's memory service writes, a worker with
    another data directory (another host) recalls; neither has an episodic.lance folder."""
    from graph import resources
    from graph.context import Context

    def service(name: str):
        return resources.get_memory(
            Context(data_dir=str(tmp_path / name), embeddings="hash", postgres_url=postgres_url, user_id="u")
        )

    try:
        writer, reader = service("a"), service("b")
        assert writer is not reader
        assert await writer.write_events([ev("the quarterly sales report goes to the finance team")]) == 1
        lines = await reader.recall_episodic("u", "quarterly sales report", now=NOW)
        assert any("finance team" in line for line in lines), lines
        assert not (tmp_path / "a" / "episodic.lance").exists() and not (tmp_path / "b" / "episodic.lance").exists()
    finally:
        await resources.aclose_resources()


async def test_recent_spans_users_and_expired_rows_are_listed_only_when_asked(postgres_url):
    """The calls outside the contract suite: ``recent`` (the consolidate graph's scan, every
    user, live only, newest first) and ``include_expired`` of ``list``/``count``."""
    from datetime import timedelta

    store = PostgresEpisodicStore(postgres_url, HashEmbedder(16), table="ep_recent")
    try:
        await store.add_many([ev("old note", days_ago=40), ev("new note", days_ago=1), ev("bob note", user="b")])
        assert await store.expire(30, now=NOW) == 1
        assert [e.text for e in await store.recent(NOW - timedelta(days=100))] == ["bob note", "new note"]
        assert [e.text for e in await store.recent(NOW - timedelta(days=2), limit=1)] == ["bob note"]
        assert [e.text for e in await store.list("u")] == ["new note"]
        assert [e.text for e in await store.list("u", include_expired=True)] == ["new note", "old note"]
        assert await store.count("u") == 1 and await store.count("u", include_expired=True) == 2
        assert await store.count() == 2 and await store.count(include_expired=True) == 3
    finally:
        await store.close()
