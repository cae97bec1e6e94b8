"""Goal-progress rules shared by the nodes (seed §5.2 "distance to the goal"; DESIGN §5).

A goal's **required steps** are tools its text asks for (``STEP_RULES``: the flagship task of
seed §5.1 — report, post to the group, monthly reminder — and its parts). A step is required
only by a clause that *asks for the action*: an action verb with its object ("post it to the
project group", "remind me every month"); a negated clause ("don't post anything"), a question
("did you already send the report?") or a stated preference ("I prefer short reports")
requires nothing. **Distance** is the number of required steps, among the tools actually
registered, without a successful result for the current goal. Pure functions; no I/O.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from typing import Any

from langchain_core.messages import AnyMessage, HumanMessage, ToolMessage

# tool name → pattern of a clause that asks for it (verb + object, either order)
STEP_RULES: dict[str, re.Pattern[str]] = {
    "generate_report": re.compile(
        r"\b(write|generate|create|make|produce|prepare|draft|summari[sz]e|compile)\b.{0,80}\breports?\b"
        r"|\breport\b.{0,30}\b(for|on|about)\b.{0,20}\b(last|this|previous)\b|(写|生成|做|总结).{0,20}报告",
        re.I,
    ),
    "post_message": re.compile(
        r"\b(post|send|share|announce)\b.{0,80}\b(group|channel|team|chat)\b|(发到|发送到|发给).{0,20}(群|频道)",
        re.I,
    ),
    "schedule_reminder": re.compile(
        r"\bremind me\b|\b(set|schedule|create|add)\b.{0,30}\breminders?\b|提醒我", re.I
    ),
}
# a clause with one of these asks for nothing (negation, question, stated preference)
NOT_A_REQUEST = re.compile(
    r"\b(don'?t|do not|never|no need|without|not)\b|不要|别|不用"
    r"|^\s*(did|have|has|was|were|is|are|can|could|should|would|do|does|why|what|when|how)\b.*\?\s*$"
    r"|\b(i prefer|i like|i'd like reports|from now on)\b|我喜欢|以后",
    re.I,
)
_CLAUSES = re.compile(r"(?<=[.!?;。！？；])\s+|\bbut\b|\bthen\b|，但|但是", re.I)


def requested_clauses(goal: str) -> list[str]:
    """The clauses of ``goal`` that ask for something (see the module docstring)."""
    return [c for c in _CLAUSES.split(goal) if c and c.strip() and not NOT_A_REQUEST.search(c)]


def current_goal_messages(messages: list[AnyMessage]) -> list[AnyMessage]:
    """Messages from the last human message on (the current goal's work)."""
    start = max((i for i, m in enumerate(messages) if isinstance(m, HumanMessage)), default=0)
    return messages[start:]


def call_signature(call: dict[str, Any]) -> str:
    """``name(args)`` with keys sorted: equal for identical calls."""
    return f"{call['name']}({json.dumps(call.get('args', {}), sort_keys=True, default=str)})"


def required_steps(goal: str, available: Iterable[str]) -> set[str]:
    """Registered tools (``available``) that a requesting clause of the goal requires."""
    clauses = requested_clauses(goal)
    return {name for name, pattern in STEP_RULES.items() if any(pattern.search(c) for c in clauses)} & set(available)


def succeeded_tools(messages: list[AnyMessage]) -> set[str]:
    """Names of tools with at least one successful result among ``messages``."""
    return {m.name for m in messages if isinstance(m, ToolMessage) and m.status != "error" and m.name}


def missing_steps(goal: str, messages: list[AnyMessage], available: Iterable[str]) -> list[str]:
    """Required steps of ``goal`` not yet done in the current goal's messages, sorted."""
    return sorted(required_steps(goal, available) - succeeded_tools(current_goal_messages(messages)))
