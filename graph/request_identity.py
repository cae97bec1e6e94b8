"""Which request a new user message makes, across a thread's branches (DESIGN §2.4, issue 23).

A side effect's request id is ``<thread>:<goal id>:<hash of tool and arguments>``
(``graph.progress.request_id``). The **goal id** is the id of the human message that set the
goal — or, for a message that repeats the request of a turn on another branch, that turn's goal
id, carried on the message as ``additional_kwargs[SAME_REQUEST_AS]`` (:func:`goal_key` reads
it). The ledger then finds the effects that request already had and replays them (marked
``replayed``, "not run again") instead of running them a second time.

The rule (:func:`repeated_request`), applied when a message starts a turn:

* the run is a **fork**: the checkpoint it starts from (its **base**) is not the thread's
  newest checkpoint, or it is a branch operation's copy (``source`` ``update``/``fork`` with
  the same messages: a rollback, a switch, an SDK/Studio ``update_state`` at an earlier
  checkpoint) of a checkpoint that has another branch;
* the **forked-from turns** are, on each other branch leaving the base (or a checkpoint it
  copies), the turn that ran right after it: the turn in progress at the base (that branch
  continued it) or the turn a new message started there (a fork of a fork follows the same
  rule, its turn carrying the identity it got);
* the new message's text equals a forked-from turn's text, compared with whitespace collapsed
  and case folded (:func:`same_text`) → **the same request**: it gets that turn's goal id (the
  oldest such turn's). Any other text is a **new request** (the user's edit: its effects may
  run). A message that reuses the id of a forked-from turn's message with another text (an
  edit that kept the id) gets a goal id of its own, so the edit is not mistaken for the
  original.

Not a fork — a run from the thread's newest checkpoint — is the same request only when that
checkpoint stopped mid-turn (nodes still to run, no question waiting: a cancelled run, a run
the server's multitask strategy interrupted, a lost server) and the text is that turn's: the
rule ``hermes run`` applies by continuing the turn (``graph.branches.same_request``), here for a
client that sends the message again. Otherwise it is a new request whatever its text: the same
text sent again after the answer was shown is a deliberate repeat (DESIGN §2.4).

Reads the checkpointer the running graph was given (no writes): a few checkpoints per turn; for
a fork, the checkpoints written since its base. The common turn — a run from the thread's newest
checkpoint — is told apart on the SQLite saver from the ids, parents and sources of the thread's
three newest rows (one SELECT, no checkpoint deserialised) plus one full read, of the base (is it
stopped mid-turn? does it already hold the message?), instead of three full-state reads
(:func:`_head_run`; bench_overhead, issue 19). Any other shape, and any other saver, takes the
general walk, which gives the same answer.
"""

from __future__ import annotations

import hashlib
import json
import logging
import sqlite3
from collections.abc import Iterable
from contextlib import aclosing
from dataclasses import dataclass, field
from typing import Any

from langchain_core.messages import AnyMessage, BaseMessage, HumanMessage

log = logging.getLogger(__name__)

#: ``additional_kwargs`` key on a human message that repeats another branch's request: the
#: goal id of that request.
SAME_REQUEST_AS = "same_request_as"

#: Checkpoint sources of branch operations that copy a checkpoint (rollback, switch, update).
_COPIES = frozenset({"update", "fork"})
#: How far up from the running checkpoint the message's base is looked for.
_MAX_WALK = 8


def normalized(text: str) -> str:
    """``text`` with whitespace collapsed to single spaces and case folded."""
    return " ".join(text.split()).casefold()


def same_text(a: str, b: str) -> bool:
    """True when ``a`` (non-blank) and ``b`` are the same text up to whitespace and case."""
    return bool(normalized(a)) and normalized(a) == normalized(b)


