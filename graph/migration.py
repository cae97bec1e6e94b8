"""``hermes migrate --to postgres``: a data directory's threads, episodic and semantic
memories, idempotency ledger and reminders copied into the PostgreSQL database of
``HERMES_POSTGRES_URL`` (issue 22, deliverable 6). Run it with no ``hermes`` process using the data directory; then set the URL.

* **Threads, with their branch trees.** Every checkpoint of ``<data_dir>/checkpoints.sqlite``
  (every thread, every namespace), read with the SQLite saver's own ``alist(None)``, is written
  with the PostgreSQL saver's own ``aput`` under its own id and with its own parent (the config
  passed to ``aput`` names the parent, as LangGraph does), so each thread keeps its whole tree:
  every branch, every head, the active head (the newest id) and its history. Its pending writes
  go first, through ``aput_writes``, task by task with the task's ``task_path`` (read from the
  SQLite ``writes`` table: the tuple does not carry it, and both savers order writes by it):
  a checkpoint present in PostgreSQL therefore has its writes there too, even when a copy was
  interrupted. The regular writes of a task are written in one call and its special writes
  (error, interrupt, resume ...) in another, so their ``idx`` is the one LangGraph gave them.
* **Episodic memories** (LanceDB, ``<data_dir>/episodic.lance``): every live event of every
  user (the store's ``recent`` from the epoch) is added to the PostgreSQL store with its own id,
  text, time, kind, confidence and metadata; the vectors are made again by the configured
  embedder (the one the PostgreSQL store then searches with). Retired (expired) events are
  never recalled and are not copied; the report counts them. With ``HERMES_EPISODIC=weaviate``
  episodic memory is on the Weaviate server already and is left there.
* **The idempotency ledger** (``<data_dir>/idempotency.db``): every row, its state, owner,
  record and times as they are. A ``running`` row (a call in flight when its process died)
  keeps its owner, who holds no lease in PostgreSQL: the first duplicate states its outcome
  unknown (a retry-safe call is taken over), as on SQLite.
* **Semantic memory** (the knowledge graph in ``<data_dir>/memory.db``): its tables row for row
  into ``memory.semantic_postgres``'s (:func:`copy_semantic`), and with them the memory's
  **branch origins** (``memory.branch_origins``, same file: which memories belong to a branch
  that is not active), so a memory hidden by a rollback before the move stays hidden after it.
* **Reminders** (``<data_dir>/reminders.db``): every reminder under its own id, with its
  firings (per-period claims) and delivered notices (:func:`copy_reminders` says why the id).

**Idempotent.** A checkpoint already in PostgreSQL (same thread, namespace and id) is not
written again; its writes are written only when PostgreSQL holds fewer than the file (the
rows are inserted ``ON CONFLICT DO NOTHING``); memories are deduplicated by the store (same user
and text: the stored id; same id: nothing); ledger rows by their key ``(tool, request_id)``
(``ON CONFLICT DO NOTHING``: a row PostgreSQL already has, possibly newer, is kept), the
knowledge graph's rows by their keys the same way; reminders by their id and content.

**Not copied** (:data:`NOT_COPIED`): the memory's write retry queue (the rest of
``<data_dir>/memory.db``: writes that failed or were in flight on this machine; it stays in the
data directory, whose next turn that writes memory replays them into the database's stores); the marks of
answers shown (``deliveries.db``: an answer of a turn that ended before the move is not shown
again); the tool schema versions (``tool_schemas.db``: each data directory keeps its own).
"""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import AsyncIterator, Iterable
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import WRITES_IDX_MAP, CheckpointTuple
from psycopg_pool import AsyncConnectionPool

from base.sqlite_files import open_sqlite
from graph.checkpoints import checkpoints_file, open_checkpointer
from graph.context import Context
from graph.postgres import HermesPostgresSaver, open_postgres_checkpointer

#: Events added to the PostgreSQL store per call (one embedding batch, one INSERT).
EPISODIC_BATCH = 128
#: What stays in the data directory, for the report.
NOT_COPIED = (
    "the memory's write retry queue (memory.db): replayed from this data directory by its next turn that writes memory",
    "the marks of answers shown (deliveries.db)",
    "tool schema versions (tool_schemas.db)",
)

CheckpointKey = tuple[str, str, str]  # thread_id, checkpoint_ns, checkpoint_id


