"""Node ``assemble_context``: choose what the model sees next (seed §1.2, §6.2; case K1).

Update: ``goal``, ``intent``; ``tool_rounds``, ``stop_reason``, ``blocked_tools``,
``goal_distance``, ``stalled_rounds`` (reset when a new user message starts a goal), ``memory_context`` (recalled once per goal), ``system_prompt`` and
``window`` (``[message id, char limit]`` pairs: the history for the next model call, rendered
by ``State.prompt_messages``).

The window is built from **groups**, never single messages: a human message; an AI answer; or
an AI message with ``tool_calls`` together with exactly the tool messages answering it. A group
whose calls lack results, and a tool message without its calling AI message, are left out, so
no cut can orphan a tool result or leave calls unanswered (case K1, OpenAI's 400 error). The
current goal's own groups come first; earlier groups are added newest-first, truncated, while
the token budget (approximate count, no tokenizer download) allows.
"""

from __future__ import annotations

import re
from typing import Any

from langchain_core.messages import (
    AIMessage,
    AnyMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)
from langchain_core.messages.utils import count_tokens_approximately
from langgraph.runtime import Runtime

from graph.context import Context
from graph.progress import required_steps
from graph.resources import get_memory, get_toolbox
from graph.state import State

SYSTEM_PROMPT = (
    "You are Hermes, an agent that does work with tools. Use a tool when the task needs data or "
    "an action; answer directly when you already have what you need. Never invent tool results."
)
HISTORY_CHARS = 600  # earlier-goal messages are truncated to this many characters

INTENT_RULES: list[tuple[str, re.Pattern[str]]] = [
    ("report", re.compile(r"\b(report|summar|analy[sz]|总结|报告|分析)", re.I)),
    ("data_query", re.compile(r"\b(sales|orders?|revenue|query|sql|database|销售|订单)", re.I)),
    ("messaging", re.compile(r"\b(post|send|message|group|channel|群|发送)", re.I)),
    ("scheduling", re.compile(r"\b(remind|schedule|every month|monthly|提醒|每月)", re.I)),
    ("preference", re.compile(r"\b(i prefer|always|from now on|我喜欢|以后)", re.I)),
]


def tag_intent(text: str) -> str:
    """Rule-based intent tag of a user turn (seed §1.2): the first matching rule, else 'chat'."""
    for tag, pattern in INTENT_RULES:
        if pattern.search(text):
            return tag
    return "chat"


def message_groups(messages: list[AnyMessage]) -> list[list[AnyMessage]]:
    """Split history into atomic groups (see the module docstring). Orphan tool messages and
    AI messages whose ``tool_calls`` are not all answered are dropped."""
    groups: list[list[AnyMessage]] = []
    i = 0
    while i < len(messages):
        message = messages[i]
        if isinstance(message, ToolMessage):
            i += 1  # orphan: its AI message is not in this history
            continue
        if isinstance(message, AIMessage) and (message.tool_calls or message.invalid_tool_calls):
            wanted = {c["id"] for c in message.tool_calls} | {
                c["id"] for c in message.invalid_tool_calls
            }
            group: list[AnyMessage] = [message]
            j = i + 1
            while j < len(messages) and isinstance(messages[j], ToolMessage):
                if messages[j].tool_call_id in wanted:
                    group.append(messages[j])
                j += 1
            answered = {m.tool_call_id for m in group[1:]}
            if wanted <= answered:
                groups.append(group)
            i = j
            continue
        if isinstance(message, SystemMessage):
            i += 1
            continue
        groups.append([message])
        i += 1
    return groups


def _truncate(message: AnyMessage, limit: int) -> AnyMessage:
    content = message.content
    if isinstance(content, str) and len(content) > limit:
        return message.model_copy(update={"content": content[:limit] + " …[truncated]"})
    return message


def select_window(
    messages: list[AnyMessage], budget_tokens: int, system_tokens: int = 0
) -> list[AnyMessage]:
    """Choose history within ``budget_tokens`` (approximate) as whole groups.

    The last human message and everything after it (the current goal) are kept first, oldest
    groups of it dropped if even that exceeds the budget; then earlier groups newest-first,
    each message truncated to ``HISTORY_CHARS``. Returns messages in chronological order.
    """
    groups = message_groups(messages)
    start = max((i for i, g in enumerate(groups) if isinstance(g[0], HumanMessage)), default=0)
    current, earlier = groups[start:], groups[:start]
    budget = budget_tokens - system_tokens
    chosen: list[list[AnyMessage]] = []
    used = 0
    # Current goal: its human message always, then the newest groups that fit.
    head, tail = current[:1], current[1:]
    for group in head:
        used += count_tokens_approximately(group)
    kept_tail: list[list[AnyMessage]] = []
    for group in reversed(tail):
        cost = count_tokens_approximately(group)
        if used + cost > budget:
            break
        kept_tail.insert(0, group)
        used += cost
    chosen = head + kept_tail
    prefix: list[list[AnyMessage]] = []
    for group in reversed(earlier):
        trimmed = [_truncate(m, HISTORY_CHARS) for m in group]
        cost = count_tokens_approximately(trimmed)
        if used + cost > budget:
            break
        prefix.insert(0, trimmed)
        used += cost
    return [m for g in prefix + chosen for m in g]


def build_system_prompt(memories: list[str]) -> str:
    """System turn in the seed §6.2 order: instructions, then key memories (labelled). The
    progress note goes last, after the tool results (``State.prompt_messages``)."""
    parts = [SYSTEM_PROMPT]
    if memories:
        parts.append("What you remember (type · date · confidence · evidence):\n" + "\n".join(memories))
    return "\n\n".join(parts)


async def assemble_context(state: State, runtime: Runtime[Context]) -> dict[str, Any]:
    """Graph node: see the module docstring for the update it returns."""
    context = runtime.context or Context()
    update: dict[str, Any] = {}
    last = state.messages[-1] if state.messages else None
    memories = state.memory_context
    if isinstance(last, HumanMessage):
        goal = last.text if hasattr(last, "text") else str(last.content)
        goal = goal if isinstance(goal, str) else str(last.content)
        try:
            memories = await get_memory(context).recall(context.user_id, goal, k=3)
        except Exception:  # memory must never block the answer (DESIGN §4)
            memories = []
        steps = sorted(required_steps(goal, (await get_toolbox(context)).registry.names()))
        update.update(
            goal=goal,
            intent=tag_intent(goal),
            tool_rounds=0,
            stop_reason=None,
            progress_note=f"Steps of this task: {', '.join(steps)}." if steps else "",
            blocked_tools=[],
            must_call_tool=bool(steps),  # known steps to do: the first reply must act
            goal_distance=len(steps),
            stalled_rounds=0,
            memory_context=memories,
            references=[f"memory:{i}" for i in range(len(memories))],
        )
    system_prompt = build_system_prompt(memories)
    window = select_window(
        state.messages,
        context.token_budget,
        count_tokens_approximately([SystemMessage(system_prompt)]),
    )
    original = {m.id: m for m in state.messages}
    update.update(
        system_prompt=system_prompt,
        window=[[m.id, 0 if m is original.get(m.id) else HISTORY_CHARS] for m in window],
    )
    return update
