"""The turn runner: one user turn through the checkpointed agent graph, outside a LangGraph server.

The ``hermes`` CLI (``graph.cli``), the CLI's reminder firings and the tests run turns with
:func:`run_turn` (or :func:`execute_turn`, which also resumes an interrupt or forks from an
earlier checkpoint); the ``reminders`` graph, invoked in-process, runs its task turns with
:func:`invoke_turn`. Under ``langgraph dev`` the server itself is the runner (docs/DESIGN.md §8).

:func:`execute_turn`, step by step:

0. build the chat model (``graph.resources.get_model``): a model that cannot be used raises
   ``ModelUnavailableError`` before anything is written;
1. hold the thread's lock (:func:`thread_lock`: one turn per thread at a time, across processes
   — on every host with ``HERMES_POSTGRES_URL``);
2. open ``<data_dir>/checkpoints.sqlite`` (``graph.checkpoints.open_checkpointer``) and bind
   the agent graph to it;
3. rebuild the thread from its plain-text mirror if its head cannot be read
   (``graph.recovery.ensure_readable``; the observer is told);
4. stream the graph (``stream_mode`` updates, custom, tasks and messages; the observer sees every
   node's start and update, MCP progress and the token count of a streaming model call); when
   the run stops at an ``interrupt()`` question, ask the observer and resume with its answer,
   or stop and return the question in the summary when nobody can answer;
5. wait for background work (memory writes), then append the thread's active branch to
   ``<data_dir>/mirror/<thread>.jsonl`` (the dual write; a failure only warns);
6. return the turn's summary (:func:`execute_turn` documents its keys).

**The same request across processes** (docs/DESIGN.md §2.4). A caller that shows the answer to
a person (the CLI) runs with ``track_delivery``: the finished turn's goal is recorded as
*answered, not yet delivered* in ``<data_dir>/deliveries.db`` and the caller marks it delivered
(:func:`answer_delivered`) once the answer is printed. A new message on the same thread whose
text is that of the thread's latest goal, finished but not delivered (the process died between
the end of the turn and the print), is the same request: nothing runs, the stored answer comes
back with a notice (``already_done``) and the goal's calls the idempotency ledger recorded. A
turn that stopped mid-way is continued instead (:func:`interrupted_turn`), and so is a fork
from a checkpoint inside a turn whose message is that turn's request, so its calls keep their
request ids and the ledger replays what already ran. The same text after a delivered
answer is a new request (``repeat_notice`` says so); ``new_request`` skips the check.

The runner prints nothing itself: what a person sees is the observer's business
(:class:`TurnObserver`; the CLI's is ``graph.cli.render.ConsoleObserver``). Without an observer
a turn is silent, asks nobody, and logs warnings and recovery notices (``logging``).

Its parts, each in its own module and re-exported here: the thread lock (``graph.thread_lock``),
the observer protocol (``graph.turn_observer``) and the delivery marks (``graph.delivery_marks``).
"""

from __future__ import annotations

import asyncio
import contextvars
from pathlib import Path
from typing import Any, cast

from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.messages import AIMessage, AIMessageChunk, HumanMessage
from langchain_core.runnables import RunnableConfig
from langgraph.types import Command

from graph.branches import same_request
from graph.builder import make_graph
from graph.checkpoints import checkpoints_file, open_checkpointer
from graph.context import Context
from graph.delivery_marks import DELIVERIES_FILE, answer_delivered, delivery_state, set_delivery
from graph.mirror import ThreadMirror
from graph.progress import current_goal_messages, request_id
from graph.recovery import RecoveryReport, ensure_readable
from graph.resources import get_model
from graph.thread_lock import ThreadBusyError, thread_lock
from graph.turn_observer import SilentObserver, TurnObserver
from tools.ledgers import open_ledger


class NothingToResumeError(RuntimeError):
    """A resume on a thread that is not waiting for an answer."""


def _thread_config(thread_id: str) -> RunnableConfig:
    return {"configurable": {"thread_id": thread_id}}


async def _mirror_written(thread_id: str, timeout_s: float = 30.0) -> None:
    """Wait for the turn's own background mirror append (``nodes/write_memory.py`` names it
    ``mirror:<thread>``). The turn's memory write (``memory-write:<thread>``) is not waited for:
    ``MemoryService.write_plan`` holds it in the memory queue first (durable from then on), and
    its passage embedding finishes after the answer — ``hermes`` drains it before the process
    exits (``graph.resources.aclose_resources``); a process killed before that leaves it held,
    and the next process's first memory write replays it (``memory.queue``)."""
    mine = [t for t in asyncio.all_tasks() if t.get_name() == f"mirror:{thread_id}" and not t.done()]
    if mine:
        await asyncio.wait(mine, timeout=timeout_s)


