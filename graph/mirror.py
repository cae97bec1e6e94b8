"""Plain-text mirror of each thread beside its checkpoints (dual write, seed §5.3, DESIGN §1.6).

File: ``<data_dir>/mirror/<thread>.jsonl`` (the thread id percent-encoded into a safe file name),
UTF-8, one JSON object per line, only ever appended to. Two kinds of record:

    {"kind": "message", "ts": "2026-11-02T10:00:00+00:00", "role": "human"|"ai"|"tool"|"system",
     "name": str|null, "content": str|list, "id": message id, "prev": id of the message before it
     on its branch (null for the first), "tool_call_id": str (tool), "status": str (tool),
     "tool_calls": [{"id", "name", "args"}] (ai), "invalid_tool_calls": [...] (ai, K3),
     "additional_kwargs": {...} (when not empty, e.g. intent tags)}
    {"kind": "head", "ts": ..., "last": id of the active branch's last message | null,
     "count": number of messages on it, "checkpoint_id": str|null, "op": "turn"|"rollback"|
     "switch"|"fork"|"recovered"}

``prev`` links make the mirror a tree of messages, the same shape as the checkpoint branch tree
at message granularity: a rollback writes a ``head`` record pointing back into the tree, and the
next turn's messages chain from there, so a rebuilt session never contains an abandoned branch.
A message is written once per (id, prev, content); shared prefixes are not repeated.

Robust to partial writes: each append is one ``os.write`` of whole lines on an ``O_APPEND``
descriptor; a line that is not valid JSON (a write torn by a crash) is skipped on reading, and
the next append first ends such a torn line so it cannot swallow a good record.

The active conversation (:meth:`ThreadMirror.read`) is the ``prev`` chain ending at whichever
came last in the file: the last ``head`` record's ``last``, or the last ``message`` record (a
turn whose head record was torn off still counts).

No blocking I/O on the event loop: file access runs in ``asyncio.to_thread``.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import quote

from langchain_core.messages import (
    AIMessage,
    AnyMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)

MIRROR_DIR = "mirror"
_ROLES: dict[str, type[HumanMessage | AIMessage | ToolMessage | SystemMessage]] = {
    "human": HumanMessage,
    "ai": AIMessage,
    "tool": ToolMessage,
    "system": SystemMessage,
}


def mirror_path(data_dir: str | Path, thread_id: str) -> Path:
    """``<data_dir>/mirror/<thread>.jsonl``; characters outside ``[A-Za-z0-9._-]`` are
    percent-encoded, so any thread id maps to one file inside the mirror directory."""
    safe = quote(str(thread_id), safe="-_.")
    if safe.startswith("."):
        safe = "%2E" + safe[1:]
    return Path(data_dir) / MIRROR_DIR / f"{safe}.jsonl"


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def _role(message: BaseMessage) -> str:
    return message.type if message.type in _ROLES else "human"


def message_record(message: BaseMessage, prev: str | None) -> dict[str, Any]:
    """The mirror record of one LangChain message (see the module docstring for its fields)."""
    record: dict[str, Any] = {"kind": "message", "ts": _now(), "role": _role(message)}
    if message.name:
        record["name"] = message.name
    record["content"] = message.content
    if isinstance(message, ToolMessage):
        record["tool_call_id"] = message.tool_call_id
        record["status"] = message.status
    if isinstance(message, AIMessage):
        if message.tool_calls:
            record["tool_calls"] = [{"id": c["id"], "name": c["name"], "args": c["args"]} for c in message.tool_calls]
        if message.invalid_tool_calls:
            record["invalid_tool_calls"] = [dict(c) for c in message.invalid_tool_calls]
    if message.additional_kwargs:
        record["additional_kwargs"] = {k: v for k, v in message.additional_kwargs.items() if k != "tool_calls"}
        if not record["additional_kwargs"]:
            del record["additional_kwargs"]
    record["id"] = message.id
    record["prev"] = prev
    return record


def record_to_message(record: dict[str, Any]) -> AnyMessage:
    """A LangChain message from a ``message`` record (inverse of :func:`message_record`)."""
    role = record.get("role", "human")
    kwargs: dict[str, Any] = {"content": record.get("content", ""), "id": record.get("id")}
    if record.get("name"):
        kwargs["name"] = record["name"]
    if record.get("additional_kwargs"):
        kwargs["additional_kwargs"] = dict(record["additional_kwargs"])
    if role == "tool":
        return ToolMessage(
            tool_call_id=record.get("tool_call_id") or "", status=record.get("status") or "success", **kwargs
        )
    if role == "ai":
        calls = [
            {"type": "tool_call", "id": c["id"], "name": c["name"], "args": c.get("args") or {}}
            for c in record.get("tool_calls") or []
        ]
        return AIMessage(tool_calls=calls, invalid_tool_calls=list(record.get("invalid_tool_calls") or []), **kwargs)
    return _ROLES.get(role, HumanMessage)(**kwargs)


def _digest(record: dict[str, Any]) -> str:
    body = {k: v for k, v in record.items() if k != "ts"}
    return hashlib.sha1(json.dumps(body, sort_keys=True, ensure_ascii=False, default=str).encode()).hexdigest()


@dataclass
class MirrorView:
    """What a mirror file holds, parsed. ``messages``: id → latest record; ``order``: ids in file
    order of their latest record; ``tail``: last message id of the active branch (or None);
    ``heads``: head records in file order; ``torn_lines``: lines skipped as unreadable."""

    messages: dict[str, dict[str, Any]] = field(default_factory=dict)
    digests: dict[str, str] = field(default_factory=dict)
    heads: list[dict[str, Any]] = field(default_factory=list)
    tail: str | None = None
    torn_lines: int = 0
    size: int = 0
    ends_clean: bool = True

    def feed(self, data: bytes) -> None:
        """Parse appended bytes (whole lines; a trailing partial line counts as torn)."""
        lines = data.split(b"\n")
        for raw in lines:
            if not raw.strip():
                continue
            try:
                record = json.loads(raw)
                if not isinstance(record, dict):
                    raise ValueError("not an object")
            except ValueError:
                self.torn_lines += 1
                continue
            if record.get("kind") == "message" and record.get("id"):
                self.messages[record["id"]] = record
                self.digests[record["id"]] = _digest(record)
                self.tail = record["id"]
            elif record.get("kind") == "head":
                self.heads.append(record)
                self.tail = record.get("last")
        self.size += len(data)
        self.ends_clean = data.endswith(b"\n") if data else self.ends_clean

    def chain(self, last: str | None) -> tuple[list[dict[str, Any]], list[str]]:
        """Records from the first message to ``last`` along ``prev`` links, and the ids that
        were referenced but are missing from the file (a broken chain stops there)."""
        out: list[dict[str, Any]] = []
        missing: list[str] = []
        seen: set[str] = set()
        current = last
        while current:
            if current in seen:  # a cycle can only come from a hand-edited file
                break
            seen.add(current)
            record = self.messages.get(current)
            if record is None:
                missing.append(current)
                break
            out.append(record)
            current = record.get("prev")
        out.reverse()
        return out, missing


class ThreadMirror:
    """Append-only plain-text mirror of the threads under ``<data_dir>/mirror/``.

    One instance may serve many threads; parsed files are cached by size and extended
    incrementally (another process appending is picked up; a shrunk file is re-read)."""

    def __init__(self, data_dir: str | Path) -> None:
        self.data_dir = Path(data_dir)
        self._views: dict[Path, MirrorView] = {}
        self._locks: dict[tuple[Path, int], asyncio.Lock] = {}

    def path(self, thread_id: str) -> Path:
        return mirror_path(self.data_dir, thread_id)

    def close(self) -> None:
        """Forget the parsed files and the per-loop locks (no file stays open between calls)."""
        self._views.clear()
        self._locks.clear()

    def _lock(self, path: Path) -> asyncio.Lock:
        key = (path, id(asyncio.get_running_loop()))  # an asyncio.Lock belongs to one loop
        lock = self._locks.get(key)
        if lock is None:
            lock = self._locks[key] = asyncio.Lock()
        return lock

    def _load_sync(self, path: Path) -> MirrorView:
        view = self._views.get(path)
        try:
            size = path.stat().st_size
        except FileNotFoundError:
            view = self._views[path] = MirrorView()
            return view
        if view is None or size < view.size:
            view = MirrorView()
        if size > view.size:
            with open(path, "rb") as fh:
                fh.seek(view.size)
                data = fh.read(size - view.size)
            if view.size and not view.ends_clean:
                # the previous read ended inside a line: re-read from the start to stay exact
                view = MirrorView()
                data = path.read_bytes()
            view.feed(data)
        self._views[path] = view
        return view

    async def view(self, thread_id: str) -> MirrorView:
        """The parsed mirror of ``thread_id`` (empty if there is no file)."""
        path = self.path(thread_id)
        async with self._lock(path):
            return await asyncio.to_thread(self._load_sync, path)

    def _append_sync(self, path: Path, lines: list[dict[str, Any]]) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        payload = "".join(json.dumps(r, ensure_ascii=False, default=str) + "\n" for r in lines).encode("utf-8")
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            if os.fstat(fd).st_size:
                with open(path, "rb") as fh:
                    fh.seek(-1, os.SEEK_END)
                    if fh.read(1) != b"\n":
                        payload = b"\n" + payload  # isolate a torn last line
            os.write(fd, payload)
            os.fsync(fd)
        finally:
            os.close(fd)

    async def append_turn(
        self,
        thread_id: str,
        messages: list[BaseMessage],
        *,
        checkpoint_id: str | None = None,
        op: str = "turn",
    ) -> int:
        """Mirror the active branch ``messages`` (the full list, as in the checkpoint, in order)
        of ``thread_id``: append a record for each message not yet mirrored at that position
        (or changed), then a ``head`` record naming the branch's last message. Idempotent: a
        second call with the same list writes nothing. Messages without an ``id`` cannot be
        chained and are skipped (add_messages gives every checkpointed message one).

        Returns the number of message records written. Raises ``OSError`` if the file cannot
        be written (callers decide whether that may fail the turn; ``run_turn`` only warns)."""
        path = self.path(thread_id)
        async with self._lock(path):
            view = await asyncio.to_thread(self._load_sync, path)
            records: list[dict[str, Any]] = []
            prev: str | None = None
            for message in messages:
                if not message.id:
                    continue
                record = message_record(message, prev)
                if view.digests.get(message.id) != _digest(record):
                    records.append(record)
                prev = message.id
            # nothing new on the same branch (e.g. the node hook, then run_turn): only name the
            # checkpoint if this call knows it and the last head record does not
            last_head = view.heads[-1] if view.heads else {}
            if (
                not records
                and view.tail == prev
                and op == "turn"
                and (checkpoint_id is None or last_head.get("checkpoint_id") == checkpoint_id)
            ):
                return 0
            head = {
                "kind": "head",
                "ts": _now(),
                "last": prev,
                "count": sum(1 for m in messages if m.id),
                "checkpoint_id": checkpoint_id,
                "op": op,
            }
            await asyncio.to_thread(self._append_sync, path, [*records, head])
            await asyncio.to_thread(self._load_sync, path)
            return len(records)

    async def read(self, thread_id: str) -> MirroredThread:
        """The active branch of ``thread_id`` as LangChain messages (see :class:`MirroredThread`).
        An absent file gives an empty result (``exists`` False)."""
        path = self.path(thread_id)
        view = await self.view(thread_id)
        records, missing = view.chain(view.tail)
        return MirroredThread(
            thread_id=thread_id,
            path=path,
            exists=view.size > 0,
            messages=[record_to_message(r) for r in records],
            missing_ids=missing,
            torn_lines=view.torn_lines,
            heads=len(view.heads),
            last_checkpoint_id=next(
                (h.get("checkpoint_id") for h in reversed(view.heads) if h.get("checkpoint_id")), None
            ),
        )


@dataclass
class MirroredThread:
    """A thread read back from its mirror: ``messages`` of the active branch, oldest first;
    ``missing_ids`` referenced but absent (the chain was cut there, older messages are lost);
    ``torn_lines`` skipped as unreadable; ``heads`` head records seen; ``last_checkpoint_id``
    the newest checkpoint id a head record named."""

    thread_id: str
    path: Path
    exists: bool
    messages: list[AnyMessage]
    missing_ids: list[str]
    torn_lines: int
    heads: int
    last_checkpoint_id: str | None


async def append_turn(
    data_dir: str | Path, thread_id: str, messages: list[BaseMessage], checkpoint_id: str | None = None
) -> int:
    """Hook for graph nodes (``nodes/write_memory.py``): mirror the thread's full message list
    after the turn. ``messages`` must be the list as it will stand in the checkpoint, every
    message with its ``id`` (give a message the node adds an id before returning it). Same
    contract as :meth:`ThreadMirror.append_turn`; one shared instance per ``data_dir``."""
    key = str(data_dir)  # not resolved: no filesystem call on the event loop (caches re-check sizes)
    mirror = _shared.get(key)
    if mirror is None:
        mirror = _shared[key] = ThreadMirror(data_dir)
    return await mirror.append_turn(thread_id, messages, checkpoint_id=checkpoint_id)


#: The mirrors :func:`append_turn` shares, keyed on the one setting they use (``data_dir``);
#: closed by :func:`close_shared_mirrors` (``graph.resources.aclose_resources``).
_shared: dict[str, ThreadMirror] = {}


def close_shared_mirrors() -> None:
    """Close and forget every shared mirror (the next :func:`append_turn` makes a new one)."""
    for mirror in _shared.values():
        mirror.close()
    _shared.clear()
