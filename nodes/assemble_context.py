"""Node ``assemble_context``: choose what the model sees next (seed §1.2, §6.2; case K1).

Update, when a new user message starts a goal: ``goal``; ``intent`` (rule-based tag, also
stored on the message as ``additional_kwargs["intent"]`` and counted in ``metrics.intents``);
``tool_rounds``, ``stop_reason``, ``blocked_tools``, ``must_call_tool``, ``goal_distance``,
``stalled_rounds``, ``progress_note`` reset; ``memory_context`` recalled; ``archive_summary`` /
``archived_turns`` extended with one line per turn that fell out of the last
``ARCHIVE_AFTER_TURNS``. Every time: ``system_prompt`` and ``window`` (``[message id, char
limit]`` pairs: the history for the next model call, rendered by ``State.prompt_messages``).

Layers (seed §1.2): core = the current goal and the turn before it, verbatim; working =
earlier turns ranked by intent match and keyword relevance with time decay, each message
truncated; archive = a running summary of old turns in the system prompt.

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
    RemoveMessage,
    SystemMessage,
    ToolMessage,
)
from langgraph.graph.message import REMOVE_ALL_MESSAGES
from cachetools import LRUCache
from langchain_core.messages.utils import count_tokens_approximately
from langgraph.config import get_config
from langgraph.runtime import Runtime

from graph.context import Context
from graph.history import close_unanswered
from graph.intent import tag_intent
from graph.progress import required_steps
from graph.resources import get_memory, get_toolbox
from graph.state import State

#: The result given to a call left without one when the conversation went on without running it
#: (a fork or rollback to a checkpoint between a model call and its dispatch, then a new message).
NOT_RUN = ("not run: the conversation continued from an earlier checkpoint before this call was "
           "dispatched; it had no effect")

SYSTEM_PROMPT = (
    "You are Hermes, an agent that does work with tools. Use a tool when the task needs data or "
    "an action; answer directly when you already have what you need. Never invent tool results."
)
HISTORY_CHARS = 600  # earlier-goal messages are truncated to this many characters

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


CORE_TURNS = 2  # seed §1.2: the last 2 turns verbatim (the current goal and the one before)
HALF_LIFE_TURNS = 20.0  # time decay of history relevance, in turns
INTENT_WEIGHT = 0.6  # weight of an intent match against keyword relevance
ARCHIVE_AFTER_TURNS = 20  # turns older than this are summarised into ``archive_summary``
MAX_ARCHIVE_LINES = 30

_WORD = re.compile(r"[a-z0-9]+|[\u4e00-\u9fff]")
_STOP = frozenset("the and for you that this with what was are from have can how please".split())


def _terms(text: str) -> set[str]:
    return {w[:6] for w in _WORD.findall(text.lower()) if (len(w) > 2 or not w.isascii()) and w not in _STOP}


def _text(message: AnyMessage) -> str:
    return message.content if isinstance(message.content, str) else str(message.content)


# Per-message work is cached by (id, hash of the content): history is re-ranked every round,
# but its messages do not change (str hashes are computed once per string object).
_TERM_CACHE: LRUCache = LRUCache(maxsize=50_000)
_TOKEN_CACHE: LRUCache = LRUCache(maxsize=100_000)


def _message_terms(message: AnyMessage) -> frozenset[str]:
    key = (message.id, hash(_text(message)))
    if message.id is None or key not in _TERM_CACHE:
        terms = frozenset(_terms(_text(message)))
        if message.id is None:
            return terms
        _TERM_CACHE[key] = terms
    return _TERM_CACHE[key]


def _tokens(group: list[AnyMessage], limit: int = 0) -> int:
    """Approximate tokens of ``group`` (``count_tokens_approximately`` is additive per message),
    each message's text cut to ``limit`` chars if ``limit`` (without building the copies)."""
    total = 0
    for message in group:
        text = _text(message)
        cut = bool(limit) and len(text) > limit
        calls = tuple(c["id"] for c in getattr(message, "tool_calls", None) or ())
        key = (message.id, hash(text), cut and limit, calls, getattr(message, "tool_call_id", None), message.name)
        if message.id is None or key not in _TOKEN_CACHE:
            count = count_tokens_approximately([_truncate(message, limit) if cut else message])
            if message.id is None:
                total += count
                continue
            _TOKEN_CACHE[key] = count
        total += _TOKEN_CACHE[key]
    return total


