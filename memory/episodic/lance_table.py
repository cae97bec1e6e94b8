"""The layout of the episodic LanceDB table: its Arrow schema and format version
(:data:`EPISODIC_FORMAT`, kept in the schema metadata under :data:`FORMAT_KEY`), the columns
read back into an :class:`~memory.episodic.base.EpisodicEvent`, timestamps as microseconds since
the epoch, the de-duplication key and SQL string literals of filters.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

from memory.episodic.base import EpisodicEvent
from memory.text import content_hash

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


def table_schema(dim: int):
    import pyarrow as pa  # noqa: PLC0415

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


def row_to_event(row: dict[str, Any]) -> EpisodicEvent:
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
