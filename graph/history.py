"""Pairing of tool calls and tool results in a message history (case K1; docs/DESIGN.md §1.3
"no orphan tool result, no unanswered call").

A history is *valid* when every AI ``tool_calls`` entry is followed, before the next non-tool
message, by exactly one ``ToolMessage`` with its id, and every ``ToolMessage`` answers a call
of the AI message before it. A fork or rollback to a checkpoint taken between a model call and
its tool dispatch, followed by a new user message, breaks that: this module finds and closes
such calls with an error result, so the stored history stays valid for every consumer.

The same pairing rule cuts a history into the atomic groups the context window is built from
(:func:`message_groups`, used by ``graph.window``): one module knows how calls and results pair.
"""

from __future__ import annotations

from typing import Any, NamedTuple, TypeGuard

from langchain_core.messages import AIMessage, AnyMessage, HumanMessage, SystemMessage, ToolMessage

from graph.request_identity import goal_key

Group = list[AnyMessage]


class Paired(NamedTuple):
    """What :func:`close_unanswered` returns."""

    messages: list[AnyMessage]
    """the valid copy of the history"""
    closed: list[tuple[str, str]]
    """``(call id, tool name)`` of every call that got an error result"""
    dropped: list[str]
    """``tool_call_id`` of every tool message dropped (it answered no open call)"""


def _calls(message: AnyMessage) -> list[tuple[str | None, str]]:
    """``(call id, tool name)`` of the calls an AI message makes (valid and invalid ones)."""
    if not isinstance(message, AIMessage):
        return []
    return [
        (call.get("id"), call.get("name") or "unknown") for call in [*message.tool_calls, *message.invalid_tool_calls]
    ]


def message_groups(messages: list[AnyMessage]) -> list[Group]:
    """Split a history into atomic groups, in order: a human message; an AI answer; or an AI
    message with calls together with the tool messages answering them (the ones that follow
    it, in their order). A group with a call left unanswered, a tool message
    answering no call of the AI message before it (an orphan or a duplicate) and system
    messages are left out, so no cut between groups splits a call from its result (case K1)."""
    groups: list[Group] = []
    group: Group = []
    open_calls: set[str | None] = set()

    def flush() -> None:
        if group and not open_calls:
            groups.append(list(group))
        group.clear()
        open_calls.clear()

    for message in messages:
        if isinstance(message, ToolMessage):
            if group and message.tool_call_id in open_calls:
                open_calls.discard(message.tool_call_id)
                group.append(message)
            continue
        flush()
        if isinstance(message, SystemMessage):
            continue
        calls = _calls(message)
        if calls:
            group.append(message)
            open_calls.update(call_id for call_id, _ in calls)
        else:
            groups.append([message])
    flush()
    return groups


def is_closure(message: AnyMessage) -> TypeGuard[ToolMessage]:
    """True for the error result :func:`close_unanswered` gave a call left pending (its
    deterministic id ``closed-<call id>``): the call was not dispatched on this branch."""
    return isinstance(message, ToolMessage) and message.id == f"closed-{message.tool_call_id}"


def previous_turn_closures(messages: list[AnyMessage]) -> list[tuple[str, dict[str, Any], str]]:
    """``(tool name, arguments, goal message id)`` of each call of the turn before the current
    one (between the last two human messages) that a fork or rollback left pending and
    :func:`close_unanswered` closed: the ledger may still hold its result from the branch the
    fork left (``graph.progress.request_id`` of the three)."""
    humans = [i for i, m in enumerate(messages) if isinstance(m, HumanMessage)]
    if len(humans) < 2:
        return []
    turn = messages[humans[-2] : humans[-1]]
    goal_id = goal_key(turn[0])
    closed = {m.tool_call_id for m in turn if is_closure(m)}
    return [
        (str(c["name"]), dict(c.get("args") or {}), goal_id)
        for m in turn
        if isinstance(m, AIMessage)
        for c in m.tool_calls
        if c.get("id") in closed
    ]