@dataclass
class MigrationReport:
    """What :func:`migrate_to_postgres` did. ``*_copied``: written now; ``*_present``: already in
    PostgreSQL (a previous run), left as they were."""

    threads: int = 0
    checkpoints_copied: int = 0
    checkpoints_present: int = 0
    writes_copied: int = 0
    episodic_copied: int = 0
    episodic_present: int = 0
    episodic_expired_left: int = 0
    episodic_note: str = ""
    ledger_copied: int = 0
    ledger_present: int = 0
    semantic_copied: dict[str, int] = field(default_factory=dict)
    origins_copied: dict[str, int] = field(default_factory=dict)
    reminders_copied: int = 0
    reminders_present: int = 0
    reminders_conflicting: list[int] = field(default_factory=list)
    firings_copied: int = 0
    deliveries_copied: int = 0
    not_copied: list[str] = field(default_factory=lambda: list(NOT_COPIED))

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


async def migrate_to_postgres(context: Context, url: str) -> MigrationReport:
    """Copy ``context.data_dir``'s threads, episodic memories and ledger into the PostgreSQL
    database ``url`` (module docstring). ``context``: the source's settings (its ``data_dir``,
    embedder and episodic backend; its ``postgres_url`` is ignored). Raises
    ``graph.postgres.PostgresUnavailable`` when ``url`` cannot be reached, ``sqlite3.Error``
    when a file of the data directory cannot be read."""
    data_dir = Path(context.data_dir)
    report = MigrationReport()
    await copy_checkpoints(data_dir, url, report)
    await copy_episodic(context, url, report)
    await copy_ledger(data_dir, url, report)
    await asyncio.to_thread(copy_semantic, data_dir, url, report)
    await asyncio.to_thread(copy_reminders, data_dir, url, report)
    return report


# --- threads ------------------------------------------------------------------------------


async def copy_checkpoints(data_dir: Path, url: str, report: MigrationReport) -> None:
    """Every checkpoint of ``<data_dir>/checkpoints.sqlite`` and its writes into ``url``."""
    source = checkpoints_file(data_dir)
    if not source.exists():
        return
    paths = await _task_paths(source)
    threads: set[str] = set()
    async with (
        open_checkpointer(source, postgres="") as src,
        open_postgres_checkpointer(url) as dst,
    ):
        present = await _present(dst)
        async for item in src.alist(None):
            key = _key(item)
            threads.add(key[0])
            held = present.get(key)
            if held is not None and held >= len(item.pending_writes or []):
                report.checkpoints_present += 1
                continue
            if item.pending_writes:
                report.writes_copied += await _put_writes(dst, key, item.pending_writes, paths)
            if held is None:
                await dst.aput(
                    _parent_config(key, item),
                    item.checkpoint,
                    item.metadata,
                    dict(item.checkpoint.get("channel_versions") or {}),
                )
                report.checkpoints_copied += 1
            else:
                report.checkpoints_present += 1
    report.threads = len(threads)


def _key(item: CheckpointTuple) -> CheckpointKey:
    c = item.config["configurable"]
    return str(c["thread_id"]), str(c.get("checkpoint_ns", "")), str(c["checkpoint_id"])


def _parent_config(key: CheckpointKey, item: CheckpointTuple) -> Any:
    """The config ``aput`` stores as the checkpoint's parent: LangGraph passes the parent's
    config; a root checkpoint has no ``checkpoint_id`` in it."""
    configurable: dict[str, Any] = {"thread_id": key[0], "checkpoint_ns": key[1]}
    parent = (item.parent_config or {}).get("configurable", {}).get("checkpoint_id")
    if parent:
        configurable["checkpoint_id"] = parent
    return {"configurable": configurable}


async def _put_writes(
    dst: HermesPostgresSaver,
    key: CheckpointKey,
    writes: Iterable[tuple[str, str, Any]],
    paths: dict[tuple[str, str, str, str], str],
) -> int:
    """The checkpoint's pending writes, task by task (regular ones in one call, special ones
    in another: their ``idx`` as LangGraph gave them). Returns the number of rows now stored
    that were not before."""
    config: RunnableConfig = {"configurable": {"thread_id": key[0], "checkpoint_ns": key[1], "checkpoint_id": key[2]}}
    before = await _count_writes(dst, key)
    tasks: dict[str, list[tuple[str, Any]]] = {}
    for task_id, channel, value in writes:
        tasks.setdefault(task_id, []).append((channel, value))
    for task_id, task_writes in tasks.items():
        path = paths.get((*key, task_id), "")
        regular = [w for w in task_writes if w[0] not in WRITES_IDX_MAP]
        special = [w for w in task_writes if w[0] in WRITES_IDX_MAP]
        for group in (regular, special):
            if group:
                await dst.aput_writes(config, group, task_id, path)
    return await _count_writes(dst, key) - before


