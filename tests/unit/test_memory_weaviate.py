"""WeaviateEpisodicStore, without a server: URL parsing, mapping, filters, schema, K11 flow.

No Weaviate server can run on the build machines; the collection below is a stand-in that
records calls, so these tests check the store's own logic, not Weaviate's behaviour.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from types import SimpleNamespace
from typing import Any

import pytest
from weaviate.classes.config import DataType, Tokenization

from memory.episodic.base import EpisodicEvent, EpisodicStore
from memory.episodic.weaviate import (
    WeaviateEpisodicStore,
    build_filters,
    collection_properties,
    event_to_properties,
    object_uuid,
    parse_weaviate_url,
    properties_to_event,
    rank_objects,
)

NOW = datetime(2026, 11, 29, 12, 0, tzinfo=timezone.utc)
DOG = "The dog is a domesticated descendant of the wolf."


def flatten(f) -> list[tuple[str, str, Any]]:
    """(target, operator, value) of every leaf of a v4 filter tree."""
    if hasattr(f, "filters"):
        return [leaf for sub in f.filters for leaf in flatten(sub)]
    return [(f.target, f.operator.value, f.value)]


def test_parse_url():
    p = parse_weaviate_url("https://mem.example.com")
    assert (p.http_host, p.http_port, p.http_secure, p.grpc_host, p.grpc_port, p.grpc_secure) == (
        "mem.example.com", 443, True, "mem.example.com", 50051, True,
    )
    p = parse_weaviate_url("http://localhost:9090", grpc_port=6000)
    assert (p.http_port, p.http_secure, p.grpc_port) == (9090, False, 6000)
    assert parse_weaviate_url("http://localhost").http_port == 8080
    for bad in ("localhost:8080", "ftp://host", "http://"):
        with pytest.raises(ValueError):
            parse_weaviate_url(bad)


def test_from_env_builds_an_unconnected_async_client(monkeypatch):
    monkeypatch.setenv("HERMES_WEAVIATE_URL", "http://weaviate.internal:8081")
    monkeypatch.setenv("HERMES_WEAVIATE_GRPC_PORT", "50052")
    store = WeaviateEpisodicStore.from_env(alpha=0.3)
    assert isinstance(store, EpisodicStore)
    assert store.alpha == 0.3 and not store.client.is_connected()
    with pytest.raises(ValueError):
        WeaviateEpisodicStore(store.client, alpha=1.5)


def test_properties_round_trip():
    e = EpisodicEvent(
        user_id="u", kind="preference", text="user preference: 以后都用PDF", created_at=NOW, confidence=0.9,
        evidence="inferred", metadata={"thread_id": "t1", "tools": ["a"]},
    )
    props = event_to_properties(e)
    assert props["created_at"] == NOW and props["metadata_json"] == '{"thread_id": "t1", "tools": ["a"]}'
    assert properties_to_event(props) == e
    # The server returns dates as datetimes, but ISO text with "Z" is accepted too.
    assert properties_to_event({**props, "created_at": "2026-11-29T12:00:00Z"}).created_at == NOW


def test_malformed_object_raises_on_mapping():
    with pytest.raises(Exception):
        properties_to_event({"user_id": "u", "text": "x"})


def test_k11_uuid_ignores_case_and_whitespace_but_not_user():
    assert object_uuid("u", DOG) == object_uuid("u", "  the DOG is a domesticated descendant of the   wolf. ")
    assert object_uuid("u", DOG) != object_uuid("v", DOG)
    assert object_uuid("u", DOG) != object_uuid("u", DOG + " Really.")


def test_filters():
    cutoff = NOW - timedelta(days=30)
    assert flatten(build_filters("u")) == [("user_id", "Equal", "u")]
    assert flatten(build_filters("u", ["task", "preference"], cutoff)) == [
        ("user_id", "Equal", "u"),
        ("kind", "ContainsAny", ["task", "preference"]),
        ("created_at", "GreaterThanEqual", cutoff),
    ]


def test_schema_filters_exactly_and_searches_only_text():
    props = {p.name: p for p in collection_properties()}
    assert set(props) >= {"event_id", "user_id", "kind", "text", "content_hash", "created_at", "confidence"}
    assert props["user_id"].tokenization == Tokenization.FIELD and props["user_id"].indexSearchable is False
    assert props["text"].tokenization == Tokenization.WORD
    assert props["created_at"].dataType == DataType.DATE


def obj(props, score=None):
    return SimpleNamespace(uuid="x", properties=props, metadata=SimpleNamespace(score=score))


def test_rank_objects_applies_decay_and_skips_bad_objects():
    old = EpisodicEvent(user_id="u", kind="task", text="old", created_at=NOW - timedelta(days=14), confidence=0.9)
    new = EpisodicEvent(user_id="u", kind="task", text="new", created_at=NOW - timedelta(days=1), confidence=0.9)
    objects = [obj(event_to_properties(old), 0.9), obj({"broken": True}, 1.0), obj(event_to_properties(new), 0.6)]
    hits = rank_objects(objects, NOW, 7.0, k=5)
    assert [h.event.text for h in hits] == ["new", "old"]  # 0.6 × 0.91 > 0.9 × 0.25
    assert hits[1].decay == pytest.approx(0.25) and hits[1].score == pytest.approx(0.225)
    assert rank_objects([obj(event_to_properties(new))], NOW, 7.0, k=1)[0].relevance == 1.0


# --- a stand-in for the async client / collection ---------------------------------------------


@dataclass
class FakeCollection:
    objects: dict[str, dict] = field(default_factory=dict)
    inserts: list[dict] = field(default_factory=list)
    hybrid_calls: list[dict] = field(default_factory=list)

    def __post_init__(self):
        self.query = SimpleNamespace(fetch_object_by_id=self._fetch, hybrid=self._hybrid)
        self.data = SimpleNamespace(insert=self._insert)

    async def _fetch(self, uuid):
        props = self.objects.get(str(uuid))
        return None if props is None else SimpleNamespace(uuid=uuid, properties=props)

    async def _insert(self, properties, uuid=None, vector=None):
        self.inserts.append({"properties": properties, "uuid": uuid, "vector": vector})
        self.objects[str(uuid)] = properties
        return uuid

    async def _hybrid(self, **kwargs):
        self.hybrid_calls.append(kwargs)
        return SimpleNamespace(objects=[obj(p, 0.5) for p in self.objects.values()])


class FakeClient:
    def __init__(self, coll: FakeCollection) -> None:
        self.connected = False
        self.created = []
        self.collections = SimpleNamespace(exists=self._exists, create=self._create, use=lambda name: coll)

    def is_connected(self):
        return self.connected

    async def connect(self):
        self.connected = True

    async def _exists(self, name):
        return name in self.created

    async def _create(self, name, **kwargs):
        self.created.append(name)


async def test_add_dedupes_before_embedding_and_creates_the_collection_once():
    coll = FakeCollection()
    client = FakeClient(coll)
    embedded = []

    async def embed(text):
        embedded.append(text)
        return [0.1, 0.2]

    store = WeaviateEpisodicStore(client, embed=embed)
    first = EpisodicEvent(user_id="u", kind="task", text=DOG, confidence=0.9)
    assert await store.add(first) == first.id
    assert await store.add(EpisodicEvent(user_id="u", kind="task", text=DOG.upper(), confidence=0.9)) == first.id
    assert len(coll.inserts) == 1 and embedded == [DOG]  # no model call for the duplicate
    assert coll.inserts[0]["uuid"] == object_uuid("u", DOG) and coll.inserts[0]["vector"] == [0.1, 0.2]
    assert client.connected and client.created == ["HermesEpisodicEvent"]


async def test_search_without_embeddings_is_keyword_only():
    coll = FakeCollection()
    store = WeaviateEpisodicStore(FakeClient(coll), alpha=0.7)
    await store.add(EpisodicEvent(user_id="u", kind="task", text="sales report", confidence=0.9, created_at=NOW))
    (hit,) = await store.search("u", "sales", k=3, kinds=["task"], now=NOW)
    call = coll.hybrid_calls[0]
    assert call["alpha"] == 0.0 and call["vector"] is None and call["query_properties"] == ["text"]
    assert ("kind", "ContainsAny", ["task"]) in flatten(call["filters"])
    assert hit.event.text == "sales report" and hit.score == pytest.approx(0.5)
    assert await store.search("u", "sales", kinds=[], now=NOW) == []
