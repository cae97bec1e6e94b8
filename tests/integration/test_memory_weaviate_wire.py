"""WeaviateEpisodicStore over the wire: the real ``weaviate-client`` (4.16.2) against a
protocol-level stand-in built on the gRPC/protobuf stubs that ship inside the client (the
client's own mock-test pattern: a gRPC ``Weaviate`` + health servicer, and a small REST server
for meta, readiness and schema).

What this proves: the requests the store sends — collection schema (properties, tokenization,
self-provided vectors), batch inserts under K11 UUIDs with vectors, hybrid queries (fusion
type, alpha, vector, query properties, max vector distance), BM25 and vector queries, the
user / kind / time filter tree, deletes — and that it parses the answers. What it does not
prove: Weaviate's own ranking or filtering (the stand-in evaluates only a user filter and id
lookups). The ranking contract runs against a real server in
``test_memory_weaviate_contract.py`` when ``WEAVIATE_URL`` is set.
"""

from __future__ import annotations

import json
import socket
import threading
import uuid
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import ClassVar

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from weaviate.proto.v1 import (
    base_pb2,
    base_search_pb2,
    batch_delete_pb2,
    batch_pb2,
    properties_pb2,
    search_get_pb2,
    weaviate_pb2_grpc,
)

from memory.embeddings import HashEmbedder
from memory.episodic.base import EpisodicEvent, EventKind
from memory.episodic.weaviate import WeaviateEpisodicStore, object_uuid

pytestmark = [pytest.mark.timeout(60)]
NOW = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Rest(BaseHTTPRequestHandler):
    """REST half: meta, readiness, schema (collections.exists / create)."""

    # class-level: the server makes a handler per request; tests read and reset these on the class
    schemas: ClassVar[dict[str, dict]] = {}
    calls: ClassVar[list[tuple[str, str, dict | None]]] = []

    def log_message(self, *args):  # quiet
        pass

    def _send(self, code: int, body: dict | None = None) -> None:
        data = json.dumps(body or {}).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        self.calls.append(("GET", self.path, None))
        if self.path == "/v1/meta":
            return self._send(200, {"version": "1.32.0", "modules": {}})
        if self.path == "/v1/.well-known/ready":
            return self._send(200)
        if self.path.startswith("/v1/schema/"):
            name = self.path.split("/")[3]
            return self._send(200, self.schemas[name]) if name in self.schemas else self._send(404)
        return self._send(404)

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
        self.calls.append(("POST", self.path, body))
        if self.path == "/v1/schema":
            self.schemas[body["class"]] = body
            return self._send(200, body)
        return self._send(404)


def _value(v) -> properties_pb2.Value:
    if isinstance(v, bool):
        return properties_pb2.Value(bool_value=v)
    if isinstance(v, (int, float)):
        return properties_pb2.Value(number_value=float(v))
    return properties_pb2.Value(text_value=str(v))


def _leaves(f: base_pb2.Filters):
    if f.filters:
        for sub in f.filters:
            yield from _leaves(sub)
    else:
        yield f


