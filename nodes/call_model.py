"""Node ``call_model``: one model call over ``state.prompt_messages()`` with the registry's tools
bound, less ``state.blocked_tools`` (evaluate_progress's masking: a grammar-constrained model
cannot even name a blocked tool; with every tool blocked the model can only answer) and less
every side-effect tool that no clause of the goal asks for (``graph.progress``), ranked by
relevance to the goal and progress note and cut to ``context.max_tools``, and with
``tool_choice="required"`` when ``state.must_call_tool`` or when a missing step of the goal is
offered (a mid-task narration — "I will now post …" — costs no model call: DESIGN §5.3).

For the bundled embedded models the prompt shows calls that failed in the tool with ``{}``
as their arguments (``graph.history.without_failed_arguments``; catalog flag
``omit_failed_arguments``): they copy their own failed call otherwise; nor the answers of this
goal that ``evaluate_progress`` sent back (``graph.history.without_sent_back_answers``; flag
``omit_sent_back_answers``): they write the refused answer again after the read they were
sent to make.

With ``context.model_accepts_images`` (a hosted model that takes images), tool results holding
saved images (MCP image content) carry them as image blocks in this call's prompt only
(:func:`with_images`); the state keeps the placeholders and handles.

The offer is recorded in ``offered_tools``; ``dispatch_tools`` runs nothing else, so a model
that names a blocked or unoffered tool anyway (any hosted model can) gets an error result.

Update: ``messages`` (the AI reply), ``offered_tools`` (names bound to this call),
``pending_actions`` (``"name#id"`` of each requested call,
including calls whose arguments were not valid JSON: ``invalid_tool_calls``, case K3, which
``dispatch_tools`` answers with an error result so the model can regenerate), and ``metrics``
and ``turn_metrics`` (``model_calls``, ``tokens_in``, ``tokens_out``; the endpoint's usage
report, else an approximate count). A model that cannot be reached, refuses the key or does not know the
model name raises :class:`ModelUnavailableError` naming the endpoint and the next step; the
checkpoint before this node stays resumable.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import Mapping
from typing import Any

import pydantic
from langchain_core.messages import AIMessage, AnyMessage, ToolMessage
from langchain_core.messages.utils import count_tokens_approximately
from langgraph.runtime import Runtime

from graph.context import Context
from graph.history import without_failed_arguments, without_sent_back_answers
from graph.model import ModelUnavailableError, embedded_model, is_embedded
from graph.progress import (
    current_goal_messages,
    later_side_effects,
    missing_steps,
    required_steps,
    unrequested_side_effects,
)
from graph.resources import get_model, get_toolbox
from graph.state import State
from tools.mcp.results import model_content
from tools.registry import ToolRegistry
from tools.selection import rank_tools

EMBEDDED_MAX_TOOLS = 2


def offered_tools(
    registry: ToolRegistry, query: str, blocked: set[str], max_tools: int, must_call: bool = False
) -> list[dict[str, Any]]:
    """OpenAI tool definitions for the next call: every registered tool not in ``blocked``,
    the most relevant to ``query`` first, near-ties by their MCP servers' health (``tools.selection``,
    ``registry.health``: better-scored first, parked last with a note). With a cap (``max_tools`` > 0,
    small models) only tools with some relevance are offered, at most ``max_tools`` — so
    "hello" offers none and cannot trigger a side effect — unless a call is required."""
    ranked = rank_tools([spec for spec in registry.specs() if spec.name not in blocked], query, registry.health)
    if not max_tools:
        return [spec.openai_tool() for _, spec in ranked]
    relevant = [spec for score, spec in ranked if score > 0 or must_call]
    return [spec.openai_tool() for spec in relevant[:max_tools]]


def with_unique_call_ids(reply: AIMessage) -> AIMessage:
    """Give every tool call an id, unique within the message (some endpoints omit ids or
    repeat them; a tool result is matched to its call by id, and the id is part of the
    call's idempotency key)."""
    seen: set[str] = set()
    changed = False

    def fix(call: Mapping[str, Any]) -> dict[str, Any]:
        nonlocal changed
        cid = call.get("id")
        if not cid or cid in seen:
            cid, changed = f"call_{uuid.uuid4().hex[:12]}", True
        seen.add(cid)
        return {**call, "id": cid}

    calls = [fix(c) for c in reply.tool_calls]
    invalid = [fix(c) for c in reply.invalid_tool_calls]
    return reply.model_copy(update={"tool_calls": calls, "invalid_tool_calls": invalid}) if changed else reply


def with_images(prompt: list[AnyMessage]) -> list[AnyMessage]:
    """``prompt`` with each tool result that holds saved images (placeholders with a
    ``handle``, ``tools.mcp.results``) carrying them as LangChain image blocks after its text.
    Blocking (reads the files)."""
    out: list[AnyMessage] = []
    for message in prompt:
        shown = message
        if isinstance(message, ToolMessage) and isinstance(message.content, str) and '"handle"' in message.content:
            try:
                value = json.loads(message.content)
            except ValueError:
                value = None
            content = model_content(message.content, value, accepts_images=True) if value is not None else None
            if isinstance(content, list):
                shown = message.model_copy(update={"content": content})
        out.append(shown)
    return out


def goal_tools(registry: ToolRegistry, goal: str, limit: int) -> list[dict[str, Any]]:
    """The tools rendered in every prompt of one goal for a model served with a KV cache
    (the embedded llama.cpp server): the goal's required steps and the tools most relevant to
    the goal's text, at most ``limit`` besides the steps, in ranking order. A function of the
    goal alone, so the rendered prompt prefix stays the same from call to call; which of them
    may be called in a given call is the grammar's business (``allowed_tools``). Side-effect
    tools no clause asks for are never among them."""
    specs = registry.specs()
    never = unrequested_side_effects(goal, specs)
    steps = required_steps(goal, specs)
    ranked = rank_tools([s for s in specs if s.name not in never], goal)
    chosen = [spec for score, spec in ranked if spec.name in steps]
    chosen += [spec for score, spec in ranked if score > 0 and spec.name not in steps][:limit]
    order = {spec.name: i for i, (_, spec) in enumerate(ranked)}
    return [spec.openai_tool() for spec in sorted(chosen, key=lambda s: order[s.name])]


def _bind(
    model: Any, tools: list[dict[str, Any]], must_call: bool, rendered: list[dict[str, Any]] | None = None
) -> Any:
    """``model`` with ``tools`` callable; with ``rendered`` (embedded models), those are the
    tools in the prompt and ``tools`` only restrict the grammar (``allowed_tools``)."""
    if rendered:
        names = [t["function"]["name"] for t in tools]
        shown = rendered + [t for t in tools if t["function"]["name"] not in {r["function"]["name"] for r in rendered}]
        bound = model.bind_tools(shown, tool_choice="required") if must_call and tools else model.bind_tools(shown)
        return bound.bind(allowed_tools=names)
    if not tools:
        return model
    return model.bind_tools(tools, tool_choice="required") if must_call else model.bind_tools(tools)


def endpoint_problem(context: Context, exc: Exception) -> str:
    """A message naming the endpoint, what went wrong and what to do next."""
    if is_embedded(context):
        log = f"{context.data_dir}/embedded-llm.log"
        return (
            f"the embedded llama.cpp server stopped answering twice ({type(exc).__name__}: {exc}); "
            f"see {log}, then rerun with the same --thread to resume from the last checkpoint"
        )
    import openai  # loaded with the model that raised ``exc``

    where = context.base_url
    if isinstance(exc, openai.AuthenticationError):
        hint = f"the endpoint refused the API key: set {context.api_key_env}"
    elif isinstance(exc, openai.NotFoundError):
        hint = f"the endpoint does not know model {context.model!r}: check HERMES_MODEL / --model"
    else:
        hint = "nothing answered there: check HERMES_BASE_URL / --base-url, or unset it to use the embedded model"
    return f"cannot use the model at {where} ({type(exc).__name__}: {exc}); {hint}"


async def call_model(state: State, runtime: Runtime[Context]) -> dict[str, Any]:
    """Graph node: see the module docstring for the update it returns."""
    context = runtime.context or Context()
    toolbox = await get_toolbox(context)
    model = await get_model(context)
    # here, not at the top: the graph is also built by commands that never call a model (hermes
    # session list); get_model above has loaded the client
    import openai

    # small bundled models pick far better among few tools (measured: evals/README.md)
    max_tools = context.max_tools or (
        (embedded_model(context).max_tools or EMBEDDED_MAX_TOOLS) if is_embedded(context) else 0
    )
    specs = toolbox.registry.specs()
    blocked = set(state.blocked_tools) | unrequested_side_effects(state.goal, specs)
    blocked |= later_side_effects(state.goal, state.messages, specs)  # steps in request order
    missing = missing_steps(state.goal, state.messages, specs)
    if state.must_call_tool and missing:
        # a call is required because known steps are missing: offer those steps, and the
        # read-only tools that help do them (a schema, a query), nothing else
        reads = {s.name for s in specs if not s.side_effect}
        blocked |= set(toolbox.registry.names()) - set(missing) - reads
    tools = offered_tools(
        toolbox.registry,
        f"{state.goal}\n{state.progress_note}",
        blocked,
        max_tools,
        must_call=state.must_call_tool,
    )
    # a step of the task is missing and offered: this call must be a tool call, so the model
    # cannot spend a call narrating ("I will now post the report …") between steps — an answer
    # with steps missing is never final anyway (DESIGN §5.3)
    must_call = state.must_call_tool or bool(set(missing) & {t["function"]["name"] for t in tools})
    # the embedded server reuses its KV cache up to the first changed token: the same tools
    # rendered for the whole goal keep the long prefix cached (measured: evals/README.md)
    rendered = goal_tools(toolbox.registry, state.goal, max_tools + 2) if is_embedded(context) else None
    bound = _bind(model, tools, must_call, rendered)
    prompt = state.prompt_messages()
    if is_embedded(context) and embedded_model(context).omit_failed_arguments:
        # the stored history keeps the arguments; only this model's prompt loses them
        prompt = without_failed_arguments(prompt)
    if is_embedded(context) and embedded_model(context).omit_sent_back_answers:
        # nor the answers evaluate_progress sent back (the progress note says what was wrong)
        prompt = without_sent_back_answers(prompt, current_goal_messages(state.messages))
    if context.model_accepts_images and not is_embedded(context):
        # images reach the model here, from their saved files, so the state (and every
        # checkpoint) keeps only the placeholders and handles
        prompt = await asyncio.to_thread(with_images, prompt)
    try:
        reply = await bound.ainvoke(prompt)
    except openai.APIConnectionError as exc:
        if not is_embedded(context):
            raise ModelUnavailableError(endpoint_problem(context, exc)) from exc
        # the embedded server died mid-run: start it again (new port) and retry once
        model = await get_model(context)
        bound = _bind(model, tools, must_call, rendered)
        try:
            reply = await bound.ainvoke(prompt)
        except openai.APIConnectionError as again:
            raise ModelUnavailableError(endpoint_problem(context, again)) from again
    except (openai.AuthenticationError, openai.NotFoundError) as exc:
        raise ModelUnavailableError(endpoint_problem(context, exc)) from exc
    except pydantic.ValidationError as exc:
        if "tool_calls" not in str(exc):
            raise
        # arguments that are valid JSON but not an object ([1, 2], "x", 42): the client library
        # cannot even build the message. Case K3's sibling: an invalid call the model is told
        # about (dispatch_tools answers it with an error result), never a crashed run.
        reply = AIMessage(
            content="",
            invalid_tool_calls=[
                {
                    "type": "invalid_tool_call",
                    "name": None,
                    "args": None,
                    "id": f"call_{uuid.uuid4().hex[:12]}",
                    "error": "the tool call's arguments were not a JSON object (send a JSON object of the tool's parameters)",
                }
            ],
        )
    if not isinstance(reply, AIMessage):
        reply = AIMessage(content=str(reply.content))
    reply = with_unique_call_ids(reply)
    usage: dict[str, Any] = dict(reply.usage_metadata or {})
    tokens_in = usage.get("input_tokens") or count_tokens_approximately(prompt)
    tokens_out = usage.get("output_tokens") or count_tokens_approximately([reply])
    calls = [*reply.tool_calls, *reply.invalid_tool_calls]
    return {
        "messages": [reply],
        "offered_tools": [t["function"]["name"] for t in tools],
        "pending_actions": [f"{c['name']}#{c['id']}" for c in calls],
        "metrics": (counts := {"model_calls": 1, "tokens_in": tokens_in, "tokens_out": tokens_out}),
        "turn_metrics": counts,
    }
