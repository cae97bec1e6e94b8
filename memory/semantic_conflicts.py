"""Semantic memory's write path: a fact added or reinforced, and the conflicts it settles.

The same fact again is a duplicate (its sources merged, nothing else); a different value for a
single-valued predicate (``fact_extraction.FUNCTIONAL_PREDICATES``) whose confirmed value exists
is stored *pending* beside it — never overwriting it. When the user then states or uses one of
the two values again, that value is confirmed and the other superseded with a timestamp
(``resolved``). Opposite predicates (``fact_extraction.OPPOSITE_PREDICATES``: ``likes`` /
``dislikes``) about the same object: the later statement supersedes the earlier at once.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Sequence
from datetime import datetime
from uuid import uuid4

from memory.episodic.base import utcnow
from memory.fact_extraction import FUNCTIONAL_PREDICATES, OPPOSITE_PREDICATES
from memory.semantic_forgetting import is_forgotten
from memory.semantic_model import Fact, FactStatus, UpsertResult, entity_key, object_key
from memory.semantic_ranking import visible
from memory.semantic_sqlite import SELECT, SqliteFactStore, iso, row_to_fact
from memory.sql import SqlConnection


class ConflictWrites(SqliteFactStore):
    """:meth:`upsert`: add or reinforce a fact (module docstring)."""

    async def upsert(
        self,
        user_id: str,
        subject: str,
        predicate: str,
        obj: str,
        *,
        object_is_entity: bool,
        confidence: float,
        evidence: str = "direct",
        sources: Sequence[str] = (),
        subject_type: str = "thing",
        object_type: str = "thing",
        origin: str | None = None,
        now: datetime | None = None,
        restated: bool = False,
        inactive: Collection[tuple[str, str]] = (),
    ) -> UpsertResult:
        """Add or reinforce ``subject —predicate→ obj`` (module docstring: duplicates,
        conflicts, resolution). Atomic (one ``BEGIN IMMEDIATE`` transaction). A fact the user
        forgot is refused (``forgotten``) when read again from the episodes it was forgotten
        with; ``restated``: the user states it anew in this turn — the tombstone is lifted.
        ``inactive``: (thread id, message id) origins off their session's active branch — a
        fact stated there neither conflicts with nor is contradicted by this one (the same
        fact stated again is still a duplicate: it becomes unbound, as on any other branch)."""
        if confidence < self.min_confidence:
            return UpsertResult("rejected", None)
        now = now or utcnow()
        s_key = entity_key(subject)
        o_key = object_key(obj, object_is_entity)
        async with self._connect() as db:
            await self._begin(db)
            try:
                if restated:
                    await db.execute(
                        "DELETE FROM semantic_forgotten WHERE user_id = ? AND subject = ? AND predicate = ?"
                        " AND object = ?",
                        (user_id, s_key, predicate, o_key),
                    )
                elif await is_forgotten(db, user_id, s_key, predicate, o_key, list(sources)):
                    await db.execute("ROLLBACK")
                    return UpsertResult("forgotten", None)
                result = await self._upsert(
                    db,
                    user_id,
                    subject,
                    s_key,
                    predicate,
                    obj,
                    o_key,
                    object_is_entity,
                    confidence,
                    evidence,
                    list(sources),
                    subject_type,
                    object_type,
                    now,
                    origin,
                    inactive,
                )
                await db.execute("COMMIT")
            except BaseException:
                await db.execute("ROLLBACK")
                raise
        return result

    async def _entity(self, db: SqlConnection, user_id: str, name: str, kind: str, now: datetime) -> None:
        await db.execute(
            "INSERT INTO semantic_entities (user_id, key, name, type, created_at) VALUES (?, ?, ?, ?, ?)"
            " ON CONFLICT DO NOTHING",
            (user_id, entity_key(name), " ".join(name.split()), kind, iso(now)),
        )

    async def _live(self, db: SqlConnection, user_id: str, s_key: str, predicate: str) -> list[Fact]:
        cur = await db.execute(
            SELECT + " WHERE f.user_id = ? AND f.subject = ? AND f.predicate = ?"
            " AND f.status IN ('confirmed', 'pending')",
            (user_id, s_key, predicate),
        )
        return [row_to_fact(r) for r in await cur.fetchall()]

    async def _upsert(
        self,
        db: SqlConnection,
        user_id: str,
        subject: str,
        s_key: str,
        predicate: str,
        obj: str,
        o_key: str,
        object_is_entity: bool,
        confidence: float,
        evidence: str,
        sources: list[str],
        subject_type: str,
        object_type: str,
        now: datetime,
        origin: str | None = None,
        inactive: Collection[tuple[str, str]] = (),
    ) -> UpsertResult:
        live = await self._live(db, user_id, s_key, predicate)
        same = [f for f in live if self._okey(f) == o_key]
        # a value stated on a branch that is not active contests nothing (issue 27)
        others = [f for f in live if self._okey(f) != o_key and visible(f, None, None, inactive)]
        stamp = iso(now)
        opposite = OPPOSITE_PREDICATES.get(predicate)
        contradicted = (
            [
                f
                for f in await self._live(db, user_id, s_key, opposite)
                if self._okey(f) == o_key and visible(f, None, None, inactive)
            ]
            if opposite
            else []
        )
        if contradicted:  # the later statement wins: "I love X" … "I hate X"
            ids = [f.id for f in contradicted]
            marks = ", ".join("?" for _ in ids)
            await db.execute(
                f"UPDATE semantic_facts SET status = 'superseded', valid_to = ?, updated_at = ? WHERE id IN ({marks})",
                (stamp, stamp, *ids),
            )
            result = await self._upsert(
                db, user_id, subject, s_key, predicate, obj, o_key, object_is_entity, confidence,
                evidence, sources, subject_type, object_type, now, origin, inactive,
            )  # fmt: skip
            if result.fact is not None:
                await db.execute(
                    f"UPDATE semantic_facts SET superseded_by = ? WHERE id IN ({marks})", (result.fact.id, *ids)
                )
            return UpsertResult("resolved", result.fact, [*result.superseded, *ids])
        if same:
            fact = same[0]
            merged = list(dict.fromkeys([*fact.sources, *sources]))
            if fact.status == "pending" or (
                predicate in FUNCTIONAL_PREDICATES and any(o.status == "pending" for o in others)
            ):
                # the user's behaviour decides (seed §4.3): this value wins, the other loses
                losers = [o for o in others if predicate in FUNCTIONAL_PREDICATES]
                for loser in losers:
                    await db.execute(
                        "UPDATE semantic_facts SET status = 'superseded', valid_to = ?, superseded_by = ?,"
                        " updated_at = ? WHERE id = ?",
                        (stamp, fact.id, stamp, loser.id),
                    )
                await db.execute(
                    "UPDATE semantic_facts SET status = 'confirmed', conflict_with = NULL, sources = ?,"
                    " confidence = CASE WHEN confidence > ? THEN confidence ELSE ? END, updated_at = ?, origin = NULL"
                    " WHERE id = ?",
                    (json.dumps(merged), confidence, confidence, stamp, fact.id),
                )
                return UpsertResult("resolved", await self._get(db, fact.id), [o.id for o in losers])
            # stated again: still valid (the 180-day clock restarts), evidence merged; stated on
            # another branch or session too: no longer bound to the branch that first stated it
            unbind = fact.origin is not None and fact.origin != origin
            await db.execute(
                "UPDATE semantic_facts SET sources = ?, updated_at = ?"
                + (", origin = NULL" if unbind else "")
                + " WHERE id = ?",
                (json.dumps(merged), stamp, fact.id),
            )
            return UpsertResult("duplicate", await self._get(db, fact.id))
        await self._entity(db, user_id, subject, subject_type, now)
        if object_is_entity:
            await self._entity(db, user_id, obj, object_type, now)
        conflict = None
        status: FactStatus = "confirmed"
        if predicate in FUNCTIONAL_PREDICATES:
            confirmed = [o for o in others if o.status == "confirmed"]
            if confirmed:
                status, conflict = "pending", confirmed[0].id
                # a second new value replaces an older undecided one: one pending at a time
                for stale in (o for o in others if o.status == "pending"):
                    await db.execute(
                        "UPDATE semantic_facts SET status = 'superseded', valid_to = ?, updated_at = ? WHERE id = ?",
                        (stamp, stamp, stale.id),
                    )
        fact_id = uuid4().hex
        await db.execute(
            "INSERT INTO semantic_facts (id, user_id, subject, predicate, object, object_name, object_is_entity,"
            " confidence, evidence, sources, status, valid_from, created_at, updated_at, conflict_with, origin)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                fact_id,
                user_id,
                s_key,
                predicate,
                o_key,
                " ".join(obj.split()),
                int(object_is_entity),
                confidence,
                evidence,
                json.dumps(sources),
                status,
                stamp,
                stamp,
                stamp,
                conflict,
                origin,
            ),
        )
        return UpsertResult("pending_conflict" if status == "pending" else "added", await self._get(db, fact_id))

    @staticmethod
    def _okey(fact: Fact) -> str:
        return object_key(fact.object, fact.object_is_entity)
