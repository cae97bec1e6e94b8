"""Read a thread's checkpoints from the checkpoint saver alone: the one reader of the stored
rows, for the read-only commands (``session list|show``, ``branch list|show``) and for
``graph.branches`` (its thread listing and the rows of a history that cannot be listed). No
agent graph is built, and nothing of the model client, the memory service, LanceDB or the
embedder is imported (issue 19, item 1; ``tests/unit/test_cli_startup.py``). The head-changing
commands (rollback, switch, fork) go through the compiled graph (``graph.branches``).

What the compiled graph's ``aget_state`` adds is derived from the stored checkpoint itself:

* ``values``: the checkpoint's ``channel_values`` without LangGraph's own channels
  (``branch:to:*``, ``__start__``, ``__pregel_*``) — what ``StateSnapshot.values`` holds,
  except that a reducer field never written yet (``metrics`` of a thread's first input) is
  absent where the graph shows its empty default (``{}``).
* ``next``: the nodes whose trigger channel (``branch:to:<node>``, or ``__start__`` for an
  input checkpoint) carries a version newer than the one that node last saw
  (``versions_seen``) — LangGraph's own trigger rule (``langgraph.pregel._algo._triggers``).
  Checked against the graph's ``aget_state_history`` over real runs
  (``tests/unit/test_checkpoint_reader.py``). Unlike the graph's live view of a head, a task
  that finished inside a step whose checkpoint was never written (a crash between the two) is
  still listed.

Only read: an SQLite file through a connection that issues nothing but SELECTs (the saver's
``setup`` — which would write — is skipped: ``require_db`` checked the tables first); with ``HERMES_POSTGRES_URL``,
that database (``graph.postgres``; its ``setup`` creates the tables of a new database, as every
process on it does). The thread listing and a thread's rows (ids, parents, metadata) are one
SELECT on the saver's ``checkpoints`` table on either store — the SQLite saver's, or
langgraph-checkpoint-postgres's, whose ``metadata`` is ``jsonb`` — since neither saver's
public API lists threads and ``alist`` deserialises every checkpoint. Unreadable checkpoints
are reported, never rebuilt.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Mapping
from contextlib import aclosing, asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

#: LangGraph's channels, not the agent's state.
_OWN_CHANNELS = ("branch:to:", "__")
_BRANCH = "branch:to:"
_START = "__start__"
#: ``graph.checkpoints.CHECKPOINTS_FILE`` (named here so reading does not import the graph; a
#: test checks the two agree).
CHECKPOINTS_FILE = "checkpoints.sqlite"


def checkpoints_file(data_dir: str | Path) -> Path:
    """``<data_dir>/checkpoints.sqlite``."""
    return Path(data_dir) / CHECKPOINTS_FILE


def postgres_url() -> str:
    """The checkpoint database setting (``HERMES_POSTGRES_URL``): "" = the SQLite file."""
    from graph.context import Context

    return Context().postgres_url


@dataclass(frozen=True)
class ThreadSummary:
    """One line of ``hermes session list``: ``checkpoints`` (count of rows), ``updated_at``
    (ISO 8601 of the head, ``None`` when unreadable), the head's ``goal`` and ``stop_reason``,
    ``error`` when the head cannot be read."""

    thread_id: str
    checkpoints: int
    updated_at: str | None
    goal: str
    stop_reason: str
    error: str


@dataclass(frozen=True)
class Snapshot:
    """A checkpoint as the read-only commands show it (the fields of LangGraph's
    ``StateSnapshot`` they read): ``checkpoint_id``, ``parent_id``, ``values`` (the state),
    ``next`` (nodes still to run), ``metadata``, ``created_at`` (ISO 8601)."""

    checkpoint_id: str
    parent_id: str | None
    values: dict[str, Any]
    next: tuple[str, ...]
    metadata: dict[str, Any]
    created_at: str | None

    def as_history_item(self) -> dict[str, Any]:
        """The shape of a server history entry, which ``graph.checkpoint_tree.tree_from_history`` reads."""
        return {
            "checkpoint": {"checkpoint_id": self.checkpoint_id},
            "parent_checkpoint": {"checkpoint_id": self.parent_id} if self.parent_id else None,
            "metadata": self.metadata,
            "next": list(self.next),
            "created_at": self.created_at,
            "values": self.values,
        }


def shape_problem(checkpoint: Any) -> str:
    """Why a deserialised checkpoint is not one LangGraph could read ("" when it is): the same
    checks as ``graph.recovery.check_shape`` (kept here so reading does not import the graph)."""
    if not isinstance(checkpoint, dict):
        return f"a {type(checkpoint).__name__}, not a checkpoint"
    if not all(isinstance(checkpoint.get(k), str) for k in ("ts", "id")) or "v" not in checkpoint:
        return "no v/ts/id"
    if not all(isinstance(checkpoint.get(k), dict) for k in ("channel_values", "channel_versions", "versions_seen")):
        return "no channel_values/channel_versions/versions_seen"
    if not all(isinstance(v, dict) for v in checkpoint["versions_seen"].values()):
        return "versions_seen is not a mapping of mappings"
    if not isinstance(checkpoint["channel_values"].get("messages", []), list):
        return "its messages are not a list"
    return ""


class UnreadableCheckpoint(ValueError):
    """A stored checkpoint that deserialised into the wrong shape."""


def next_nodes(checkpoint: Mapping[str, Any]) -> tuple[str, ...]:
    """The nodes LangGraph would run from ``checkpoint``: those whose trigger channel is set
    and newer than what the node saw (see the module docstring)."""
    versions: Mapping[str, Any] = checkpoint["channel_versions"]
    values: Mapping[str, Any] = checkpoint["channel_values"]
    seen: Mapping[str, Mapping[str, Any]] = checkpoint["versions_seen"]
    null = type(next(iter(versions.values())))() if versions else ""
    out: list[str] = []
    for channel, version in versions.items():
        if channel.startswith(_BRANCH):
            node = channel[len(_BRANCH) :]
        elif channel == _START:
            node = _START
        else:
            continue
        if channel in values and version > seen.get(node, {}).get(channel, null):
            out.append(node)
    return tuple(out)


def snapshot_of(saved: Any) -> Snapshot:
    """A :class:`Snapshot` of a LangGraph ``CheckpointTuple``; raises :class:`UnreadableCheckpoint`
    for a checkpoint of the wrong shape."""
    checkpoint = saved.checkpoint
    problem = shape_problem(checkpoint)
    conf = saved.config.get("configurable", {})
    if problem:
        raise UnreadableCheckpoint(
            f"checkpoint {conf.get('checkpoint_id')} deserialised into the wrong shape ({problem})"
        )
    parent = (saved.parent_config or {}).get("configurable", {}).get("checkpoint_id")
    values = {k: v for k, v in checkpoint["channel_values"].items() if not k.startswith(_OWN_CHANNELS)}
    return Snapshot(
        checkpoint_id=conf["checkpoint_id"],
        parent_id=parent,
        values=values,
        next=next_nodes(checkpoint),
        metadata=dict(saved.metadata or {}),
        created_at=checkpoint["ts"],
    )


def _config(thread_id: str, checkpoint_id: str | None = None) -> dict[str, Any]:
    conf: dict[str, Any] = {"thread_id": thread_id, "checkpoint_ns": ""}
    if checkpoint_id:
        conf["checkpoint_id"] = checkpoint_id
    return {"configurable": conf}


class CheckpointReader:
    """The read-only view of a checkpoint saver: :meth:`threads`, :meth:`state`, :meth:`tree`."""

    def __init__(self, saver: Any) -> None:
        self.saver = saver

    async def state(self, thread_id: str, checkpoint_id: str | None = None) -> Snapshot | None:
        """The thread's active head (or ``checkpoint_id``); None when there is none. Raises
        what deserialising it raises, or :class:`UnreadableCheckpoint`."""
        saved = await self.saver.aget_tuple(_config(thread_id, checkpoint_id))
        return snapshot_of(saved) if saved is not None else None

    async def _select(self, sqlite_sql: str, postgres_sql: str, params: tuple[Any, ...]) -> list[tuple[Any, ...]]:
        """The rows of one read-only SELECT on the saver's own connection: ``sqlite_sql`` (``?``
        parameters) under the SQLite saver's lock, ``postgres_sql`` (``%s`` parameters) on a
        connection of the PostgreSQL saver's pool (or its one connection, under its lock).
        Raises ``graph.checkpoint_tree.BranchError`` for any other saver."""
        from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

        saver = self.saver
        if isinstance(saver, AsyncSqliteSaver):
            async with saver.lock, saver.conn.execute(sqlite_sql, params) as cur:
                return [tuple(r) for r in await cur.fetchall()]
        if _is_postgres_saver(saver):
            from psycopg.rows import tuple_row

            async with _postgres_connection(saver) as conn, conn.cursor(row_factory=tuple_row) as cur:
                await cur.execute(postgres_sql, params)
                return list(await cur.fetchall())
        from graph.checkpoint_tree import BranchError

        raise BranchError(
            f"reading the checkpoint table needs the SQLite or PostgreSQL checkpointer, not {type(saver).__name__}"
        )

    async def rows(self, thread_id: str) -> dict[str, tuple[str | None, dict[str, Any]]] | None:
        """Every checkpoint id of the thread with its parent and metadata, read without
        deserialising the checkpoints (the SQLite or PostgreSQL saver; None for another)."""
        from graph.checkpoint_tree import BranchError

        try:
            rows = await self._select(
                "SELECT checkpoint_id, parent_checkpoint_id, metadata FROM checkpoints "
                "WHERE thread_id = ? AND checkpoint_ns = '' ORDER BY checkpoint_id",
                "SELECT checkpoint_id, parent_checkpoint_id, metadata FROM checkpoints "
                "WHERE thread_id = %s AND checkpoint_ns = '' ORDER BY checkpoint_id",
                (thread_id,),
            )
        except BranchError:
            return None
        out: dict[str, tuple[str | None, dict[str, Any]]] = {}
        for cid, parent, stored in rows:
            metadata = stored  # PostgreSQL: jsonb, already a dict
            if isinstance(stored, (str, bytes)):  # SQLite: JSON text
                try:
                    metadata = json.loads(stored) if stored else {}
                except ValueError:
                    metadata = {}
            out[cid] = (parent, metadata if isinstance(metadata, dict) else {})
        return out

    async def counts(self, thread_id: str) -> tuple[int, int]:
        """``(checkpoints, branch heads)`` of the thread, from the rows' ids and parents alone
        (nothing deserialised; SQLite or PostgreSQL), else from :meth:`tree`."""
        rows = await self.rows(thread_id)
        if rows is None:
            tree = await self.tree(thread_id)
            return len(tree), len(tree.heads)
        parents = {parent for parent, _ in rows.values()}
        return len(rows), sum(1 for cid in rows if cid not in parents)

    async def tree(self, thread_id: str) -> Any:
        """The thread's ``graph.checkpoint_tree.BranchTree`` (empty for an unknown thread);
        checkpoints that cannot be deserialised are listed as unreadable (as
        ``graph.branches.Branches.branch_tree`` does)."""
        from graph.checkpoint_tree import BranchTree, tree_from_history

        try:
            # closed at once on a failure: the SQLite saver holds its lock while listing
            async with aclosing(self.saver.alist(_config(thread_id))) as listing:
                history = [snapshot_of(t) async for t in listing]
        except Exception as exc:  # a corrupt checkpoint aborts the whole listing
            rows = await self.rows(thread_id)
            if rows is None:
                raise
            history, broken = [], {}
            for cid, (parent, meta) in rows.items():
                try:
                    found = await self.state(thread_id, cid)
                    if found is not None:
                        history.append(found)
                except Exception as inner:  # noqa: BLE001 - reported per checkpoint
                    broken[cid] = (parent, meta, f"{type(inner).__name__}: {inner}"[:200])
            if not broken:
                raise exc
            items = [s.as_history_item() for s in history]
            return tree_from_history(thread_id, items, active=max(rows) if rows else None, unreadable=broken)
        if not history:
            return BranchTree(thread_id, {}, [], [], None)
        return tree_from_history(thread_id, [s.as_history_item() for s in history], active=history[0].checkpoint_id)

    async def threads(self, limit: int = 50) -> list[ThreadSummary]:
        """The threads of the checkpoint file, most recently updated first (at most ``limit``),
        one :class:`ThreadSummary` each, read from the rows' ids (checkpoint ids are uuid6,
        ordered by time) and the head's state; a thread whose head cannot be read is listed with
        ``error`` set, not dropped. Raises ``graph.checkpoint_tree.BranchError`` for a saver that is
        neither the SQLite nor the PostgreSQL one (the listing reads its table)."""
        rows = await self._select(
            "SELECT thread_id, COUNT(*), MAX(checkpoint_id) FROM checkpoints WHERE checkpoint_ns = '' "
            "GROUP BY thread_id ORDER BY MAX(checkpoint_id) DESC LIMIT ?",
            "SELECT thread_id, COUNT(*), MAX(checkpoint_id) FROM checkpoints WHERE checkpoint_ns = '' "
            "GROUP BY thread_id ORDER BY MAX(checkpoint_id) DESC LIMIT %s",
            (max(1, limit),),
        )
        out: list[ThreadSummary] = []
        for thread_id, count, _last in rows:
            try:
                snap = await self.state(thread_id)
            except Exception as exc:  # noqa: BLE001 - a damaged thread is listed with its error
                out.append(ThreadSummary(thread_id, int(count), None, "", "", f"{type(exc).__name__}: {exc}"[:200]))
                continue
            values = snap.values if snap is not None else {}
            out.append(
                ThreadSummary(
                    thread_id,
                    int(count),
                    snap.created_at if snap is not None else None,
                    str(values.get("goal") or ""),
                    str(values.get("stop_reason") or ""),
                    "",
                )
            )
        return out


def _is_postgres_saver(saver: Any) -> bool:
    """Whether ``saver`` is langgraph-checkpoint-postgres's async saver (imported only when the
    module is loaded already: a SQLite run never loads psycopg)."""
    import sys

    module = sys.modules.get("langgraph.checkpoint.postgres.aio")
    return module is not None and isinstance(saver, module.AsyncPostgresSaver)


@asynccontextmanager
async def _postgres_connection(saver: Any) -> AsyncIterator[Any]:
    """A connection of the PostgreSQL saver: one lent by its pool, or its single connection
    held under its lock (as the saver's own statements hold it)."""
    from psycopg_pool import AsyncConnectionPool

    if isinstance(saver.conn, AsyncConnectionPool):
        async with saver.conn.connection() as conn:
            yield conn
    else:
        async with saver.lock:
            yield saver.conn


@asynccontextmanager
async def open_reader(checkpoints: Path, postgres_url: str = "") -> AsyncIterator[CheckpointReader]:
    """``async with open_reader(file, url) as reader:`` a :class:`CheckpointReader` on
    the SQLite ``checkpoints`` file opened read-only, or on the PostgreSQL database
    ``postgres_url`` when it is not empty."""
    if postgres_url:
        from graph.postgres import open_postgres_checkpointer  # psycopg only when asked for

        async with open_postgres_checkpointer(postgres_url) as pg_saver:
            yield CheckpointReader(pg_saver)
        return
    from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

    from base.sqlite_files import open_aiosqlite

    # an ordinary connection that only reads (a mode=ro one would leave the WAL's -wal/-shm
    # files behind: only a connection that may write removes them when it closes last); the
    # shared opener sets the busy timeout, and wal=False leaves the file's journal mode alone
    conn = await open_aiosqlite(checkpoints, wal=False)
    try:
        saver = AsyncSqliteSaver(conn)
        saver.is_setup = True  # setup() would write; require_db checked the tables
        yield CheckpointReader(saver)
    finally:
        await conn.close()