def unanswered_calls(messages: list[AnyMessage]) -> list[tuple[str, str]]:
    """``(call id, tool name)`` of every tool call not followed by its result."""
    return close_unanswered(messages, "").closed


def close_unanswered(messages: list[AnyMessage], reason: str) -> Paired:
    """A valid copy of ``messages``: each unanswered call gets ``ToolMessage(reason,
    status="error", id="closed-<call id>")`` right after its AI message's answered results;
    tool messages answering no open call (orphans, duplicates) are dropped. The input is not
    modified. Used when a fork or rollback left calls open (``assemble_context``) and when a
    thread is rebuilt from its plain-text mirror (``graph.recovery``)."""
    out: list[AnyMessage] = []
    closed: list[tuple[str, str]] = []
    dropped: list[str] = []
    open_calls: dict[str, str] = {}  # id → tool name, of the latest AI message with calls

    def close_open() -> None:
        for call_id, name in open_calls.items():
            # a deterministic id: the same history closes the same way on every branch
            out.append(ToolMessage(reason, tool_call_id=call_id, name=name, status="error", id=f"closed-{call_id}"))
            closed.append((call_id, name))
        open_calls.clear()

    for message in messages:
        if isinstance(message, ToolMessage):
            if open_calls.pop(message.tool_call_id, None) is not None:
                out.append(message)
            else:
                dropped.append(message.tool_call_id)
            continue
        close_open()
        out.append(message)
        open_calls.update({call_id: name for call_id, name in _calls(message) if call_id})
    close_open()
    return Paired(out, closed, dropped)


def without_failed_arguments(
    messages: list[AnyMessage], kinds: frozenset[str] = frozenset({"tool_error"})
) -> list[AnyMessage]:
    """A copy of ``messages`` in which every tool call whose result is an error of one of
    ``kinds`` (``additional_kwargs["error_kind"]``; by default "tool_error": the tool ran and
    failed on the data, e.g. an SQL error) shows ``{}`` as its arguments. The results, with
    their error text, stay. The input is not modified.

    For a model's prompt only, never for the stored history: a small model at temperature 0
    shown its own failed call copies it word for word on the retry (measured on both
    Qwen2.5-Coder models, evals/README.md "Embedded models"); without it, the retry is written
    from the error and whatever was looked up since. Malformed-argument errors are not in the
    default ``kinds``: fixing those needs the arguments in view."""
    failed = {
        m.tool_call_id
        for m in messages
        if isinstance(m, ToolMessage) and m.status == "error" and m.additional_kwargs.get("error_kind") in kinds
    }
    if not failed:
        return list(messages)
    out: list[AnyMessage] = []
    for message in messages:
        if isinstance(message, AIMessage) and any(c.get("id") in failed for c in message.tool_calls):
            calls = [{**c, "args": {}} if c.get("id") in failed else c for c in message.tool_calls]
            out.append(message.model_copy(update={"tool_calls": calls}))
        else:
            out.append(message)
    return out


def without_sent_back_answers(prompt: list[AnyMessage], goal: list[AnyMessage]) -> list[AnyMessage]:
    """A copy of ``prompt`` without the model's answers of the current goal (``goal``: its
    messages, from the human message on) — AI messages without tool calls, not Hermes's own
    notices. At a model call inside a goal every such answer was sent back by
    ``evaluate_progress`` (an accepted answer ends the goal), and the progress note says what
    was wrong with it. The input is not modified.

    For a model's prompt only, never for the stored history: a small model at temperature 0
    shown its own refused answer writes it again after the read it was sent to make (measured,
    Qwen2.5-Coder-1.5B on Chinook: "$5,678" answered before any read, then twice more after a
    read whose one row said ``SUM(Total) = 38.62``; evals/README.md "Data questions")."""
    refused = {
        m.id
        for m in goal
        if isinstance(m, AIMessage) and not (m.tool_calls or m.invalid_tool_calls) and m.name != "hermes" and m.id
    }
    if not refused:
        return list(prompt)
    return [m for m in prompt if not (isinstance(m, AIMessage) and m.id in refused)]
