"""Node ``fire_due_reminders`` (the ``reminders`` graph, ``graph/scheduler_graph.py``): fire every
reminder of ``<data_dir>/reminders.db`` that is due, exactly once per period
(``tools.scheduler.fire_due``: atomic claim, missed periods caught up once, bounded retries).

A firing reminds: ``fire_due`` delivers the reminder's notice to the user (recorded in
``reminders.db``, ``hermes reminders list`` / ``history``) and, for a ``notify`` action (the
default), that is all — the reminder's text is never run as a request. What firing an action
the user asked for means here:

* ``{"kind": "tool"}``: checked again against the request that created it (its destinations,
  ``tools.destinations``; refused, it does not run and the firing says why), then the tool is
  called through the toolbox's registry (``graph.resources.get_toolbox``) with request id
  ``reminder:<id>:<period>``, so the idempotency ledger makes a replay of the same period a no-op.
* ``{"kind": "task"}``: the agent graph runs the task as a user turn on the action's thread
  (default ``reminder-<id>``), with ``Context.for_firing``: its destinations come from the
  request that created the reminder, and it runs no tool that schedules.
  - **Inside a LangGraph server** (``langgraph dev``, a deployment: ``langgraph_api.server`` is
    loaded) the turn is a normal server run: ``langgraph_sdk.get_client()`` (no url = this same
    server, in process) ``threads.create(<uuid5 of the thread name>, if_exists="do_nothing")``
    then ``runs.create(thread, "agent", input=..., multitask_strategy="enqueue")``. The run is
    queued, not awaited (this run would otherwise hold a worker while waiting for another);
    the firing counts as done when the server accepted the run, and the run's metadata carries
    ``hermes_reminder = reminder:<id>:<period>`` so a re-fire of the same period finds it
    instead of queuing a second one. The thread shows up in Studio like any other.
  - **Anywhere else** (the graph invoked in-process, e.g. from a script or a test) the turn
    runs to its end through the ``run_task`` the reminders graph gives this node
    (``graph/scheduler_graph.py`` passes ``graph.runner.invoke_turn``: the agent graph with the
    checkpointer of ``<data_dir>/checkpoints.sqlite``, the file the CLI uses), on the same
    thread name the CLI would use (no per-thread CLI lock is taken). A node imports nothing of
    the application shell (docs/DESIGN.md §7), hence the injection.
  The human message's id is the request id, so a replayed period does not add a second copy.

No blocking I/O on the event loop: SQLite work runs in threads (``asyncio.to_thread`` inside
``fire_due``), the checkpointer is aiosqlite, the SDK client is httpx.

Update: ``checked_at`` (ISO clock used), ``fired``, ``failed``, ``skipped`` (lists of
``Firing.as_dict()``). Input ``now`` (ISO-8601, optional) injects the clock.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
import sys
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, Protocol

from langchain_core.messages import AIMessage
from langgraph.runtime import Runtime

from graph.context import Context
from graph.reminder_state import ReminderState
from graph.resources import get_toolbox
from tools.scheduler import Due, bound_request, call_tool_action, fire_due

log = logging.getLogger(__name__)

#: Namespace of the server thread ids derived from Hermes thread names (``reminder-3`` → uuid5).
THREAD_NAMESPACE = uuid.UUID("6f1d2c1e-9a4b-5c3d-8e7f-0a1b2c3d4e5f")
#: Run metadata key naming the firing that queued a run.
RUN_METADATA_KEY = "hermes_reminder"

#: How a task turn runs in-process: ``(task, context, thread_id, message_id=...) -> final values``
#: (``graph.runner.invoke_turn``).
TaskRunner = Callable[..., Awaitable[dict[str, Any]]]


class ReminderNode(Protocol):
    """The node's signature: ``async (state, runtime) -> update``."""

    def __call__(self, state: ReminderState, *, runtime: Runtime[Context]) -> Awaitable[dict[str, Any]]: ...


def server_thread_id(thread: str) -> str:
    """The LangGraph server thread (a UUID) of a Hermes thread name: ``uuid5(THREAD_NAMESPACE, name)``."""
    return str(uuid.uuid5(THREAD_NAMESPACE, thread))


