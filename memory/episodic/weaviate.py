"""Episodic store on Weaviate, weaviate-client v4 collections API (pinned 4.16.2, see pyproject.toml).

Selected with ``HERMES_EPISODIC=weaviate`` (``Context.episodic``; URL, gRPC port and the name of
the API-key variable are settings too); a server for users: ``deploy/weaviate/docker-compose.yml``.

Verified how: no Weaviate server can run on the build machines, so
``tests/integration/test_memory_weaviate_wire.py`` runs the real client against a
protocol-level stand-in built on the gRPC/protobuf stubs inside ``weaviate-client`` (its own
mock-test pattern): it proves the requests this store sends (collection schema, batch
inserts with vectors, hybrid/BM25/vector queries with fusion, alpha, filters) and that it
parses the answers — not Weaviate's ranking. The contract suite
(``tests/integration/test_memory_weaviate_contract.py``) runs against a real server when
``WEAVIATE_URL`` is set, and is skipped with that reason otherwise.

Design (the same ranking contract as the embedded store, ``memory.episodic.base``):
- One collection (default ``HermesEpisodicEvent``), self-provided vectors (no server-side
  vectorizer): the embedder that the embedded store uses makes them.
- Keyword half on ``kw`` (``memory.text.keyword_text``: CJK unigrams+bigrams, emoji; whitespace
  tokenization), so CJK and emoji match as in the embedded store; ids and enums use FIELD
  tokenization (exact filters).
- Hybrid query: ``relativeScoreFusion`` (the fusion the embedded store reproduces), ``alpha``,
  ``max_vector_distance = 1 - min_similarity`` (no "nearest of everything").
- Per user: every query carries a ``user_id`` filter (a multi-tenant collection, one tenant per
  user, is the scale-out variant; the filter keeps one schema for both backends).
- Time decay client-side: ``score = fused score × decay weight``.
- K11: object UUID = ``uuid5(user_id, content hash)``; ``add_many`` fetches those ids before
  embedding; duplicates are no-ops returning the stored ``event_id``.
- ``expire`` deletes objects past the validity period (Weaviate has no cheap archive).

The async client is bound to the event loop it connects in: one store per loop, ``close()`` at
the end.
"""

from __future__ import annotations

import builtins
import json
import logging
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

import weaviate
from weaviate.classes.config import Configure, DataType, Property, Tokenization
from weaviate.classes.data import DataObject
from weaviate.classes.init import Auth
from weaviate.classes.query import Filter, HybridFusion, MetadataQuery, Sort
from weaviate.exceptions import UnexpectedStatusCodeError, WeaviateInsertManyAllFailedError
from weaviate.util import generate_uuid5

from memory.embeddings import Embedder, similarity_floor
from memory.episodic.base import (
    DEFAULT_ALPHA,
    DEFAULT_CANDIDATES,
    DEFAULT_HALF_LIFE_DAYS,
    DEFAULT_TTL_DAYS,
    EpisodicEvent,
    ScoredEvent,
    fusion_alpha,
    index_text,
    speaker_weight,
    time_decay,
    utcnow,
)
from memory.episodic.hybrid import HybridSearch, SearchQuery
from memory.observations import query_names
from memory.text import content_hash, keyword_text

if TYPE_CHECKING:
    from weaviate.collections import CollectionAsync
    from weaviate.collections.classes.filters import _Filters  # what Filter's operators return

log = logging.getLogger(__name__)

DEFAULT_URL = "http://localhost:8080"
DEFAULT_GRPC_PORT = 50051
DEFAULT_COLLECTION = "HermesEpisodicEvent"


@dataclass(frozen=True)
class ConnectionParams:
    """Arguments of ``weaviate.use_async_with_custom`` derived from a URL."""

    http_host: str
    http_port: int
    http_secure: bool
    grpc_host: str
    grpc_port: int
    grpc_secure: bool


