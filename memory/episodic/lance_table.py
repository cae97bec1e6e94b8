"""The episodic LanceDB table: its Arrow schema and format version (:data:`EPISODIC_FORMAT`,
kept in the schema metadata under :data:`FORMAT_KEY`), the columns read back into an
:class:`~memory.episodic.base.EpisodicEvent`, timestamps as microseconds since the epoch, the
de-duplication key, SQL string literals of filters, and opening the table
(:func:`open_table`: created on first use, its format and vector size checked, its keyword and
scalar indexes made).
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memory.embeddings import Embedder
from memory.episodic.base import EpisodicEvent
from memory.episodic.lance_errors import EmbedderMismatch, EpisodicStoreDamaged
from memory.migrations import MemoryStoreError
from memory.text import content_hash

if TYPE_CHECKING:  # heavy imports, done where memory is used
    import pyarrow as pa
    from lancedb import AsyncTable
    from lancedb.index import BTree

log = logging.getLogger(__name__)

#: The table inside the LanceDB database.
TABLE = "episodic"

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def to_us(dt: datetime) -> int:
    """Aware datetime → microseconds since the epoch."""
    return (dt - _EPOCH) // timedelta(microseconds=1)


def from_us(us: int) -> datetime:
    return _EPOCH + timedelta(microseconds=int(us))


def sql_str(value: str) -> str:
    """A SQL string literal (single quotes doubled): user ids and kinds never break a filter."""
    return "'" + str(value).replace("'", "''") + "'"


def dedupe_key(user_id: str, text: str) -> str:
    return f"{user_id}\x00{content_hash(text)}"


#: The table's layout version, kept in its schema metadata (``FORMAT_KEY``). A table written
#: before the key existed has the same layout: format 1. A newer format is refused with one line
#: (``memory.migrations.MemoryStoreError``), never read as if it were this one.
EPISODIC_FORMAT = 1
FORMAT_KEY = b"hermes.episodic_format"


def table_schema(dim: int) -> pa.Schema:
    import pyarrow as pa

    return pa.schema(
        [
            ("id", pa.string()),
            ("user_id", pa.string()),
            ("kind", pa.string()),
            ("text", pa.string()),
            ("kw", pa.string()),
            ("dedupe", pa.string()),
            ("created_us", pa.int64()),
            ("expired_us", pa.int64()),
            ("confidence", pa.float64()),
            ("evidence", pa.string()),
            ("metadata", pa.string()),
            ("vector", pa.list_(pa.float32(), dim)),
        ],
        metadata={FORMAT_KEY: str(EPISODIC_FORMAT).encode()},
    )


COLUMNS = ["id", "user_id", "kind", "text", "created_us", "expired_us", "confidence", "evidence", "metadata"]


def row_to_event(row: Mapping[str, Any]) -> EpisodicEvent:
    return EpisodicEvent(
        id=row["id"],
        user_id=row["user_id"],
        kind=row["kind"],
        text=row["text"],
        created_at=from_us(row["created_us"]),
        confidence=row["confidence"],
        evidence=row["evidence"],
        metadata=json.loads(row["metadata"] or "{}"),
    )


async def open_table(path: Path, embedder: Embedder) -> AsyncTable:
    """The ``episodic`` table of the LanceDB database in ``path`` (directory created, table
    created on first use; every query sees other processes' commits). Raises
    ``MemoryStoreError`` for a newer format, :class:`EpisodicStoreDamaged` for a table without
    vectors, :class:`EmbedderMismatch` for vectors of another size than ``embedder``'s."""
    import lancedb  # heavy import, only when memory is used
    from lancedb.index import FTS

    def prepare() -> str:
        os.makedirs(path, exist_ok=True)
        return os.path.abspath(path)  # relative paths would be taken as cloud URIs

    uri = await asyncio.to_thread(prepare)
    db = await lancedb.connect_async(uri, read_consistency_interval=timedelta(0))
    try:
        table = await db.open_table(TABLE)
    except ValueError:  # not there yet (exist_ok: another process may create it meanwhile)
        table = await db.create_table(TABLE, schema=table_schema(embedder.dim), exist_ok=True)
    schema = await table.schema()
    raw = (schema.metadata or {}).get(FORMAT_KEY, b"1")
    version = int(raw) if raw.isdigit() else EPISODIC_FORMAT + 1  # unreadable: not ours to guess
    if version > EPISODIC_FORMAT:
        raise MemoryStoreError(
            path,
            f"the episodic memory folder {path} is in format {raw.decode(errors='replace')}, written by a "
            f"newer Hermes (this one reads format {EPISODIC_FORMAT}): upgrade Hermes, or move the folder "
            f"aside (mv {path} {path}.format{version}) to start an empty episodic memory",
        )
    if "vector" not in schema.names:  # a folder of another program, or a damaged schema
        raise EpisodicStoreDamaged(path, ValueError(f"table {TABLE!r} has no vector column"))
    dim = schema.field("vector").type.list_size
    if dim != embedder.dim:
        raise EmbedderMismatch(
            f"episodic memory in {path} holds {dim}-dimensional vectors; the embedder "
            f"{embedder.name!r} makes {embedder.dim}. Use the embedder it was written "
            "with, or move that directory aside to start a new memory."
        )
    indices = {i.name for i in await table.list_indices()}
    if "kw_idx" not in indices:
        try:
            await table.create_index(
                "kw",
                config=FTS(
                    base_tokenizer="whitespace",
                    lower_case=True,
                    stem=True,
                    remove_stop_words=False,
                    ascii_folding=True,
                    max_token_length=None,
                ),
            )
        except Exception as exc:  # another process created it first
            if "kw_idx" not in {i.name for i in await table.list_indices()}:
                raise
            log.debug("FTS index created concurrently: %s", exc)
    for column in ("user_id", "dedupe"):
        if f"{column}_idx" not in indices:
            try:
                await table.create_index(column, config=_btree())
            except Exception:  # concurrent creation; a scalar index is an optimisation
                log.debug("scalar index on %s not created", column, exc_info=True)
    return table


def _btree() -> BTree:
    from lancedb.index import BTree

    return BTree()
