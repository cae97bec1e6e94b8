"""Workbench state of one session (seed §1.1: a structured workbench, not a message list).

Shapes:
    messages      list[AnyMessage]   user input, model replies, tool results (add_messages reducer)
    goal          str                the current goal: the latest user request that started a task
    goal_id       str                id of the human message that set ``goal`` (the same on every
                                     branch sharing it): part of side-effect request ids
    intent        str                rule-based intent tag of the current turn (seed §1.1)
    pending_actions list[str]        tool calls requested and not yet answered ("name#id")
    references    list[str]          context referenced this turn (memories, files, handles)
    metrics       dict               cumulative per thread, merged by ``merge_metrics``:
                                     turns, model_calls, tokens_in, tokens_out (tokens),
                                     tool_calls{name: n}, tool_latency_s{name: seconds},
                                     tool_errors, intents{tag: n}, memory_writes,
                                     mcp_servers: list of {name, state, score, latency_ema_s,
                                     success, calls, failures, breaker, breaker_trips,
                                     live_sessions} — the latest snapshot after a tool round
                                     (a list, so the reducer replaces it; DESIGN §3)
    turn_metrics  dict               the same counters for the current turn only (reset when a
                                     user message starts a turn): tokens in/out per turn
    tool_rounds   int                tool rounds since the current goal was set
    stop_reason   str | None         why the loop stopped early (never a normal-looking answer)
    goal_distance int | None         required steps of the goal not yet done (evaluate_progress)
    stalled_rounds int               consecutive tool rounds in which that distance did not shrink
    blocked_tools list[str]          tools not offered on the next model call (evaluate_progress):
                                     side-effect tools already done for this goal, tools at their
                                     repeat limit; every tool once the goal's steps are all done
    offered_tools list[str]          tools bound to the last model call; ``dispatch_tools`` runs
                                     only these (a call to any other tool gets an error result)
    must_call_tool bool              the next model call must call one of the offered tools
                                     (``tool_choice="required"``; set when the model stalled or
                                     answered with goal steps still missing)
    progress_note str                evaluate_progress's advice for the next model call ("" if none)
    system_prompt str                the system turn assembled for the next model call
    window        list[list]         the history chosen for it: ``[message id, char limit]`` pairs
                                     (limit 0 = verbatim); ids, not copies, so checkpoints stay
                                     small. ``State.prompt_messages()`` renders the prompt.
    pending_results list[dict]       tool results of the current round, raw payloads on disk
                                     ({"tool_call_id", "name", "status", "error", "payload_path",
                                     "latency_s"}), consumed by compress_results
    archive_summary list[str]        one line per archived turn (older than the working window's
                                     horizon), in the system prompt; originals stay in messages
    archived_turns int               how many turns archive_summary covers
    memory_context list[str]         labelled memories retrieved for the prompt
    artifacts     list[str]          what the goal's successful calls produced (each tool's
                                     ``artifact_field``: file paths, URLs, ids)
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Annotated, Any

from langchain_core.messages import AnyMessage
from langgraph.graph.message import add_messages


def merge_metrics(left: dict[str, Any] | None, right: dict[str, Any] | None) -> dict[str, Any]:
    """Reducer for ``metrics`` and ``turn_metrics``: numbers are added; nested dicts
    (``tool_calls``, ``intents``, ``tool_latency_s``) are added per key. An update carrying
    ``"reset": True`` starts from empty (``turn_metrics`` at each new turn); ``metrics`` is never
    reset: it is cumulative per thread (seed §1.1).
    """
    right = dict(right or {})
    out: dict[str, Any] = {} if right.pop("reset", False) else dict(left or {})
    for key, value in right.items():
        if isinstance(value, dict):
            inner = dict(out.get(key) or {})
            for k, v in value.items():
                inner[k] = inner.get(k, 0) + v
            out[key] = inner
        elif isinstance(value, (int, float)):
            out[key] = out.get(key, 0) + value
        else:
            out[key] = value
    return out


@dataclass(kw_only=True)
class InputState:
    """What a caller sends: new messages (usually one HumanMessage)."""

    messages: Annotated[list[AnyMessage], add_messages] = field(default_factory=list)


@dataclass(kw_only=True)
class State(InputState):
    """The workbench. See the module docstring for every field's shape."""

    goal: str = ""
    goal_id: str = ""
    intent: str = ""
    pending_actions: list[str] = field(default_factory=list)
    references: list[str] = field(default_factory=list)
    metrics: Annotated[dict[str, Any], merge_metrics] = field(default_factory=dict)
    turn_metrics: Annotated[dict[str, Any], merge_metrics] = field(default_factory=dict)
    tool_rounds: int = 0
    stop_reason: str | None = None
    goal_distance: int | None = None
    stalled_rounds: int = 0
    blocked_tools: list[str] = field(default_factory=list)
    offered_tools: list[str] = field(default_factory=list)
    must_call_tool: bool = False
    progress_note: str = ""
    system_prompt: str = ""
    window: list[list[Any]] = field(default_factory=list)
    pending_results: list[dict[str, Any]] = field(default_factory=list)
    archive_summary: list[str] = field(default_factory=list)
    archived_turns: int = 0
    memory_context: list[str] = field(default_factory=list)
    artifacts: list[str] = field(default_factory=list)

    def prompt_messages(self) -> list[AnyMessage]:
        """What the next model call sends, in seed §6.2 order: the system turn (instructions,
        memories), the ``window`` messages in order (each cut to its char limit; ids missing
        from ``messages`` are skipped), then ``progress_note`` as a last system turn, next to
        the tool results it is about (small models heed the end of the prompt)."""
        from langchain_core.messages import SystemMessage

        from tools.results import cut_text

        by_id = {m.id: m for m in self.messages}
        prompt: list[AnyMessage] = [SystemMessage(self.system_prompt)] if self.system_prompt else []
        for message_id, limit in self.window:
            message = by_id.get(message_id)
            if message is None:
                continue
            if limit and isinstance(message.content, str) and len(message.content) > limit:
                message = message.model_copy(update={"content": cut_text(message.content, limit)})
            prompt.append(message)
        if self.progress_note:
            prompt.append(SystemMessage(self.progress_note))
        return prompt
