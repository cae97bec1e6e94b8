"""The memory service's consolidation (the consolidate graph's work): facts read from recent
episodes (the user's own words only, by the rules or a model) and upserted with the episode as
their source; expiry of both layers and down-weighting of unused facts (seed §6.4)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from memory import fact_extraction
from memory.episodic.base import EpisodicEvent, utcnow
from memory.semantic import origin_of
from memory.service_writes import MemoryWrites


class MemoryConsolidation(MemoryWrites):
    """Consolidation and expiry (module docstring); its upserts take the write path's queue."""

    async def recent_episodes(self, since: datetime, limit: int = 1000) -> list[EpisodicEvent]:
        """Live episodes of every user since ``since`` (the consolidate graph's scan)."""
        await self.ready()
        return await self.episodic.recent(since, limit)

    @staticmethod
    def extraction_text(event: EpisodicEvent) -> str:
        """What of an episode facts may be read from (by the rules or by a model): the user's
        own words only — a task record's request, never the model's answer nor the tool data it
        quotes (``memory.provenance``); "" for an episode that holds none (a tool recovery)."""
        if event.kind not in ("preference", "conversation", "note", "task"):
            return ""
        text = event.text
        if event.kind == "preference":
            text = text.removeprefix("user preference: ")
        elif event.kind == "note":
            text = text.removeprefix("user note: ")
        elif event.kind == "task":
            text = text.split(" task: ", 1)[-1]
            for marker in ("; tools:", "; produced:", "; answer:"):
                text = text.split(marker, 1)[0]
        return text

    @classmethod
    def rule_candidates(cls, event: EpisodicEvent) -> list[fact_extraction.FactCandidate]:
        """The rule-based extractor (``fact_extraction.extract_facts``) over an episode's
        :meth:`extraction_text` (a task record's request only, never the model's answer)."""
        text = cls.extraction_text(event)
        return fact_extraction.extract_facts(text) if text else []

    async def consolidate_facts(
        self,
        events: Sequence[EpisodicEvent],
        *,
        now: datetime | None = None,
        candidates: dict[str, list[fact_extraction.FactCandidate]] | None = None,
        evidence: str = "direct",
    ) -> dict[str, int]:
        """Candidate facts of ``events`` (``candidates``: event id → facts, e.g. from a model;
        default the rule-based :meth:`rule_candidates`), kept over the threshold and upserted
        with the event as their source (``evidence``: "direct" for the rules, which read the
        user's own words; "inferred" for a model's reading). Counts: candidates, kept, added, duplicates, conflicts,
        resolved, queued."""
        counts = {"candidates": 0, "kept": 0, "added": 0, "duplicates": 0, "conflicts": 0, "resolved": 0, "queued": 0}
        await self.ready()
        for event in events:
            found = candidates.get(event.id, []) if candidates is not None else self.rule_candidates(event)
            for fact in found:
                counts["candidates"] += 1
                if fact.confidence < self.min_confidence:
                    continue
                counts["kept"] += 1
                outcome = await self._upsert(
                    {
                        "user_id": event.user_id,
                        "subject": fact.subject,
                        "predicate": fact.predicate,
                        "obj": fact.object,
                        "object_is_entity": fact.object_is_entity,
                        "confidence": fact.confidence,
                        "evidence": evidence,
                        "sources": [event.id],
                        "now": (now or utcnow()).isoformat(),
                        "origin": origin_of(
                            (event.metadata or {}).get("thread_id"), (event.metadata or {}).get("origin_message_id")
                        ),
                    },
                    counts,
                )
                key = {
                    "added": "added",
                    "duplicate": "duplicates",
                    "pending_conflict": "conflicts",
                    "resolved": "resolved",
                }.get(outcome)
                if key:
                    counts[key] += 1
        return counts

    async def expire(self, now: datetime | None = None) -> dict[str, int]:
        """Expire episodic items after ``episodic_ttl_days`` and semantic facts after
        ``semantic_ttl_days``; down-weight facts unused for 30 days (seed §6.4)."""
        now = now or utcnow()
        await self.ready()
        await self.flush_touches()
        episodic = await self.episodic.expire(self.episodic_ttl_days, now)
        semantic = await self.semantic.expire(now)
        weighted, archived = await self.semantic.downweight_unused(now)
        return {
            "episodic_expired": episodic,
            "semantic_expired": semantic,
            "downweighted": weighted,
            "archived": archived,
        }