def goal_key(message: BaseMessage) -> str:
    """The goal id a human message sets: the request it repeats (``SAME_REQUEST_AS``), else its
    own id ("" without one)."""
    repeated = (message.additional_kwargs or {}).get(SAME_REQUEST_AS)
    return str(repeated or message.id or "")


def _text(message: BaseMessage) -> str:
    return message.text if isinstance(message.text, str) else str(message.content)


@dataclass
class _Node:
    id: str
    parent: str | None
    source: str
    messages: list[AnyMessage]
    children: list[str] = field(default_factory=list)

    @property
    def message_ids(self) -> list[str]:
        return [str(m.id) for m in self.messages]

    def holds(self, message: BaseMessage) -> bool:
        return any(m.id == message.id and _text(m) == _text(message) for m in self.messages)

    def last_human(self) -> HumanMessage | None:
        return next((m for m in reversed(self.messages) if isinstance(m, HumanMessage)), None)


def _node(tup: Any) -> _Node:
    parent = ((tup.parent_config or {}).get("configurable") or {}).get("checkpoint_id")
    values = tup.checkpoint.get("channel_values") or {}
    return _Node(
        str(tup.config["configurable"]["checkpoint_id"]),
        str(parent) if parent else None,
        str((tup.metadata or {}).get("source") or ""),
        list(values.get("messages") or []),
    )


def _mid_turn(tup: Any) -> bool:
    """True when the checkpoint ``tup`` has nodes still to run (LangGraph keeps a ``branch:to:<node>``
    channel for each) and no question waiting (an ``__interrupt__`` write)."""
    values = tup.checkpoint.get("channel_values") or {}
    if any(write[1] == "__interrupt__" for write in tup.pending_writes or []):
        return False
    return any(str(channel).startswith("branch:to:") for channel in values)


def _config(thread_id: str, checkpoint_id: str | None = None) -> dict[str, Any]:
    conf: dict[str, Any] = {"thread_id": thread_id, "checkpoint_ns": ""}
    if checkpoint_id:
        conf["checkpoint_id"] = checkpoint_id
    return {"configurable": conf}


async def _load(saver: Any, thread_id: str, checkpoint_id: str | None) -> _Node | None:
    if not checkpoint_id:
        return None
    tup = await saver.aget_tuple(_config(thread_id, checkpoint_id))
    return _node(tup) if tup is not None else None


def _forked_from(nodes: dict[str, _Node], points: list[str], first: str) -> list[tuple[str, HumanMessage]]:
    """``(checkpoint id, message)`` of each forked-from turn's message (see the module docstring):
    on every branch leaving one of ``points`` (the base and the checkpoints it copies), other
    than the one through ``first`` (the running branch's first checkpoint)."""
    skip = {*points, first}
    found: list[tuple[str, HumanMessage]] = []

    def follow(at: _Node, child: _Node, depth: int) -> None:
        if child.id in skip:
            return
        if child.source == "input":  # the message it brings is applied in the next checkpoint
            for grandchild in child.children:
                message = nodes[grandchild].last_human()
                if message is not None and str(message.id) not in at.message_ids:
                    found.append((grandchild, message))
        elif child.source in _COPIES and child.message_ids == at.message_ids:
            if depth < _MAX_WALK:  # a rollback/switch copy: its branches leave the same point
                for grandchild in child.children:
                    follow(child, nodes[grandchild], depth + 1)
        else:
            message = child.last_human()
            # a "loop" child continued the turn in progress at ``at``; another child brought a message
            if message is not None and (child.source == "loop" or str(message.id) not in at.message_ids):
                found.append((child.id, message))

    for point in points:
        for child in nodes[point].children:
            follow(nodes[point], nodes[child], 0)
    return found