async def _mirror_head(agent: Any, mirror: ThreadMirror, thread_id: str, op: str, observer: TurnObserver) -> None:
    """Dual write: append the thread's active branch to its plain-text mirror. A failure here
    never fails the turn (the checkpoint is the primary record); the observer is warned."""
    try:
        snap = await agent.aget_state(_thread_config(thread_id))
        if snap.created_at is None:
            return
        await mirror.append_turn(
            thread_id,
            list(snap.values.get("messages") or []),
            checkpoint_id=snap.config["configurable"].get("checkpoint_id"),
            op=op,
        )
    except Exception as exc:  # noqa: BLE001 - reported; the turn itself succeeded or failed on its own
        observer.on_warning(f"plain-text mirror not written ({type(exc).__name__}: {exc})")


def _same_text(a: str, b: str) -> bool:
    return bool(a) and " ".join(a.split()) == " ".join(b.split())


async def _recorded_effects(
    data_dir: Path, thread_id: str, goal_id: str, messages: list[Any], *, postgres_url: str = ""
) -> list[str]:
    """``tool (ledger state)`` for each call of the goal the idempotency ledger (the data
    directory's, or PostgreSQL's with ``postgres_url``) holds a record of (the same request ids
    ``dispatch_tools`` derives), in call order."""
    from tools.idempotency import LEDGER_FILE

    if not postgres_url and not await asyncio.to_thread((data_dir / LEDGER_FILE).exists):
        return []
    ledger = open_ledger(data_dir, postgres_url)
    found: list[str] = []
    try:
        for message in current_goal_messages(messages):
            for call in getattr(message, "tool_calls", None) or []:
                rid = request_id(thread_id, goal_id, call["name"], call.get("args"))
                state = await ledger.state(call["name"], rid)
                if state is not None and f"{call['name']} ({state})" not in found:
                    found.append(f"{call['name']} ({state})")
    finally:
        await ledger.aclose()
    return found


def interrupted_turn(snapshot: Any, task: str) -> bool:
    """True when ``snapshot`` (the thread's head, or the checkpoint a fork starts from) stopped
    mid-turn (nodes still to run, no question waiting) and its current goal is ``task`` (same
    text, spacing ignored): ``graph.branches.same_request``."""
    return same_request(snapshot, task)


def _summary(values: dict[str, Any], before: dict[str, Any], thread_id: str, checkpoint_id: Any) -> dict[str, Any]:
    metrics = values.get("metrics", {})
    calls = {k: v - (before.get("tool_calls") or {}).get(k, 0) for k, v in (metrics.get("tool_calls") or {}).items()}
    last = next((m for m in reversed(values.get("messages", [])) if isinstance(m, AIMessage)), None)
    return {
        "answer": last.content if last else "",
        "thread_id": thread_id,
        "checkpoint_id": checkpoint_id,
        "tools_called": {k: v for k, v in calls.items() if v},
        "tokens_in": metrics.get("tokens_in", 0) - before.get("tokens_in", 0),
        "tokens_out": metrics.get("tokens_out", 0) - before.get("tokens_out", 0),
        "memory_writes": metrics.get("memory_writes", 0) - before.get("memory_writes", 0),
        "stop_reason": values.get("stop_reason"),
        "artifacts": values.get("artifacts") or [],
        "goal_id": str(values.get("goal_id") or ""),
        "already_done": None,
    }


async def run_turn(
    task: str,
    context: Context,
    thread_id: str,
    quiet: bool = False,
    callbacks: list[BaseCallbackHandler] | None = None,
) -> dict[str, Any]:
    """Run one user turn through the checkpointed graph (SQLite file ``<data_dir>/checkpoints.sqlite``).

    Returns the summary: ``answer``, ``thread_id``, ``checkpoint_id``, ``tools_called``
    ({name: count} this turn), ``tokens_in``/``tokens_out``, ``memory_writes``, ``stop_reason``,
    ``artifacts`` (what the turn's tools produced, e.g. report paths), ``recovery`` (None, or the
    notice when the thread's checkpoint was unreadable and the session was rebuilt from its
    mirror, ``graph.recovery``), ``question`` (None, or the question the run stopped at).
    ``callbacks`` are LangChain callback handlers passed to every model call. After the turn the
    thread's active branch is appended to ``<data_dir>/mirror/<thread>.jsonl`` (``graph.mirror``).
    Silent (see :func:`execute_turn` for an observer). Raises ``graph.recovery.RecoveryError`` if
    the checkpoint is unreadable and no mirror exists, :class:`ThreadBusyError` if another
    process runs a turn on the thread."""
    return await execute_turn(task, context, thread_id, quiet=quiet, callbacks=callbacks)