async def _task_paths(source: Path) -> dict[tuple[str, str, str, str], str]:
    """``(thread, ns, checkpoint, task) → task_path`` of the SQLite ``writes`` table (empty for
    a file written before LangGraph stored task paths)."""

    def read() -> dict[tuple[str, str, str, str], str]:
        con = open_sqlite(source)
        try:
            rows = con.execute(
                "SELECT DISTINCT thread_id, checkpoint_ns, checkpoint_id, task_id, task_path FROM writes"
            ).fetchall()
        except sqlite3.OperationalError:  # no writes table, or no task_path column
            return {}
        finally:
            con.close()
        return {(str(t), str(ns), str(c), str(task)): str(path or "") for t, ns, c, task, path in rows}

    return await asyncio.to_thread(read)


def _pool(dst: HermesPostgresSaver) -> AsyncConnectionPool[Any]:
    """The saver's connection pool (``open_postgres_checkpointer`` always gives one)."""
    assert isinstance(dst.conn, AsyncConnectionPool)
    return dst.conn


async def _present(dst: HermesPostgresSaver) -> dict[CheckpointKey, int]:
    """Checkpoints PostgreSQL holds, with the number of their writes."""
    async with _pool(dst).connection() as conn:
        cur = await conn.execute(
            "SELECT c.thread_id, c.checkpoint_ns, c.checkpoint_id, "
            "(SELECT count(*) FROM checkpoint_writes w WHERE w.thread_id = c.thread_id "
            "AND w.checkpoint_ns = c.checkpoint_ns AND w.checkpoint_id = c.checkpoint_id) AS n "
            "FROM checkpoints c"
        )
        rows = await cur.fetchall()
    return {(r["thread_id"], r["checkpoint_ns"], r["checkpoint_id"]): int(r["n"]) for r in rows}


async def _count_writes(dst: HermesPostgresSaver, key: CheckpointKey) -> int:
    async with _pool(dst).connection() as conn:
        cur = await conn.execute(
            "SELECT count(*) AS n FROM checkpoint_writes WHERE thread_id = %s AND checkpoint_ns = %s "
            "AND checkpoint_id = %s",
            key,
        )
        row = await cur.fetchone()
    return int(row["n"]) if row else 0


# --- episodic memory ----------------------------------------------------------------------


async def copy_episodic(context: Context, url: str, report: MigrationReport) -> None:
    """Every live episodic event of the data directory's LanceDB store into the PostgreSQL
    store (module docstring)."""
    if context.episodic == "weaviate":
        report.episodic_note = "HERMES_EPISODIC=weaviate: episodic memory is on the Weaviate server, left there"
        return
    from graph.resources import get_memory  # the stores as every command builds them

    if not (Path(context.data_dir) / "episodic.lance").exists():
        return
    service = get_memory(context.model_copy(update={"postgres_url": ""}))
    await service.ready()  # an earlier release's memory.db events are carried into it first
    src = service.episodic
    dst = get_memory(context.model_copy(update={"postgres_url": url})).episodic
    live = await src.count()
    report.episodic_expired_left = await src.count(include_expired=True) - live
    before = await dst.count()
    async for batch in _batches(await src.recent(datetime(1970, 1, 1, tzinfo=UTC), limit=max(live, 1))):
        await dst.add_many(batch)
    report.episodic_copied = await dst.count() - before
    report.episodic_present = live - report.episodic_copied


async def _batches(events: list[Any]) -> AsyncIterator[list[Any]]:
    for start in range(0, len(events), EPISODIC_BATCH):
        yield events[start : start + EPISODIC_BATCH]


# --- idempotency ledger -------------------------------------------------------------------


