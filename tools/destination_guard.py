"""The destination guard of one round of tool calls (DESIGN §2.8; the dispatch hook): which
side-effect calls must not run because a destination is not the user's or sensitive data would
go where the request did not name, with the user's words of the conversation and the goal's
results that the check reads.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from tools.deferred_calls import record_binding
from tools.destinations import Rules, destination_refusal
from tools.sensitive_data import sensitive_in_content, sensitive_values


def goal_results(messages: Sequence[Any], goal_id: str) -> list[tuple[str, Any, str]]:
    """``(tool name, args, tool_call_id)`` of every successful tool result after the human
    message ``goal_id`` (the whole list when it is not found): what this goal has read."""
    from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

    start = next((i for i, m in enumerate(messages) if isinstance(m, HumanMessage) and m.id == goal_id), 0)
    calls: dict[str, tuple[str, Any]] = {}
    out = []
    for m in messages[start:]:
        if isinstance(m, AIMessage):
            calls.update({str(c["id"]): (c["name"], c["args"]) for c in m.tool_calls if c.get("id")})
        elif isinstance(m, ToolMessage) and m.status != "error" and m.tool_call_id in calls:
            name, args = calls[m.tool_call_id]
            out.append((name, args, m.tool_call_id))
    return out


#: How many of the conversation's latest user messages count as the request's words.
MAX_USER_MESSAGES = 20


def user_words(messages: Sequence[Any], goal: str = "") -> list[str]:
    """The user's words in this conversation (its active branch): ``goal`` and the text of the
    latest :data:`MAX_USER_MESSAGES` human messages — a destination named in an earlier turn
    ("post the count to #sales-team" … "October") is still the user's."""
    from langchain_core.messages import HumanMessage

    texts = [m.text if isinstance(m.content, list) else str(m.content) for m in messages if isinstance(m, HumanMessage)]
    return list(dict.fromkeys([goal, *texts[-MAX_USER_MESSAGES:]]))


def _read(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8", errors="replace"))
    except (OSError, ValueError, RecursionError):
        return None


def _deferred_value(value: Any) -> dict[str, Any] | None:
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except (ValueError, RecursionError):
            return None
    return value if isinstance(value, dict) else None


async def guard_calls(
    calls: Sequence[Mapping[str, Any]],
    *,
    spec_of: Any,
    request: Sequence[str],
    answers: Mapping[str, Sequence[str]],
    prior: Sequence[tuple[str, Any, Path]],
    rules: Rules,
    data_dir: Path | str,
    fired: str = "",
) -> dict[str, str]:
    """The calls of one round that must not run: ``{tool_call_id: reason}``.

    ``calls``: ``{"id", "name", "args"}``; ``spec_of(name)`` → :class:`ToolSpec` or None;
    ``request``: the user's words of this goal; ``answers``: per call id, the user's answers
    that filled its arguments (they are the user's words too); ``prior``: ``(tool name, args,
    payload path)`` of the goal's successful results (sensitive data, :func:`sensitive_values`);
    ``fired``: the firing that started this run (``"reminder:3:2026-12"``), "" for a user's
    turn — a fired run never runs a tool that ``schedules``.

    A deferred call in an allowed call (``ToolSpec.deferred_call_arg``) is checked the same way
    and, when allowed, recorded with the request (:func:`record_binding`) before the call runs.
    File work runs in threads (safe on the event loop)."""
    import asyncio

    refused: dict[str, str] = {}
    marked: dict[str, set[str]] | None = None

    async def sensitive_data() -> dict[str, set[str]]:
        nonlocal marked
        if marked is None:
            marked = {}
            for name, args, path in prior:
                spec = spec_of(name)
                if not rules.sensitive and not (spec is not None and spec.sensitive_results):
                    continue
                payload = await asyncio.to_thread(_read, Path(path))
                for mark, values in sensitive_values(spec, args, payload, rules.sensitive).items():
                    marked.setdefault(mark, set()).update(values)
        return marked

    for call in calls:
        spec = spec_of(call["name"])
        if spec is None or not spec.side_effect or not isinstance(call.get("args"), dict):
            continue
        args = call["args"]
        if fired and spec.schedules:
            refused[call["id"]] = (
                f"{spec.name} not run: this run was started by the firing {fired}; a fired reminder delivers "
                "its notice and runs its action, it never schedules anything (the reminder already recurs)"
            )
            continue
        texts = [*request, *answers.get(call["id"], ())]
        data = await sensitive_data()
        reason = destination_refusal(
            spec, args, request=texts, rules=rules, sensitive=sensitive_in_content(spec, args, data)
        )
        deferred = _deferred_value(args.get(spec.deferred_call_arg)) if spec.deferred_call_arg else None
        later_sensitive: list[str] = []
        if reason is None and deferred is not None and deferred.get("kind") == "tool":
            later = spec_of(str(deferred.get("tool")))
            given = deferred.get("args")
            later_args: dict[str, Any] = given if isinstance(given, dict) else {}
            if later is not None:
                later_sensitive = sensitive_in_content(later, later_args, data)
                why = destination_refusal(later, later_args, request=texts, rules=rules, sensitive=later_sensitive)
                if why is not None:
                    reason = (
                        f"{spec.name} not run: its {spec.deferred_call_arg} would run {later.name} later, and {why}"
                    )
        if reason is not None:
            refused[call["id"]] = reason
        elif deferred is not None:
            await asyncio.to_thread(record_binding, data_dir, deferred, texts, later_sensitive)
    return refused
