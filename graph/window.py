"""The layered context window (docs/DESIGN.md §1.2; case K1): which history the next model call
sees. Pure functions over a message list; the node ``assemble_context`` calls them.

Layers: core = the current goal and the turn before it, verbatim; working = earlier turns
ranked by intent match and keyword relevance with time decay, each message truncated; archive =
a running summary line per old turn (:func:`archive_lines`) that the node puts in the system
prompt.

The window is built from **groups**, never single messages (``graph.history.message_groups``,
the one place that pairs calls and results): a human message; an AI answer; or an AI message
with ``tool_calls`` together with exactly the tool messages answering it. A group whose calls lack results, and a tool message without its
calling AI message, are left out, so no cut can orphan a tool result or leave calls unanswered
(case K1, OpenAI's 400 error). The current goal's own groups come first; earlier groups are
added newest-first, truncated, while the token budget allows. Tokens are counted with
``langchain_core``'s ``count_tokens_approximately`` (no tokenizer download; docs/DESIGN.md §6).
"""

from __future__ import annotations

import re

from cachetools import LRUCache
from langchain_core.messages import AIMessage, AnyMessage, HumanMessage, ToolMessage
from langchain_core.messages.utils import count_tokens_approximately

from graph.history import Group, message_groups
from graph.intent import tag_intent
from tools.results import TRUNCATION_MARK, cut_text, essential_chars

CORE_TURNS = 2  # DESIGN §1.2: the last 2 turns verbatim (the current goal and the one before)
HISTORY_CHARS = 600  # earlier-goal messages are truncated to this many characters
HALF_LIFE_TURNS = 20.0  # time decay of history relevance, in turns
INTENT_WEIGHT = 0.6  # weight of an intent match against keyword relevance
ARCHIVE_AFTER_TURNS = 20  # turns older than this are summarised into ``archive_summary``
MAX_ARCHIVE_LINES = 30

Turn = list[Group]


def text_of(message: AnyMessage) -> str:
    """The message content as text (non-string content is ``str()``-ed)."""
    return message.content if isinstance(message.content, str) else str(message.content)


def truncate(message: AnyMessage, limit: int) -> AnyMessage:
    """A copy of ``message`` cut to ``limit`` chars plus the truncation mark, if longer."""
    content = message.content
    if isinstance(content, str) and len(content) > limit:
        return message.model_copy(update={"content": cut_text(content, limit)})
    return message


def kept_chars(message: AnyMessage) -> int:
    """The char limit a truncated copy made by :func:`truncate` was cut at (its text without the
    mark): what ``State.window`` records so ``State.prompt_messages`` cuts the same way."""
    return len(text_of(message)) - len(TRUNCATION_MARK)


_WORD = re.compile(r"[a-z0-9]+|[\u4e00-\u9fff]")
_STOP = frozenset("the and for you that this with what was are from have can how please".split())


def _terms(text: str) -> set[str]:
    return {w[:6] for w in _WORD.findall(text.lower()) if (len(w) > 2 or not w.isascii()) and w not in _STOP}


# Per-message work is cached by (id, hash of the content): history is re-ranked every round,
# but its messages do not change (str hashes are computed once per string object).
_TERM_CACHE: LRUCache[tuple[str, int], frozenset[str]] = LRUCache(maxsize=50_000)
_TOKEN_CACHE: LRUCache[tuple[object, ...], int] = LRUCache(maxsize=100_000)


def _message_terms(message: AnyMessage) -> frozenset[str]:
    if message.id is None:
        return frozenset(_terms(text_of(message)))
    key = (message.id, hash(text_of(message)))
    terms = _TERM_CACHE.get(key)
    if terms is None:
        terms = _TERM_CACHE[key] = frozenset(_terms(text_of(message)))
    return terms


def count_tokens(group: Group, limit: int = 0) -> int:
    """Approximate tokens of ``group`` (``count_tokens_approximately`` is additive per message),
    each message's text cut to ``limit`` chars if ``limit`` (without building the copies)."""
    total = 0
    for message in group:
        text = text_of(message)
        cut = bool(limit) and len(text) > limit
        if message.id is None:
            total += count_tokens_approximately([truncate(message, limit) if cut else message])
            continue
        calls = tuple(c["id"] for c in message.tool_calls) if isinstance(message, AIMessage) else ()
        call_id = message.tool_call_id if isinstance(message, ToolMessage) else None
        key = (message.id, hash(text), cut and limit, calls, call_id, message.name)
        count = _TOKEN_CACHE.get(key)
        if count is None:
            count = _TOKEN_CACHE[key] = count_tokens_approximately([truncate(message, limit) if cut else message])
        total += count
    return total