async def copy_ledger(data_dir: Path, url: str, report: MigrationReport) -> None:
    """Every row of ``<data_dir>/idempotency.db`` into the PostgreSQL ledger's table."""
    import psycopg

    from tools.idempotency import LEDGER_FILE
    from tools.ledger_postgres import TABLE, PostgresLedger

    source = data_dir / LEDGER_FILE
    if not source.exists():
        return

    def read() -> list[tuple[Any, ...]]:
        con = open_sqlite(source)
        try:
            rows = con.execute(
                "SELECT tool, request_id, state, owner, fingerprint, record, created, finished FROM tool_requests"
            ).fetchall()
        finally:
            con.close()
        # times as floats (SQLite may hand back an int): one type per array
        return [(*r[:6], float(r[6]), None if r[7] is None else float(r[7])) for r in rows]

    rows = await asyncio.to_thread(read)
    ledger = PostgresLedger(url)  # creates its table (under its own lock) on first use
    try:
        await ledger.count()
    finally:
        await ledger.aclose()
    if not rows:
        return
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as con:
        cur = await con.execute(
            f"INSERT INTO {TABLE} (tool, request_id, state, owner, fingerprint, record, created, finished) "
            "SELECT * FROM unnest(%s::text[], %s::text[], %s::text[], %s::text[], %s::text[], %s::text[], "
            "%s::float8[], %s::float8[]) ON CONFLICT DO NOTHING",
            [list(column) for column in zip(*rows)],
        )
        report.ledger_copied = max(cur.rowcount, 0)
    report.ledger_present = len(rows) - report.ledger_copied


# --- reminders ----------------------------------------------------------------------------

_REMINDER_COLUMNS = (
    "id, text, day_of_month, time, recurrence, created_at, next_run, action, last_fired_period, last_fired_at"
)
_FIRING_COLUMNS = "reminder_id, period, state, owner, request_id, attempts, claimed_at, finished_at, detail, skipped"
_DELIVERY_COLUMNS = "reminder_id, period, delivered_at, message, action, outcome, detail"


def copy_reminders(data_dir: Path, url: str, report: MigrationReport) -> None:
    """Every reminder of ``<data_dir>/reminders.db`` with its firings (the per-period claims) and
    delivered notices into the schedule's PostgreSQL tables, **under its own id** where it can:
    a firing's request id is ``reminder:<id>:<period>`` (``tools.reminder_claims.request_id_for``),
    so a period in flight (``claimed``, ``retry``) when the directory moved keeps the ledger
    record that stops its action running twice. A reminder PostgreSQL holds with the same text,
    day, time, recurrence and creation time is a previous run's copy (left as it is; its firings
    and notices completed). A reminder whose id holds another reminder there (another data
    directory's) gets a new id when none of its periods is in flight (its fired periods stay
    fired under the new id); else it is not copied and its id is reported
    (``reminders_conflicting``). One write transaction under the schedule's write lock; the id
    sequence is moved past the largest id, never back."""
    from tools.builtin.reminder_store import DB_FILE, PG_SCHEMA, open_schedule

    if not (data_dir / DB_FILE).exists():
        return
    src = open_schedule(data_dir, "")
    try:
        reminders = src.execute(f"SELECT {_REMINDER_COLUMNS} FROM reminders ORDER BY id").fetchall()
        firings = src.execute(f"SELECT {_FIRING_COLUMNS} FROM firings").fetchall()
        deliveries = src.execute(f"SELECT {_DELIVERY_COLUMNS} FROM deliveries").fetchall()
    finally:
        src.close()
    dst = open_schedule(data_dir, url)
    try:
        dst.begin()
        try:
            ids: dict[int, int] = {}  # id in the file -> id in PostgreSQL
            moved = []
            in_flight = {int(f[0]) for f in firings if f[2] in ("claimed", "retry")}
            for row in reminders:
                same = dst.execute(
                    "SELECT id FROM reminders WHERE text = ? AND day_of_month = ? AND time = ? AND recurrence = ? "
                    "AND created_at = ? ORDER BY id = ? DESC LIMIT 1",
                    (*row[1:6], row[0]),
                ).fetchone()
                if same is not None:  # a previous run's copy
                    ids[int(row[0])] = int(same[0])
                    report.reminders_present += 1
                elif dst.execute("SELECT 1 FROM reminders WHERE id = ?", (row[0],)).fetchone() is None:
                    dst.execute(f"INSERT INTO reminders ({_REMINDER_COLUMNS}) VALUES ({', '.join('?' * 10)})", row)
                    ids[int(row[0])] = int(row[0])
                    report.reminders_copied += 1
                elif int(row[0]) in in_flight:  # its request ids must stay: not under another id
                    report.reminders_conflicting.append(int(row[0]))
                else:
                    moved.append(row)
            # past every id now held, never back (a deleted reminder's id is not given again:
            # its request ids may be in the ledger)
            [seq] = dst.execute("SELECT pg_get_serial_sequence(?, 'id')", (f"{PG_SCHEMA}.reminders",)).fetchone()
            dst.execute(
                f"SELECT setval('{seq}', m) FROM (SELECT max(id) AS m FROM reminders) AS r "
                f"WHERE m >= (SELECT last_value FROM {seq})"
            )
            for row in moved:  # its id holds another reminder there; nothing of it is in flight
                [new_id] = dst.execute(
                    f"INSERT INTO reminders ({_REMINDER_COLUMNS.removeprefix('id, ')}) VALUES ({', '.join('?' * 9)}) "
                    "RETURNING id",
                    row[1:],
                ).fetchone()
                ids[int(row[0])] = int(new_id)
                report.reminders_copied += 1
            for table, columns, rows, counter in (
                ("firings", _FIRING_COLUMNS, firings, "firings_copied"),
                ("deliveries", _DELIVERY_COLUMNS, deliveries, "deliveries_copied"),
            ):
                marks = ", ".join("?" * len(columns.split(", ")))
                for row in rows:
                    if int(row[0]) in ids:
                        cur = dst.execute(
                            f"INSERT INTO {table} ({columns}) VALUES ({marks}) ON CONFLICT DO NOTHING",
                            (ids[int(row[0])], *row[1:]),
                        )
                        setattr(report, counter, getattr(report, counter) + max(cur.rowcount, 0))
            dst.commit()
        except BaseException:
            dst.rollback()
            raise
    finally:
        dst.close()


