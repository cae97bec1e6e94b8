"""Goal-progress rules shared by the nodes (seed §6.1 "distance to the goal"; DESIGN §0, §5.3).

Nothing here knows a tool by name: every rule reads the tools' own metadata
(:class:`tools.spec.ToolSpec`), so a tool added by a user — builtin or MCP — gets step
tracking, masking and stop rules without a change in ``graph/`` or ``nodes/``.

* A goal's **required steps** are the registered tools whose ``requested_by`` patterns match a
  clause of the goal that *asks for an action* ("post it to the project group", "remind me
  every month"). A negated clause ("don't post anything"), a question ("did you already send
  the report?") or a stated preference ("I prefer short reports") requires nothing.
* **Distance** is the number of required steps without a successful result for the current
  goal.
* A **side-effect tool** is offered to the model only when it is a required step of the goal:
  a read-only request ("what time is it in Tokyo?") can never trigger a post or a reminder,
  whatever the model does (``call_model`` binds only the offer; ``dispatch_tools`` refuses
  anything else).
* **Artifacts** are what successful calls produced, named by each tool's ``artifact_field``.
* **Shares** are the ready messages successful calls offer about what they produced (each
  tool's ``share_field``): what a later side effect that shares them is to carry.

Pure functions; no I/O.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from langchain_core.messages import AnyMessage, HumanMessage, ToolMessage

from graph.request_identity import goal_key
from tools.spec import ToolSpec

# "I'd like <a kind of thing> ...": a bare plural names a kind ("I'd like invoices in PDF",
# "I'd like tickets posted to the support channel"), so the clause states a taste; with "to",
# "you" or a determiner ("I'd like the report for October", "I'd like you to post it") it is a
# request. Grammar words only: no workload's nouns.
_TASTE_FOR_A_KIND = (
    r"\bi(?:'d| would) like (?!(?:to|you|it|them|me|us|the|a|an|this|that|these|those|my|our|your|his|her"
    r"|their|its|one|some|any|all|each|every|last|next)\b)[a-z]+s\b"
)
# A clause with one of these asks for nothing (negation, question, stated preference). These
# are rules about requests in general (English and Chinese), not about any tool or workload.
NOT_A_REQUEST = re.compile(
    r"\b(don'?t|do not|never|no need|without|not)\b|不要|别|不用"
    r"|^\s*(did|have|has|was|were|is|are|can|could|should|would|do|does|why|what|when|how)\b.*\?\s*$"
    r"|\b(i prefer|i like|from now on)\b|" + _TASTE_FOR_A_KIND + r"|我喜欢|以后",
    re.IGNORECASE,
)
_CLAUSES = re.compile(r"(?<=[.!?;。！？；])\s+|\bbut\b|\bthen\b|，但|但是", re.IGNORECASE)


def requested_clauses(goal: str) -> list[str]:
    """The clauses of ``goal`` that ask for something (see the module docstring)."""
    return [c for c in _CLAUSES.split(goal) if c and c.strip() and not NOT_A_REQUEST.search(c)]


def current_goal_messages(messages: list[AnyMessage]) -> list[AnyMessage]:
    """Messages from the last human message on (the current goal's work)."""
    start = max((i for i, m in enumerate(messages) if isinstance(m, HumanMessage)), default=0)
    return messages[start:]


def goal_message_id(messages: list[AnyMessage]) -> str:
    """Goal id of the human message that set the current goal ("" when there is none): its id,
    or the request it repeats from another branch (``graph.request_identity.goal_key``). It is
    the same on every branch that shares that message, so it keys exactly-once side effects."""
    for message in reversed(messages):
        if isinstance(message, HumanMessage):
            return goal_key(message)
    return ""


def request_id(thread_id: str, goal_id: str, name: str, args: Any) -> str:
    """Idempotency key of a request (seed §2.2): thread, the goal's message id and a hash of the
    tool name and canonical arguments (keys sorted, compact JSON). The model's call id is not
    part of it: the same request under a new call id, on a fork, after a timeout or a restart
    is recognised; a different request (other arguments, another goal) is not."""
    body = json.dumps([name, args], sort_keys=True, default=str, ensure_ascii=True, separators=(",", ":"))
    return f"{thread_id}:{goal_id}:{hashlib.sha256(body.encode()).hexdigest()[:24]}"


def call_signature(call: Mapping[str, Any]) -> str:
    """``name(args)`` with keys sorted: equal for identical calls."""
    return f"{call['name']}({json.dumps(call.get('args', {}), sort_keys=True, default=str)})"


def required_steps(goal: str, specs: Iterable[ToolSpec]) -> set[str]:
    """Names of the tools in ``specs`` that a requesting clause of ``goal`` asks for."""
    clauses = requested_clauses(goal)
    if not clauses:
        return set()
    return {spec.name for spec in specs if any(p.search(c) for p in spec.request_patterns() for c in clauses)}


def unrequested_side_effects(goal: str, specs: Iterable[ToolSpec]) -> set[str]:
    """Side-effect tools no clause of ``goal`` asks for: never offered for this goal."""
    specs = list(specs)
    required = required_steps(goal, specs)
    return {spec.name for spec in specs if spec.side_effect and spec.name not in required}


def later_side_effects(goal: str, messages: list[AnyMessage], specs: Iterable[ToolSpec]) -> set[str]:
    """Missing side-effect steps that the request states after another missing one: not offered
    yet. Steps run in the order the request asks for them ("write the report, post it to the
    group, remind me" → the post waits for the report it refers to), whatever the model does."""
    specs = list(specs)
    missing = set(missing_steps(goal, messages, specs))
    clauses = requested_clauses(goal)

    def position(spec: ToolSpec) -> int:
        starts = [
            goal.find(c) + (m.start() if (m := p.search(c)) else 0)
            for c in clauses
            for p in spec.request_patterns()
            if p.search(c)
        ]
        return min(starts, default=len(goal))

    pending = sorted((position(s), s.name) for s in specs if s.side_effect and s.name in missing)
    return {name for _, name in pending[1:]}


def succeeded_tools(messages: list[AnyMessage]) -> set[str]:
    """Names of tools with at least one successful result among ``messages``."""
    return {m.name for m in messages if isinstance(m, ToolMessage) and m.status != "error" and m.name}


def missing_steps(goal: str, messages: list[AnyMessage], specs: Iterable[ToolSpec]) -> list[str]:
    """Required steps of ``goal`` not yet done in the current goal's messages, sorted."""
    return sorted(required_steps(goal, specs) - succeeded_tools(current_goal_messages(messages)))


def _result_fields(messages: list[AnyMessage], fields: dict[str, str]) -> Iterator[Any]:
    """The value of ``fields[tool]`` in the envelope ``data`` of each successful result among
    ``messages`` whose tool has such a field, in call order (unparseable results skipped)."""
    for message in messages:
        if not isinstance(message, ToolMessage) or message.status == "error":
            continue
        field = fields.get(message.name or "")
        if not field or not isinstance(message.content, str):
            continue
        try:
            data = json.loads(message.content).get("data") or {}
        except (TypeError, ValueError, AttributeError):
            continue
        if isinstance(data, dict):
            yield data.get(field)


def artifacts(messages: list[AnyMessage], specs: Iterable[ToolSpec]) -> list[str]:
    """What the successful calls among ``messages`` produced: the value of each tool's
    ``artifact_field`` in its result envelope's ``data`` (e.g. a report's path), in call order,
    without repeats."""
    fields = {spec.name: spec.artifact_field for spec in specs if spec.artifact_field}
    found: list[str] = []
    for value in _result_fields(messages, fields):
        if value and str(value) not in found:
            found.append(str(value))
    return found


def shares(messages: list[AnyMessage], specs: Iterable[ToolSpec]) -> list[str]:
    """The ready-to-share texts the successful calls among ``messages`` offer (each tool's
    ``share_field`` ``{"text": ...}`` in its result envelope's ``data``), in call order: what a
    later message about those results is to carry (:mod:`tools.content_checks`)."""
    fields = {spec.name: spec.share_field for spec in specs if spec.share_field}
    found: list[str] = []
    for value in _result_fields(messages, fields):
        text = value.get("text") if isinstance(value, dict) else None
        if isinstance(text, str) and text and text not in found:
            found.append(text)
    return found
