"""Episodic store on Weaviate, weaviate-client v4 collections API (DESIGN.md §4 / seed §4.1–4.2).

UNVERIFIED HERE: no Weaviate server can run on the build machines (embedded mode downloads a
binary; there is no Docker engine). This module was written from the v4 client's API
(4.16.2: ``use_async_with_custom``, ``collections.create``, ``query.hybrid``, ``Filter``) and
only its pure parts (URL parsing, property mapping, filters, collection schema) and its K11
flow against a stand-in collection are unit-tested. Run a server with
``deploy/weaviate/docker-compose.yml`` before relying on it.

Design:
- One collection (default ``HermesEpisodicEvent``), self-provided vectors (no server-side
  vectorizer). With an ``embed`` function, ``add`` stores a vector and ``search`` runs a hybrid
  query (``alpha`` weighs vector vs. BM25, relative-score fusion); without one, search is BM25
  only (``alpha = 0``), because the server has nothing to vectorize the query with.
- Filters: ``user_id`` equal, ``kind`` contains-any, ``created_at`` within the validity period.
- Time decay is applied client-side: ``score = hybrid score × 0.5 ** (age_days / half_life)``.
- K11: the object UUID is ``uuid5(user_id + content hash)``, so the same normalised text for
  the same user maps to the same object; ``add`` looks it up before embedding and is a no-op
  returning the stored ``event_id``. Nothing is deleted by ``add``.
- ``expire`` deletes objects older than the validity period (Weaviate has no cheap archive).

Connection: ``WeaviateEpisodicStore.from_env()`` reads ``HERMES_WEAVIATE_URL`` (default
``http://localhost:8080``), ``HERMES_WEAVIATE_GRPC_PORT`` (default 50051) and
``WEAVIATE_API_KEY`` (optional). The async client is bound to the event loop it connects in:
create one store per loop and ``await store.close()`` when done.
"""

from __future__ import annotations

import json
import logging
import os
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Awaitable, Callable, Mapping, Sequence
from urllib.parse import urlsplit

import weaviate
from weaviate.classes.config import Configure, DataType, Property, Tokenization
from weaviate.classes.init import Auth
from weaviate.classes.query import Filter, HybridFusion, MetadataQuery, Sort
from weaviate.exceptions import UnexpectedStatusCodeError
from weaviate.util import generate_uuid5

from memory.episodic.base import (
    DEFAULT_HALF_LIFE_DAYS,
    EpisodicEvent,
    ScoredEvent,
    content_hash,
    scored,
    utcnow,
)
from memory.policy import EPISODIC_TTL_DAYS

log = logging.getLogger(__name__)

DEFAULT_URL = "http://localhost:8080"
DEFAULT_GRPC_PORT = 50051
DEFAULT_COLLECTION = "HermesEpisodicEvent"
#: Default hybrid weight: 0 = pure BM25, 1 = pure vector.
DEFAULT_ALPHA = 0.5
#: Candidates fetched from the server and re-ranked by time decay.
DEFAULT_CANDIDATES = 100

#: ``embed(text) -> vector``: any async embedding function (e.g. an OpenAI-compatible endpoint).
Embed = Callable[[str], Awaitable[Sequence[float]]]


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
    """The collection schema. Ids and enums use FIELD tokenization (exact-match filters) and are
    kept out of BM25; only ``text`` is searchable with WORD tokenization."""

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
        Property(name="text", data_type=DataType.TEXT, tokenization=Tokenization.WORD),
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
        created = datetime.fromisoformat(created.replace("Z", "+00:00"))
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


def build_filters(user_id: str, kinds: Sequence[str] | None = None, not_before: datetime | None = None):
    """``user_id == user_id`` AND (``kind`` in ``kinds``) AND (``created_at >= not_before``)."""
    f = Filter.by_property("user_id").equal(user_id)
    if kinds:
        f = f & Filter.by_property("kind").contains_any(list(kinds))
    if not_before is not None:
        f = f & Filter.by_property("created_at").greater_or_equal(not_before)
    return f


