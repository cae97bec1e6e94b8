"""A turn's memory write as a queue payload (``memory.queue`` ``hold``): the plan is stored
durably before it is written, so a process that ends before the passage embedding is done loses
nothing — the next drain of the queue (the next process's first memory write, or ``hermes memory
consolidate``) writes it. JSON shape: ``{"user_id", "events": [EpisodicEvent JSON], "facts":
[{"subject", "predicate", "obj", "object_is_entity", "confidence"}], "signals": [[predicate,
value]], "origin", "now": ISO 8601}``.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from memory.episodic.base import EpisodicEvent
from memory.fact_extraction import FactCandidate
from memory.turn_events import TurnPlan

#: The queue operation of a held turn plan.
OP_TURN_PLAN = "turn.plan"


def plan_payload(plan: TurnPlan, now: datetime) -> dict[str, Any]:
    """``plan`` (written at ``now``) as JSON-able data (see the module docstring)."""
    return {
        "user_id": plan.user_id,
        "events": [e.model_dump(mode="json") for e in plan.events],
        "facts": [
            {
                "subject": f.subject,
                "predicate": f.predicate,
                "obj": f.object,
                "object_is_entity": f.object_is_entity,
                "confidence": f.confidence,
            }
            for f in plan.facts
        ],
        "signals": [list(s) for s in plan.signals],
        "origin": plan.origin,
        "now": now.isoformat(),
    }


def plan_from_payload(payload: dict[str, Any]) -> tuple[TurnPlan, datetime]:
    """The plan and its time back from :func:`plan_payload`'s data. Raises ``KeyError``,
    ``ValueError`` (pydantic's ``ValidationError`` included) for data of another shape."""
    plan = TurnPlan(
        user_id=payload["user_id"],
        events=[EpisodicEvent.model_validate(e) for e in payload["events"]],
        facts=[
            FactCandidate(
                f["subject"],
                f["predicate"],
                f["obj"],
                object_is_entity=bool(f["object_is_entity"]),
                confidence=float(f["confidence"]),
            )
            for f in payload["facts"]
        ],
        signals=[(str(p), str(v)) for p, v in payload["signals"]],
        origin=payload.get("origin"),
    )
    return plan, datetime.fromisoformat(payload["now"])
