"""Pairing of tool calls and tool results in a message history (case K1; DESIGN §1 "a window
never splits an AI message from its tool results").

A history is *valid* when every AI ``tool_calls`` entry is followed, before the next non-tool
message, by exactly one ``ToolMessage`` with its id, and every ``ToolMessage`` answers a call
of the AI message before it. A fork or rollback to a checkpoint taken between a model call and
its tool dispatch, followed by a new user message, breaks that: this module finds and closes
such calls with an error result, so the stored history stays valid for every consumer.
"""

from __future__ import annotations

from langchain_core.messages import AIMessage, AnyMessage, ToolMessage


def unanswered_calls(messages: list[AnyMessage]) -> list[tuple[str, str]]:
    """``(call id, tool name)`` of every tool call not followed by its result."""
    return close_unanswered(messages, "")[1]


def close_unanswered(messages: list[AnyMessage], reason: str) -> tuple[list[AnyMessage], list[tuple[str, str]]]:
    """A valid copy of ``messages``: each unanswered call gets ``ToolMessage(reason,
    status="error")`` right after its AI message's answered results; tool messages answering
    no open call are dropped. Returns ``(messages, closed)`` with ``closed`` the
    ``(call id, tool name)`` pairs that were closed. The input is not modified."""
    out: list[AnyMessage] = []
    closed: list[tuple[str, str]] = []
    open_calls: dict[str, str] = {}

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
            continue
        close_open()
        out.append(message)
        if isinstance(message, AIMessage):
            for call in [*message.tool_calls, *message.invalid_tool_calls]:
                if call.get("id"):
                    open_calls[call["id"]] = call.get("name") or "unknown"
    close_open()
    return out, closed