class StandIn(weaviate_pb2_grpc.WeaviateServicer):
    """gRPC half: keeps inserted objects; answers searches with the objects of the filter's
    user (or the ids asked for), a fixed descending score each; records every request."""

    def __init__(self) -> None:
        self.objects: dict[str, dict] = {}  # uuid -> {"props": dict, "vector": bytes}
        self.searches: list[search_get_pb2.SearchRequest] = []
        self.batches: list[batch_pb2.BatchObjectsRequest] = []
        self.deletes: list[batch_delete_pb2.BatchDeleteRequest] = []

    async def BatchObjects(self, request, context):  # noqa: N802 - the gRPC service's method name
        self.batches.append(request)
        errors = []
        for i, obj in enumerate(request.objects):
            if obj.uuid in self.objects:
                errors.append(batch_pb2.BatchObjectsReply.BatchError(index=i, error="id already exists"))
                continue
            props = json.loads(json.dumps(dict(obj.properties.non_ref_properties)))
            self.objects[obj.uuid] = {"props": props, "vector": obj.vector_bytes or b""}
        return batch_pb2.BatchObjectsReply(took=0.001, errors=errors)

    async def BatchDelete(self, request, context):  # noqa: N802 - the gRPC service's method name
        self.deletes.append(request)
        users = [leaf.value_text for leaf in _leaves(request.filters) if leaf.target.property == "user_id"]
        gone = [u for u, o in self.objects.items() if not users or o["props"].get("user_id") in users]
        for u in gone:
            del self.objects[u]
        return batch_delete_pb2.BatchDeleteReply(took=0.001, matches=len(gone), successful=len(gone))

    async def Search(self, request, context):  # noqa: N802 - the gRPC service's method name
        self.searches.append(request)
        leaves = list(_leaves(request.filters))
        ids = [
            v
            for leaf in leaves
            if leaf.target.property == "_id" or leaf.on == ["_id"]
            for v in leaf.value_text_array.values
        ]
        users = [leaf.value_text for leaf in leaves if leaf.target.property == "user_id"]
        if ids:
            chosen = [u for u in self.objects if u in ids]
        else:
            chosen = [u for u, o in self.objects.items() if not users or o["props"].get("user_id") in users]
        results = []
        for rank, uid in enumerate(chosen[: request.limit or 100]):
            props = properties_pb2.Properties(
                fields={
                    k: (properties_pb2.Value(date_value=v) if k == "created_at" else _value(v))
                    for k, v in self.objects[uid]["props"].items()
                }
            )
            meta = search_get_pb2.MetadataResult(
                id=uid,
                id_as_bytes=uuid.UUID(uid).bytes,
                score=1.0 - 0.1 * rank,
                score_present=True,
                distance=0.1 * rank,
                distance_present=True,
            )
            results.append(
                search_get_pb2.SearchResult(
                    properties=search_get_pb2.PropertiesResult(non_ref_props=props), metadata=meta
                )
            )
        return search_get_pb2.SearchReply(took=0.001, results=results)


class Health(health_pb2_grpc.HealthServicer):
    async def Check(self, request, context):  # noqa: N802 - the gRPC service's method name
        return health_pb2.HealthCheckResponse(status=health_pb2.HealthCheckResponse.SERVING)


@pytest.fixture
async def standin():
    Rest.schemas, Rest.calls = {}, []
    http_port, grpc_port = free_port(), free_port()
    rest = ThreadingHTTPServer(("127.0.0.1", http_port), Rest)
    thread = threading.Thread(target=rest.serve_forever, daemon=True)
    thread.start()
    server = grpc.aio.server()
    servicer = StandIn()
    weaviate_pb2_grpc.add_WeaviateServicer_to_server(servicer, server)
    health_pb2_grpc.add_HealthServicer_to_server(Health(), server)
    server.add_insecure_port(f"127.0.0.1:{grpc_port}")
    await server.start()
    emb = HashEmbedder(8)
    store = WeaviateEpisodicStore.from_url(
        f"http://127.0.0.1:{http_port}", grpc_port=grpc_port, embedder=emb, alpha=0.6
    )
    try:
        yield store, servicer
    finally:
        await store.close()
        await server.stop(None)
        rest.shutdown()
        rest.server_close()


def ev(text: str, user: str = "u", kind: EventKind = "task", **kw) -> EpisodicEvent:
    return EpisodicEvent(user_id=user, kind=kind, text=text, confidence=0.9, created_at=NOW, **kw)


async def test_collection_schema_and_batch_insert_with_k11_ids_and_vectors(standin):
    store, servicer = standin
    first = ev("我喜欢喝茶 and sales reports 🎉", metadata={"thread_id": "t1"})
    ids = await store.add_many([first, ev("  我喜欢喝茶 AND sales reports 🎉 ")])
    assert ids == [first.id, first.id]  # the in-batch duplicate is one object
    posts = [body for method, path, body in Rest.calls if method == "POST" and path == "/v1/schema"]
    assert len(posts) == 1 and posts[0]["class"] == "HermesEpisodicEvent"
    props = {p["name"]: p for p in posts[0]["properties"]}
    assert props["kw"]["tokenization"] == "whitespace" and props["user_id"]["tokenization"] == "field"
    assert props["text"]["indexSearchable"] is False
    assert posts[0]["vectorConfig"]["default"]["vectorizer"] == {"none": {}}  # self-provided vectors
    (batch,) = servicer.batches
    (obj,) = batch.objects
    assert obj.uuid == object_uuid("u", first.text) and obj.collection == "HermesEpisodicEvent"
    assert len(obj.vector_bytes) == 8 * 4  # float32 × dim
    sent = dict(obj.properties.non_ref_properties)
    assert sent["kw"].split()[:3] == ["我", "喜", "欢"] and "喝茶" in sent["kw"].split() and "🎉" in sent["kw"]
    # the same text again: found by id before any embedding, no second batch
    assert await store.add(ev("我喜欢喝茶 and sales reports 🎉")) == first.id
    assert len(servicer.batches) == 1
    pre = servicer.searches[-1]
    assert [v for leaf in _leaves(pre.filters) for v in leaf.value_text_array.values] == [obj.uuid]


