"""Memories written by an earlier release are carried over on upgrade (issue 26, "memories lost
on upgrade"; ``memory.migrations``).

The old stores are written by the tests in the earlier formats, as those releases wrote them
(schemas copied from ``git show 47bd00d:memory/episodic/sqlite.py`` — episodic events in
``memory.db`` — and ``git show bd2e44d:memory/semantic.py`` — facts without ``origin``), then
opened by this release: every live memory is listed, recalled and kept once; what is not
carried over is said; a damaged file or a newer format is one error line naming the file and
what to do.
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from typer.testing import CliRunner

from memory import migrations
from memory.embeddings import HashEmbedder
from memory.episodic.lance import LanceEpisodicStore
from memory.service import MemoryService

#: ``memory/episodic/sqlite.py`` SCHEMA of the 2026-11-29 release (47bd00d), verbatim
FORMAT1_SCHEMA = """
CREATE TABLE IF NOT EXISTS episodic_events (
    rowid        INTEGER PRIMARY KEY,
    id           TEXT NOT NULL UNIQUE,
    user_id      TEXT NOT NULL,
    kind         TEXT NOT NULL,
    text         TEXT NOT NULL,
    content_hash TEXT NOT NULL,
    created_at   TEXT NOT NULL,          -- ISO 8601, UTC, microseconds
    confidence   REAL NOT NULL,
    evidence     TEXT NOT NULL DEFAULT 'direct',
    metadata     TEXT NOT NULL DEFAULT '{}',
    expired_at   TEXT                    -- NULL while live
);
CREATE UNIQUE INDEX IF NOT EXISTS episodic_live_hash
    ON episodic_events (user_id, content_hash) WHERE expired_at IS NULL;
CREATE INDEX IF NOT EXISTS episodic_user_time ON episodic_events (user_id, created_at);
CREATE VIRTUAL TABLE IF NOT EXISTS episodic_fts
    USING fts5 (body, tokenize = 'porter unicode61 remove_diacritics 2');
