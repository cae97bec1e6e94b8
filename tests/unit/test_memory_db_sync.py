"""memory.db's connections run synchronous=NORMAL in WAL, as the checkpoints and the ledger do
(issue 19: SQLite's default FULL synced the WAL on every commit of every turn's memory write)."""

from __future__ import annotations

from pathlib import Path

from memory.db import SqliteDb

NORMAL = 1  # PRAGMA synchronous: 0 OFF, 1 NORMAL, 2 FULL


async def test_every_connection_is_wal_and_synchronous_normal(tmp_path: Path) -> None:
    db = SqliteDb(tmp_path / "memory.db", "CREATE TABLE IF NOT EXISTS t (a TEXT);")
    for _ in range(2):  # the first connection creates the schema; later ones skip it
        async with db.connect() as conn:
            sync = await (await conn.execute("PRAGMA synchronous")).fetchone()
            mode = await (await conn.execute("PRAGMA journal_mode")).fetchone()
            await conn.execute("INSERT INTO t VALUES ('x')")
        assert sync is not None and sync[0] == NORMAL
        assert mode is not None and mode[0] == "wal"
    async with db.connect() as conn:
        count = await (await conn.execute("SELECT count(*) FROM t")).fetchone()
    assert count is not None and count[0] == 2
