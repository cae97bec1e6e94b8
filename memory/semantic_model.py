"""Semantic memory's fact model: a fact ``subject —predicate→ object``, its status and the keys
that identify an entity and a value (``memory.semantic`` describes the knowledge graph).

``object_is_entity`` says whether the object is an entity of the graph (a relation: user
reports_to Alice) or a literal (an attribute: user prefers_format pdf). Each fact carries its
confidence, its source (``evidence`` "direct" with the episode ids in ``sources``, or
"inferred"), validity (``valid_from``/``valid_to``), a status (:data:`FactStatus`, meanings in
``memory.semantic``) and, for a fact stated in a session, its ``origin`` (:func:`origin_of`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal

FactStatus = Literal["confirmed", "pending", "superseded", "archived"]
UpsertOutcome = Literal["added", "duplicate", "pending_conflict", "resolved", "rejected", "forgotten"]

#: The statuses of a fact still believed (recalled, contested, expired by age).
LIVE: tuple[str, ...] = ("confirmed", "pending")


def entity_key(name: str) -> str:
    """The key of an entity: whitespace collapsed, case folded ("Data Platform group" ==
    "data platform  Group")."""
    return " ".join(name.split()).casefold()


def object_key(obj: str, object_is_entity: bool) -> str:
    """The key of a fact's object: :func:`entity_key` for an entity, else the literal with
    whitespace collapsed and case folded (the same value written twice is one fact)."""
    return entity_key(obj) if object_is_entity else " ".join(obj.split()).casefold()


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
        out = dict(self.__dict__.items())
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


def origin_of(thread_id: str | None, message_id: str | None) -> str | None:
    """The ``origin`` of a fact stated by message ``message_id`` of session ``thread_id``."""
    return f"{thread_id}\x00{message_id}" if thread_id and message_id else None