def fit_results(group: Group, budget_tokens: int) -> Group:
    """``group`` (an AI message and its tool results) with each result cut to one shared char
    limit so the group fits ``budget_tokens`` (approximate), but never below the result's
    envelope head (:func:`tools.results.essential_chars`: status, summary, handle) — so the
    cut group may still exceed the budget. Returns ``group`` itself when it has no tool result
    to cut, or when the results are already as short as they may get."""
    results = [i for i, m in enumerate(group) if isinstance(m, ToolMessage) and isinstance(m.content, str)]
    if not results:
        return group
    floors = {i: essential_chars(text_of(group[i])) for i in results}
    if all(len(text_of(group[i])) <= floors[i] for i in results):
        return group

    def cut(limit: int) -> Group:
        out = list(group)
        for i in results:
            out[i] = truncate(group[i], max(limit, floors[i]))
        return out

    lo, hi = 0, max(len(text_of(group[i])) for i in results)
    while lo < hi:  # the largest shared limit that fits (token count grows with the limit)
        mid = (lo + hi + 1) // 2
        if count_tokens(cut(mid)) <= budget_tokens:
            lo = mid
        else:
            hi = mid - 1
    return cut(lo)


def split_turns(groups: list[Group]) -> list[Turn]:
    """Groups → turns: a turn starts at a human message and runs to the next one."""
    turns: list[Turn] = []
    for group in groups:
        if isinstance(group[0], HumanMessage) or not turns:
            turns.append([group])
        else:
            turns[-1].append(group)
    return turns


def turn_intent(turn: Turn) -> str:
    """The intent tag of a turn: stored on its human message, else computed."""
    head = turn[0][0]
    if isinstance(head, HumanMessage):
        return head.additional_kwargs.get("intent") or tag_intent(text_of(head))
    return "chat"


def turn_relevance(turn: Turn, query: set[str], intent: str, age: int) -> float:
    """Relevance of an earlier turn to the current goal (DESIGN §1.2: intent match or time-decay
    weight, not recency alone): keyword overlap × (0.5 + 0.5·decay) + intent match × decay ×
    ``INTENT_WEIGHT``, decay = 0.5^(age / ``HALF_LIFE_TURNS``); a small recency term breaks ties."""
    decay: float = 0.5 ** (age / HALF_LIFE_TURNS)  # a positive base: never complex
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

    * the **current goal** (last human message and its tool rounds): kept first; over budget,
      a round's tool results are cut to fit (:func:`fit_results`, each keeping its envelope
      head: status, summary, handle) — the newest round always, older ones while their cut
      form fits, the oldest dropped only then;
    * **core**: the turn before it, verbatim (``CORE_TURNS``);
    * **working**: earlier turns ranked by :func:`turn_relevance` to ``query``/``intent``,
      each message truncated to ``HISTORY_CHARS``, added best-first while the budget allows.

    Groups whose AI message id is in ``exclude`` (calls made invalid by a tool's schema change,
    DESIGN §2.6) are left out with their results. Returns messages in chronological order. Older
    turns also live on, summarised, in the state's ``archive_summary`` (:func:`archive_lines`).
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
    used = count_tokens(head)
    if used > budget and len(head) == 1:
        # the request alone is over budget (a pasted document): cut it to fit, with a notice
        limit = max(200, budget * 3)  # ~3-4 chars per token in the approximate count
        head = [truncate(head[0], limit)]
        used = count_tokens(head)
    kept_current: list[Group] = []
    for position, group in enumerate(reversed(current[1:])):
        kept, cost = group, count_tokens(group)
        if used + cost > budget:
            # Over budget, a tool round's results are cut, never dropped (issue 23 kind 4: ten
            # parallel results dropped whole made the model re-run every call): each result keeps
            # at least its envelope head (status, summary, handle). The newest round always goes
            # in; an older one only if its cut form fits.
            kept = fit_results(group, budget - used)
            cost = count_tokens(kept)
            if kept is group or (position > 0 and used + cost > budget):
                break
        kept_current.insert(0, kept)
        used += cost
    chosen: dict[int, list[Group]] = {len(turns) - 1: [head, *kept_current]}

    core_start = max(0, len(turns) - CORE_TURNS)
    for index in range(len(turns) - 2, core_start - 1, -1):
        cost = sum(count_tokens(g) for g in turns[index])
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
        cost = sum(count_tokens(g, HISTORY_CHARS) for g in turns[index])
        if used + cost > budget:
            continue  # a smaller relevant turn may still fit
        chosen[index] = [[truncate(m, HISTORY_CHARS) for m in g] for g in turns[index]]
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
        request = text_of(head)[:100] if isinstance(head, HumanMessage) else ""
        tools = sorted({c["name"] for g in turn for m in g if isinstance(m, AIMessage) for c in m.tool_calls})
        answers = [m for g in turn for m in g if isinstance(m, AIMessage) and not m.tool_calls and text_of(m)]
        answer = text_of(answers[-1])[:100] if answers else ""
        lines.append(
            f"[{turn_intent(turn)}] {request}"
            + (f" → tools: {', '.join(tools)}" if tools else "")
            + (f" → {answer}" if answer else "")
        )
    return lines, boundary
