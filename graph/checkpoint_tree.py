"""The checkpoint tree of a thread (seed §1.3, DESIGN §1.5): LangGraph checkpoints name their
parent (``parent_config``), so a thread's checkpoints form a tree; its leaves are the branch
**heads** and the newest checkpoint is the **active head**. Built from ``get_state_history``
snapshots or the server's history dicts (:func:`tree_from_history`); read by the branch
operations (``graph.branches``) and shown by ``hermes branch show``. Reading only: nothing here
writes a checkpoint.

Errors: :class:`BranchError` (unknown or ambiguous checkpoint reference).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from langchain_core.messages import BaseMessage
from langgraph.types import StateSnapshot

PREVIEW_CHARS = 60


class BranchError(ValueError):
    """A branch operation that cannot be done as asked; the message says why and what to do."""


def preview(message: Any, limit: int = PREVIEW_CHARS) -> str:
    """``"role: text…"`` for a LangChain message or a serialised message dict ("" for None)."""
    if message is None:
        return ""
    if isinstance(message, BaseMessage):
        role, content, name = message.type, message.content, message.name
        calls = getattr(message, "tool_calls", None) or []
        calls = [c.get("name") for c in calls]
    else:
        role, content, name = message.get("type", "?"), message.get("content", ""), message.get("name")
        calls = [c.get("name") for c in message.get("tool_calls") or []]
    if not isinstance(content, str):
        content = json.dumps(content, ensure_ascii=False, default=str)
    text = " ".join(content.split())
    if calls:
        text = ("→ " + ", ".join(str(c) for c in calls) + (f" {text}" if text else "")).strip()
    if len(text) > limit:
        text = text[: limit - 1] + "…"
    who = f"{role}({name})" if name and role == "tool" else role
    return f"{who}: {text}" if text else f"{who}: (empty)"


@dataclass
class CheckpointNode:
    """One checkpoint in a thread's tree.

    ``step``: LangGraph superstep (-1 = input); ``source``: metadata source (input, loop,
    update, fork); ``node``: what produced it — the node(s) that ran (``loop``), ``input``,
    ``rollback``/``switch``/``recovered`` (Hermes operations), ``update`` or ``copy``;
    ``next``: nodes that would run from it; ``preview``: its last message (see
    :func:`preview`); ``messages``: message count; ``readable``: False if the checkpoint could
    not be deserialised (``error`` says why)."""

    checkpoint_id: str
    parent_id: str | None
    step: int
    source: str
    node: str
    next: tuple[str, ...]
    created_at: str | None
    preview: str
    messages: int
    metadata: dict[str, Any] = field(default_factory=dict)
    children: list[str] = field(default_factory=list)
    readable: bool = True
    error: str = ""

    @property
    def short_id(self) -> str:
        return short_id(self.checkpoint_id)


def short_id(checkpoint_id: str | None) -> str:
    """The last 8 characters of a checkpoint id (its random tail; uuid6 ids share a time
    prefix within a thread). Any unique substring is accepted where an id is expected."""
    return (checkpoint_id or "")[-8:]


@dataclass
class BranchTree:
    """The checkpoint tree of one thread.

    ``nodes``: checkpoint id → :class:`CheckpointNode`; ``roots``: ids without a (known)
    parent; ``heads``: leaf ids, oldest first; ``active``: the active head's id (what
    ``aget_state(thread)`` returns), None for an empty thread."""

    thread_id: str
    nodes: dict[str, CheckpointNode]
    roots: list[str]
    heads: list[str]
    active: str | None

    def __len__(self) -> int:
        return len(self.nodes)

    def resolve(self, ref: str) -> str:
        """The full checkpoint id for ``ref``: a full id, or a unique prefix/suffix/substring
        (e.g. the 8-character short id). Raises :class:`BranchError` if none or several match."""
        if ref in self.nodes:
            return ref
        ref = ref.strip()
        hits = [cid for cid in self.nodes if ref and ref in cid]
        if len(hits) == 1:
            return hits[0]
        if not hits:
            if not self.nodes:  # the thread itself is unknown: say that, not "no checkpoint"
                raise BranchError(f"no thread {self.thread_id!r} (its threads: `hermes session list`)")
            raise BranchError(
                f"no checkpoint {ref!r} in thread {self.thread_id!r} (see `hermes branch show {self.thread_id}`)"
            )
        raise BranchError(
            f"checkpoint reference {ref!r} is ambiguous in thread {self.thread_id!r}: "
            + ", ".join(short_id(h) for h in hits[:5])
            + (" …" if len(hits) > 5 else "")
        )

    def path_to(self, checkpoint_id: str) -> list[str]:
        """Ids from the root down to ``checkpoint_id`` (inclusive)."""
        path: list[str] = []
        current: str | None = checkpoint_id
        while current and current in self.nodes and current not in path:
            path.append(current)
            current = self.nodes[current].parent_id
        return list(reversed(path))

    def is_ancestor(self, ancestor: str, of: str) -> bool:
        """True if ``ancestor`` is on the path from the root to ``of`` (inclusive)."""
        return ancestor in self.path_to(of)

    def fork_point(self, head: str) -> str | None:
        """The last checkpoint ``head``'s branch shares with the active branch (None if the
        two share nothing, e.g. after a recovery started a new root)."""
        if self.active is None:
            return None
        active_path = set(self.path_to(self.active))
        for cid in reversed(self.path_to(head)):
            if cid in active_path:
                return cid
        return None

    def branch_length(self, head: str) -> int:
        """Checkpoints on ``head``'s branch after its fork point from the active branch."""
        path = self.path_to(head)
        point = self.fork_point(head)
        return len(path) - (path.index(point) + 1 if point in path else 0)


