"""Recovery of a thread whose checkpoint cannot be read, from its plain-text mirror (seed §5.3, DESIGN §1.6).

A thread needs rebuilding when its head checkpoint fails to load for a reason in the data — a
corrupt checkpoint blob, a failed deserialisation, a blob that deserialises into something that
is not a checkpoint (:func:`check_shape`), a corrupt pending write — or when the checkpoint
file has no record of a thread whose mirror exists (the file was replaced or moved aside). The
rebuild (:func:`rebuild_from_mirror`) is the same everywhere:

* **Same thread id, new root checkpoint.** The messages of the mirror's active branch
  (:meth:`graph.mirror.ThreadMirror.read`) become the state of a new checkpoint on the *same*
  thread, so ``hermes run --thread X`` (or the next SDK run on the thread) simply goes on. The
  checkpoint is built by LangGraph itself — ``aupdate_state(values, as_node="write_memory")``
  on a scratch in-memory copy of the graph, i.e. "a finished turn with these messages" (next
  tasks: none) — and stored with the saver's ``aput`` without a parent. Being the newest
  checkpoint it is the active head. The unreadable checkpoints are left in place (nothing is
  deleted; ``hermes branch show`` lists them as unreadable) and older readable ones stay
  reachable as another root of the tree. Metadata: ``{"source": "update", "hermes_op":
  "recovered", "hermes_recovered_from": <id>, "hermes_mirror": <path>, "hermes_notice": <text>}``.
* **Tool-call pairing** is repaired before writing (``graph.history.close_unanswered``): an AI
  message whose ``tool_calls`` have no result gets an error ``ToolMessage`` per missing id
  (:data:`LOST_RESULT`), and a tool message without its calling AI message is dropped, so the
  next prompt is valid (case K1).
* **What is lost** is reported (:class:`RecoveryReport.notice`): derived state (goal, intent,
  pending actions, references, window, progress, report path) — re-derived from the next user
  message; metrics (turns, tokens, per-tool counts) — they restart at zero; branch history —
  the recovered head is a new root, rollback cannot reach before it; plus anything the mirror
  itself lacks (torn lines, a cut chain, a mirror older than the lost checkpoint).

**Where it runs — two entry points, one rebuild (decision):**

* **CLI**: ``run_turn`` calls :func:`ensure_readable` before the turn (it probes with
  ``graph.aget_state``) and prints the notice; read-only commands (``session show``,
  ``branch show``) only report the unreadable checkpoint and never write.
* **``langgraph dev`` / the SDK / Studio**: the run starts inside the server, which loads the
  thread's checkpoint itself before any node runs, so a node cannot do it (an unreadable head
  fails the run before ``assemble_context``). Instead ``langgraph.json``'s ``checkpointer``
  entry points at ``graph/checkpoints.py: server_checkpointer`` — the same
  ``<data_dir>/checkpoints.sqlite`` the CLI uses, opened as a ``HermesSqliteSaver`` with the
  data directory's mirror — whose ``aget_tuple`` does the rebuild when the head is asked for
  and found unreadable or missing-with-a-mirror, then returns the new head. There nobody is
  at a terminal, so the notice goes *into the state* as an AI message named ``hermes``
  (``Recovered: ...``, after the restored messages; Studio and ``runs.wait`` show it, and the
  model sees it as history), into the checkpoint metadata (``hermes_notice``) and the server
  log. ``alist`` leaves unreadable checkpoints out (the history still loads); deleting a thread
  through the API moves its mirror to ``<file>.deleted`` so it is not rebuilt.
  Limits: the first access to the thread rebuilds it (a ``get_state`` too, not only a run);
  the server keeps one saver per event-loop thread, and two of them asked for the same broken
  thread at the same instant could each write a recovered root (the later one wins as head).

Errors from SQLite itself (locked database, a file that is not a database) are not data
corruption of one thread and are re-raised. No mirror for the thread → :class:`RecoveryError`
(nothing to rebuild from; the message says what to do) — in the server's saver a thread with
neither checkpoint nor mirror is simply a new thread.
"""