def _choose(message: BaseMessage, candidates: Iterable[tuple[str, HumanMessage]]) -> str | None:
    ordered = sorted(candidates, key=lambda c: c[0])  # checkpoint ids are uuid6: oldest first
    for _, other in ordered:
        if same_text(_text(other), _text(message)):
            key = goal_key(other)
            return None if key == str(message.id) else key
    own = str(message.id or "")
    if own and any(goal_key(other) == own or str(other.id) == own for _, other in ordered):
        # an edit that kept the message's id: a new request, with an identity of its own
        return f"{own}:{hashlib.sha256(normalized(_text(message)).encode()).hexdigest()[:16]}"
    return None


@dataclass(frozen=True)
class _Row:
    """A checkpoint's id, parent id and ``metadata["source"]``, read without its state."""

    id: str
    parent: str | None
    source: str


async def _newest_rows(saver: Any, thread_id: str, limit: int) -> list[_Row] | None:
    """The ``limit`` newest root-namespace checkpoints of ``thread_id``, newest first, read from
    the SQLite saver's table without deserialising them (one SELECT under the saver's lock);
    None for any other saver."""
    from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

    if not isinstance(saver, AsyncSqliteSaver):
        return None
    try:
        async with (
            saver.lock,
            saver.conn.execute(
                "SELECT checkpoint_id, parent_checkpoint_id, metadata FROM checkpoints "
                "WHERE thread_id = ? AND checkpoint_ns = '' ORDER BY checkpoint_id DESC LIMIT ?",
                (thread_id, limit),
            ) as cur,
        ):
            rows = await cur.fetchall()
    except sqlite3.Error:  # the saver's own reads say what is wrong
        return None
    out = []
    for cid, parent, stored in rows:
        try:
            meta = json.loads(stored) if stored else {}
        except ValueError:
            return None  # unreadable metadata: the general walk decides
        source = meta.get("source") if isinstance(meta, dict) else None
        out.append(_Row(str(cid), str(parent) if parent else None, str(source or "")))
    return out


class _General(Exception):
    """The run is not the plain shape :func:`_head_run` decides: take the general walk."""


async def _head_run(saver: Any, thread_id: str, checkpoint_id: str, message: HumanMessage) -> str | None:
    """:func:`repeated_request` for the common turn, with one full checkpoint read: the run's
    current checkpoint is the thread's newest, its parent the run's input checkpoint, and that
    one's parent — the base — the newest before it, not a branch operation's copy (so not a
    fork); the base does not hold ``message`` (else the general walk goes on up from it). Then,
    exactly as the general walk: the turn stopped mid-way at the base, if any, is the one to
    match. Raises :class:`_General` for any other shape or saver (the input checkpoint holds the
    base's messages: LangGraph writes the input to ``__start__`` only)."""
    rows = await _newest_rows(saver, thread_id, 3)
    if rows is None or len(rows) < 2:
        raise _General
    current, started = rows[0], rows[1]
    if current.id != checkpoint_id or current.parent != started.id or started.source != "input":
        raise _General
    if started.parent is None:  # the thread's first run: no base, nothing to repeat
        return None
    if len(rows) < 3 or rows[2].id != started.parent or rows[2].source in _COPIES:
        raise _General
    try:
        head = await saver.aget_tuple(_config(thread_id, started.parent))
    except Exception:  # noqa: BLE001 - an unreadable base: the general walk lists past it
        raise _General from None
    if head is None:
        raise _General
    base = _node(head)
    if base.holds(message):  # the message was already there: the general walk goes further up
        raise _General
    stopped = base.last_human() if _mid_turn(head) else None
    return _choose(message, [(base.id, stopped)]) if stopped is not None else None


async def repeated_request(saver: Any, thread_id: str, checkpoint_id: str, message: HumanMessage) -> str | None:
    """The goal id ``message`` is to carry (``SAME_REQUEST_AS``) when it starts a turn in the
    run whose current checkpoint is ``checkpoint_id`` on ``thread_id`` of ``saver`` (a LangGraph
    checkpointer): the goal id of the same request on another branch, a goal id of its own for
    an edit that kept a forked-from message's id, or None (its own id: not a fork, or a new
    request). ``message`` is the last message of that checkpoint's state (the running node's).
    A message that already carries one keeps it (None). Reads only; checkpointer errors
    propagate."""
    if (message.additional_kwargs or {}).get(SAME_REQUEST_AS):
        return None
    try:
        return await _head_run(saver, thread_id, checkpoint_id, message)
    except _General:
        pass
    return await _walk(saver, thread_id, checkpoint_id, message)


