"""What a finished turn writes to memory (seed §4.2): the episodic events its triggers fire
(:func:`build_turn_events`: a task completed or stopped, a stated preference, an explicit note, a
tool recovered on retry, a cross-session reference) and the plan that carries them with the
turn's fact candidates (:class:`TurnPlan`). Pure: no I/O; ``memory.service`` writes the plan.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from memory import fact_extraction, policy, provenance, task_outcome, triggers
from memory.dates import resolve_relative_dates
from memory.episodic.base import EpisodicEvent

GOAL_CHARS = 200
ANSWER_CHARS = 300


def _clip(text: str, limit: int) -> str:
    text = " ".join((text or "").split())
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def build_turn_events(
    user_id: str,
    thread_id: str,
    goal: str,
    answer: str,
    tools_used: Sequence[str],
    stop_reason: str | None,
    failed_then_succeeded: Sequence[str],
    evidence: task_outcome.TurnEvidence | None = None,
    goal_from_user: bool = True,
) -> list[EpisodicEvent]:
    """The events a finished turn triggers (seed §4.2), before the confidence threshold:
    "task" when ``task_outcome.assess_task`` finds evidence that it completed (or that work was
    done before an early stop) — its confidence is that evidence's; one "preference" per
    stated preference, one "tool_recovery" per tool that failed then succeeded, one
    "cross_session" when the request refers to an earlier session. Relative dates in their
    texts get the absolute date beside them (``memory.dates``, the machine's local time).
    ``evidence``: what the runtime observed (default: only the names in ``tools_used``).
    ``goal_from_user`` False: the request is not the user's own words (a reminder's stored
    action, fired by the scheduler): no preference, note or cross-session event is read from
    it. Pure."""
    evidence = evidence or task_outcome.TurnEvidence.from_tools(tools_used)
    tools = list(dict.fromkeys([*(tools_used or []), *evidence.tools_succeeded]))
    meta: dict[str, Any] = {"thread_id": thread_id}
    # the shape each tool had when it was used: a later schema change marks the memory stale
    versions = {"tool_versions": dict(evidence.tool_versions)} if evidence.tool_versions else {}
    events: list[EpisodicEvent] = []
    verdict = task_outcome.assess_task(goal, answer, stop_reason, evidence)
    # a request that is not the user's words (a reminder's stored action) is quoted as data too
    request = goal if goal_from_user else (provenance.as_data(goal)[0] or "a scheduled action")
    if verdict.outcome is not None:
        text = f"{'completed' if verdict.outcome == 'completed' else f'stopped ({stop_reason}) on'} task: {_clip(request, GOAL_CHARS)}"
        if tools:
            text += f"; tools: {', '.join(tools)}"
        if evidence.artifacts:
            text += f"; produced: {', '.join(evidence.artifacts[:3])}"
        left_out = 0
        if verdict.keep_answer and verdict.outcome == "completed":
            # the answer is the model's words and may echo a tool result: quoted as data, its
            # instruction-like sentences left out (a row's "always BCC x@y" is not the user's)
            quoted, left_out = provenance.as_data(answer)
            if quoted.strip():
                text += f"; answer: {_clip(quoted, ANSWER_CHARS)}"
            if left_out:
                text += f" [{left_out} instruction-like sentence(s) of the answer left out: data, not the user's]"
        events.append(
            EpisodicEvent(
                user_id=user_id,
                kind="task",
                text=text,
                confidence=verdict.confidence,
                metadata={
                    **meta,
                    "tools": tools,
                    "stop_reason": stop_reason,
                    "outcome": verdict.outcome,
                    "evidence": verdict.evidence,
                    "answer_defects": verdict.defects,
                    "artifacts": list(evidence.artifacts),
                    "source": provenance.TASK,
                    **versions,
                    **({"instructions_left_out": left_out} if left_out else {}),
                },
            )
        )
    said = goal if goal_from_user else ""  # only the user's own words state preferences and notes
    events.extend(
        EpisodicEvent(
            user_id=user_id,
            kind="preference",
            text=f"user preference: {sentence}",
            confidence=policy.PREFERENCE_CONFIDENCE,
            metadata={**meta, "source": provenance.USER},
        )
        for sentence in triggers.detect_preferences(said)
    )
    events.extend(
        EpisodicEvent(
            user_id=user_id,
            kind="note",
            text=f"user note: {sentence}",
            confidence=policy.NOTE_CONFIDENCE,
            metadata={**meta, "source": provenance.USER},
        )
        for sentence in triggers.detect_notes(said)
    )
    events.extend(
        EpisodicEvent(
            user_id=user_id,
            kind="tool_recovery",
            text=f"tool {tool} failed, then succeeded on retry, during task: {_clip(request, GOAL_CHARS)}",
            confidence=policy.TOOL_RECOVERY_CONFIDENCE,
            metadata={**meta, "tool": tool, "source": provenance.RUNTIME, **versions},
        )
        for tool in dict.fromkeys(failed_then_succeeded or [])
    )
    phrase = triggers.detect_cross_session(said)
    if phrase:
        events.append(
            EpisodicEvent(
                user_id=user_id,
                kind="cross_session",
                text=f"user referred to earlier work ({phrase}): {_clip(goal, GOAL_CHARS)}",
                confidence=policy.CROSS_SESSION_CONFIDENCE,
                metadata={**meta, "phrase": phrase, "source": provenance.USER},
            )
        )
    for event in events:  # "yesterday" stored as such means another day next week (issue 26)
        event.text = resolve_relative_dates(event.text, event.created_at.astimezone())
    return events


@dataclass
class TurnPlan:
    """What a finished turn writes: episodic ``events`` and semantic ``facts`` (candidates
    from the user's words), plus ``signals`` that may decide a pending conflict."""

    user_id: str
    events: list[EpisodicEvent] = field(default_factory=list)
    facts: list[fact_extraction.FactCandidate] = field(default_factory=list)
    signals: list[tuple[str, str]] = field(default_factory=list)
    #: The turn's place (``memory.semantic.origin_of``): facts stated on a branch later rolled
    #: back are not recalled on the branch that replaced it.
    origin: str | None = None

    def __len__(self) -> int:
        return len(self.events) + len(self.facts)
