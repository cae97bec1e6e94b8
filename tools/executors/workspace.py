"""Per-thread workspaces of tool runs (DESIGN §2.2; issue 25).

Everything a tool run writes goes to its thread's own folder, ``<data_dir>/threads/<name>/``
(``generate_report`` writes ``reports/<slug>.md`` there), where ``<name>`` is the thread id in a
file-name-safe, one-to-one form (:func:`folder_name`). Under a server a thread has one owner, so a
thread's folder is also that owner's: another thread's — another user's — folder is never shown
to the run (the executors cover ``threads/`` whole and mount only the run's own folder back).
The agent and the user read the folders directly; reports written before this layout stay in the
flat ``<data_dir>/reports/`` (read by the agent and the user, hidden from every tool).
Pure path arithmetic, no I/O but :func:`ensure_workspace`.
"""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

#: The folder of the per-thread workspaces in a data directory.
THREADS = "threads"
#: Longest folder name kept as is; a longer one is cut and ends with a hash of the thread id.
MAX_NAME_CHARS = 100
_PLAIN = re.compile(r"[A-Za-z0-9_-]")
_HASH = re.compile(r"[0-9a-f]+")


def request_thread_id(request_id: str) -> str | None:
    """The thread id of a request id ``<thread>:<goal>:<hex hash>`` (``graph.progress.request_id``;
    the thread may hold ``:``), as is; None for another form (``reminder-7``, a reminder's tool
    action ``reminder:<id>:<YYYY-MM>``: its period is no hash, so a thread a user names
    ``reminder`` never shares its folder)."""
    parts = request_id.rsplit(":", 2)
    return parts[0] if len(parts) == 3 and parts[0] and _HASH.fullmatch(parts[2]) else None


def folder_name(thread: str) -> str:
    """A file name for ``thread``, different for different threads: letters, digits, ``_`` and
    ``-`` stay, every other character becomes ``.XX`` (its UTF-8 bytes in hex, ``.`` included,
    so the name is never ``.`` or ``..`` and two ids never meet); a name over
    :data:`MAX_NAME_CHARS` is cut and ends with ``~`` and a SHA-256 of the id."""
    name = "".join(c if _PLAIN.fullmatch(c) else "".join(f".{b:02x}" for b in c.encode()) for c in thread)
    if len(name) > MAX_NAME_CHARS:
        name = name[:60] + "~" + hashlib.sha256(thread.encode()).hexdigest()[:32]
    return name


def workspace_for(data_dir: Path, request_id: str) -> Path:
    """The workspace of a tool run for ``request_id``: ``data_dir/threads/<folder_name(thread)>``;
    a request naming no thread gets a folder of its own (``+`` and the encoded request id, a
    form no thread's name takes)."""
    thread = request_thread_id(request_id)
    name = folder_name(thread) if thread is not None else "+" + folder_name(request_id or "-")
    return Path(data_dir) / THREADS / name


def ensure_workspace(data_dir: Path, request_id: str) -> Path:
    """:func:`workspace_for`, created (with ``threads/``) when missing. Blocking."""
    path = workspace_for(data_dir, request_id)
    path.mkdir(parents=True, exist_ok=True)
    return path