from __future__ import annotations

import sqlite3
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, cast

from langchain_core.messages import AIMessage
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import BaseCheckpointSaver, CheckpointMetadata, CheckpointTuple
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import StateGraph
from langgraph.graph.state import CompiledStateGraph
from langgraph.types import StateSnapshot

from graph.history import close_unanswered
from graph.mirror import ThreadMirror

LOST_RESULT = "result lost in recovery: the plain-text mirror held no result for this call"


class RecoveryError(RuntimeError):
    """The thread's checkpoint is unreadable and cannot be rebuilt (e.g. no mirror)."""


@dataclass
class RecoveryReport:
    """What :func:`recover_thread` did.

    ``unreadable_checkpoint``: id of the head that failed to load (None if unknown);
    ``error``: ``"Type: message"`` of that failure; ``new_checkpoint_id``: the recovered head;
    ``restored``: messages restored; ``mirror_path``; ``filled_results``/``dropped_orphans``:
    tool-call pairing repairs; ``lost``: human-readable list of what structure was lost."""

    thread_id: str
    unreadable_checkpoint: str | None
    error: str
    new_checkpoint_id: str
    restored: int
    mirror_path: str
    filled_results: list[str] = field(default_factory=list)
    dropped_orphans: list[str] = field(default_factory=list)
    lost: list[str] = field(default_factory=list)

    def notice(self) -> str:
        """The message for the user (several lines)."""
        head = (
            f"checkpoint {self.unreadable_checkpoint} of thread {self.thread_id!r}"
            if self.unreadable_checkpoint
            else f"the latest checkpoint of thread {self.thread_id!r}"
        )
        lines = [
            f"Recovered: {head} could not be read ({self.error}).",
            f"The conversation was rebuilt from the plain-text mirror {self.mirror_path}: "
            f"{self.restored} messages restored as "
            + (f"new checkpoint {self.new_checkpoint_id}" if self.new_checkpoint_id else "a new root checkpoint")
            + " on the same thread.",
        ]
        if self.filled_results or self.dropped_orphans:
            lines.append(
                f"Tool-call pairing repaired: {len(self.filled_results)} missing result(s) marked "
                f"as lost, {len(self.dropped_orphans)} orphan result(s) dropped."
            )
        lines.append("Lost: " + "; ".join(self.lost) + ".")
        return "\n".join(lines)

    def as_dict(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in self.__dataclass_fields__} | {"notice": self.notice()}


def is_data_error(exc: BaseException) -> bool:
    """True for failures that mean "this checkpoint's data cannot be read" (not SQLite or
    connection problems, not cancellation)."""
    if isinstance(exc, (sqlite3.Error, ConnectionError, OSError)):
        return False
    return isinstance(exc, Exception)


class UnreadableCheckpoint(ValueError):
    """A checkpoint deserialised into something that is not a checkpoint (wrong shape)."""


def check_shape(saved: CheckpointTuple) -> CheckpointTuple:
    """``saved`` if its checkpoint has the shape LangGraph reads (``v``, ``ts``, ``id``,
    ``channel_values``/``channel_versions``/``versions_seen`` mappings, a ``messages`` list);
    else :class:`UnreadableCheckpoint`. A blob can deserialise without error into the wrong
    thing (a torn write that still parses, another program's data): the saver-level
    recovery checks this so the failure is caught where the checkpoint is read, not later
    inside the graph run."""
    cp = saved.checkpoint
    problem = ""
    if not isinstance(cp, dict):
        problem = f"a {type(cp).__name__}, not a checkpoint"
    elif not all(isinstance(cp.get(k), str) for k in ("ts", "id")) or "v" not in cp:
        problem = "no v/ts/id"
    elif not all(isinstance(cp.get(k), dict) for k in ("channel_values", "channel_versions", "versions_seen")):
        problem = "no channel_values/channel_versions/versions_seen"
    elif not all(isinstance(v, dict) for v in cp["versions_seen"].values()):
        problem = "versions_seen is not a mapping of mappings"
    elif not isinstance(cp["channel_values"].get("messages", []), list):
        problem = "its messages are not a list"
    if problem:
        ident = saved.config.get("configurable", {}).get("checkpoint_id")
        raise UnreadableCheckpoint(f"checkpoint {ident} deserialised into the wrong shape ({problem})")
    return saved


