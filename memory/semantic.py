"""Semantic memory: a knowledge graph of entities, relations and attributes on SQLite.

Store chosen by measurement (``evals/bench_memory_semantic.py``, figures in ``evals/README.md``):
plain SQLite tables with recursive queries answer 1–3-hop queries with confidence and validity
filters in well under a millisecond at 10k entities / 50k relations; no graph database needed
(kuzu is archived; its fork gave wrong counts on parameterised 2-hop queries). Tables live in
``<data_dir>/memory.db`` beside the retry queue.

    entities(user_id, key, name, type)                  key = casefolded name
    facts(id, user_id, subject, predicate, object, object_is_entity,
          confidence, evidence, sources, status, valid_from, valid_to,
          created_at, updated_at, last_used_at, use_count, conflict_with, superseded_by)

A fact is ``subject —predicate→ object``; ``object_is_entity`` says whether the object is an
entity of the graph (a relation: user reports_to Alice) or a literal (an attribute: user
prefers_format pdf). Each fact carries its confidence, its source (``evidence`` "direct" with
the episode ids in ``sources``, or "inferred"), validity (``valid_from``/``valid_to``) and a
status:

    confirmed    believed true
    pending      contradicts a confirmed fact of a single-valued predicate; waits for the
                 user's next behaviour (seed §4.3)
    superseded   lost a conflict (``valid_to`` and ``superseded_by`` say when and to what)
    archived     expired (not confirmed for ``ttl_days``) or down-weighted below the threshold

Conflicts (``upsert``): the same fact again is a duplicate (its sources merged, nothing else);
a different value for a single-valued predicate (``fact_extraction.FUNCTIONAL_PREDICATES``) whose
confirmed value exists is stored *pending* beside it — never overwriting it. When the user
then states or uses one of the two values again, that value is confirmed and the other
superseded with a timestamp (``resolved``). The prompt shows an undecided pair as a conflict
(``memory.retrieval``), never as two true facts. Opposite predicates
(``fact_extraction.OPPOSITE_PREDICATES``: ``likes`` / ``dislikes``) about the same object are a
contradiction of the user's own taste: the later statement supersedes the earlier at once
(``resolved``; tastes change, and both are the user's words), and the earlier statement's
episodes are no longer recalled (:meth:`SemanticMemory.retracted_sources`).

Forgetting is final (:meth:`SemanticMemory.forget`): the fact is deleted and a tombstone
(``semantic_forgotten``: its key and source episodes) keeps it from coming back — an upsert of
the same fact read from those same episodes (consolidation re-reading them, a model extraction)
is refused (``forgotten``), and the episodes are no longer recalled. Only a new statement (a
new episode) brings the fact back.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any, Literal
from uuid import uuid4

from memory.db import DB_FILENAME, SqliteDb
from memory.episodic.base import utcnow
from memory.fact_extraction import FUNCTIONAL_PREDICATES, OPPOSITE_PREDICATES
from memory.policy import SEMANTIC_TTL_DAYS
from memory.text import keyword_tokens

FactStatus = Literal["confirmed", "pending", "superseded", "archived"]
UpsertOutcome = Literal["added", "duplicate", "pending_conflict", "resolved", "rejected", "forgotten"]

SCHEMA = """
CREATE TABLE IF NOT EXISTS semantic_entities (
    user_id TEXT NOT NULL,
    key     TEXT NOT NULL,
    name    TEXT NOT NULL,
    type    TEXT NOT NULL DEFAULT 'thing',
    created_at TEXT NOT NULL,
    PRIMARY KEY (user_id, key)
);
CREATE TABLE IF NOT EXISTS semantic_facts (
    id               TEXT PRIMARY KEY,
    user_id          TEXT NOT NULL,
    subject          TEXT NOT NULL,      -- entity key
    predicate        TEXT NOT NULL,
    object           TEXT NOT NULL,      -- entity key when object_is_entity, else the literal
    object_name      TEXT NOT NULL,      -- as written
    object_is_entity INTEGER NOT NULL,
    confidence       REAL NOT NULL,
    evidence         TEXT NOT NULL,      -- 'direct' | 'inferred'
    sources          TEXT NOT NULL DEFAULT '[]',
    status           TEXT NOT NULL,
    valid_from       TEXT NOT NULL,
    valid_to         TEXT,
    created_at       TEXT NOT NULL,
    updated_at       TEXT NOT NULL,
    last_used_at     TEXT,
    use_count        INTEGER NOT NULL DEFAULT 0,
    conflict_with    TEXT,
    superseded_by    TEXT,
    origin           TEXT                -- thread id, NUL, message id of the turn that stated it; NULL: not branch-bound
);
-- what the user asked to forget: the fact's key and the episodes it was read from (issue 26)
CREATE TABLE IF NOT EXISTS semantic_forgotten (
    user_id      TEXT NOT NULL,
    subject      TEXT NOT NULL,
    predicate    TEXT NOT NULL,
    object       TEXT NOT NULL,
    sources      TEXT NOT NULL DEFAULT '[]',
    forgotten_at TEXT NOT NULL,
    PRIMARY KEY (user_id, subject, predicate, object)
);
CREATE INDEX IF NOT EXISTS semantic_out ON semantic_facts (user_id, subject, predicate, status);
CREATE INDEX IF NOT EXISTS semantic_in ON semantic_facts (user_id, object, predicate, status);
"""

log = logging.getLogger(__name__)

_LIVE = ("confirmed", "pending")


def entity_key(name: str) -> str:
    """The key of an entity: whitespace collapsed, case folded ("Data Platform group" ==
    "data platform  Group")."""
    return " ".join(name.split()).casefold()


def _iso(dt: datetime) -> str:
    return dt.isoformat(timespec="microseconds")


@dataclass
class Fact:
    """One fact as read back (see the module docstring for the fields)."""

    id: str
    user_id: str
    subject: str
    predicate: str
    object: str
    object_is_entity: bool
    confidence: float
    evidence: str
    sources: list[str]
    status: FactStatus
    valid_from: datetime
    valid_to: datetime | None
    created_at: datetime
    updated_at: datetime
    last_used_at: datetime | None = None
    use_count: int = 0
    conflict_with: str | None = None
    superseded_by: str | None = None
    subject_name: str = ""
    origin: str | None = None

    def as_dict(self) -> dict[str, Any]:
        out = {k: v for k, v in self.__dict__.items()}
        for key in ("valid_from", "valid_to", "created_at", "updated_at", "last_used_at"):
            out[key] = out[key].isoformat() if out[key] else None
        return out

    @property
    def statement(self) -> str:
        """``subject predicate object`` in words ("user prefers format: pdf")."""
        verb = self.predicate.replace("_", " ")
        return (
            f"{self.subject_name or self.subject} {verb}: {self.object}"
            if not self.object_is_entity
            else f"{self.subject_name or self.subject} {verb} {self.object}"
        )


@dataclass
class UpsertResult:
    outcome: UpsertOutcome
    fact: Fact | None
    superseded: list[str] = field(default_factory=list)


def _row_to_fact(row) -> Fact:
    def dt(v):
        return datetime.fromisoformat(v) if v else None

    keys = row.keys()
    return Fact(
        id=row["id"],
        user_id=row["user_id"],
        subject=row["subject"],
        predicate=row["predicate"],
        object=row["object_name"],
        object_is_entity=bool(row["object_is_entity"]),
        confidence=row["confidence"],
        evidence=row["evidence"],
        sources=json.loads(row["sources"] or "[]"),
        status=row["status"],
        valid_from=dt(row["valid_from"]),
        valid_to=dt(row["valid_to"]),
        created_at=dt(row["created_at"]),
        updated_at=dt(row["updated_at"]),
        last_used_at=dt(row["last_used_at"]),
        use_count=row["use_count"],
        conflict_with=row["conflict_with"],
        superseded_by=row["superseded_by"],
        subject_name=row["subject_name"] if "subject_name" in keys and row["subject_name"] else row["subject"],
        origin=row["origin"] if "origin" in keys else None,
    )


_SELECT = (
    "SELECT f.*, e.name AS subject_name FROM semantic_facts f LEFT JOIN semantic_entities e"
    " ON e.user_id = f.user_id AND e.key = f.subject"
)


class SemanticMemory:
    """The knowledge graph (see the module docstring). ``db_path``: the SQLite file.

    ``ttl_days``: a fact not confirmed again (nor used) for this long is archived by
    ``expire`` (seed §6.4: 180 days). ``min_confidence``: facts below it are not stored and,
    after down-weighting, archived.
    """

    def __init__(self, db_path: Path, *, ttl_days: int = SEMANTIC_TTL_DAYS, min_confidence: float = 0.6) -> None:
        self.db = SqliteDb(Path(db_path), SCHEMA)
        self._migrated = False
        self.ttl_days = ttl_days
        self.min_confidence = min_confidence

    def _connect(self) -> _Migrating:
        """A connection; the first one adds columns that files written before them lack."""
        return _Migrating(self)

    @classmethod
    def in_dir(cls, data_dir: Path, **kwargs) -> SemanticMemory:
        return cls(Path(data_dir) / DB_FILENAME, **kwargs)

    # --- writes -----------------------------------------------------------------------------

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
        o_key = entity_key(obj) if object_is_entity else " ".join(obj.split()).casefold()
        async with self._connect() as db:
            await db.execute("BEGIN IMMEDIATE")
            try:
                if restated:
                    await db.execute(
                        "DELETE FROM semantic_forgotten WHERE user_id = ? AND subject = ? AND predicate = ?"
                        " AND object = ?",
                        (user_id, s_key, predicate, o_key),
                    )
                elif await self._forgotten(db, user_id, s_key, predicate, o_key, list(sources)):
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

    async def _entity(self, db, user_id: str, name: str, kind: str, now: datetime) -> None:
        await db.execute(
            "INSERT OR IGNORE INTO semantic_entities (user_id, key, name, type, created_at) VALUES (?, ?, ?, ?, ?)",
            (user_id, entity_key(name), " ".join(name.split()), kind, _iso(now)),
        )

    async def _live(self, db, user_id: str, s_key: str, predicate: str) -> list[Fact]:
        cur = await db.execute(
            _SELECT + " WHERE f.user_id = ? AND f.subject = ? AND f.predicate = ?"
            " AND f.status IN ('confirmed', 'pending')",
            (user_id, s_key, predicate),
        )
        return [_row_to_fact(r) for r in await cur.fetchall()]

    async def _upsert(
        self,
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
        sources,
        subject_type,
        object_type,
        now,
        origin=None,
        inactive: Collection[tuple[str, str]] = (),
    ) -> UpsertResult:
        live = await self._live(db, user_id, s_key, predicate)
        same = [f for f in live if self._okey(f) == o_key]
        # a value stated on a branch that is not active contests nothing (issue 27)
        others = [f for f in live if self._okey(f) != o_key and visible(f, None, None, inactive)]
        stamp = _iso(now)
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
                    " confidence = MAX(confidence, ?), updated_at = ?, origin = NULL WHERE id = ?",
                    (json.dumps(merged), confidence, stamp, fact.id),
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
        return entity_key(fact.object) if fact.object_is_entity else " ".join(fact.object.split()).casefold()

    async def _get(self, db, fact_id: str) -> Fact | None:
        cur = await db.execute(_SELECT + " WHERE f.id = ?", (fact_id,))
        row = await cur.fetchone()
        return _row_to_fact(row) if row else None

    async def get(self, user_id: str, fact_id: str) -> Fact | None:
        async with self._connect() as db:
            fact = await self._get(db, fact_id)
        return fact if fact and fact.user_id == user_id else None

    async def forget(self, user_id: str, fact_id: str) -> bool:
        """Delete a fact for good (the user asked) and leave its tombstone (module docstring):
        the same fact read again from the same episodes is refused, and those episodes are no
        longer recalled. True if it existed."""
        async with self._connect() as db:
            await db.execute("BEGIN IMMEDIATE")
            try:
                fact = await self._get(db, fact_id)
                if fact is None or fact.user_id != user_id:
                    await db.execute("ROLLBACK")
                    return False
                await self._tombstone(db, fact, fact.sources)
                await db.execute("DELETE FROM semantic_facts WHERE user_id = ? AND id = ?", (user_id, fact_id))
                await db.execute("COMMIT")
            except BaseException:
                await db.execute("ROLLBACK")
                raise
        return True

    async def forget_source(self, user_id: str, episode_id: str) -> int:
        """An episode was forgotten: the facts read from it lose it as a source, and a fact
        left with no source (it rested on that episode alone) is forgotten as well (a
        tombstone). Returns how many facts were forgotten."""
        forgotten = 0
        async with self._connect() as db:
            await db.execute("BEGIN IMMEDIATE")
            try:
                cur = await db.execute(
                    _SELECT + " WHERE f.user_id = ? AND f.sources LIKE ?", (user_id, f'%"{episode_id}"%')
                )
                for fact in [_row_to_fact(r) for r in await cur.fetchall()]:
                    rest = [i for i in fact.sources if i != episode_id]
                    if rest:
                        await db.execute(
                            "UPDATE semantic_facts SET sources = ? WHERE id = ?", (json.dumps(rest), fact.id)
                        )
                        continue
                    await self._tombstone(db, fact, [episode_id])
                    await db.execute("DELETE FROM semantic_facts WHERE id = ?", (fact.id,))
                    forgotten += 1
                await db.execute("COMMIT")
            except BaseException:
                await db.execute("ROLLBACK")
                raise
        return forgotten

    async def _tombstone(self, db, fact: Fact, sources: Sequence[str]) -> None:
        cur = await db.execute(
            "SELECT sources FROM semantic_forgotten WHERE user_id = ? AND subject = ? AND predicate = ? AND object = ?",
            (fact.user_id, fact.subject, fact.predicate, fact.object),
        )
        row = await cur.fetchone()
        merged = list(dict.fromkeys([*(json.loads(row["sources"]) if row else []), *sources]))
        await db.execute(
            "INSERT OR REPLACE INTO semantic_forgotten (user_id, subject, predicate, object, sources, forgotten_at)"
            " VALUES (?, ?, ?, ?, ?, ?)",
            (fact.user_id, fact.subject, fact.predicate, fact.object, json.dumps(merged), _iso(utcnow())),
        )

    async def _forgotten(
        self, db, user_id: str, s_key: str, predicate: str, o_key: str, sources: Sequence[str]
    ) -> bool:
        """True when the user forgot this fact and ``sources`` holds no episode it was not
        already read from (a re-reading, not a new statement)."""
        cur = await db.execute(
            "SELECT sources FROM semantic_forgotten WHERE user_id = ? AND subject = ? AND predicate = ? AND object = ?",
            (user_id, s_key, predicate, o_key),
        )
        row = await cur.fetchone()
        return row is not None and set(sources) <= set(json.loads(row["sources"]))

    async def touch(self, fact_ids: Iterable[str], now: datetime | None = None) -> None:
        """Record that these facts were recalled (use counts drive down-weighting, seed §6.4)."""
        ids = list(fact_ids)
        if not ids:
            return
        async with self._connect() as db:
            await db.executemany(
                "UPDATE semantic_facts SET use_count = use_count + 1, last_used_at = ? WHERE id = ?",
                [(_iso(now or utcnow()), i) for i in ids],
            )

    async def expire(self, now: datetime | None = None, *, ttl_days: int | None = None) -> int:
        """Archive live facts neither confirmed again nor used for ``ttl_days`` (default the
        store's, 180). Returns how many."""
        now = now or utcnow()
        cutoff = _iso(now - timedelta(days=self.ttl_days if ttl_days is None else ttl_days))
        async with self._connect() as db:
            cur = await db.execute(
                "UPDATE semantic_facts SET status = 'archived', valid_to = ?, updated_at = ? WHERE status IN"
                " ('confirmed', 'pending') AND updated_at < ? AND COALESCE(last_used_at, '') < ?",
                (_iso(now), _iso(now), cutoff, cutoff),
            )
            return cur.rowcount

    async def downweight_unused(
        self, now: datetime | None = None, *, idle_days: int = 30, factor: float = 0.9
    ) -> tuple[int, int]:
        """Seed §6.4: facts not used nor confirmed for ``idle_days`` lose confidence
        (× ``factor``); those falling under ``min_confidence`` are archived. Returns
        (down-weighted, archived)."""
        now = now or utcnow()
        cutoff = _iso(now - timedelta(days=idle_days))
        stamp = _iso(now)
        async with self._connect() as db:
            await db.execute("BEGIN IMMEDIATE")
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

    # --- reads ------------------------------------------------------------------------------

    async def facts(
        self,
        user_id: str,
        *,
        subject: str | None = None,
        predicate: str | None = None,
        statuses: Sequence[str] = _LIVE,
        limit: int = 200,
    ) -> list[Fact]:
        """Facts of ``user_id`` (optionally of one subject / predicate), newest first."""
        sql = _SELECT + f" WHERE f.user_id = ? AND f.status IN ({', '.join('?' for _ in statuses)})"
        params: list[Any] = [user_id, *statuses]
        if subject is not None:
            sql += " AND f.subject = ?"
            params.append(entity_key(subject))
        if predicate is not None:
            sql += " AND f.predicate = ?"
            params.append(predicate)
        sql += " ORDER BY f.updated_at DESC LIMIT ?"
        params.append(limit)
        async with self._connect() as db:
            cur = await db.execute(sql, params)
            return [_row_to_fact(r) for r in await cur.fetchall()]

    async def retracted_sources(self, user_id: str) -> set[str]:
        """Ids of the episodes that were the evidence of a superseded or forgotten fact and of
        no live one: what the user said and later contradicted ("I love X" after "I hate X") or
        asked to forget. Recall leaves them out, so the prompt shows the current statement only."""
        async with self._connect() as db:
            cur = await db.execute("SELECT status, sources FROM semantic_facts WHERE user_id = ?", (user_id,))
            rows = list(await cur.fetchall())
            cur = await db.execute(
                "SELECT 'superseded' AS status, sources FROM semantic_forgotten WHERE user_id = ?", (user_id,)
            )
            rows += await cur.fetchall()
        old: set[str] = set()
        live: set[str] = set()
        for row in rows:
            ids = json.loads(row["sources"] or "[]")
            if row["status"] == "superseded":
                old.update(ids)
            elif row["status"] in _LIVE:
                live.update(ids)
        return old - live

    async def conflicts(self, user_id: str) -> list[tuple[Fact, Fact]]:
        """Undecided conflicts: (confirmed fact, pending challenger) pairs."""
        pending = await self.facts(user_id, statuses=("pending",))
        out = []
        async with self._connect() as db:
            for fact in pending:
                if fact.conflict_with:
                    other = await self._get(db, fact.conflict_with)
                    if other is not None and other.status == "confirmed":
                        out.append((other, fact))
        return out

    async def recall(
        self,
        user_id: str,
        query: str,
        k: int = 5,
        *,
        now: datetime | None = None,
        thread_id: str | None = None,
        visible_origins: set[str] | None = None,
        inactive: Collection[tuple[str, str]] = (),
        touch: bool = True,
    ) -> tuple[list[tuple[Fact, Fact]], list[Fact]]:
        """What a new request recalls, in one connection (the agent's hot path): undecided
        conflicts (as :meth:`conflicts`), and the facts to show — the user's standing
        preferences (confirmed ``prefers_*`` facts about the user) plus up to ``k`` facts
        relevant to ``query`` (as :meth:`search`) — whose use is recorded (:meth:`touch`).
        With ``thread_id`` and ``visible_origins`` (the message ids of the session's active
        branch), a fact this session stated on a branch that was rolled back is left out;
        ``inactive``: (thread id, message id) origins of any session that are not on their
        session's active branch (``memory.branch_origins``): their facts are left out too.
        ``touch=False``: read only — the caller records the use later with :meth:`touch` (the
        UPDATE is a write transaction: 15–25 ms with fsync on a loaded machine, measured)."""
        async with self._connect() as db:
            cur = await db.execute(
                _SELECT + " WHERE f.user_id = ? AND f.status IN ('confirmed', 'pending')"
                " ORDER BY f.updated_at DESC LIMIT 5000",
                (user_id,),
            )
            live = [
                f
                for f in (_row_to_fact(r) for r in await cur.fetchall())
                if visible(f, thread_id, visible_origins, inactive)
            ]
            by_id = {f.id: f for f in live}
            conflicts = [
                (by_id[f.conflict_with], f)
                for f in live
                if f.status == "pending"
                and f.conflict_with
                and f.conflict_with in by_id
                and by_id[f.conflict_with].status == "confirmed"
            ]
            standing = [
                f
                for f in live
                if f.status == "confirmed" and f.subject == "user" and f.predicate.startswith("prefers_")
            ]
            found = _rank(live, query, k)
            facts = list({f.id: f for f in [*standing, *found]}.values())
            if facts and touch:
                await db.executemany(
                    "UPDATE semantic_facts SET use_count = use_count + 1, last_used_at = ? WHERE id = ?",
                    [(_iso(now or utcnow()), f.id) for f in facts],
                )
        return conflicts, facts

    async def search(self, user_id: str, query: str, k: int = 5, *, now: datetime | None = None) -> list[Fact]:
        """Live facts relevant to ``query``: keyword overlap of the query with the fact's
        subject, predicate and object (a user has hundreds of facts, not millions); facts
        about the user themself rank first on ties. Nothing searchable → ``[]``."""
        if not keyword_tokens(query) or k <= 0:
            return []
        return _rank(await self.facts(user_id, statuses=("confirmed", "pending"), limit=5000), query, k)

    async def traverse(
        self,
        user_id: str,
        start: str,
        steps: Sequence[tuple[str, Literal["out", "in"]]],
        *,
        min_confidence: float | None = None,
        now: datetime | None = None,
    ) -> list[tuple[str, float, list[str]]]:
        """Multi-hop query: follow ``steps`` (predicate, direction) from entity ``start``
        over confirmed facts valid at ``now`` with confidence ≥ ``min_confidence``.

        "Who is in the group the user reports to?" =
        ``traverse(u, "user", [("reports_to", "out"), ("member_of", "out"), ("member_of", "in")])``.
        Returns (entity name, path confidence = product of the facts', fact ids), best first.
        One SQL query per hop over the whole frontier."""
        floor = self.min_confidence if min_confidence is None else min_confidence
        stamp = _iso(now or utcnow())
        frontier: dict[str, tuple[float, list[str]]] = {entity_key(start): (1.0, [])}
        async with self._connect() as db:
            for predicate, direction in steps:
                if not frontier:
                    break
                here, there = ("subject", "object") if direction == "out" else ("object", "subject")
                marks = ", ".join("?" for _ in frontier)
                cur = await db.execute(
                    f"SELECT id, {here} AS here, {there} AS there, confidence FROM semantic_facts WHERE user_id = ?"
                    f" AND predicate = ? AND object_is_entity = 1 AND status = 'confirmed' AND confidence >= ?"
                    f" AND valid_from <= ? AND (valid_to IS NULL OR valid_to > ?) AND {here} IN ({marks})",
                    (user_id, predicate, floor, stamp, stamp, *frontier),
                )
                nxt: dict[str, tuple[float, list[str]]] = {}
                for row in await cur.fetchall():
                    conf, path = frontier[row["here"]]
                    cand = (conf * row["confidence"], [*path, row["id"]])
                    if row["there"] not in nxt or cand[0] > nxt[row["there"]][0]:
                        nxt[row["there"]] = cand
                frontier = nxt
            names = await self._names(db, user_id, list(frontier))
        out = [(names.get(key, key), conf, path) for key, (conf, path) in frontier.items()]
        out.sort(key=lambda x: x[1], reverse=True)
        return out

    async def reachable(
        self,
        user_id: str,
        start: str,
        max_hops: int = 3,
        *,
        predicates: Sequence[str] | None = None,
        now: datetime | None = None,
    ) -> dict[str, int]:
        """Entities reachable from ``start`` along confirmed, valid relations (either
        direction) within ``max_hops``: name → fewest hops. A recursive CTE."""
        stamp = _iso(now or utcnow())
        pred_sql = f" AND f.predicate IN ({', '.join('?' for _ in predicates)})" if predicates else ""
        live = (
            "f.user_id = ? AND f.object_is_entity = 1 AND f.status = 'confirmed' AND f.confidence >= ?"
            f" AND f.valid_from <= ? AND (f.valid_to IS NULL OR f.valid_to > ?){pred_sql}"
        )
        live_params: list[Any] = [user_id, self.min_confidence, stamp, stamp, *(predicates or [])]
        # one recursive step per direction, each an index lookup (semantic_out / semantic_in)
        sql = f"""
        WITH RECURSIVE walk(node, hops) AS (
            SELECT ?, 0
            UNION
            SELECT f.object, walk.hops + 1 FROM walk JOIN semantic_facts f ON f.subject = walk.node
            WHERE walk.hops < ? AND {live}
            UNION
            SELECT f.subject, walk.hops + 1 FROM walk JOIN semantic_facts f ON f.object = walk.node
            WHERE walk.hops < ? AND {live}
        )
        SELECT node, MIN(hops) AS hops FROM walk GROUP BY node
        """
        params: list[Any] = [entity_key(start), max_hops, *live_params, max_hops, *live_params]
        async with self._connect() as db:
            cur = await db.execute(sql, params)
            rows = await cur.fetchall()
            names = await self._names(db, user_id, [r["node"] for r in rows])
        return {names.get(r["node"], r["node"]): r["hops"] for r in rows if r["hops"] > 0}

    async def _names(self, db, user_id: str, keys: list[str]) -> dict[str, str]:
        if not keys:
            return {}
        out: dict[str, str] = {}
        for i in range(0, len(keys), 500):
            chunk = keys[i : i + 500]
            cur = await db.execute(
                f"SELECT key, name FROM semantic_entities WHERE user_id = ? AND key IN"
                f" ({', '.join('?' for _ in chunk)})",
                (user_id, *chunk),
            )
            out.update({r["key"]: r["name"] for r in await cur.fetchall()})
        return out

    async def users(self) -> list[str]:
        """Ids of the users with at least one fact (any status), sorted."""
        async with self._connect() as db:
            cur = await db.execute("SELECT DISTINCT user_id FROM semantic_facts ORDER BY user_id")
            return [str(r[0]) for r in await cur.fetchall()]

    async def count(self, user_id: str | None = None, *, statuses: Sequence[str] = _LIVE) -> int:
        sql = f"SELECT COUNT(*) FROM semantic_facts WHERE status IN ({', '.join('?' for _ in statuses)})"
        params: list[Any] = list(statuses)
        if user_id is not None:
            sql += " AND user_id = ?"
            params.append(user_id)
        async with self._connect() as db:
            cur = await db.execute(sql, params)
            row = await cur.fetchone()
        assert row is not None  # COUNT(*) always returns a row
        return int(row[0])


def _rank(facts: Sequence[Fact], query: str, k: int) -> list[Fact]:
    """The ``k`` facts sharing most keyword tokens with ``query`` (× confidence; facts about
    the user first on ties); none when the query has nothing searchable."""
    terms = set(keyword_tokens(query))
    if not terms or k <= 0:
        return []
    scored = []
    for fact in facts:
        words = set(keyword_tokens(f"{fact.subject_name} {fact.predicate.replace('_', ' ')} {fact.object}"))
        overlap = len(terms & words)
        if overlap:
            scored.append((overlap * fact.confidence + (0.1 if fact.subject == "user" else 0.0), fact))
    scored.sort(key=lambda x: x[0], reverse=True)
    return [f for _, f in scored[:k]]


def origin_of(thread_id: str | None, message_id: str | None) -> str | None:
    """The ``origin`` of a fact stated by message ``message_id`` of session ``thread_id``."""
    return f"{thread_id}\x00{message_id}" if thread_id and message_id else None


def visible(
    fact: Fact,
    thread_id: str | None,
    visible_origins: set[str] | None,
    inactive: Collection[tuple[str, str]] = (),
) -> bool:
    """False for a fact this session (``thread_id``) stated on a message that is not on the
    active branch (``visible_origins``), and for a fact of any session whose origin is in
    ``inactive`` ((thread id, message id) pairs off their session's active branch); True
    otherwise (other sessions' active branches, unbound facts)."""
    if not fact.origin:
        return True
    thread, _, message = fact.origin.partition("\x00")
    if (thread, message) in inactive:
        return False
    if not thread_id or visible_origins is None:
        return True
    return thread != thread_id or message in visible_origins


class _Migrating:
    """``async with``: a connection of the store's database, after adding once the columns a
    file written by an earlier version lacks (``origin``)."""

    def __init__(self, store: SemanticMemory) -> None:
        self.store = store
        self.cm = store.db.connect()

    async def __aenter__(self) -> Any:
        db = await self.cm.__aenter__()
        if not self.store._migrated:
            cur = await db.execute("PRAGMA table_info(semantic_facts)")
            columns = {row[1] for row in await cur.fetchall()}
            if "origin" not in columns:
                try:
                    await db.execute("ALTER TABLE semantic_facts ADD COLUMN origin TEXT")
                except Exception:  # noqa: BLE001 - another process added it first
                    log.debug("origin column added concurrently")
            self.store._migrated = True
        return db

    async def __aexit__(self, *exc: Any) -> Any:
        return await self.cm.__aexit__(*exc)
