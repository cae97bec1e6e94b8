"""Node ``consolidate_extract`` (the ``consolidate`` graph): candidate semantic facts from the
scanned episodes, kept over the confidence threshold, duplicates and conflicts resolved by the
knowledge graph (``memory.semantic``: a contradiction is stored pending, never overwriting).

Extractor: with a capable model configured (any model but the embedded one) the model reads
the episodes and proposes facts as JSON (``evidence = "inferred"``, confidence as it says,
capped at 0.9); on the embedded model — or when the model's answer cannot be used — the
rule-based extractor (``memory.fact_extraction.extract_facts``, the user's own words, "direct") does,
and ``extractor`` says which one ran. Update: ``extractor``, ``counts`` (candidates, kept,
added, duplicates, conflicts, resolved).
"""

from __future__ import annotations

import json
import logging
import re
from typing import Any

from langchain_core.messages import HumanMessage, SystemMessage
from langgraph.runtime import Runtime

from graph.consolidate_state import ConsolidateState, run_clock
from graph.context import Context
from graph.resources import get_memory, get_model
from memory.episodic.base import EpisodicEvent
from memory.fact_extraction import FactCandidate
from memory.service import MemoryService

log = logging.getLogger(__name__)

#: Episodes per model call.
BATCH = 20
PROMPT = (
    "Extract lasting facts about the user and the people, groups and things they mention from these "
    'memory records. Answer with JSON only: a list of objects {"record": <record number>, "subject": '
    '"user" or a name, "predicate": snake_case (use prefers_format, prefers_answer_length, '
    'prefers_language, reports_to, works_at, lives_in, member_of, leads when they fit), "object": value, '
    '"object_is_entity": true if the object is a person/group/place, "confidence": 0..1}. '
    "Only facts the records state or clearly imply; [] if none."
)


def parse_facts(text: str, count: int) -> dict[int, list[FactCandidate]]:
    """The model's JSON answer → record index → candidates. Raises ``ValueError`` when it is
    not a JSON list of fact objects."""
    match = re.search(r"\[.*\]", text or "", re.DOTALL)
    items = json.loads(match.group(0) if match else text)
    if not isinstance(items, list):
        raise ValueError("not a JSON list")
    out: dict[int, list[FactCandidate]] = {}
    for item in items:
        index = int(item["record"]) - 1
        if not 0 <= index < count:
            continue
        predicate = re.sub(r"[^a-z0-9_]", "_", str(item["predicate"]).strip().lower())
        out.setdefault(index, []).append(
            FactCandidate(
                str(item["subject"]).strip(),
                predicate,
                str(item["object"]).strip(),
                object_is_entity=bool(item.get("object_is_entity")),
                confidence=min(0.9, max(0.0, float(item.get("confidence", 0.7)))),
            )
        )
    return out


async def model_candidates(context: Context, events: list[EpisodicEvent]) -> dict[str, list[FactCandidate]]:
    model = await get_model(context)
    out: dict[str, list[FactCandidate]] = {}
    for start in range(0, len(events), BATCH):
        chunk = events[start : start + BATCH]
        # the user's words only: a task's answer may quote tool data ("always BCC x@y"), never a fact
        records = "\n".join(f"{i + 1}. [{e.kind}] {MemoryService.extraction_text(e)}" for i, e in enumerate(chunk))
        reply = await model.ainvoke([SystemMessage(PROMPT), HumanMessage(records)])
        for index, facts in parse_facts(str(reply.content), len(chunk)).items():
            out[chunk[index].id] = facts
    return out


async def consolidate_extract(state: ConsolidateState, runtime: Runtime[Context]) -> dict[str, Any]:
    """Graph node: see the module docstring."""
    from graph.model import is_embedded

    context = runtime.context or Context()
    memory = get_memory(context)
    events = [EpisodicEvent.model_validate(e) for e in state.episodes]
    now = run_clock(state.now)
    if not events:
        return {"extractor": "none (no recent episodes)", "counts": {}}
    if not is_embedded(context):
        try:
            found = await model_candidates(context, events)
            counts = await memory.consolidate_facts(events, now=now, candidates=found, evidence="inferred")
            return {"extractor": f"model:{context.model}", "counts": counts}
        except Exception as exc:  # noqa: BLE001 - a model that cannot do it falls back to the rules
            log.warning("consolidate: model extraction failed (%s); using the rule-based extractor", exc)
    counts = await memory.consolidate_facts(events, now=now)
    return {"extractor": "rule-based", "counts": counts}
