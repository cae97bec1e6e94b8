"""Session branches over LangGraph checkpoints (seed §1.3, DESIGN §1.5).

Terms are LangGraph's: a **thread** (``thread_id``) holds **checkpoints**; every checkpoint
names its parent (``parent_config``), so a thread's checkpoints form a tree. A **head** is a
leaf of that tree (a checkpoint no other checkpoint names as parent): one per branch. The
**active head** is what ``graph.aget_state({"configurable": {"thread_id": t}})`` returns —
LangGraph always resumes a thread from its newest checkpoint, so "moving the branch pointer"
means writing a new newest checkpoint.

Mechanisms (all through the compiled graph's own API, never by editing checkpoint rows):

* ``rollback(thread, C)``: ``graph.aupdate_state(C.config, None)`` — an update *with no
  values* applied at checkpoint ``C`` "as the node that last wrote C" (LangGraph infers it). It
  writes a new checkpoint whose parent is ``C``, whose values equal ``C``'s and whose next
  tasks are ``C``'s (the node's edges are re-evaluated on the same state). It is the newest
  checkpoint, so it is the active head; nothing is rebuilt by hand and the abandoned branch
  stays in the tree as another head. Metadata ``{"source": "update", "hermes_op":
  "rollback", "hermes_target": C}`` labels it. If LangGraph cannot infer the node (two nodes
  wrote C in the same step) the update falls back to ``as_node="__copy__"`` (an exact copy of
  C stored as C's sibling, ``source: "fork"``).
  An ``input`` checkpoint (where a user message was received but not yet applied) stands for
  "before that message": rolling back or forking at it uses its parent instead.
* ``switch(thread, H)``: the same update at a head ``H`` of another branch (``hermes_op:
  "switch"``); ``H`` stops being a leaf, the switch checkpoint becomes that branch's head.
* ``fork(thread, C, input)``: ``graph.ainvoke(input, C.config)`` — invoking with an old
  checkpoint's config continues from it; the run's checkpoints descend from ``C`` as a new
  branch (LangGraph's "replay/fork" semantics). The new branch's head is the active head.
  A fork inside a turn (``C`` has nodes still to run) whose message is that turn's own request
  (:func:`same_request`) continues the turn instead (input None): its calls keep their goal's
  request ids, so the idempotency ledger replays the side effects that already ran (DESIGN
  §2.4) — a new goal would either run them a second time or, told they exist, not count them.
  Any other fork with a message runs it as new input; a message with the text of the turn it
  forked from on the other branch is still that turn's request (``graph.request_identity``,
  applied in the graph, so Studio's and the SDK's forks get it too).

Resuming at the active head with its explicit ``checkpoint_id`` behaves like resuming with the
thread id only (case K10): identical for ``Command(resume=...)`` after an ``interrupt()`` and for
new input; ``invoke(None, head_config)`` after a static breakpoint gives the same results but
LangGraph treats it as time travel and writes one extra ``source: "fork"`` checkpoint first, so
:meth:`Branches.resume_config` drops an id that names the active head (measured, langgraph
1.2.24; tests/integration/test_branches_sqlite.py).

The tree these operations read (checkpoints, heads, the active head) is built in
``graph.checkpoint_tree``. Every operation needs a graph compiled with a checkpointer. Errors: ``BranchError`` (unknown
or ambiguous checkpoint reference, rollback target not on the active branch, switch target not
a head, nothing before a thread's first input, a target or an active head that cannot be read).
A thread whose active head cannot be read refuses every head change before anything is written:
LangGraph reads the newest checkpoint for each of them (``aupdate_state`` checks whether its
target was superseded, a fork resolves its config against the head), so the operation would
fail half-way with the deserialiser's error. The way out is the rebuild from the mirror
(``graph.recovery``) that the next ``hermes run --thread`` does; the message says so. An optional :class:`~graph.mirror.ThreadMirror`
is told about every head change, so the plain-text mirror follows the active branch.

Memory follows the active branch too (issue 27): after every head change the memory's branch
origins (``memory.branch_origins``, in ``<data_dir>/memory.db``) are synced with the new head's
message ids, so the memories written by turns no longer on the active branch are hidden from
recall in every session and from ``hermes memory list`` (kept: a switch back restores them).
A branch moved without these operations (a Studio fork or edit through ``langgraph dev``) is
synced by the session's next turn (``nodes/assemble_context.py``).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any, cast

from langchain_core.messages import HumanMessage
from langchain_core.runnables import RunnableConfig
from langgraph.errors import InvalidUpdateError
from langgraph.graph.state import CompiledStateGraph
from langgraph.types import StateSnapshot

from graph.checkpoint_reader import CheckpointReader, ThreadSummary
from graph.checkpoint_tree import BranchError, BranchTree, short_id, tree_from_history
from graph.mirror import ThreadMirror
from graph.request_identity import same_text
from memory.branch_origins import BranchOrigins

log = logging.getLogger(__name__)


def same_request(snapshot: StateSnapshot, text: str) -> bool:
    """True when ``snapshot`` stopped inside a turn (nodes still to run, no question waiting)
    and ``text`` is that turn's goal (same text, whitespace and case ignored:
    ``graph.request_identity.same_text``): a message that continues the turn rather than
    starting a new request (a crashed turn run again, a fork inside the turn). A fork sent as
    new input instead (``langgraph dev``, Studio) gets the same request identity in the graph
    (``graph.request_identity``)."""
    if not snapshot.next or snapshot.interrupts:
        return False
    return same_text(str((snapshot.values or {}).get("goal") or ""), text)


@dataclass
class BranchOp:
    """Result of a head change: ``op`` (rollback/switch/fork), ``target`` (the checkpoint it
    was based on), ``head`` (the new active head's id), ``config`` (its RunnableConfig),
    ``mechanism`` (``"update"`` or ``"copy"``, see the module docstring)."""

    thread_id: str
    op: str
    target: str
    head: str
    config: RunnableConfig
    mechanism: str = "update"


class Branches:
    """Branch operations on the threads of ``graph`` (a compiled graph with a checkpointer).

    ``mirror``: if given, every head change is appended to the thread's plain-text mirror.
    ``origins``: the memory's branch origins, synced after every head change (default: those of
    the mirror's data directory, where ``memory.db`` lives; none without a mirror)."""

    def __init__(
        self,
        graph: CompiledStateGraph[Any, Any, Any, Any],
        mirror: ThreadMirror | None = None,
        origins: BranchOrigins | None = None,
    ) -> None:
        if graph.checkpointer in (None, False, True):
            raise BranchError(
                "branches need a graph compiled with a checkpointer (graph.builder.make_graph(checkpointer=...))"
            )
        self.graph = graph
        self.mirror = mirror
        self.origins = origins or (BranchOrigins.in_dir(mirror.data_dir) if mirror is not None else None)

    async def _sync_memory(self, thread_id: str, messages: list[Any]) -> None:
        """Tell the memory which messages are on ``thread_id``'s active branch now. A failure
        is logged, not raised: the head has moved already, and the thread's next turn syncs."""
        if self.origins is None:
            return
        try:
            await self.origins.sync(thread_id, {str(m.id) for m in messages if getattr(m, "id", None)})
        except Exception:
            log.warning("memory not synced with the active branch of %r", thread_id, exc_info=True)

    @staticmethod
    def config(thread_id: str, checkpoint_id: str | None = None) -> RunnableConfig:
        """``{"configurable": {"thread_id", "checkpoint_ns": "", "checkpoint_id"?}}``."""
        conf: dict[str, Any] = {"thread_id": thread_id, "checkpoint_ns": ""}
        if checkpoint_id:
            conf["checkpoint_id"] = checkpoint_id
        return {"configurable": conf}

    async def _reader(self) -> CheckpointReader:
        """The saver's :class:`~graph.checkpoint_reader.CheckpointReader`, its tables created
        first (a new SQLite file has none yet)."""
        saver = self.graph.checkpointer
        if getattr(saver, "conn", None) is not None:
            await saver.setup()  # type: ignore[union-attr]
        return CheckpointReader(saver)

    async def threads(self, limit: int = 50) -> list[ThreadSummary]:
        """The threads of the checkpoint file, most recently updated first (at most ``limit``):
        :meth:`graph.checkpoint_reader.CheckpointReader.threads`. Raises :class:`BranchError`
        for a saver that is neither the SQLite nor the PostgreSQL one (the listing reads its table)."""
        return await (await self._reader()).threads(limit)

    async def branch_tree(self, thread_id: str) -> BranchTree:
        """The checkpoint tree of ``thread_id`` (empty tree for an unknown thread).

        Uses ``aget_state_history``; if a checkpoint cannot be deserialised (a corrupt row),
        each checkpoint is loaded on its own and the broken ones are listed as unreadable."""
        try:
            history = [s async for s in self.graph.aget_state_history(self.config(thread_id))]
        except Exception as exc:  # a corrupt checkpoint aborts the whole listing
            # every row's id, parent and metadata (stored apart from the blob), then each
            # checkpoint loaded on its own to find the broken ones (SQLite or PostgreSQL)
            rows = await (await self._reader()).rows(thread_id)
            if rows is None:
                raise
            history, broken = [], {}
            for cid, (parent, meta) in rows.items():
                try:
                    history.append(await self.graph.aget_state(self.config(thread_id, cid)))
                except Exception as inner:  # noqa: BLE001 - reported per checkpoint
                    broken[cid] = (parent, meta, f"{type(inner).__name__}: {inner}"[:200])
            active = max(rows) if rows else None
            tree = tree_from_history(thread_id, history, active=active, unreadable=broken)
            if not broken:
                raise exc
            return tree
        if not history:
            return BranchTree(thread_id, {}, [], [], None)
        head = history[0].config["configurable"]["checkpoint_id"]  # newest first
        return tree_from_history(thread_id, history, active=head)

    async def _require_readable_head(self, tree: BranchTree, what: str) -> None:
        """Raise :class:`BranchError` when ``tree``'s active head cannot be read (see the module
        docstring): the message names the head, its error and the way back (a rebuild from the
        plain-text mirror by the next ``hermes run --thread``, or a new thread without a mirror)."""
        node = tree.nodes.get(tree.active or "")
        if node is None or node.readable:
            return
        thread = tree.thread_id
        mirrored = await self.mirror.read(thread) if self.mirror is not None else None
        if mirrored is not None and not mirrored.messages:
            way_out = (
                f"it has no plain-text mirror ({mirrored.path}) to rebuild it from: continue in a new thread "
                "(hermes run without --thread), or restore checkpoints.sqlite from a backup"
            )
        else:
            way_out = (
                f'rebuild the thread from its plain-text mirror with `hermes run --thread {thread} "<message>"`, '
                f'then fork from an earlier checkpoint with `hermes branch fork {thread} CHECKPOINT "<task>"`'
            )
        raise BranchError(
            f"cannot {what}: the active head {short_id(node.checkpoint_id)} of thread {thread!r} cannot be read "
            f"({node.error or 'unreadable'}); nothing was changed. {way_out[0].upper()}{way_out[1:]}."
        )

    def _base(self, tree: BranchTree, checkpoint_id: str, what: str) -> str:
        """Resolve ``checkpoint_id`` and map an input checkpoint to its parent; ``what``: the
        operation for messages ("roll back to", "fork from")."""
        cid = tree.resolve(checkpoint_id)
        node = tree.nodes[cid]
        if not node.readable:
            raise BranchError(f"checkpoint {short_id(cid)} cannot be read ({node.error}); {what} another one")
        if node.source == "input":
            if not node.parent_id:
                raise BranchError(
                    f"{short_id(cid)} is the thread's first input: there is no state before it "
                    "to go back to; start a new thread instead"
                )
            return node.parent_id
        return cid

    async def _move_head(self, thread_id: str, base: str, op: str) -> BranchOp:
        config = self.config(thread_id, base)
        config["metadata"] = {"hermes_op": op, "hermes_target": base}
        mechanism = "update"
        try:
            new_config = await self.graph.aupdate_state(config, None)
        except InvalidUpdateError:
            mechanism = "copy"
            new_config = await self.graph.aupdate_state(config, None, as_node="__copy__")
        head = new_config["configurable"]["checkpoint_id"]
        if self.mirror is not None or self.origins is not None:
            state = await self.graph.aget_state(new_config)
            messages = list(state.values.get("messages") or [])
            if self.mirror is not None:
                await self.mirror.append_turn(thread_id, messages, checkpoint_id=head, op=op)
            await self._sync_memory(thread_id, messages)
        return BranchOp(thread_id, op, base, head, new_config, mechanism)

    async def rollback(self, thread_id: str, checkpoint_id: str) -> BranchOp:
        """Make the earlier checkpoint ``checkpoint_id`` (on the active branch) the active head.

        Returns the :class:`BranchOp`; ``head`` is the new checkpoint (parent: the target, same
        values and next tasks). The abandoned continuation stays as a branch (its head can be
        switched back to). Rolling back to the active head itself changes nothing. Raises
        :class:`BranchError` for a checkpoint not on the active branch (use :meth:`switch` or
        :meth:`fork`), for the thread's first input, and for a target or an active head that
        cannot be read (nothing is written then)."""
        tree = await self.branch_tree(thread_id)
        await self._require_readable_head(tree, "roll back")
        base = self._base(tree, checkpoint_id, "roll back to")
        if tree.active is None or not tree.is_ancestor(base, tree.active):
            raise BranchError(
                f"{short_id(base)} is not on the active branch of {thread_id!r}: "
                "use `switch` to another head or `fork` from it"
            )
        if base == tree.active:
            return BranchOp(thread_id, "rollback", base, base, self.config(thread_id, base), "none")
        return await self._move_head(thread_id, base, "rollback")

    async def switch(self, thread_id: str, checkpoint_id: str) -> BranchOp:
        """Make another branch's head ``checkpoint_id`` the active head (a new checkpoint under
        it with the same state). Switching to the active head changes nothing. Raises
        :class:`BranchError` if the checkpoint is not a head (use :meth:`rollback`/:meth:`fork`),
        or if it or the active head cannot be read (nothing is written then)."""
        tree = await self.branch_tree(thread_id)
        await self._require_readable_head(tree, "switch")
        cid = tree.resolve(checkpoint_id)
        if cid == tree.active:
            return BranchOp(thread_id, "switch", cid, cid, self.config(thread_id, cid), "none")
        if cid not in tree.heads:
            raise BranchError(
                f"{short_id(cid)} is not a branch head (heads: "
                + ", ".join(short_id(h) for h in tree.heads)
                + "); use rollback or fork"
            )
        if not tree.nodes[cid].readable:
            raise BranchError(f"head {short_id(cid)} cannot be read ({tree.nodes[cid].error})")
        return await self._move_head(thread_id, cid, "switch")

    async def fork_base(self, thread_id: str, checkpoint_id: str) -> str:
        """The full id of the checkpoint a fork at ``checkpoint_id`` continues from (an input
        checkpoint maps to its parent). Raises :class:`BranchError` as :meth:`rollback`."""
        tree = await self.branch_tree(thread_id)
        await self._require_readable_head(tree, "fork")
        return self._base(tree, checkpoint_id, "fork from")

    async def resume_config(self, thread_id: str, checkpoint_id: str | None = None) -> RunnableConfig:
        """The config to continue ``thread_id`` at ``checkpoint_id``: the thread id alone when
        that is the active head (or None), else the explicit checkpoint config (a fork).

        Why (case K10): LangGraph resumes an explicit head id exactly like the thread id for
        ``Command(resume=...)`` and for new input, but ``invoke(None, config_with_id)`` (going
        on after a static breakpoint or a failed step) is *time travel*: it first writes a
        ``source: "fork"`` copy of the head, then runs the same tasks — same results, one more
        checkpoint. Dropping the id when it names the head makes both paths identical."""
        if checkpoint_id is None:
            return self.config(thread_id)
        head = await self.graph.aget_state(self.config(thread_id))
        if head.config and head.config["configurable"].get("checkpoint_id") == checkpoint_id:
            return self.config(thread_id)
        return self.config(thread_id, checkpoint_id)

    async def fork_config(self, thread_id: str, checkpoint_id: str) -> RunnableConfig:
        """The config to invoke the graph with so that the run continues from
        ``checkpoint_id`` as a new branch (an input checkpoint maps to its parent; the active
        head gives the thread-only config: continuing there is an ordinary turn)."""
        return await self.resume_config(thread_id, await self.fork_base(thread_id, checkpoint_id))

    async def fork(
        self,
        thread_id: str,
        checkpoint_id: str,
        new_input: str | dict[str, Any] | None,
        *,
        context: Any = None,
        config: RunnableConfig | None = None,
    ) -> dict[str, Any]:
        """Continue from the earlier checkpoint ``checkpoint_id`` with ``new_input`` (a user
        message text, or a graph input dict; None resumes its pending tasks) as a new branch.

        ``context`` is the graph's runtime context (``graph.context.Context``); ``config`` is
        merged in (callbacks, recursion_limit). Returns the run's final state values; the new
        branch's head is then the active head."""
        run_config: dict[str, Any] = dict(config or {})
        base_config = await self.fork_config(thread_id, checkpoint_id)
        run_config["configurable"] = {**(run_config.get("configurable") or {}), **base_config["configurable"]}
        if isinstance(new_input, str):
            base = await self.graph.aget_state(cast(RunnableConfig, run_config))
            # the turn's own request again: continue the turn, so its side effects replay
            new_input = None if same_request(base, new_input) else {"messages": [HumanMessage(new_input)]}
        out = await self.graph.ainvoke(new_input, cast(RunnableConfig, run_config), context=context)
        if self.mirror is not None or self.origins is not None:
            state = await self.graph.aget_state(self.config(thread_id))
            messages = list(state.values.get("messages") or [])
            if self.mirror is not None:
                await self.mirror.append_turn(
                    thread_id, messages, checkpoint_id=state.config["configurable"]["checkpoint_id"], op="fork"
                )
            # the fork's turn synced at its start (assemble_context); its own memories are
            # written after, as active: this sync is for a fork that ran no new turn (input None)
            await self._sync_memory(thread_id, messages)
        return out