async def test_hybrid_request_carries_fusion_alpha_vector_distance_and_filters(standin):
    store, servicer = standin
    await store.add_many([ev("monthly sales report"), ev("other user's report", user="v")])
    hits = await store.search(
        "u", "Sales REPORT", k=3, kinds=["task", "preference"], since=NOW - timedelta(days=3), until=NOW, now=NOW
    )
    request = servicer.searches[-1]
    hybrid = request.hybrid_search
    assert hybrid.fusion_type == base_search_pb2.Hybrid.FUSION_TYPE_RELATIVE_SCORE
    assert hybrid.alpha == pytest.approx(0.6) and list(hybrid.properties) == ["kw"]
    assert hybrid.query == "sales report"  # the keyword tokens, as the embedded store queries them
    assert hybrid.vector_distance == pytest.approx(1 - HashEmbedder.min_similarity)
    assert len(hybrid.vector_bytes or b"") == 8 * 4 or len(hybrid.near_vector.vector_bytes) == 8 * 4
    leaves = {(leaf.target.property, leaf.operator): leaf for leaf in _leaves(request.filters)}
    assert leaves[("user_id", base_pb2.Filters.OPERATOR_EQUAL)].value_text == "u"
    assert list(leaves[("kind", base_pb2.Filters.OPERATOR_CONTAINS_ANY)].value_text_array.values) == [
        "task",
        "preference",
    ]
    assert ("created_at", base_pb2.Filters.OPERATOR_GREATER_THAN_EQUAL) in leaves
    assert ("created_at", base_pb2.Filters.OPERATOR_LESS_THAN_EQUAL) in leaves
    assert request.metadata.score is True
    # parsed back into events, decay applied client-side
    assert [h.event.text for h in hits] == ["monthly sales report"]
    assert hits[0].event.created_at == NOW and hits[0].decay == pytest.approx(1.0)


async def test_keyword_and_vector_modes_and_nothing_searchable(standin):
    store, servicer = standin
    await store.add(ev("weekly report"))
    await store.search("u", "report", mode="keyword", now=NOW)
    assert servicer.searches[-1].bm25_search.query == "report"
    assert list(servicer.searches[-1].bm25_search.properties) == ["kw"]
    hits = await store.search("u", "report", mode="vector", now=NOW)
    assert servicer.searches[-1].HasField("near_vector") and hits[0].relevance == pytest.approx(1.0)
    before = len(servicer.searches)
    assert await store.search("u", "!!! ？？", now=NOW) == []  # never "everything"
    assert len(servicer.searches) == before  # not even sent


async def test_get_list_forget_and_expire_requests(standin):
    store, servicer = standin
    a = ev("keep me")
    await store.add_many([a, ev("drop me")])
    assert (await store.get("u", a.id)).text == "keep me"
    listed = await store.list("u", limit=5)
    assert {e.text for e in listed} == {"keep me", "drop me"}
    assert servicer.searches[-1].sort_by[0].path == ["created_at"]
    assert await store.forget("u", a.id) is True
    leaves = {leaf.target.property: leaf for leaf in _leaves(servicer.deletes[-1].filters)}
    assert leaves["user_id"].value_text == "u" and leaves["event_id"].value_text == a.id
    await store.expire(30, now=NOW)
    (leaf,) = list(_leaves(servicer.deletes[-1].filters))
    assert leaf.target.property == "created_at" and leaf.operator == base_pb2.Filters.OPERATOR_LESS_THAN
