"""What a request recalls from semantic memory: the live facts, undecided conflicts, the user's
standing preferences and the facts relevant to the request (:meth:`FactRecall.recall`, the
agent's hot path, in one connection)."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from datetime import datetime
from typing import Any

from memory.episodic.base import utcnow
from memory.semantic_model import LIVE, Fact, entity_key
from memory.semantic_ranking import rank_facts, visible
from memory.semantic_sqlite import SELECT, SqliteFactStore, iso, row_to_fact
from memory.text import keyword_tokens


class FactRecall(SqliteFactStore):
    """Reads of live facts for a request (module docstring)."""

    async def facts(
        self,
        user_id: str,
        *,
        subject: str | None = None,
        predicate: str | None = None,
        statuses: Sequence[str] = LIVE,
        limit: int = 200,
    ) -> list[Fact]:
        """Facts of ``user_id`` (optionally of one subject / predicate), newest first."""
        sql = SELECT + f" WHERE f.user_id = ? AND f.status IN ({', '.join('?' for _ in statuses)})"
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
            return [row_to_fact(r) for r in await cur.fetchall()]

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
                SELECT + " WHERE f.user_id = ? AND f.status IN ('confirmed', 'pending')"
                " ORDER BY f.updated_at DESC LIMIT 5000",
                (user_id,),
            )
            live = [
                f
                for f in (row_to_fact(r) for r in await cur.fetchall())
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
            found = rank_facts(live, query, k)
            facts = list({f.id: f for f in [*standing, *found]}.values())
            if facts and touch:
                await db.executemany(
                    "UPDATE semantic_facts SET use_count = use_count + 1, last_used_at = ? WHERE id = ?",
                    [(iso(now or utcnow()), f.id) for f in facts],
                )
        return conflicts, facts

    async def search(self, user_id: str, query: str, k: int = 5, *, now: datetime | None = None) -> list[Fact]:
        """Live facts relevant to ``query``: keyword overlap of the query with the fact's
        subject, predicate and object (a user has hundreds of facts, not millions); facts
        about the user themself rank first on ties. Nothing searchable → ``[]``."""
        if not keyword_tokens(query) or k <= 0:
            return []
        return rank_facts(await self.facts(user_id, statuses=("confirmed", "pending"), limit=5000), query, k)
