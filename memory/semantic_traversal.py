"""Multi-hop queries over semantic memory's relations (facts whose object is an entity):
:meth:`GraphQueries.traverse` follows given predicates, :meth:`GraphQueries.reachable` finds
every entity within a number of hops (a recursive CTE). Confirmed, valid facts only."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any, Literal

from memory.episodic.base import utcnow
from memory.semantic_model import entity_key
from memory.semantic_sqlite import SqliteFactStore, iso


class GraphQueries(SqliteFactStore):
    """Traversal of the knowledge graph (module docstring)."""

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
        stamp = iso(now or utcnow())
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
        stamp = iso(now or utcnow())
        pred_sql = f" AND f.predicate IN ({', '.join('?' for _ in predicates)})" if predicates else ""
        live = (
            "f.user_id = ? AND f.object_is_entity = 1 AND f.status = 'confirmed' AND f.confidence >= ?"
            f" AND f.valid_from <= ? AND (f.valid_to IS NULL OR f.valid_to > ?){pred_sql}"
        )
        live_params: list[Any] = [user_id, self.min_confidence, stamp, stamp, *(predicates or [])]
        sql, params = self._walk(entity_key(start), max_hops, live, live_params)
        async with self._connect() as db:
            cur = await db.execute(sql, params)
            rows = await cur.fetchall()
            names = await self._names(db, user_id, [r["node"] for r in rows])
        return {names.get(r["node"], r["node"]): r["hops"] for r in rows if r["hops"] > 0}

    def _walk(self, start: str, max_hops: int, live: str, live_params: list[Any]) -> tuple[str, list[Any]]:
        """The recursive query of :meth:`reachable` (rows: ``node``, ``hops``) and its
        parameters; ``live``: the filter of a usable relation ``f``, with ``live_params``."""
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
        return sql, [start, max_hops, *live_params, max_hops, *live_params]