class WeaviateEpisodicStore:
    """``EpisodicStore`` on Weaviate (see the module docstring; unverified against a server).

    Args:
        client: a ``weaviate.WeaviateAsyncClient`` (connected lazily if needed).
        collection: collection name (created on first use if missing).
        embed: optional async embedding function; enables vectors and hybrid search.
        alpha: hybrid weight in [0, 1] when ``embed`` is set (0 = BM25, 1 = vector).
        half_life_days: time-decay half-life, days. ttl_days: validity period, days.
        candidates: objects fetched per search before decay re-ranking.
    """

    def __init__(
        self,
        client: Any,
        *,
        collection: str = DEFAULT_COLLECTION,
        embed: Embed | None = None,
        alpha: float = DEFAULT_ALPHA,
        half_life_days: float = DEFAULT_HALF_LIFE_DAYS,
        ttl_days: int = EPISODIC_TTL_DAYS,
        candidates: int = DEFAULT_CANDIDATES,
    ) -> None:
        if not 0.0 <= alpha <= 1.0:
            raise ValueError("alpha must be in [0, 1]")
        if half_life_days <= 0:
            raise ValueError("half_life_days must be > 0")
        self.client = client
        self.collection_name = collection
        self.embed = embed
        self.alpha = alpha
        self.half_life_days = half_life_days
        self.ttl_days = ttl_days
        self.candidates = candidates
        self._collection = None

    @classmethod
    def from_url(
        cls, url: str = DEFAULT_URL, *, grpc_port: int = DEFAULT_GRPC_PORT, api_key: str | None = None, **kwargs
    ) -> "WeaviateEpisodicStore":
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
        )
        return cls(client, **kwargs)

    @classmethod
    def from_env(cls, **kwargs) -> "WeaviateEpisodicStore":
        """``from_url`` with ``HERMES_WEAVIATE_URL``, ``HERMES_WEAVIATE_GRPC_PORT``, ``WEAVIATE_API_KEY``."""
        return cls.from_url(
            os.environ.get("HERMES_WEAVIATE_URL", DEFAULT_URL),
            grpc_port=int(os.environ.get("HERMES_WEAVIATE_GRPC_PORT", DEFAULT_GRPC_PORT)),
            api_key=os.environ.get("WEAVIATE_API_KEY") or None,
            **kwargs,
        )

    async def close(self) -> None:
        """Close the client connection."""
        await self.client.close()

    async def _coll(self):
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
                    # Another process created it between exists() and create().
                    if not await self.client.collections.exists(self.collection_name):
                        raise
            self._collection = self.client.collections.use(self.collection_name)
        return self._collection

    async def add(self, event: EpisodicEvent) -> str:
        """Insert ``event`` under its K11 UUID; a duplicate (same user, same normalised text)
        is a no-op returning the stored ``event_id``, found before any embedding call.
        Raises ``weaviate.exceptions.WeaviateBaseError`` on server errors."""
        coll = await self._coll()
        uid = object_uuid(event.user_id, event.text)
        existing = await coll.query.fetch_object_by_id(uid)
        if existing is not None:
            return str(existing.properties.get("event_id") or uid)
        vector = list(await self.embed(event.text)) if self.embed else None
        try:
            await coll.data.insert(properties=event_to_properties(event), uuid=uid, vector=vector)
        except UnexpectedStatusCodeError:
            existing = await coll.query.fetch_object_by_id(uid)  # lost a race with another writer
            if existing is None:
                raise
            return str(existing.properties.get("event_id") or uid)
        return event.id

    async def search(
        self,
        user_id: str,
        query: str,
        k: int = 3,
        kinds: Sequence[str] | None = None,
        now: datetime | None = None,
    ) -> list[ScoredEvent]:
        """Hybrid (or BM25) search × client-side time decay; see ``EpisodicStore.search``."""
        if k <= 0 or (kinds is not None and not kinds):
            return []
        now = now or utcnow()
        coll = await self._coll()
        filters = build_filters(user_id, kinds, now - timedelta(days=self.ttl_days))
        limit = max(self.candidates, k)
        if query.strip():
            vector = list(await self.embed(query)) if self.embed else None
            result = await coll.query.hybrid(
                query=query,
                alpha=self.alpha if vector is not None else 0.0,
                vector=vector,
                query_properties=["text"],
                fusion_type=HybridFusion.RELATIVE_SCORE,
                filters=filters,
                limit=limit,
                return_metadata=MetadataQuery(score=True),
            )
        else:
            result = await coll.query.fetch_objects(
                filters=filters, limit=limit, sort=Sort.by_property("created_at", ascending=False)
            )
        return rank_objects(result.objects, now, self.half_life_days, k)

    async def expire(self, older_than_days: int = EPISODIC_TTL_DAYS, now: datetime | None = None) -> int:
        """Delete objects created more than ``older_than_days`` days before ``now``; return how many."""
        now = now or utcnow()
        coll = await self._coll()
        result = await coll.data.delete_many(
            where=Filter.by_property("created_at").less_than(now - timedelta(days=older_than_days))
        )
        return int(result.successful)


def rank_objects(objects: Sequence[Any], now: datetime, half_life_days: float, k: int) -> list[ScoredEvent]:
    """Weaviate result objects → the ``k`` best ``ScoredEvent`` by ``score × decay``.
    An object without a score (plain fetch) has relevance 1.0; malformed objects are skipped."""
    hits: list[ScoredEvent] = []
    for obj in objects:
        try:
            event = properties_to_event(obj.properties)
        except Exception as exc:  # noqa: BLE001 - one bad object must not break recall
            log.warning("skipping unreadable Weaviate object %s: %s", getattr(obj, "uuid", "?"), exc)
            continue
        score = getattr(getattr(obj, "metadata", None), "score", None)
        hits.append(scored(event, 1.0 if score is None else float(score), now, half_life_days))
    hits.sort(key=lambda h: h.score, reverse=True)
    return hits[:k]
