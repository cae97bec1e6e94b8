"""Forgetting in semantic memory, final (:meth:`Forgetting.forget`): the fact is deleted and a
tombstone (``semantic_forgotten``: its key and source episodes) keeps it from coming back — an
upsert of the same fact read from those same episodes (consolidation re-reading them, a model
extraction) is refused (``forgotten``, :func:`is_forgotten`), and the episodes are no longer
recalled (:meth:`Forgetting.retracted_sources`). Only a new statement (a new episode) brings the
fact back.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from memory.episodic.base import utcnow
from memory.semantic_model import LIVE, Fact
from memory.semantic_sqlite import SELECT, SqliteFactStore, iso, row_to_fact
from memory.sql import SqlConnection


class Forgetting(SqliteFactStore):
    """Forgetting a fact or an episode's facts, and what was retracted (module docstring)."""

    async def forget(self, user_id: str, fact_id: str) -> bool:
        """Delete a fact for good (the user asked) and leave its tombstone (module docstring):
        the same fact read again from the same episodes is refused, and those episodes are no
        longer recalled. True if it existed."""
        async with self._connect() as db:
            await self._begin(db)
            try:
                fact = await self._get(db, fact_id)
                if fact is None or fact.user_id != user_id:
                    await db.execute("ROLLBACK")
                    return False
                await tombstone(db, fact, fact.sources)
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
            await self._begin(db)
            try:
                cur = await db.execute(
                    SELECT + " WHERE f.user_id = ? AND f.sources LIKE ?", (user_id, f'%"{episode_id}"%')
                )
                for fact in [row_to_fact(r) for r in await cur.fetchall()]:
                    rest = [i for i in fact.sources if i != episode_id]
                    if rest:
                        await db.execute(
                            "UPDATE semantic_facts SET sources = ? WHERE id = ?", (json.dumps(rest), fact.id)
                        )
                        continue
                    await tombstone(db, fact, [episode_id])
                    await db.execute("DELETE FROM semantic_facts WHERE id = ?", (fact.id,))
                    forgotten += 1
                await db.execute("COMMIT")
            except BaseException:
                await db.execute("ROLLBACK")
                raise
        return forgotten

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
            elif row["status"] in LIVE:
                live.update(ids)
        return old - live


async def tombstone(db: SqlConnection, fact: Fact, sources: Sequence[str]) -> None:
    """Leave (or widen) ``fact``'s tombstone with the episodes ``sources``."""
    cur = await db.execute(
        "SELECT sources FROM semantic_forgotten WHERE user_id = ? AND subject = ? AND predicate = ? AND object = ?",
        (fact.user_id, fact.subject, fact.predicate, fact.object),
    )
    row = await cur.fetchone()
    merged = list(dict.fromkeys([*(json.loads(row["sources"]) if row else []), *sources]))
    await db.execute(
        "INSERT INTO semantic_forgotten (user_id, subject, predicate, object, sources, forgotten_at)"
        " VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (user_id, subject, predicate, object)"
        " DO UPDATE SET sources = excluded.sources, forgotten_at = excluded.forgotten_at",
        (fact.user_id, fact.subject, fact.predicate, fact.object, json.dumps(merged), iso(utcnow())),
    )


async def is_forgotten(
    db: SqlConnection, user_id: str, s_key: str, predicate: str, o_key: str, sources: Sequence[str]
) -> bool:
    """True when the user forgot this fact and ``sources`` holds no episode it was not
    already read from (a re-reading, not a new statement)."""
    cur = await db.execute(
        "SELECT sources FROM semantic_forgotten WHERE user_id = ? AND subject = ? AND predicate = ? AND object = ?",
        (user_id, s_key, predicate, o_key),
    )
    row = await cur.fetchone()
    return row is not None and set(sources) <= set(json.loads(row["sources"]))
