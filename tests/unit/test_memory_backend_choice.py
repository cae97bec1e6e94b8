"""Which episodic store (and knowledge graph) ``graph.resources.get_memory`` builds (issue 22): PostgreSQL + pgvector
when ``postgres_url`` (``HERMES_POSTGRES_URL``) is set, LanceDB in the data directory when it is
not, Weaviate when asked for by name. Building a store opens no connection (stores connect on
first use), so no database is needed here; the store itself is tested against a real
PostgreSQL in ``tests/integration/test_memory_postgres_contract.py``."""

from __future__ import annotations

import pytest

from graph import resources
from graph.context import Context
from memory.episodic.lance import LanceEpisodicStore
from memory.episodic.postgres import PostgresEpisodicStore

URL = "postgresql://hermes@127.0.0.1:9/hermes"


@pytest.fixture(autouse=True)
async def _fresh_resources():
    yield
    await resources.aclose_resources()


def test_the_postgres_url_puts_episodic_memory_in_postgres(tmp_path):
    store = resources.get_memory(Context(data_dir=str(tmp_path), embeddings="hash", postgres_url=URL)).episodic
    assert isinstance(store, PostgresEpisodicStore) and store.url == URL


def test_without_it_episodic_memory_stays_in_the_data_directory(tmp_path):
    store = resources.get_memory(Context(data_dir=str(tmp_path), embeddings="hash")).episodic
    assert isinstance(store, LanceEpisodicStore)


def test_weaviate_named_explicitly_wins_over_the_postgres_url(tmp_path):
    from memory.episodic.weaviate import WeaviateEpisodicStore

    context = Context(data_dir=str(tmp_path), embeddings="hash", postgres_url=URL, episodic="weaviate")
    assert isinstance(resources.get_memory(context).episodic, WeaviateEpisodicStore)


def test_the_postgres_url_puts_the_knowledge_graph_in_postgres_too(tmp_path):
    from memory.postgres_db import PostgresDb
    from memory.semantic_postgres import PostgresSemanticMemory

    context = Context(data_dir=str(tmp_path), embeddings="hash", postgres_url=URL, semantic_ttl_days=90)
    semantic = resources.get_memory(context).semantic
    assert isinstance(semantic, PostgresSemanticMemory) and semantic.url == URL and semantic.ttl_days == 90
    assert isinstance(resources.get_memory(context).origins.db, PostgresDb)  # branch origins too
    assert not (tmp_path / "memory.db").exists()  # nothing opened yet


def test_without_it_the_knowledge_graph_stays_in_the_data_directory(tmp_path):
    from memory.semantic_postgres import PostgresSemanticMemory

    semantic = resources.get_memory(Context(data_dir=str(tmp_path), embeddings="hash")).semantic
    assert not isinstance(semantic, PostgresSemanticMemory)
    assert semantic.memory_db_path == tmp_path / "memory.db"