# --- semantic memory ----------------------------------------------------------------------

#: The knowledge graph's tables (the same columns in ``memory.db`` and in PostgreSQL).
SEMANTIC_TABLES = ("semantic_entities", "semantic_facts", "semantic_forgotten")
#: The branch origins' tables (``memory.branch_origins.SCHEMA``), in the same schema.
ORIGIN_TABLES = ("memory_origins", "memory_restated")


def copy_semantic(data_dir: Path, url: str, report: MigrationReport) -> None:
    """The knowledge graph of ``<data_dir>/memory.db`` (entities, facts with their status,
    conflicts, supersession and origins, the tombstones of what the user asked to forget) into
    ``memory.semantic_postgres``'s tables, row for row (``ON CONFLICT DO NOTHING`` on their
    keys: an entity or tombstone PostgreSQL holds is kept), and the branch origins into
    ``memory.branch_origins``'s the same way. ``report.semantic_copied`` /
    ``report.origins_copied``: rows added per table. Facts of the same user from two directories
    are not reconciled with each other (both stay as they were stated)."""
    import psycopg

    from memory.branch_origins import SCHEMA as ORIGINS_DDL
    from memory.semantic_postgres import SCHEMA_LOCK_KEY, SCHEMA_NAME, TABLES

    source = data_dir / "memory.db"
    if not source.exists():
        return
    con = open_sqlite(source)
    try:
        present = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        rows: dict[str, tuple[list[str], list[Any]]] = {}
        for table in (*SEMANTIC_TABLES, *ORIGIN_TABLES):
            if table in present:
                cur = con.execute(f"SELECT * FROM {table}")
                rows[table] = ([d[0] for d in cur.description], cur.fetchall())
    finally:
        con.close()
    with psycopg.connect(url, autocommit=True) as pg:
        with pg.transaction():  # the tables, as the store creates them
            pg.execute("SELECT pg_advisory_xact_lock(%s)", (SCHEMA_LOCK_KEY,))
            pg.execute(TABLES)
            pg.execute(f"SET LOCAL search_path TO {SCHEMA_NAME}")  # the origins' DDL is unqualified
            pg.execute(ORIGINS_DDL)
        with pg.transaction():
            for table, (columns, values) in rows.items():
                target = f"{SCHEMA_NAME}.{table}"
                before = _count(pg, target)
                if values:
                    with pg.cursor() as pg_cur:
                        pg_cur.executemany(
                            f"INSERT INTO {target} ({', '.join(columns)}) VALUES ({', '.join(['%s'] * len(columns))}) "
                            "ON CONFLICT DO NOTHING",
                            values,
                        )
                copied = report.origins_copied if table in ORIGIN_TABLES else report.semantic_copied
                copied[table] = _count(pg, target) - before


def _count(pg: Any, table: str) -> int:
    row = pg.execute(f"SELECT count(*) FROM {table}").fetchone()
    return int(row[0]) if row else 0


__all__ = [
    "EPISODIC_BATCH",
    "NOT_COPIED",
    "MigrationReport",
    "copy_checkpoints",
    "copy_reminders",
    "copy_semantic",
    "migrate_to_postgres",
]