def split_turns(groups: list[list[AnyMessage]]) -> list[list[list[AnyMessage]]]:
    """Groups → turns: a turn starts at a human message and runs to the next one."""
    turns: list[list[list[AnyMessage]]] = []
    for group in groups:
        if isinstance(group[0], HumanMessage) or not turns:
            turns.append([group])
        else:
            turns[-1].append(group)
    return turns


def turn_intent(turn: list[list[AnyMessage]]) -> str:
    """The intent tag of a turn: stored on its human message, else computed."""
    head = turn[0][0]
    if isinstance(head, HumanMessage):
        return head.additional_kwargs.get("intent") or tag_intent(_text(head))
    return "chat"


def turn_relevance(turn: list[list[AnyMessage]], query: set[str], intent: str, age: int) -> float:
    """Relevance of an earlier turn to the current goal (seed §1.2: intent match or time-decay
    weight, not recency alone): keyword overlap × (0.5 + 0.5·decay) + intent match × decay ×
    ``INTENT_WEIGHT``, decay = 0.5^(age / ``HALF_LIFE_TURNS``); a small recency term breaks ties."""
    decay = 0.5 ** (age / HALF_LIFE_TURNS)
    words: set[str] = set().union(*(_message_terms(m) for g in turn for m in g))
    keyword = len(query & words) / (len(query) or 1)
    match = 1.0 if intent and turn_intent(turn) == intent else 0.0
    return keyword * (0.5 + 0.5 * decay) + INTENT_WEIGHT * match * decay + 0.01 * decay


def select_window(
    messages: list[AnyMessage],
    budget_tokens: int,
    system_tokens: int = 0,
    *,
    query: str = "",
    intent: str = "",
    exclude: set[str] | None = None,
) -> list[AnyMessage]:
    """Choose history within ``budget_tokens`` (approximate) as whole groups, in three layers:

    * the **current goal** (last human message and its tool rounds): kept first, its oldest
      groups dropped if even it exceeds the budget;
    * **core**: the turn before it, verbatim (``CORE_TURNS``);
    * **working**: earlier turns ranked by :func:`turn_relevance` to ``query``/``intent``,
      each message truncated to ``HISTORY_CHARS``, added best-first while the budget allows.

    Groups whose AI message id is in ``exclude`` (calls made invalid by a tool's schema change,
    seed §6.3) are left out with their results. Returns messages in chronological order. Older
    turns also live on, summarised, in the state's ``archive_summary`` (see the node).
    """
    groups = message_groups(messages)
    if exclude:
        groups = [g for g in groups if g[0].id not in exclude]
    turns = split_turns(groups)
    if not turns:
        return []
    budget = budget_tokens - system_tokens
    current = turns[-1]
    head = current[0]
    used = _tokens(head)
    if used > budget and len(head) == 1:
        # the request alone is over budget (a pasted document): cut it to fit, with a notice
        limit = max(200, budget * 3)  # ~3-4 chars per token in the approximate count
        head = [_truncate(head[0], limit)]
        used = _tokens(head)
    kept_current: list[list[AnyMessage]] = []
    for group in reversed(current[1:]):
        cost = _tokens(group)
        if used + cost > budget:
            break
        kept_current.insert(0, group)
        used += cost
    chosen: dict[int, list[list[AnyMessage]]] = {len(turns) - 1: [head, *kept_current]}

    core_start = max(0, len(turns) - CORE_TURNS)
    for index in range(len(turns) - 2, core_start - 1, -1):
        cost = sum(_tokens(g) for g in turns[index])
        if used + cost <= budget:
            chosen[index] = turns[index]
            used += cost

    terms = _terms(query)
    ranked = sorted(
        range(core_start),
        key=lambda i: turn_relevance(turns[i], terms, intent, len(turns) - 1 - i),
        reverse=True,
    )
    for index in ranked:
        cost = sum(_tokens(g, HISTORY_CHARS) for g in turns[index])
        if used + cost > budget:
            continue  # a smaller relevant turn may still fit
        chosen[index] = [[_truncate(m, HISTORY_CHARS) for m in g] for g in turns[index]]
        used += cost
    return [m for i in sorted(chosen) for g in chosen[i] for m in g]