async def probe(
    graph: CompiledStateGraph[Any, Any, Any, Any], thread_id: str
) -> tuple[StateSnapshot | None, BaseException | None]:
    """``(snapshot, None)`` if the thread's active head loads, ``(None, error)`` if it fails
    with a data error (see :func:`is_data_error`); other errors propagate."""
    try:
        return await graph.aget_state({"configurable": {"thread_id": thread_id}}), None
    except Exception as exc:
        if not is_data_error(exc):
            raise
        return None, exc


async def _head_id(saver: Any, thread_id: str) -> str | None:
    """The newest checkpoint id of the thread, read without deserialising it (SQLite saver)."""
    conn = getattr(saver, "conn", None)
    if conn is None:
        return None
    async with (
        saver.lock,
        conn.execute(
            "SELECT checkpoint_id FROM checkpoints WHERE thread_id = ? AND checkpoint_ns = '' "
            "ORDER BY checkpoint_id DESC LIMIT 1",
            (thread_id,),
        ) as cur,
    ):
        row = await cur.fetchone()
    return row[0] if row else None


async def rebuild_from_mirror(
    saver: BaseCheckpointSaver[str],
    builder: StateGraph[Any, Any, Any, Any],
    mirror: ThreadMirror,
    thread_id: str,
    error: BaseException | None = None,
    *,
    as_node: str = "write_memory",
    notice_in_state: bool = False,
    read_head: Callable[[RunnableConfig], Awaitable[CheckpointTuple | None]] | None = None,
) -> RecoveryReport:
    """The rebuild itself, at the saver level (no compiled graph needed, so a saver can call it
    from its own ``aget_tuple``): the mirror's active branch, tool calls paired, becomes a new
    root checkpoint of ``thread_id`` in ``saver``, built as ``builder``'s state after
    ``as_node``. ``notice_in_state``: also append the notice as an AI message named ``hermes``
    (the server's way to tell the user; the CLI prints it instead). ``read_head``: how to read
    the thread's head back for the check (default ``saver.aget_tuple``; a saver passes its
    base-class method so the check cannot recurse into recovery).

    Raises :class:`RecoveryError` if the mirror has no messages for the thread, or if the new
    checkpoint is not the thread's head afterwards."""
    mirrored = await mirror.read(thread_id)
    if not mirrored.messages:
        raise RecoveryError(
            f"thread {thread_id!r} cannot be read ({type(error).__name__ if error else 'error'}: {error}) "
            f"and has no plain-text mirror at {mirrored.path} to rebuild it from. Continue in a new "
            "thread (omit --thread), or restore checkpoints.sqlite from a backup."
        )
    messages, closed, dropped = close_unanswered(mirrored.messages, LOST_RESULT)
    filled = [call_id for call_id, _ in closed]
    bad_head = await _head_id(saver, thread_id)
    lost = [
        (
            "derived state (goal, intent, pending actions, references, context window, progress, "
            "report path) — re-derived from your next message"
        ),
        "metrics (turn, token and per-tool counts) — they restart at zero",
        (
            "branch history — the recovered head starts a new root, so rollback cannot go before it "
            "(older readable checkpoints are still listed by `hermes branch show`)"
        ),
    ]
    if mirrored.torn_lines:
        lost.append(f"{mirrored.torn_lines} torn line(s) of the mirror")
    if mirrored.missing_ids:
        lost.append(f"messages before {mirrored.missing_ids[0]} (the mirror's chain is cut there)")
    if bad_head and mirrored.last_checkpoint_id and mirrored.last_checkpoint_id != bad_head:
        lost.append(
            f"possibly the last steps: the mirror was last written at checkpoint "
            f"{mirrored.last_checkpoint_id}, not at the lost one"
        )
    report = RecoveryReport(
        thread_id=thread_id,
        unreadable_checkpoint=bad_head,
        error=f"{type(error).__name__}: {str(error)[:160]}" if error else "unknown error",
        new_checkpoint_id="",
        restored=len(messages),
        mirror_path=str(mirrored.path),
        filled_results=filled,
        dropped_orphans=dropped,
        lost=lost,
    )
    state_messages = list(messages)
    if notice_in_state:
        state_messages.append(AIMessage(report.notice(), name="hermes", id=f"recovered-{uuid.uuid4().hex[:12]}"))

    scratch = builder.compile(checkpointer=InMemorySaver())
    scratch_config = await scratch.aupdate_state(
        {"configurable": {"thread_id": thread_id}}, {"messages": state_messages}, as_node=as_node
    )
    saved = await scratch.checkpointer.aget_tuple(scratch_config)  # type: ignore[union-attr]
    assert saved is not None
    metadata: dict[str, Any] = {
        **saved.metadata,
        "hermes_op": "recovered",
        "hermes_recovered_from": bad_head or "",
        "hermes_mirror": str(mirrored.path),
        "hermes_notice": report.notice(),
    }
    new_config = await saver.aput(
        {"configurable": {"thread_id": thread_id, "checkpoint_ns": ""}},
        saved.checkpoint,
        cast(CheckpointMetadata, metadata),
        saved.checkpoint["channel_versions"],
    )
    report.new_checkpoint_id = new_config["configurable"]["checkpoint_id"]
    check = await (read_head or saver.aget_tuple)({"configurable": {"thread_id": thread_id, "checkpoint_ns": ""}})
    head = check.config["configurable"]["checkpoint_id"] if check else None
    if check is None or head != report.new_checkpoint_id:
        raise RecoveryError(
            f"the recovered checkpoint {report.new_checkpoint_id} is not the thread's head "
            f"({head}); the clock may have gone back"
        )
    await mirror.append_turn(
        thread_id,
        list(check.checkpoint["channel_values"].get("messages") or []),
        checkpoint_id=report.new_checkpoint_id,
        op="recovered",
    )
    return report


