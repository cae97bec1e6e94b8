"""Which idempotency ledger a data directory uses (DESIGN §2.4): the SQLite file in the data
directory, or the shared one on PostgreSQL when ``HERMES_POSTGRES_URL`` is set. Its own module so
that neither ledger imports the other."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tools.idempotency import IdempotencyLedger


def open_ledger(data_dir: Path, postgres_url: str = "", **kw: Any) -> IdempotencyLedger:
    """The ledger of a data directory: ``data_dir / LEDGER_FILE``, or, when ``postgres_url`` is
    not empty (``HERMES_POSTGRES_URL``), ``tools.ledger_postgres.PostgresLedger`` on that
    database, shared by every process and machine that names it. ``kw``: ``wait_s``. Connects
    lazily (the first operation); a server that cannot be reached is then
    :class:`tools.idempotency.LedgerUnavailable`."""
    if postgres_url:
        from tools.ledger_postgres import PostgresLedger  # psycopg only when asked for

        return PostgresLedger(postgres_url, **kw)
    return IdempotencyLedger.in_data_dir(data_dir, **kw)


__all__ = ["open_ledger"]