def parse_weaviate_url(url: str, grpc_port: int = DEFAULT_GRPC_PORT) -> ConnectionParams:
    """``"https://host:443"`` → connection params (gRPC on the same host, same TLS setting).
    The port defaults to 443 for https and 8080 for http. Raises ``ValueError`` on a URL
    without an http(s) scheme or a host."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"not an http(s) Weaviate URL: {url!r}")
    secure = parts.scheme == "https"
    port = parts.port or (443 if secure else 8080)
    return ConnectionParams(parts.hostname, port, secure, parts.hostname, grpc_port, secure)


def collection_properties() -> list[Property]:
    """The collection schema: ids and enums FIELD-tokenized (exact filters, not in BM25);
    ``kw`` (pre-tokenized keyword text) is the one BM25 property, WHITESPACE-tokenized."""

    def exact(name: str) -> Property:
        return Property(
            name=name,
            data_type=DataType.TEXT,
            tokenization=Tokenization.FIELD,
            index_searchable=False,
            index_filterable=True,
        )

    return [
        exact("event_id"),
        exact("user_id"),
        exact("kind"),
        Property(name="text", data_type=DataType.TEXT, index_searchable=False, index_filterable=False),
        Property(
            name="kw",
            data_type=DataType.TEXT,
            tokenization=Tokenization.WHITESPACE,
            index_searchable=True,
            index_filterable=False,
        ),
        exact("content_hash"),
        Property(name="created_at", data_type=DataType.DATE, index_range_filters=True),
        Property(name="confidence", data_type=DataType.NUMBER),
        exact("evidence"),
        Property(name="metadata_json", data_type=DataType.TEXT, index_searchable=False, index_filterable=False),
    ]


def object_uuid(user_id: str, text: str) -> str:
    """The K11 object id: ``uuid5`` of the user and the normalised-text hash."""
    return generate_uuid5(f"{user_id}\x00{content_hash(text)}")


def event_to_properties(event: EpisodicEvent) -> dict[str, Any]:
    """``EpisodicEvent`` → Weaviate properties (``created_at`` aware UTC, metadata as JSON)."""
    return {
        "event_id": event.id,
        "user_id": event.user_id,
        "kind": event.kind,
        "text": event.text,
        "kw": keyword_text(index_text(event)),
        "content_hash": content_hash(event.text),
        "created_at": event.created_at,
        "confidence": event.confidence,
        "evidence": event.evidence,
        "metadata_json": json.dumps(event.metadata, ensure_ascii=False, default=str),
    }


def properties_to_event(props: Mapping[str, Any]) -> EpisodicEvent:
    """Weaviate properties → ``EpisodicEvent``. ``created_at`` may be a datetime or ISO text.
    Raises ``KeyError``/``ValueError``/``pydantic.ValidationError`` on a malformed object."""
    created = props["created_at"]
    if isinstance(created, str):
        created = datetime.fromisoformat(created)
    return EpisodicEvent(
        id=props["event_id"],
        user_id=props["user_id"],
        kind=props["kind"],
        text=props["text"],
        created_at=created,
        confidence=props["confidence"],
        evidence=props.get("evidence") or "direct",
        metadata=json.loads(props.get("metadata_json") or "{}"),
    )


def build_filters(
    user_id: str,
    kinds: Sequence[str] | None = None,
    not_before: datetime | None = None,
    not_after: datetime | None = None,
) -> _Filters:
    """``user_id == user_id`` AND (``kind`` in ``kinds``) AND ``created_at`` within the range."""
    f = Filter.by_property("user_id").equal(user_id)
    if kinds:
        f = f & Filter.by_property("kind").contains_any(list(kinds))
    if not_before is not None:
        f = f & Filter.by_property("created_at").greater_or_equal(not_before)
    if not_after is not None:
        f = f & Filter.by_property("created_at").less_or_equal(not_after)
    return f


class WeaviateEpisodicStore(HybridSearch):
    """:class:`~memory.episodic.base.EpisodicStore` on Weaviate (see the module docstring).

    Args:
        client: a ``weaviate.WeaviateAsyncClient`` (connected lazily if needed).
        embedder: vectors for the vector half (``None``: keyword search only).
        collection: collection name (created on first use if missing).
        alpha: hybrid weight of the vector half. half_life_days, ttl_days: decay and validity.
        candidates: objects fetched per search before decay re-ranking.
    """

    def __init__(
        self,
        client: Any,
        *,
        embedder: Embedder | None = None,
        collection: str = DEFAULT_COLLECTION,
        alpha: float = DEFAULT_ALPHA,
        half_life_days: float = DEFAULT_HALF_LIFE_DAYS,
        ttl_days: int = DEFAULT_TTL_DAYS,
        candidates: int = DEFAULT_CANDIDATES,
    ) -> None:
        if not 0.0 <= alpha <= 1.0:
            raise ValueError("alpha must be in [0, 1]")
        if half_life_days <= 0:
            raise ValueError("half_life_days must be > 0")
        self.client = client
        self.embedder = embedder
        self.collection_name = collection
        self.alpha = alpha
        self.half_life_days = half_life_days
        self.ttl_days = ttl_days
        self.candidates = candidates
        self._collection: CollectionAsync[dict[str, Any], None] | None = None

    @classmethod
    def from_url(
        cls, url: str = DEFAULT_URL, *, grpc_port: int = DEFAULT_GRPC_PORT, api_key: str | None = None, **kwargs: Any
    ) -> WeaviateEpisodicStore:
        """A store whose client targets ``url`` (not connected until first use)."""
        p = parse_weaviate_url(url, grpc_port)
        client = weaviate.use_async_with_custom(
            http_host=p.http_host,
            http_port=p.http_port,
            http_secure=p.http_secure,
            grpc_host=p.grpc_host,
            grpc_port=p.grpc_port,
            grpc_secure=p.grpc_secure,
            auth_credentials=Auth.api_key(api_key) if api_key else None,
            skip_init_checks=False,
        )
        return cls(client, **kwargs)

    async def close(self) -> None:
        """Close the client connection (idempotent)."""
        self._collection = None
        try:
            await self.client.close()
        except Exception:
            log.debug("weaviate close failed", exc_info=True)

    async def _coll(self) -> CollectionAsync[dict[str, Any], None]:
        if self._collection is None:
            if not self.client.is_connected():
                await self.client.connect()
            if not await self.client.collections.exists(self.collection_name):
                try:
                    await self.client.collections.create(
                        self.collection_name,
                        properties=collection_properties(),
                        vector_config=Configure.Vectors.self_provided(),
                    )
                except UnexpectedStatusCodeError:
                    # another process created it between exists() and create()
                    if not await self.client.collections.exists(self.collection_name):
                        raise
            self._collection = self.client.collections.use(self.collection_name)
        return self._collection

    async def add(self, event: EpisodicEvent) -> str:
        return (await self.add_many([event]))[0]

    async def _stored_ids(self, coll: CollectionAsync[dict[str, Any], None], uuids: Sequence[str]) -> dict[str, str]:
        if not uuids:
            return {}
        result = await coll.query.fetch_objects(
            filters=Filter.by_id().contains_any(list(uuids)), limit=len(uuids), return_properties=["event_id"]
        )
        return {str(o.uuid): str(o.properties.get("event_id") or o.uuid) for o in result.objects}

    async def add_many(self, events: Sequence[EpisodicEvent]) -> list[str]:
        """One batch insert under K11 UUIDs; duplicates (already stored, or twice in the batch)
        are no-ops returning the stored ``event_id``, found before any embedding call.
        Raises ``weaviate.exceptions.WeaviateBaseError`` (or ``RuntimeError`` with the
        server's per-object errors) when the batch fails."""
        if not events:
            return []
        coll = await self._coll()
        uids = [object_uuid(e.user_id, e.text) for e in events]
        stored = await self._stored_ids(coll, list(dict.fromkeys(uids)))
        fresh: dict[str, EpisodicEvent] = {}
        for uid, event in zip(uids, events):
            if uid not in stored and uid not in fresh:
                fresh[uid] = event
        if fresh:
            vectors = (
                await self.embedder.embed_passages([e.text for e in fresh.values()])
                if self.embedder
                else [None] * len(fresh)
            )
            objects = [
                DataObject(properties=event_to_properties(e), uuid=uid, vector=v)
                for (uid, e), v in zip(fresh.items(), vectors)
            ]
            try:
                result = await coll.data.insert_many(objects)
                errors = {i: str(err.message) for i, err in result.errors.items()}
            except WeaviateInsertManyAllFailedError as exc:  # every object refused (e.g. all raced)
                errors = {i: str(exc) for i in range(len(objects))}
            if errors:
                again = await self._stored_ids(coll, [str(objects[i].uuid) for i in errors])
                lost = [message for i, message in errors.items() if str(objects[i].uuid) not in again]
                if lost:
                    raise RuntimeError(f"Weaviate refused {len(lost)} of {len(objects)} objects: {lost[0]}")
                stored.update(again)  # lost a race with another writer: theirs is stored
            for uid, event in fresh.items():
                stored.setdefault(uid, event.id)
        return [stored[uid] for uid in uids]

    async def _ranked(self, q: SearchQuery) -> builtins.list[ScoredEvent]:
        """Hybrid / BM25 / vector search fused on the server (``relativeScoreFusion``) ×
        client-side time decay; see ``EpisodicStore.search``."""
        coll = await self._coll()
        not_before = q.now - timedelta(days=self.ttl_days)
        if q.since is not None and q.since > not_before:
            not_before = q.since
        filters = build_filters(q.user_id, q.kinds, not_before, q.until)
        query, terms, limit, mode = q.text, q.terms, q.limit, q.mode
        embedder = self.embedder
        if embedder is None:
            mode = "keyword"
        vector = None if mode == "keyword" or embedder is None else (await embedder.embed_queries([query]))[0]
        if mode == "keyword":
            result = await coll.query.bm25(
                query=" ".join(terms),
                query_properties=["kw"],
                filters=filters,
                limit=limit,
                return_metadata=MetadataQuery(score=True),
            )
        elif mode == "vector":
            assert vector is not None  # the vector mode has an embedder (else it is keyword)
            result = await coll.query.near_vector(
                near_vector=vector, filters=filters, limit=limit, return_metadata=MetadataQuery(distance=True)
            )
        else:
            assert embedder is not None  # without one the mode is keyword
            result = await coll.query.hybrid(
                query=" ".join(terms),
                alpha=fusion_alpha(query, self.alpha),
                vector=vector,
                query_properties=["kw"],
                fusion_type=HybridFusion.RELATIVE_SCORE,
                max_vector_distance=1.0 - similarity_floor(embedder, query),
                filters=filters,
                limit=limit,
                return_metadata=MetadataQuery(score=True),
            )
        return rank_objects(result.objects, q.now, self.half_life_days, q.k, query_names(query))

    async def get(self, user_id: str, event_id: str) -> EpisodicEvent | None:
        coll = await self._coll()
        result = await coll.query.fetch_objects(
            filters=Filter.by_property("user_id").equal(user_id) & Filter.by_property("event_id").equal(event_id),
            limit=1,
        )
        return properties_to_event(result.objects[0].properties) if result.objects else None

    async def list(
        self,
        user_id: str,
        *,
        kinds: Sequence[str] | None = None,
        since: datetime | None = None,
        until: datetime | None = None,
        limit: int = 50,
        include_expired: bool = False,
    ) -> list[EpisodicEvent]:
        if limit <= 0 or (kinds is not None and not kinds):
            return []
        coll = await self._coll()
        result = await coll.query.fetch_objects(
            filters=build_filters(user_id, kinds, since, until),
            limit=limit,
            sort=Sort.by_property("created_at", ascending=False),
        )
        out = []
        for obj in result.objects:
            try:
                out.append(properties_to_event(obj.properties))
            except Exception as exc:  # noqa: BLE001 - one bad object must not break the listing
                log.warning("skipping unreadable Weaviate object %s: %s", getattr(obj, "uuid", "?"), exc)
        return out

    async def recent(self, since: datetime, limit: int = 1000) -> builtins.list[EpisodicEvent]:
        coll = await self._coll()
        result = await coll.query.fetch_objects(
            filters=Filter.by_property("created_at").greater_or_equal(since),
            limit=limit,
            sort=Sort.by_property("created_at", ascending=False),
        )
        out = []
        for obj in result.objects:
            try:
                out.append(properties_to_event(obj.properties))
            except Exception as exc:  # noqa: BLE001 - one bad object must not break the listing
                log.warning("skipping unreadable Weaviate object %s: %s", getattr(obj, "uuid", "?"), exc)
        return out

    async def forget(self, user_id: str, event_id: str) -> bool:
        coll = await self._coll()
        result = await coll.data.delete_many(
            where=Filter.by_property("user_id").equal(user_id) & Filter.by_property("event_id").equal(event_id)
        )
        return int(result.successful) > 0

    async def expire(self, older_than_days: int = DEFAULT_TTL_DAYS, now: datetime | None = None) -> int:
        """Delete objects created more than ``older_than_days`` days before ``now``; return how many."""
        now = now or utcnow()
        coll = await self._coll()
        result = await coll.data.delete_many(
            where=Filter.by_property("created_at").less_than(now - timedelta(days=older_than_days))
        )
        return int(result.successful)

    async def count(self, user_id: str | None = None, *, include_expired: bool = False) -> int:
        coll = await self._coll()
        filters = Filter.by_property("user_id").equal(user_id) if user_id is not None else None
        result = await coll.aggregate.over_all(total_count=True, filters=filters)
        return int(result.total_count or 0)


def rank_objects(
    objects: Sequence[Any], now: datetime, half_life_days: float, k: int, names: Collection[str] = ()
) -> builtins.list[ScoredEvent]:
    """Weaviate result objects → the ``k`` best ``ScoredEvent`` by ``score × decay weight``
    (× ``speaker_weight`` for the case-folded ``names`` the query mentions). Relevance: the
    fused/BM25 score, or ``1 - distance`` for a vector query; malformed objects are skipped."""
    hits: list[ScoredEvent] = []
    for obj in objects:
        try:
            event = properties_to_event(obj.properties)
        except Exception as exc:  # noqa: BLE001 - one bad object must not break recall
            log.warning("skipping unreadable Weaviate object %s: %s", getattr(obj, "uuid", "?"), exc)
            continue
        meta = getattr(obj, "metadata", None)
        score, distance = getattr(meta, "score", None), getattr(meta, "distance", None)
        relevance = float(score) if score is not None else (1.0 - float(distance) if distance is not None else 1.0)
        weight = time_decay(event.created_at, now, half_life_days)
        score = relevance * weight * speaker_weight(event, names)
        hits.append(ScoredEvent(event=event, relevance=relevance, decay=weight, score=score))
    hits.sort(key=lambda h: (h.score, h.event.created_at), reverse=True)
    return hits[:k]