async def execute_turn(
    task: str,
    context: Context,
    thread_id: str,
    *,
    quiet: bool = False,
    callbacks: list[BaseCallbackHandler] | None = None,
    checkpoint_id: str | None = None,
    op: str = "turn",
    resume: Any = None,
    observer: TurnObserver | None = None,
    track_delivery: bool = False,
    new_request: bool = False,
) -> dict[str, Any]:
    """:func:`run_turn` with every option (see the module docstring for the steps).

    ``track_delivery``: the caller shows the answer to a person and calls
    :func:`answer_delivered` with the summary's ``goal_id`` once it has; until then the turn
    counts as answered but not delivered. ``new_request``: run ``task`` as a new request even
    when it repeats the thread's latest goal whose answer was not delivered. The summary has,
    besides :func:`run_turn`'s keys, ``goal_id`` (the id of the goal's message) and
    ``already_done`` (None, or the notice when ``task`` was that undelivered request: nothing
    ran, the summary is the stored one, ``tools_called`` is empty).

    ``checkpoint_id``: start from that earlier checkpoint of the thread (a fork: LangGraph
    continues from its config and the run becomes a new branch). ``resume``: answer the
    question the thread is waiting at (``Command(resume=...)``; ``task`` is ignored) — raises
    :class:`NothingToResumeError` if it waits for none. ``op``: what the mirror records
    (turn, resume, fork). ``observer``: who sees the progress and answers questions; with
    ``quiet`` it sees no node updates and is asked nothing."""
    watcher: TurnObserver = observer or SilentObserver()
    # a model that cannot be built (no endpoint, an unknown embedded name) fails here, before
    # the turn writes a checkpoint, a mirror line or a memory file (it is cached for call_model)
    await get_model(context)
    data_dir = Path(context.data_dir)
    await asyncio.to_thread(data_dir.mkdir, parents=True, exist_ok=True)
    mirror = ThreadMirror(data_dir)
    recovery: RecoveryReport | None = None
    question: Any = None
    text: str | None = None
    async with (
        thread_lock(data_dir, thread_id, context.postgres_url),
        open_checkpointer(checkpoints_file(data_dir), postgres=context.postgres_url) as saver,
    ):
        agent = make_graph(checkpointer=saver)
        if thread_id:
            recovery = await ensure_readable(agent, mirror, thread_id)
            if recovery is not None:
                watcher.on_recovery(recovery)
        config: RunnableConfig = _thread_config(thread_id)
        if checkpoint_id:
            config["configurable"]["checkpoint_id"] = checkpoint_id
        if callbacks:
            config["callbacks"] = callbacks
        current = await agent.aget_state(config)
        if resume is not None and not current.interrupts:
            raise NothingToResumeError(
                f"thread {thread_id!r} is not waiting for an answer"
                + (" (no such thread)" if current.created_at is None else "")
                + '; start a new turn with: hermes run "<task>" --thread '
                + thread_id
            )
        before = current.values.get("metrics", {}) if thread_id else {}
        fresh = resume is None and not checkpoint_id and thread_id and not current.next and not current.interrupts
        goal_id = str(current.values.get("goal_id") or "")
        if fresh and goal_id and _same_text(str(current.values.get("goal") or ""), task):
            state = await asyncio.to_thread(delivery_state, data_dir, thread_id, goal_id, context.postgres_url)
            if state == "pending" and not new_request:
                return await _already_done(
                    current, data_dir, thread_id, goal_id, recovery, watcher, postgres_url=context.postgres_url
                )
            if state == "delivered":
                watcher.on_warning(
                    f"the same request as the previous turn of thread {thread_id!r}, whose answer was shown: "
                    "it runs again as a new request (its side effects too)"
                )
        graph_input: Any = Command(resume=resume) if resume is not None else {"messages": [HumanMessage(task)]}
        if resume is None and interrupted_turn(current, task):
            # the same task again on a turn that stopped mid-way (a crash, Ctrl-C, a kill), or a
            # fork inside a turn with that turn's own request: continue it rather than start a
            # new goal, so its side effects keep their request ids and the ledger replays what
            # already ran instead of running it twice
            graph_input = None
            watcher.on_warning(
                (
                    f"continuing the turn of thread {thread_id!r} as a new branch from its checkpoint "
                    f"before {', '.join(current.next)}: the message is that turn's own request"
                    if checkpoint_id
                    else f"continuing the interrupted turn of thread {thread_id!r} (it stopped before "
                    f"{', '.join(current.next)})"
                )
                + "; side effects that already ran are not repeated"
            )
        try:
            while True:
                # quiet: node updates only (no token stream, so models are not asked to stream)
                modes: list[Any] = ["updates"] if quiet else ["updates", "custom", "tasks", "messages"]
                async for mode, chunk in agent.astream(graph_input, config, context=context, stream_mode=modes):
                    if quiet:
                        continue
                    if mode == "custom":  # what nodes write to the stream: MCP progress, say
                        on_event = getattr(watcher, "on_event", None)
                        if on_event is not None and isinstance(chunk, dict):
                            on_event(chunk)
                        continue
                    if mode == "tasks":  # a node starts (its finish comes as an update)
                        on_start = getattr(watcher, "on_node_start", None)
                        if on_start is not None and isinstance(chunk, dict) and "result" not in chunk:
                            on_start(str(chunk.get("name")))
                        continue
                    if mode == "messages":  # a model streaming inside a node: count its chunks
                        on_tokens = getattr(watcher, "on_tokens", None)
                        message, meta = cast(tuple[Any, dict[str, Any]], chunk)
                        if on_tokens is not None and isinstance(message, AIMessageChunk):
                            on_tokens(str((meta or {}).get("langgraph_node", "")), 1)
                        continue
                    for node, update in cast(dict[str, Any], chunk).items():
                        if not node.startswith("__"):
                            watcher.on_update(node, update)
                snapshot = await agent.aget_state(_thread_config(thread_id))
                question = snapshot.interrupts[0].value if snapshot.interrupts else None
                if question is None:
                    break
                text = question.get("question") if isinstance(question, dict) else str(question)
                answer = None if quiet else await watcher.ask(str(text))
                if answer is None:
                    break  # nobody to ask here: the summary carries the question
                graph_input = Command(resume=answer)
                config = {k: v for k, v in config.items() if k != "configurable"}  # type: ignore[assignment]
                config["configurable"] = {"thread_id": thread_id}
        finally:
            await _mirror_written(thread_id)  # the node's own mirror write lands first, then the head
            await _mirror_head(agent, mirror, thread_id, op, watcher)
    summary = _summary(snapshot.values, before, thread_id, snapshot.config["configurable"].get("checkpoint_id"))
    summary["recovery"] = recovery.notice() if recovery else None
    summary["question"] = text if question is not None else None
    if track_delivery and thread_id and summary["goal_id"] and question is None and not snapshot.next:
        # answered; delivered only once the caller has shown it (answer_delivered)
        await asyncio.to_thread(set_delivery, data_dir, thread_id, summary["goal_id"], "pending", context.postgres_url)
    return summary


