"""Node ``evaluate_progress``: after each tool round, measure distance to the goal and decide
whether the loop goes on (seed §5.2, §6.1; DESIGN §5).

Rules, in order (each is a cap, so no retry path is unbounded):

1. **Repeated identical call**: the same tool with the same arguments made more than
   ``context.max_repeated_calls`` times for this goal → stop.
2. **Distance to goal**: the goal's required steps come from ``STEP_RULES`` (a tool is required
   when the goal's text matches its pattern); distance = required steps without a successful
   result yet. If it did not shrink this round, the model is told to change approach; after
   ``MAX_STALLED_ROUNDS`` such rounds in a row → stop (no progress). At distance 0 the model is
   told every step is done and to answer.
3. **Round cap**: ``context.max_tool_rounds`` rounds for one goal → stop.

Update: ``tool_rounds``, ``goal_distance``, ``stalled_rounds``, ``progress_note`` (advice for
the next model call), ``report_path`` (when ``generate_report`` succeeded), and ``stop_reason``
— set only when the loop must end; ``write_memory`` then tells the user, never as a
normal-looking answer.
"""

from __future__ import annotations

import json
import re
from typing import Any

from langchain_core.messages import AIMessage, AnyMessage, HumanMessage, ToolMessage
from langgraph.runtime import Runtime

from graph.context import Context
from graph.state import State

MAX_STALLED_ROUNDS = 3

# tool name → pattern of goals that require it (the flagship task of seed §5.1 and its parts)
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


def required_steps(goal: str, available: set[str] | None = None) -> set[str]:
    """Tools the goal's text requires (``STEP_RULES``), limited to ``available`` if given."""
    steps = {name for name, pattern in STEP_RULES.items() if pattern.search(goal)}
    return steps & available if available is not None else steps


def succeeded_tools(messages: list[AnyMessage]) -> set[str]:
    """Names of tools with at least one successful result among ``messages``."""
    return {m.name for m in messages if isinstance(m, ToolMessage) and m.status != "error" and m.name}


def _report_path(messages: list[AnyMessage]) -> str | None:
    for message in reversed(messages):
        if isinstance(message, ToolMessage) and message.name == "generate_report" and message.status != "error":
            try:
                data = json.loads(message.content).get("data") or {}
            except (TypeError, ValueError, AttributeError):
                continue
            if isinstance(data, dict) and data.get("path"):
                return str(data["path"])
    return None


async def evaluate_progress(state: State, runtime: Runtime[Context]) -> dict[str, Any]:
    """Graph node: see the module docstring for the update it returns."""
    context = runtime.context or Context()
    work = current_goal_messages(state.messages)
    rounds = state.tool_rounds + 1
    update: dict[str, Any] = {"tool_rounds": rounds}
    report = _report_path(work)
    if report:
        update["report_path"] = report

    calls = [c for m in work if isinstance(m, AIMessage) for c in m.tool_calls]
    last_ai = next((m for m in reversed(work) if isinstance(m, AIMessage)), None)
    seen: dict[str, int] = {}
    for call in calls:
        sig = call_signature(call)
        seen[sig] = seen.get(sig, 0) + 1
    for call in (last_ai.tool_calls if last_ai else []):
        sig = call_signature(call)
        if seen[sig] > context.max_repeated_calls:
            update["stop_reason"] = (
                f"repeated identical call: {sig[:200]} was made {seen[sig]} times for this goal "
                f"(limit {context.max_repeated_calls}); stopped instead of looping"
            )
            return update

    done = succeeded_tools(work)
    required = required_steps(state.goal)
    distance = len(required - done)
    previous = state.goal_distance
    stalled = state.stalled_rounds + 1 if previous is not None and distance >= previous else 0
    if previous is None:
        stalled = 0 if distance < len(required) or not required else 1
    update.update(goal_distance=distance, stalled_rounds=stalled)
    round_ids = {c["id"] for c in [*last_ai.tool_calls, *last_ai.invalid_tool_calls]} if last_ai else set()
    last_results = [m for m in work if isinstance(m, ToolMessage) and m.tool_call_id in round_ids]
    all_failed = bool(last_results) and all(m.status == "error" for m in last_results)

    if required and distance == 0:
        update["progress_note"] = (
            f"Progress: every required step is done ({', '.join(sorted(required))}). "
            "Now answer the user with a short summary; do not call more tools."
        )
    elif stalled >= MAX_STALLED_ROUNDS:
        missing = ", ".join(sorted(required - done)) or "a useful result"
        update["stop_reason"] = (
            f"no progress: {stalled} tool rounds in a row did not bring the goal closer "
            f"(still missing: {missing})"
        )
        return update
    elif stalled or all_failed:
        missing = sorted(required - done)
        update["progress_note"] = (
            "Progress check: the last round did not bring the goal closer"
            + (" (the tool returned an error; fix the arguments)" if all_failed else "")
            + ". Change approach"
            + (f"; steps still missing: {', '.join(missing)}" if missing else "")
            + "."
        )
    else:
        missing = sorted(required - done)
        update["progress_note"] = (
            f"Progress: steps still to do: {', '.join(missing)}." if missing else ""
        )

    if rounds >= context.max_tool_rounds:
        update["stop_reason"] = (
            f"tool-round cap reached: {rounds} rounds for this goal (limit {context.max_tool_rounds})"
        )
    return update