CREATE TABLE IF NOT EXISTS memory_retry_queue (
    id         INTEGER PRIMARY KEY AUTOINCREMENT,
    op         TEXT NOT NULL,
    payload    TEXT NOT NULL,
    error      TEXT NOT NULL,
    attempts   INTEGER NOT NULL DEFAULT 1,
    status     TEXT NOT NULL DEFAULT 'pending',
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL
);
"""

#: ``memory/semantic.py`` SCHEMA of the 2026-12-01 release (bd2e44d): no ``origin``, no tombstones
FORMAT2_SCHEMA = """
CREATE TABLE IF NOT EXISTS semantic_entities (
    user_id TEXT NOT NULL, key TEXT NOT NULL, name TEXT NOT NULL, type TEXT NOT NULL DEFAULT 'thing',
    created_at TEXT NOT NULL, PRIMARY KEY (user_id, key)
);
CREATE TABLE IF NOT EXISTS semantic_facts (
    id TEXT PRIMARY KEY, user_id TEXT NOT NULL, subject TEXT NOT NULL, predicate TEXT NOT NULL,
    object TEXT NOT NULL, object_name TEXT NOT NULL, object_is_entity INTEGER NOT NULL,
    confidence REAL NOT NULL, evidence TEXT NOT NULL, sources TEXT NOT NULL DEFAULT '[]',
    status TEXT NOT NULL, valid_from TEXT NOT NULL, valid_to TEXT, created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL, last_used_at TEXT, use_count INTEGER NOT NULL DEFAULT 0,
    conflict_with TEXT, superseded_by TEXT
);
"""

NOW = datetime.now(UTC)

#: (id, user, kind, text, days ago, confidence, metadata, expired)
FORMAT1_EVENTS = [
    (
        "e-task",
        "ana",
        "task",
        "completed task: monthly sales report; tools: sales_query",
        3,
        0.9,
        {"thread_id": "t1"},
        False,
    ),
    ("e-pref", "ana", "preference", "user preference: I prefer reports in PDF format.", 2, 0.9, {}, False),
    ("e-zh", "ana", "preference", "user preference: 我喜欢简短的回答", 1, 0.9, {"thread_id": "t2"}, False),
    ("e-rec", "ana", "tool_recovery", "tool sales_query failed, then succeeded on retry", 1, 0.9, {}, False),
    ("e-ref", "ana", "cross_session", "user referred to earlier work (like last time): redo it", 1, 0.8, {}, False),
    ("e-bob", "bob", "task", "completed task: inventory count for the warehouse", 2, 0.8, {}, False),
    ("e-old", "ana", "task", "completed task: an expired one", 40, 0.9, {}, True),
]


def write_format1(data: Path) -> Path:
    """A ``memory.db`` as the 2026-11-29 release left it (its episodic store in this file)."""
    data.mkdir(parents=True, exist_ok=True)
    path = data / "memory.db"
    con = sqlite3.connect(path)
    con.executescript(FORMAT1_SCHEMA)
    for rowid, (ident, user, kind, text, days, conf, meta, expired) in enumerate(FORMAT1_EVENTS, start=1):
        created = NOW - timedelta(days=days)
        con.execute(
            "INSERT INTO episodic_events (rowid, id, user_id, kind, text, content_hash, created_at, confidence,"
            " evidence, metadata, expired_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, 'direct', ?, ?)",
            (
                rowid,
                ident,
                user,
                kind,
                text,
                f"hash-{ident}",
                created.isoformat(timespec="microseconds"),
                conf,
                json.dumps(meta),
                NOW.isoformat() if expired else None,
            ),
        )
        con.execute("INSERT INTO episodic_fts (rowid, body) VALUES (?, ?)", (rowid, text))
    con.commit()
    con.close()
    return path


def write_format2(data: Path) -> Path:
    """A ``memory.db`` of the 2026-12-01 release: a knowledge graph without ``origin``."""
    data.mkdir(parents=True, exist_ok=True)
    path = data / "memory.db"
    con = sqlite3.connect(path)
    con.executescript(FORMAT2_SCHEMA)
    at = (NOW - timedelta(days=5)).isoformat(timespec="microseconds")
    con.execute("INSERT INTO semantic_entities VALUES ('ana', 'user', 'user', 'person', ?)", (at,))
    con.execute(
        "INSERT INTO semantic_facts (id, user_id, subject, predicate, object, object_name, object_is_entity,"
        " confidence, evidence, sources, status, valid_from, created_at, updated_at)"
        " VALUES ('f1', 'ana', 'user', 'prefers_format', 'pdf', 'pdf', 0, 0.85, 'direct', '[\"e-pref\"]',"
        " 'confirmed', ?, ?, ?)",
        (at, at, at),
    )
    con.commit()
    con.close()
    return path


def service(data: Path) -> MemoryService:
    return MemoryService(data, episodic=LanceEpisodicStore.in_dir(data, HashEmbedder()))


def user_version(path: Path) -> int:
    con = sqlite3.connect(path)
    try:
        return con.execute("PRAGMA user_version").fetchone()[0]
    finally:
        con.close()


LIVE = {e[0] for e in FORMAT1_EVENTS if not e[7]}


@pytest.mark.slow  # a real LanceDB folder is written and read
async def test_a_format1_store_is_listed_and_recalled_after_the_upgrade(tmp_path):
    data = tmp_path / "data"
    path = write_format1(data)
    mem = service(data)
    report = await mem.ready()
    assert report is not None and (report.from_format, report.to_format) == (1, migrations.MEMORY_FORMAT)
    assert report.carried == len(LIVE)
    assert report.not_carried == [f"1 expired event(s) (no longer recalled; kept in table {migrations.FORMAT1_BACKUP})"]

    ana = {e.id: e for e in await mem.episodic.list("ana", limit=100)}
    bob = {e.id: e for e in await mem.episodic.list("bob", limit=100)}
    assert set(ana) | set(bob) == LIVE  # ids kept, each user's own, the expired one not revived
    by_id = {e[0]: e for e in FORMAT1_EVENTS}
    for ident, event in {**ana, **bob}.items():
        _, user, kind, text, days, conf, meta, _ = by_id[ident]
        assert (event.user_id, event.kind, event.text, event.confidence) == (user, kind, text, conf)
        assert abs(event.created_at - (NOW - timedelta(days=days))) < timedelta(seconds=1)  # its own date
        assert event.metadata["migrated_from"] == "memory.db episodic_events (format 1)"
        assert all(event.metadata[k] == v for k, v in meta.items())

    # recalled by a new request, like any memory of this release
    block = await mem.recall_for_turn("ana", "t9", "write the monthly sales report")
    assert any("monthly sales report" in line for line in block.lines), block.lines
    assert user_version(path) == migrations.MEMORY_FORMAT
    con = sqlite3.connect(path)
    tables = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    recorded = con.execute("SELECT from_format, to_format, summary FROM memory_migrations").fetchall()
    con.close()
    assert migrations.FORMAT1_BACKUP in tables and "episodic_events" not in tables  # kept aside, not deleted
    assert [(f, t) for f, t, _ in recorded] == [(1, migrations.MEMORY_FORMAT)]
    assert "6 episodic event(s) carried over" in recorded[0][2] and "1 expired" in recorded[0][2]

    # opened again (a new process): nothing migrated twice, nothing doubled
    again = service(data)
    report = await again.ready()
    assert report is not None and not report.migrated
    assert len(await again.episodic.list("ana", limit=100)) == len(ana)


@pytest.mark.slow
async def test_a_migration_cut_short_before_its_stamp_stores_each_event_once(tmp_path):
    data = tmp_path / "data"
    path = write_format1(data)
    first = service(data)
    events, _ = migrations._format1_events(path)
    await first.episodic.add_many(events[:3])  # a run killed after copying half, before the stamp
    assert user_version(path) == 0
    mem = service(data)
    await mem.ready()
    listed = await mem.episodic.list("ana", limit=100) + await mem.episodic.list("bob", limit=100)
    assert sorted(e.id for e in listed) == sorted(LIVE)


@pytest.mark.slow
async def test_a_format2_knowledge_graph_reads_after_the_upgrade(tmp_path):
    data = tmp_path / "data"
    path = write_format2(data)
    mem = service(data)
    report = await mem.ready()
    assert report is not None and report.from_format == 2 and report.carried == 0
    facts = await mem.semantic.facts("ana")
    assert [(f.predicate, f.object, f.origin) for f in facts] == [("prefers_format", "pdf", None)]
    block = await mem.recall_for_turn("ana", "t", "write the sales report")
    assert any("prefers format: pdf" in line for line in block.lines), block.lines
    assert user_version(path) == migrations.MEMORY_FORMAT


async def test_a_new_store_is_written_in_the_current_format(tmp_path):
    data = tmp_path / "data"

    class NoEpisodes:
        async def add_many(self, events):  # a new store copies nothing
            raise AssertionError("nothing to copy")

    report = await migrations.migrate(data / "memory.db", NoEpisodes())
    assert report.from_format == 0 and user_version(data / "memory.db") == migrations.MEMORY_FORMAT
    assert migrations.migrations(data / "memory.db") == []  # a new file has no history


def _newer(data: Path) -> Path:
    data.mkdir(parents=True, exist_ok=True)
    path = data / "memory.db"
    con = sqlite3.connect(path)
    con.execute("PRAGMA user_version = 99")
    con.execute("CREATE TABLE future (x)")
    con.commit()
    con.close()
    return path


def _garbage(data: Path) -> Path:
    data.mkdir(parents=True, exist_ok=True)
    (data / "memory.db").write_bytes(b"\x13\x37not sqlite" * 100)
    return data / "memory.db"


def _zeroed(data: Path) -> Path:
    data.mkdir(parents=True, exist_ok=True)
    (data / "memory.db").write_bytes(b"\0" * 4096)
    return data / "memory.db"


def _truncated(data: Path) -> Path:
    path = write_format1(data)
    path.write_bytes(path.read_bytes()[:1500])  # the header kept, the pages cut
    return path


#: how the store is unusable → what the line must say besides the file
UNUSABLE = {
    "a newer format": (_newer, ("format 99", "upgrade Hermes", "mv ")),
    "not a database": (_garbage, ("cannot be read", "mv ")),
    "zeroed": (_zeroed, ("cannot be read", "mv ")),
    "truncated": (_truncated, ("cannot be read", "mv ")),
}


@pytest.mark.parametrize("case", sorted(UNUSABLE))
async def test_an_unusable_store_is_one_line_naming_the_file_and_what_to_do(tmp_path, case):
    make, says = UNUSABLE[case]
    path = make(tmp_path / "data")
    before = path.read_bytes()

    class NoEpisodes:
        async def add_many(self, events):
            raise AssertionError("an unusable store is not migrated")

    with pytest.raises(migrations.MemoryStoreError) as info:
        await migrations.migrate(path, NoEpisodes())
    line = str(info.value)
    assert "\n" not in line and str(path) in line and all(s in line for s in says), line
    assert path.read_bytes() == before  # left as it was: nothing written to it


@pytest.mark.slow  # the CLI and a LanceDB folder
@pytest.mark.parametrize("case", ["a newer format", "not a database"])
def test_memory_commands_end_with_that_line_and_the_answer_path_goes_on_without_memory(tmp_path, monkeypatch, case):
    from graph.cli import app

    make, says = UNUSABLE[case]
    data = tmp_path / "data"
    path = make(data)
    monkeypatch.setenv("HERMES_EMBEDDINGS", "hash")
    monkeypatch.delenv("HERMES_DEBUG", raising=False)
    for command in (["memory", "list"], ["memory", "search", "sales"]):
        result = CliRunner().invoke(app, [*command, "--data-dir", str(data)])
        assert result.exit_code == 1, result.output
        errors = [line for line in result.output.splitlines() if line.startswith("error:")]
        assert len(errors) == 1 and str(path) in errors[0] and all(s in errors[0] for s in says), result.output
        assert "Traceback" not in result.output

    # a turn's recall and write do not fail: memory is left out, the file untouched
    before = path.read_bytes()

    async def turn() -> None:
        mem = MemoryService(data, episodic=LanceEpisodicStore.in_dir(data, HashEmbedder()))
        assert await mem.recall("ana", "sales report") == []
        plan = mem.plan_turn("ana", "t", "I prefer PDF reports.", "Noted.", [], None, [])
        assert (await mem.write_plan(plan))["facts"] == 0

    asyncio.run(turn())
    assert path.read_bytes() == before


@pytest.mark.slow
def test_memory_list_shows_an_earlier_releases_memories(tmp_path, monkeypatch):
    from graph.cli import app

    data = tmp_path / "data"
    write_format1(data)
    monkeypatch.setenv("HERMES_EMBEDDINGS", "hash")
    result = CliRunner().invoke(app, ["memory", "list", "--json", "--user", "ana", "--data-dir", str(data)])
    assert result.exit_code == 0, result.output
    listed = json.loads(result.stdout)["episodic"]
    assert {e["id"] for e in listed} == {e[0] for e in FORMAT1_EVENTS if e[1] == "ana" and not e[7]}
    assert {e["source"] for e in listed if e["kind"] == "preference"} == {"user"}
    # the user is told once what the upgrade did, and what it left behind
    assert "format 1 → 4; 6 episodic event(s) carried over" in result.stderr and "1 expired" in result.stderr


# --- the episodic folder's own format -------------------------------------------------------------


async def _raw_table(data: Path, metadata: dict[bytes, bytes] | None) -> Path:
    """An ``episodic.lance`` table with this release's columns and the given schema metadata
    (None: as written before the format key existed), holding one event of user ana."""
    import lancedb
    import pyarrow as pa

    from memory.episodic.lance import LANCE_DIRNAME, TABLE
    from memory.episodic.lance_table import dedupe_key, table_schema, to_us
    from memory.text import keyword_text

    folder = data / LANCE_DIRNAME
    folder.mkdir(parents=True)
    schema = pa.schema(list(table_schema(HashEmbedder().dim)), metadata=metadata)
    db = await lancedb.connect_async(str(folder))
    table = await db.create_table(TABLE, schema=schema)
    text = "completed task: the quarterly inventory count"
    await table.add(
        [
            {
                "id": "old-1",
                "user_id": "ana",
                "kind": "task",
                "text": text,
                "kw": keyword_text(text),
                "dedupe": dedupe_key("ana", text),
                "created_us": to_us(NOW - timedelta(days=1)),
                "expired_us": 0,
                "confidence": 0.9,
                "evidence": "direct",
                "metadata": "{}",
                "vector": (await HashEmbedder().embed_passages([text]))[0],
            }
        ]
    )
    table.close()
    return folder


@pytest.mark.slow
async def test_an_episodic_folder_written_before_its_format_was_recorded_is_read(tmp_path):
    data = tmp_path / "data"
    await _raw_table(data, None)
    store = LanceEpisodicStore.in_dir(data, HashEmbedder())
    try:
        assert [e.id for e in await store.list("ana")] == ["old-1"]
    finally:
        await store.close()


@pytest.mark.slow
@pytest.mark.parametrize("stamp", [b"2", b"x"], ids=["newer", "unreadable"])
async def test_an_episodic_folder_of_a_newer_format_is_one_line_naming_it(tmp_path, stamp):
    from memory.episodic.lance_table import FORMAT_KEY

    data = tmp_path / "data"
    folder = await _raw_table(data, {FORMAT_KEY: stamp})
    store = LanceEpisodicStore.in_dir(data, HashEmbedder())
    try:
        with pytest.raises(migrations.MemoryStoreError) as info:
            await store.list("ana")
    finally:
        await store.close()
    line = str(info.value)
    assert "\n" not in line and str(folder) in line and "newer Hermes" in line and f"mv {folder} " in line, line


@pytest.mark.slow
async def test_a_new_episodic_folder_records_its_format(tmp_path):
    from memory.episodic.lance_table import EPISODIC_FORMAT, FORMAT_KEY

    store = LanceEpisodicStore.in_dir(tmp_path, HashEmbedder())
    try:
        await store.list("ana")
        table = await store._table()
        assert (await table.schema()).metadata[FORMAT_KEY] == str(EPISODIC_FORMAT).encode()
    finally:
        await store.close()
