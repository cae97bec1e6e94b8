"""The agent's own state in a data directory, hidden from every tool run (DESIGN §2.2): the
checkpoints, ledgers, memory, mirror, MCP tokens ... (:data:`AGENT_STATE`), what every thread
shares (:data:`SHARED_STATE`), the schedule unless the call's tool schedules or reads it
(:data:`SCHEDULE_STATE`), and the other threads' payload folders; :func:`private_entries` lists
the paths a run must not see. Used by the subprocess and container executors.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

#: The agent's own state in a data directory, never shown to a tool: checkpoints, idempotency
#: ledgers, the answers-delivered record, request bindings, memory (knowledge graph, queue,
#: episodic store), the plain-text mirror, thread locks, MCP OAuth tokens and media, the bundled
#: team chat's messages, the embedded model's log and saved KV cache. An entry is hidden when its name starts with
#: one of these (SQLite's -wal/-shm/-journal and moved-aside ``.broken-*`` copies included).
#: A tool keeps its thread's workspace, its own thread's ``payloads/<thread>/``, the tool-schema
#: file and the user's database. Override with ``SubprocessExecutor(hidden=...)``.
AGENT_STATE = (
    "checkpoints.sqlite",
    "idempotency.db",
    "remote_idempotency.db",
    "deliveries.db",
    "request_bindings.db",
    "memory.db",
    "episodic.lance",
    "mirror",
    "locks",
    "mcp_auth",
    "mcp_media",
    "team_chat.db",
    "embedded-llm.log",
    "kv-cache",  # the embedded model's saved KV cache: the tokens of earlier prompts
)
#: Shared by every thread (every user) of a data directory, so no tool run's: the flat ``reports/``
#: of before reports were per thread (still read by the agent and the user, never by a tool).
SHARED_STATE = ("reports",)
#: The schedule (the reminder store, every user's reminders): shown only to a call whose tool
#: schedules or reads the schedule (``ToolSpec.schedules`` / ``reads_schedule``).
SCHEDULE_STATE = ("reminders.db",)
_THREAD_SAFE = re.compile(r"[^A-Za-z0-9_.-]")


def request_thread(request_id: str) -> str | None:
    """The thread a request id (``<thread>:<goal>:<hash>``, ``graph.progress.request_id``)
    belongs to, as its payload folder names it; None for another form."""
    parts = request_id.rsplit(":", 2)
    return _THREAD_SAFE.sub("_", parts[0]) if len(parts) == 3 and parts[0] else None


def private_entries(
    data_dir: Path,
    request_id: str,
    state: tuple[str, ...] = AGENT_STATE,
    keep: tuple[str, ...] = (),
    *,
    schedule: bool = False,
) -> list[str]:
    """Paths in ``data_dir`` a tool run for ``request_id`` must not see: the entries named by
    ``state`` and :data:`SHARED_STATE` (prefixes), :data:`SCHEDULE_STATE` unless ``schedule``
    (the call's tool schedules or reads the schedule), and the other threads' folders of
    ``payloads`` (all of them when the request names no thread). ``keep``: absolute paths that
    stay visible (the user's database, import paths) with every entry that contains one. The
    ``threads/`` workspaces are not listed: the run covers that folder whole
    (:mod:`tools.executors.workspace`). Blocking (lists the directory)."""
    kept = [os.path.realpath(p) for p in keep]
    state = (*state, *SHARED_STATE, *(() if schedule else SCHEDULE_STATE))

    def needed(path: Path) -> bool:
        real = os.path.realpath(path)
        return any(k == real or k.startswith(real.rstrip("/") + "/") for k in kept)

    try:
        hidden = [str(e) for e in data_dir.iterdir() if any(e.name.startswith(n) for n in state) and not needed(e)]
        payloads = data_dir / "payloads"
        if payloads.is_dir():
            own = request_thread(request_id)
            hidden += [str(p) for p in payloads.iterdir() if p.name != own and not needed(p)]
    except OSError:
        return []
    return hidden