async def _walk(saver: Any, thread_id: str, checkpoint_id: str, message: HumanMessage) -> str | None:
    """:func:`repeated_request` for any run shape, on any checkpointer (its public reads)."""
    node = await _load(saver, thread_id, checkpoint_id)
    first: _Node | None = None
    base: str | None = None
    for _ in range(_MAX_WALK):
        if node is None:
            return None
        if not node.holds(message):
            if node.source == "input":  # the run's input checkpoint: the base is before it
                first, base = node, node.parent
            elif first is not None:  # ``first`` (an update) brought the message onto ``node``
                base = node.id
            break
        first = node
        node = await _load(saver, thread_id, node.parent)
    if first is None or base is None:
        return None
    older = [t async for t in saver.alist(_config(thread_id), before=_config(thread_id, first.id), limit=1)]
    if older and _node(older[0]).id == base and _node(older[0]).source not in _COPIES:
        # the run continues the thread's newest checkpoint: not a fork. A turn stopped there
        # mid-way (a cancelled or interrupted run, a lost server) is the one to match
        head = _node(older[0])
        stopped = head.last_human() if _mid_turn(older[0]) else None
        return _choose(message, [(head.id, stopped)]) if stopped is not None else None
    # a fork: the base, and the checkpoints it copies (a rollback's, a switch's, an update's)
    node = await _load(saver, thread_id, base)
    if node is None:
        return None
    points = [node]
    while node.source in _COPIES:
        parent = await _load(saver, thread_id, node.parent)
        if parent is None or parent.message_ids != node.message_ids:
            break
        points.append(node := parent)
    # their branches: only checkpoints newer than the oldest point can be on them (ids are
    # uuid6, listed newest first), so a fork near the head reads few checkpoints
    oldest = min(p.id for p in points)
    nodes = {p.id: p for p in points}
    async with aclosing(saver.alist(_config(thread_id))) as rows:  # closed early: the saver's lock
        async for tup in rows:
            if str(tup.config["configurable"]["checkpoint_id"]) <= oldest:
                break
            nodes.setdefault((n := _node(tup)).id, n)
    for n in nodes.values():
        if n.parent in nodes:
            nodes[n.parent].children.append(n.id)
    return _choose(message, _forked_from(nodes, [p.id for p in points], first.id))


async def repeated_request_here(execution: Any, message: HumanMessage) -> str | None:
    """:func:`repeated_request` for the running node: ``execution`` is its
    ``runtime.execution_info`` (checkpoint and thread ids); the checkpointer is the one the
    graph runs with. None without a checkpointer or a thread, and when the checkpoints cannot be
    read (logged: the turn goes on as a new request rather than fail)."""
    from langgraph.config import get_config
    from langgraph.constants import CONFIG_KEY_CHECKPOINTER

    thread_id = getattr(execution, "thread_id", None)
    checkpoint_id = getattr(execution, "checkpoint_id", None)
    if not thread_id or not checkpoint_id:
        return None
    try:
        saver = (get_config().get("configurable") or {}).get(CONFIG_KEY_CHECKPOINTER)
    except RuntimeError:  # called outside a running graph
        return None
    if saver is None:
        return None
    try:
        return await repeated_request(saver, str(thread_id), str(checkpoint_id), message)
    except Exception:  # identity is a safeguard; a turn is never lost to it
        log.warning("could not read the checkpoints of %r to match a fork's request", thread_id, exc_info=True)
        return None
