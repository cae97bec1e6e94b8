"""Ageing of semantic memory (seed §6.4): the use of a recalled fact recorded (:meth:`touch`),
facts neither confirmed again nor used for ``ttl_days`` archived (:meth:`expire`), and facts
idle for 30 days down-weighted, archived under the threshold (:meth:`downweight_unused`)."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime, timedelta

from memory.episodic.base import utcnow
from memory.semantic_sqlite import SqliteFactStore, iso


class FactExpiry(SqliteFactStore):
    """Use counts, expiry and down-weighting of facts (module docstring)."""

    async def touch(self, fact_ids: Iterable[str], now: datetime | None = None) -> None:
        """Record that these facts were recalled (use counts drive down-weighting, seed §6.4)."""
        ids = list(fact_ids)
        if not ids:
            return
        async with self._connect() as db:
            await db.executemany(
                "UPDATE semantic_facts SET use_count = use_count + 1, last_used_at = ? WHERE id = ?",
                [(iso(now or utcnow()), i) for i in ids],
            )

    async def expire(self, now: datetime | None = None, *, ttl_days: int | None = None) -> int:
        """Archive live facts neither confirmed again nor used for ``ttl_days`` (default the
        store's, 180). Returns how many."""
        now = now or utcnow()
        cutoff = iso(now - timedelta(days=self.ttl_days if ttl_days is None else ttl_days))
        async with self._connect() as db:
            cur = await db.execute(
                "UPDATE semantic_facts SET status = 'archived', valid_to = ?, updated_at = ? WHERE status IN"
                " ('confirmed', 'pending') AND updated_at < ? AND COALESCE(last_used_at, '') < ?",
                (iso(now), iso(now), cutoff, cutoff),
            )
            return int(cur.rowcount)

    async def downweight_unused(
        self, now: datetime | None = None, *, idle_days: int = 30, factor: float = 0.9
    ) -> tuple[int, int]:
        """Seed §6.4: facts not used nor confirmed for ``idle_days`` lose confidence
        (× ``factor``); those falling under ``min_confidence`` are archived. Returns
        (down-weighted, archived)."""
        now = now or utcnow()
        cutoff = iso(now - timedelta(days=idle_days))
        stamp = iso(now)
        async with self._connect() as db:
            await self._begin(db)
            try:
                cur = await db.execute(
                    "UPDATE semantic_facts SET confidence = confidence * ?, updated_at = updated_at WHERE status ="
                    " 'confirmed' AND updated_at < ? AND COALESCE(last_used_at, '') < ?",
                    (factor, cutoff, cutoff),
                )
                weighted = cur.rowcount
                cur = await db.execute(
                    "UPDATE semantic_facts SET status = 'archived', valid_to = ? WHERE status = 'confirmed'"
                    " AND confidence < ?",
                    (stamp, self.min_confidence),
                )
                archived = cur.rowcount
                await db.execute("COMMIT")
            except BaseException:
                await db.execute("ROLLBACK")
                raise
        return weighted, archived
