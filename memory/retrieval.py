"""The memory block of the prompt: what is recalled, how each line is labelled, in what order,
within what budget (seed §4.2 retrieval, §6.2 prompt order, §6.4 labels).

Every line carries its type, date, confidence and whether it is direct evidence or inference:

    [working · this session] short answers this time
    [semantic · CONFLICT, undecided] user prefers format: pdf (confirmed 2026-11-01, confidence 0.85)
        or markdown (pending since 2026-11-29, confidence 0.85) — not both are true: follow this
        request's own instruction, else ask which one
    [semantic · fact · since 2026-11-29 · confidence 0.85 · evidence: 1 episode] user prefers format: pdf
    [semantic · fact · since 2026-11-29 · confidence 0.70 · inferred] ...
    [episodic · task · 2026-11-29 · confidence 0.90 · evidence] completed task: ...
    [episodic · note · 2026-11-20 · confidence 0.70 · inferred] ...

Order (the block sits in the system turn, after the instructions, seed §6.2): this session's
working memory, undecided conflicts, semantic facts (direct evidence, then inferred), episodic
events (direct evidence by score, then inferred by score) — direct evidence is ranked apart
from inference. Lines are added in that order while the approximate token budget allows
(:func:`approx_tokens`: the estimate the rest of the prompt uses, no tokenizer download).
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass

from langchain_core.messages import SystemMessage
from langchain_core.messages.utils import count_tokens_approximately

from memory.episodic.base import EpisodicEvent, ScoredEvent
from memory.provenance import TASK, as_data, source_of
from memory.semantic import Fact

#: Default budget of the memory block, tokens (approximate).
DEFAULT_MEMORY_TOKENS: int = 400
#: Characters of one memory line's text at most (longer texts are cut with "…"). 250 keeps ten
#: recalled conversation turns under 600 tokens with their labels (LoCoMo: 593 on average; at
#: 400, 631); one turn in ten is longer (evals/README.md, Memory).
MAX_LINE_CHARS: int = 250


def approx_tokens(text: str) -> int:
    """Approximate tokens ``text`` adds to the system message, counted as the whole prompt is
    (``langchain_core``'s ``count_tokens_approximately``, ~4 characters a token, no tokenizer
    download; docs/DESIGN.md §6): the message's count with ``text`` minus its count empty.
    At least 1."""
    return max(1, _system_tokens(text) - _EMPTY_SYSTEM_TOKENS)


def _system_tokens(text: str) -> int:
    return count_tokens_approximately([SystemMessage(text)], extra_tokens_per_message=0)


_EMPTY_SYSTEM_TOKENS = _system_tokens("")


def _clip(text: str, limit: int = MAX_LINE_CHARS) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def format_working(item: str) -> str:
    return f"[working · this session] {_clip(item)}"


def changed_tools(event: EpisodicEvent, tool_versions: Mapping[str, str] | None) -> list[str]:
    """The tools ``event`` recorded using (``metadata["tool_versions"]``) whose schema version is
    not the current one in ``tool_versions`` (changed, or no longer offered); ``[]`` when either
    side is unknown."""
    recorded = (event.metadata or {}).get("tool_versions")
    if not tool_versions or not isinstance(recorded, dict):
        return []
    return sorted(str(t) for t, v in recorded.items() if tool_versions.get(str(t)) != v)


def format_episode(hit: ScoredEvent | EpisodicEvent, tool_versions: Mapping[str, str] | None = None) -> str:
    """An episode as a prompt line; with ``tool_versions`` (the current schema version of each
    offered tool) a memory of a tool that changed since is marked stale in its label."""
    event = hit.event if isinstance(hit, ScoredEvent) else hit
    label = "evidence" if event.evidence == "direct" else "inferred"
    changed = changed_tools(event, tool_versions)
    text = event.text
    if source_of(event.kind, event.metadata) == TASK and "; answer: " in text:
        # a task memory written before answers were quoted as data (an earlier release) may
        # carry a row's "always BCC x@y": it is left out here too
        head, _, answer = text.partition("; answer: ")
        quoted, left_out = as_data(answer)
        if left_out:
            text = f"{head}; answer: {quoted} [{left_out} instruction-like sentence(s) left out]"
    stale = f" · stale: {', '.join(changed)} changed since (call as offered now, not as then)" if changed else ""
    return (
        f"[episodic · {event.kind} · {event.created_at.date().isoformat()} · confidence {event.confidence:.2f}"
        f" · {label}{stale}] {_clip(text)}"
    )


def _evidence_label(fact: Fact) -> str:
    if fact.evidence != "direct":
        return "inferred"
    n = len(fact.sources)
    return f"evidence: {n} episode{'s' if n != 1 else ''}" if n else "evidence: user's words"


def format_fact(fact: Fact) -> str:
    return (
        f"[semantic · fact · since {fact.valid_from.date().isoformat()} · confidence {fact.confidence:.2f}"
        f" · {_evidence_label(fact)}] {_clip(fact.statement)}"
    )


def format_conflict(confirmed: Fact, pending: Fact) -> str:
    verb = confirmed.predicate.replace("_", " ")
    return (
        f"[semantic · CONFLICT, undecided] {confirmed.subject_name} {verb}: {confirmed.object}"
        f" (confirmed {confirmed.valid_from.date().isoformat()}, confidence {confirmed.confidence:.2f})"
        f" or {pending.object} (pending since {pending.created_at.date().isoformat()}, confidence"
        f" {pending.confidence:.2f}) — not both are true: follow this request's own instruction, else ask which one"
    )


@dataclass
class MemoryBlock:
    """The lines for the prompt and what they refer to (``refs``: ``working:<n>``,
    ``semantic:<fact id>``, ``episodic:<event id>``, in line order)."""

    lines: list[str]
    refs: list[str]
    tokens: int
    dropped: int = 0


def build_block(
    *,
    working: Sequence[str] = (),
    conflicts: Sequence[tuple[Fact, Fact]] = (),
    facts: Sequence[Fact] = (),
    episodes: Sequence[ScoredEvent] = (),
    budget_tokens: int = DEFAULT_MEMORY_TOKENS,
    retracted: Collection[str] = frozenset(),
    tool_versions: Mapping[str, str] | None = None,
) -> MemoryBlock:
    """Assemble the block in the module docstring's order within ``budget_tokens``. A fact
    that is part of a conflict appears only in its conflict line; an episode that is the
    evidence of a fact or conflict shown is left out (the fact's line counts it), and so is an
    episode in ``retracted`` (a statement the user later contradicted:
    ``SemanticMemory.retracted_sources``). ``tool_versions``: see :func:`format_episode`."""
    in_conflict = {f.id for pair in conflicts for f in pair}
    candidates: list[tuple[str, str]] = []
    candidates += [(format_working(w), f"working:{i}") for i, w in enumerate(working)]
    candidates += [(format_conflict(c, p), f"semantic:{p.id}") for c, p in conflicts]
    plain = [f for f in facts if f.id not in in_conflict and f.status == "confirmed"]
    candidates += [(format_fact(f), f"semantic:{f.id}") for f in plain if f.evidence == "direct"]
    candidates += [(format_fact(f), f"semantic:{f.id}") for f in plain if f.evidence != "direct"]
    # an episode that is the evidence of a fact or conflict shown above is said there already
    # (and two contradicting preference episodes must not read as two truths)
    covered = {i for pair in conflicts for f in pair for i in f.sources} | {i for f in plain for i in f.sources}
    episodes = [h for h in episodes if h.event.id not in covered and h.event.id not in retracted]
    direct = [h for h in episodes if h.event.evidence == "direct"]
    inferred = [h for h in episodes if h.event.evidence != "direct"]
    candidates += [(format_episode(h, tool_versions), f"episodic:{h.event.id}") for h in _by_score(direct)]
    candidates += [(format_episode(h, tool_versions), f"episodic:{h.event.id}") for h in _by_score(inferred)]
    lines, refs, used, dropped = [], [], 0, 0
    seen: set[str] = set()
    for line, ref in candidates:
        if line in seen:
            continue
        cost = approx_tokens(line)
        if used + cost > budget_tokens:
            dropped += 1
            continue
        seen.add(line)
        lines.append(line)
        refs.append(ref)
        used += cost
    return MemoryBlock(lines, refs, used, dropped)


def _by_score(hits: Iterable[ScoredEvent]) -> list[ScoredEvent]:
    return sorted(hits, key=lambda h: h.score, reverse=True)