async def _already_done(
    current: Any,
    data_dir: Path,
    thread_id: str,
    goal_id: str,
    recovery: RecoveryReport | None,
    watcher: TurnObserver,
    *,
    postgres_url: str = "",
) -> dict[str, Any]:
    """The summary of the thread's finished, undelivered goal, returned instead of running it
    again (see the module docstring)."""
    values = current.values
    effects = await _recorded_effects(
        data_dir, thread_id, goal_id, list(values.get("messages") or []), postgres_url=postgres_url
    )
    notice = (
        f"already done: this request finished earlier on thread {thread_id!r} but its answer was never "
        "shown (the process stopped first); nothing ran again"
        + (f"; recorded in the idempotency ledger: {', '.join(effects)}" if effects else "")
        + ". To run it again as a new request, add --again."
    )
    watcher.on_warning(notice)
    summary = _summary(
        values, values.get("metrics", {}), thread_id, current.config["configurable"].get("checkpoint_id")
    )
    summary.update(recovery=recovery.notice() if recovery else None, question=None, already_done=notice)
    return summary


async def invoke_turn(task: str, context: Context, thread_id: str, *, message_id: str | None = None) -> dict[str, Any]:
    """Run ``task`` as a user turn on ``thread_id`` to its end and return the graph's final values
    (``__interrupt__`` among them when it stopped at a question). For callers that are
    themselves a graph run — the ``reminders`` graph invoked in-process: the checkpointer
    recovers an unreadable thread by itself (``open_checkpointer(..., mirror_dir=...)``, as
    under the server), no thread lock is taken, nothing is asked, and the turn runs in a fresh
    ``contextvars`` context so it is its own run, not a subgraph of the caller's.
    ``message_id``: the id of the human message (a firing's request id: a replayed period
    does not add a second copy)."""
    data_dir = Path(context.data_dir)
    await asyncio.to_thread(data_dir.mkdir, parents=True, exist_ok=True)

    turn_input: Any = {"messages": [HumanMessage(task, id=message_id)]}

    async def turn() -> dict[str, Any]:
        async with open_checkpointer(
            checkpoints_file(data_dir), mirror_dir=data_dir, postgres=context.postgres_url
        ) as saver:
            agent = make_graph(checkpointer=saver)
            return await agent.ainvoke(turn_input, _thread_config(thread_id), context=context)

    return await asyncio.create_task(turn(), context=contextvars.Context())


__all__ = [
    "DELIVERIES_FILE",
    "NothingToResumeError",
    "ThreadBusyError",
    "TurnObserver",
    "answer_delivered",
    "execute_turn",
    "interrupted_turn",
    "invoke_turn",
    "run_turn",
    "thread_lock",
]
