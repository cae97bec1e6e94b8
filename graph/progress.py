"""Goal-progress rules shared by the nodes (seed §5.2 "distance to the goal"; DESIGN §5).

A goal's **required steps** are tools its text asks for (``STEP_RULES``: the flagship task of
seed §5.1 — report, post to the group, monthly reminder — and its parts). **Distance** is the
number of required steps, among the tools actually registered, without a successful result
for the current goal. Pure functions over messages; no I/O.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from typing import Any

from langchain_core.messages import AnyMessage, HumanMessage, ToolMessage

# tool name → pattern of goals that require it
STEP_RULES: dict[str, re.Pattern[str]] = {
    "generate_report": re.compile(r"report|报告", re.I),
    "post_message": re.compile(r"\bpost\b|\bsend\b|group|channel|发到|群", re.I),
    "schedule_reminder": re.compile(r"remind|every month|monthly|提醒|每月", re.I),
}


def current_goal_messages(messages: list[AnyMessage]) -> list[AnyMessage]:
    """Messages from the last human message on (the current goal's work)."""
    start = max((i for i, m in enumerate(messages) if isinstance(m, HumanMessage)), default=0)
    return messages[start:]


def call_signature(call: dict[str, Any]) -> str:
    """``name(args)`` with keys sorted: equal for identical calls."""
    return f"{call['name']}({json.dumps(call.get('args', {}), sort_keys=True, default=str)})"


def required_steps(goal: str, available: Iterable[str]) -> set[str]:
    """Registered tools (``available``) that the goal's text requires (``STEP_RULES``)."""
    return {name for name, pattern in STEP_RULES.items() if pattern.search(goal)} & set(available)


def succeeded_tools(messages: list[AnyMessage]) -> set[str]:
    """Names of tools with at least one successful result among ``messages``."""
    return {m.name for m in messages if isinstance(m, ToolMessage) and m.status != "error" and m.name}


def missing_steps(goal: str, messages: list[AnyMessage], available: Iterable[str]) -> list[str]:
    """Required steps of ``goal`` not yet done in the current goal's messages, sorted."""
    return sorted(required_steps(goal, available) - succeeded_tools(current_goal_messages(messages)))