async def recover_thread(
    graph: CompiledStateGraph[Any, Any, Any, Any],
    mirror: ThreadMirror,
    thread_id: str,
    error: BaseException | None = None,
    *,
    as_node: str = "write_memory",
) -> RecoveryReport:
    """Rebuild ``thread_id`` of the checkpointed ``graph`` from its mirror as a new root
    checkpoint on the same thread (see the module docstring and :func:`rebuild_from_mirror`).
    ``error``: the failure that triggered it (for the report); ``as_node``: the node the
    restored state is written as (a node whose edges end the turn).

    Raises :class:`RecoveryError` if the mirror has no messages for the thread."""
    return await rebuild_from_mirror(
        graph.checkpointer,  # type: ignore[arg-type]
        graph.builder,
        mirror,
        thread_id,
        error,
        as_node=as_node,
    )


async def ensure_readable(
    graph: CompiledStateGraph[Any, Any, Any, Any], mirror: ThreadMirror, thread_id: str
) -> RecoveryReport | None:
    """The ``run_turn`` hook: None if the thread's head loads (or the thread is new); else — an
    unreadable head, or no checkpoint at all while a mirror exists (the checkpoint file was
    replaced) — the thread is rebuilt from the mirror and the :class:`RecoveryReport` is returned. Raises
    :class:`RecoveryError` when there is nothing to rebuild from."""
    snapshot, error = await probe(graph, thread_id)
    if error is None:
        if snapshot is not None and snapshot.created_at is None and (await mirror.read(thread_id)).messages:
            # no checkpoint at all but a mirror: the checkpoint file was replaced or moved aside
            missing = FileNotFoundError("the checkpoint database has no record of this thread")
            return await recover_thread(graph, mirror, thread_id, missing)
        return None
    return await recover_thread(graph, mirror, thread_id, error)
