"""WeaviateEpisodicStore, pure parts: URL parsing, property mapping, filters, schema, ranking.

The store's wire traffic (the real client against a gRPC/REST stand-in built on the client's
own protobuf stubs) is ``tests/integration/test_memory_weaviate_wire.py``; the contract suite
against a real server is ``tests/integration/test_memory_weaviate_contract.py``.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
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

NOW = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)
DOG = "The dog is a domesticated descendant of the wolf."


def flatten(f) -> list[tuple[str, str, Any]]:
    """(target, operator, value) of every leaf of a v4 filter tree."""
    if hasattr(f, "filters"):
        return [leaf for sub in f.filters for leaf in flatten(sub)]
    return [(f.target, f.operator.value, f.value)]


def test_parse_url():
    p = parse_weaviate_url("https://mem.example.com")
    assert (p.http_host, p.http_port, p.http_secure, p.grpc_host, p.grpc_port, p.grpc_secure) == (
        "mem.example.com",
        443,
        True,
        "mem.example.com",
        50051,
        True,
    )
    p = parse_weaviate_url("http://localhost:9090", grpc_port=6000)
    assert (p.http_port, p.http_secure, p.grpc_port) == (9090, False, 6000)
    assert parse_weaviate_url("http://localhost").http_port == 8080
    for bad in ("localhost:8080", "ftp://host", "http://"):
        with pytest.raises(ValueError):
            parse_weaviate_url(bad)


def test_from_url_builds_an_unconnected_async_client():
    store = WeaviateEpisodicStore.from_url("http://weaviate.internal:8081", grpc_port=50052, alpha=0.3)
    assert isinstance(store, EpisodicStore)
    assert store.alpha == 0.3 and not store.client.is_connected()
    with pytest.raises(ValueError):
        WeaviateEpisodicStore(store.client, alpha=1.5)


def test_properties_round_trip():
    e = EpisodicEvent(
        user_id="u",
        kind="preference",
        text="user preference: 以后都用PDF",
        created_at=NOW,
        confidence=0.9,
        evidence="inferred",
        metadata={"thread_id": "t1", "tools": ["a"]},
    )
    props = event_to_properties(e)
    assert props["created_at"] == NOW and props["metadata_json"] == '{"thread_id": "t1", "tools": ["a"]}'
    assert properties_to_event(props) == e
    # The server returns dates as datetimes, but ISO text with "Z" is accepted too.
    assert properties_to_event({**props, "created_at": "2026-11-29T12:00:00Z"}).created_at == NOW


def test_malformed_object_raises_on_mapping():
    with pytest.raises(KeyError):  # no created_at (the documented error of a missing property)
        properties_to_event({"user_id": "u", "text": "x"})


def test_k11_uuid_ignores_case_and_whitespace_but_not_user():
    assert object_uuid("u", DOG) == object_uuid("u", "  the DOG is a domesticated descendant of the   wolf. ")
    assert object_uuid("u", DOG) != object_uuid("v", DOG)
    assert object_uuid("u", DOG) != object_uuid("u", DOG + " Really.")


def test_properties_carry_the_keyword_tokens():
    props = event_to_properties(EpisodicEvent(user_id="u", kind="note", text="我喜欢喝茶 🎉", confidence=0.9))
    assert props["kw"].split() == ["我", "喜", "欢", "喝", "茶", "我喜", "喜欢", "欢喝", "喝茶", "🎉"]


def test_filters():
    cutoff = NOW - timedelta(days=30)
    assert flatten(build_filters("u")) == [("user_id", "Equal", "u")]
    assert flatten(build_filters("u", ["task", "preference"], cutoff)) == [
        ("user_id", "Equal", "u"),
        ("kind", "ContainsAny", ["task", "preference"]),
        ("created_at", "GreaterThanEqual", cutoff),
    ]


def test_schema_filters_exactly_and_searches_only_the_keyword_tokens():
    props = {p.name: p for p in collection_properties()}
    assert set(props) >= {"event_id", "user_id", "kind", "text", "kw", "content_hash", "created_at", "confidence"}
    assert props["user_id"].tokenization == Tokenization.FIELD and props["user_id"].indexSearchable is False
    assert props["kw"].tokenization == Tokenization.WHITESPACE and props["kw"].indexSearchable is True
    assert props["text"].indexSearchable is False
    assert props["created_at"].dataType == DataType.DATE


def obj(props, score=None):
    return SimpleNamespace(uuid="x", properties=props, metadata=SimpleNamespace(score=score))


def test_rank_objects_applies_decay_and_skips_bad_objects():
    old = EpisodicEvent(user_id="u", kind="task", text="old", created_at=NOW - timedelta(days=14), confidence=0.9)
    new = EpisodicEvent(user_id="u", kind="task", text="new", created_at=NOW - timedelta(days=1), confidence=0.9)
    objects = [obj(event_to_properties(old), 0.9), obj({"broken": True}, 1.0), obj(event_to_properties(new), 0.6)]
    hits = rank_objects(objects, NOW, 7.0, k=5)
    assert [h.event.text for h in hits] == ["new", "old"]  # 0.6 × 0.95 > 0.9 × 0.625
    assert hits[1].decay == pytest.approx(0.625) and hits[1].score == pytest.approx(0.5625)
    assert rank_objects([obj(event_to_properties(new))], NOW, 7.0, k=1)[0].relevance == 1.0