def inside_server() -> bool:
    """True when this process is a LangGraph API server (``langgraph dev`` or a deployment)."""
    return "langgraph_api.server" in sys.modules


def _task_input(due: Due) -> str:
    return due.action.get("task") or due.text


async def _task_via_server(due: Due, context: Context) -> dict[str, Any]:
    from langgraph_sdk import get_client

    client = get_client()  # no url: this same server, through its ASGI app
    thread_id = server_thread_id(due.thread_id or "")
    try:
        await client.threads.create(
            thread_id=thread_id, if_exists="do_nothing", metadata={"hermes_thread": due.thread_id}
        )
        for run in await client.runs.list(thread_id, limit=100):
            if (run.get("metadata") or {}).get(RUN_METADATA_KEY) == due.request_id:
                return {
                    "ok": True,
                    "run_id": run["run_id"],
                    "thread_id": thread_id,
                    "replayed": True,
                    "detail": f"agent run {run['run_id']} for this period already exists on thread "
                    f"{thread_id} ({due.thread_id})",
                }
        task_input: dict[str, Any] = {
            "messages": [{"type": "human", "content": _task_input(due), "id": due.request_id}]
        }
        run = await client.runs.create(
            thread_id,
            "agent",
            input=task_input,
            context=context.model_dump(),
            metadata={RUN_METADATA_KEY: due.request_id},
            multitask_strategy="enqueue",
        )
    finally:
        await client.aclose()
    return {
        "ok": True,
        "run_id": run["run_id"],
        "thread_id": thread_id,
        "replayed": False,
        "detail": f"agent run {run['run_id']} queued on thread {thread_id} ({due.thread_id})",
    }


async def _task_in_process(due: Due, context: Context, run_task: TaskRunner) -> dict[str, Any]:
    values = await run_task(_task_input(due), context, due.thread_id, message_id=due.request_id)
    last = next((m for m in reversed(values.get("messages") or []) if isinstance(m, AIMessage)), None)
    answer = str(last.content) if last else ""
    waiting = bool(values.get("__interrupt__"))
    return {
        "ok": True,
        "thread_id": due.thread_id,
        "answer": answer[:2000],
        "waiting_for_answer": waiting,
        "detail": f"turn ran on thread {due.thread_id}"
        + (" and is waiting for an answer (hermes resume)" if waiting else f": {answer[:160]}"),
    }


async def fire_action(due: Due, context: Context, run_task: TaskRunner) -> dict[str, Any]:
    """Fire one due reminder's action (see module doc); returns ``fire_due``'s result dict."""
    if due.action["kind"] == "tool":
        toolbox = await get_toolbox(context)
        return await call_tool_action(
            toolbox.registry, due, data_dir=context.data_dir, rules=context.destination_rules()
        )
    context = context.for_firing(due.request_id, await asyncio.to_thread(bound_request, context.data_dir, due))
    if inside_server():
        return await _task_via_server(due, context)
    return await _task_in_process(due, context, run_task)


def _parse_now(value: str) -> dt.datetime:
    if not value:
        return dt.datetime.now().astimezone()  # the run's clock, read once at the top
    try:
        return dt.datetime.fromisoformat(value)
    except ValueError:
        raise ValueError(f"now must be an ISO-8601 date-time (e.g. 2026-12-01T09:30:00), got {value!r}") from None


def make_fire_due_reminders(run_task: TaskRunner) -> ReminderNode:
    """The node, with ``run_task`` as the way task turns run in-process (see the module docstring)."""

    async def fire_due_reminders(state: ReminderState, runtime: Runtime[Context]) -> dict[str, Any]:
        """Graph node: see the module docstring for the update it returns."""
        context = runtime.context or Context()
        now = _parse_now(state.now)
        firings = await fire_due(
            Path(context.data_dir),
            now,
            lambda due: fire_action(due, context, run_task),
            postgres_url=context.postgres_url,
        )
        for f in firings:
            log.info("reminder %s %s: %s %s", f.due.reminder_id, f.due.period, f.status, f.detail)
        by_status: dict[str, list[dict[str, Any]]] = {"fired": [], "failed": [], "skipped": []}
        for f in firings:
            by_status[f.status].append(f.as_dict())
        return {"checked_at": now.isoformat(timespec="seconds"), **by_status}

    return fire_due_reminders