def archive_lines(messages: list[AnyMessage], start_turn: int) -> tuple[list[str], int]:
    """One summary line per turn from ``start_turn`` up to the archive boundary (turns older
    than ``ARCHIVE_AFTER_TURNS``): ``[intent] request → tools → answer``. Returns the new lines
    and the new boundary (turn count archived). Rule-based: no model call."""
    turns = split_turns(message_groups(messages))
    boundary = max(start_turn, len(turns) - ARCHIVE_AFTER_TURNS)
    lines = []
    for turn in turns[start_turn:boundary]:
        head = turn[0][0]
        request = _text(head)[:100] if isinstance(head, HumanMessage) else ""
        tools = sorted({c["name"] for g in turn for m in g if isinstance(m, AIMessage) for c in m.tool_calls})
        answers = [m for g in turn for m in g if isinstance(m, AIMessage) and not m.tool_calls and _text(m)]
        answer = _text(answers[-1])[:100] if answers else ""
        lines.append(f"[{turn_intent(turn)}] {request}" + (f" → tools: {', '.join(tools)}" if tools else "")
                     + (f" → {answer}" if answer else ""))
    return lines, boundary


def build_system_prompt(
    memories: list[str], archive: list[str] | None = None, migrations: list[str] | None = None
) -> str:
    """System turn in the seed §6.2 order: instructions, tool migration notes (seed §6.3), key
    memories (labelled), then the summary of archived turns. The progress note goes last,
    after the tool results (``State.prompt_messages``)."""
    parts = [SYSTEM_PROMPT]
    if migrations:
        parts.append("Tool changes since earlier in this conversation:\n" + "\n".join(migrations))
    if memories:
        parts.append("What you remember (type · date · confidence · evidence):\n" + "\n".join(memories))
    if archive:
        parts.append("Earlier in this session (summary of older turns):\n" + "\n".join(archive))
    return "\n\n".join(parts)


async def assemble_context(state: State, runtime: Runtime[Context]) -> dict[str, Any]:
    """Graph node: see the module docstring for the update it returns."""
    context = runtime.context or Context()
    update: dict[str, Any] = {}
    messages = state.messages
    last = messages[-1] if messages else None
    memories = state.memory_context
    registry = (await get_toolbox(context)).registry
    if isinstance(last, HumanMessage):
        goal = last.text if hasattr(last, "text") else str(last.content)
        goal = goal if isinstance(goal, str) else str(last.content)
        thread_id = str(get_config().get("configurable", {}).get("thread_id", ""))
        try:
            memories = await get_memory(context).recall(
                context.user_id, goal, k=3,
                # this session's memories count only if they came from the active branch
                thread_id=thread_id or None, visible_origins={m.id for m in state.messages if m.id},
            )
        except Exception:  # memory must never block the answer (DESIGN §4)
            memories = []
        specs = registry.specs()
        steps = sorted(required_steps(goal, specs))
        intent = tag_intent(goal, specs)
        # the tag lives on the message (Studio shows it; later selection reads it)
        tagged = last.model_copy(update={"additional_kwargs": {**last.additional_kwargs, "intent": intent}})
        history, closed = close_unanswered(state.messages[:-1], NOT_RUN)
        if closed:
            # calls left pending by a fork/rollback: rewrite the history so each gets a result
            # before the new request (add_messages can only append, hence remove-all + re-add)
            new_messages: list[Any] = [RemoveMessage(id=REMOVE_ALL_MESSAGES), *history, tagged]
            messages = [*history, tagged]
        else:
            new_messages = [tagged]
        new_lines, archived = archive_lines(messages, state.archived_turns)
        update.update(
            messages=new_messages,
            metrics={"intents": {intent: 1}},
            turn_metrics={"reset": True},
            archive_summary=(state.archive_summary + new_lines)[-MAX_ARCHIVE_LINES:],
            archived_turns=archived,
            goal=goal,
            goal_id=str(last.id or ""),
            intent=intent,
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
    stale = {mid for change in registry.schema_changes if change.mark_history
             for mid in change.invalid_calls(messages)}
    system_prompt = build_system_prompt(
        memories, update.get("archive_summary", state.archive_summary), registry.migration_notes
    )
    window = select_window(
        messages,
        context.token_budget,
        count_tokens_approximately([SystemMessage(system_prompt)]),
        query=update.get("goal", state.goal),
        intent=update.get("intent", state.intent),
        exclude=stale,
    )
    original = {m.id: m for m in messages}
    update.update(
        system_prompt=system_prompt,
        window=[[m.id, 0 if m is original.get(m.id) else len(_text(m)) - len(" …[truncated]")] for m in window],
    )
    return update