def _meta_node(metadata: Mapping[str, Any], parent_next: tuple[str, ...] | None) -> str:
    source = metadata.get("source", "?")
    if metadata.get("hermes_op"):
        return str(metadata["hermes_op"])
    if source == "loop":
        return ",".join(parent_next) if parent_next else "__start__"
    if source == "fork":
        return "copy"
    return str(source)


def tree_from_history(
    thread_id: str,
    history: Iterable[StateSnapshot | Mapping[str, Any]],
    active: str | None = None,
    unreadable: Mapping[str, tuple[str | None, dict[str, Any], str]] | None = None,
) -> BranchTree:
    """Build a :class:`BranchTree` from ``get_state_history`` snapshots, or from the dicts that
    ``langgraph_sdk``'s ``client.threads.get_history`` returns (same fields, JSON shaped).
    ``active`` defaults to the newest checkpoint (LangGraph's rule). ``unreadable`` adds
    checkpoints that could not be loaded: id → (parent id, metadata, error)."""
    raw: list[dict[str, Any]] = []
    for item in history:
        if isinstance(item, StateSnapshot):
            conf = item.config["configurable"]
            parent = (item.parent_config or {}).get("configurable", {}).get("checkpoint_id")
            values = item.values if isinstance(item.values, Mapping) else {}
            raw.append(
                {
                    "id": conf["checkpoint_id"],
                    "parent": parent,
                    "metadata": dict(item.metadata or {}),
                    "next": tuple(item.next),
                    "created_at": item.created_at,
                    "messages": list(values.get("messages") or []),
                }
            )
        else:
            checkpoint = item.get("checkpoint") or {}
            parent = (item.get("parent_checkpoint") or {}) or {}
            values = item.get("values") or {}
            raw.append(
                {
                    "id": checkpoint.get("checkpoint_id") or item.get("checkpoint_id"),
                    "parent": parent.get("checkpoint_id"),
                    "metadata": dict(item.get("metadata") or {}),
                    "next": tuple(item.get("next") or ()),
                    "created_at": item.get("created_at"),
                    "messages": list(values.get("messages") or []) if isinstance(values, Mapping) else [],
                }
            )
    nexts = {r["id"]: r["next"] for r in raw}
    nodes: dict[str, CheckpointNode] = {}
    for r in raw:
        meta = r["metadata"]
        msgs = r["messages"]
        nodes[r["id"]] = CheckpointNode(
            checkpoint_id=r["id"],
            parent_id=r["parent"],
            step=int(meta.get("step", 0) or 0),
            source=str(meta.get("source", "?")),
            node=_meta_node(meta, nexts.get(r["parent"])),
            next=r["next"],
            created_at=r["created_at"],
            preview=preview(msgs[-1] if msgs else None),
            messages=len(msgs),
            metadata=meta,
        )
    for cid, (parent, meta, error) in (unreadable or {}).items():
        nodes[cid] = CheckpointNode(
            checkpoint_id=cid,
            parent_id=parent,
            step=int(meta.get("step", 0) or 0),
            source=str(meta.get("source", "?")),
            node=_meta_node(meta, None),
            next=(),
            created_at=None,
            preview="(unreadable)",
            messages=0,
            metadata=dict(meta),
            readable=False,
            error=error,
        )
    for cid in sorted(nodes):  # uuid6 ids sort by creation time
        parent = nodes[cid].parent_id
        if parent in nodes:
            nodes[parent].children.append(cid)
    for node in nodes.values():  # an input checkpoint is labelled with the input it received
        if node.source == "input" and node.children and nodes[node.children[0]].readable:
            node.preview = "in: " + nodes[node.children[0]].preview
    ordered = sorted(nodes)
    roots = [cid for cid in ordered if nodes[cid].parent_id not in nodes]
    heads = [cid for cid in ordered if not nodes[cid].children]
    if active is None and ordered:
        active = ordered[-1]
    return BranchTree(thread_id=thread_id, nodes=nodes, roots=roots, heads=heads, active=active)
