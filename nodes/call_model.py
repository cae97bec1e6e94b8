"""Node ``call_model``: one model call over ``state.prompt_messages()`` with the registry's tools
bound, less ``state.blocked_tools`` (evaluate_progress's masking: a grammar-constrained model
cannot even name a blocked tool; with every tool blocked the model can only answer), ranked by
relevance to the goal and progress note and cut to ``context.max_tools``, and with
``tool_choice="required"`` when ``state.must_call_tool``.

Update: ``messages`` (the AI reply), ``pending_actions`` (``"name#id"`` of each requested call,
including calls whose arguments were not valid JSON: ``invalid_tool_calls``, case K3, which
``dispatch_tools`` answers with an error result so the model can regenerate), and ``metrics``
(``model_calls``, ``tokens_in``, ``tokens_out``; the endpoint's usage report, else an
approximate count). A model that cannot be reached, refuses the key or does not know the
model name raises :class:`ModelUnavailableError` naming the endpoint and the next step; the
checkpoint before this node stays resumable.
"""

from __future__ import annotations

from typing import Any

import openai
from langchain_core.messages import AIMessage
from langchain_core.messages.utils import count_tokens_approximately
from langgraph.runtime import Runtime

from graph.context import Context
from graph.model import ModelUnavailableError, load_chat_model
from graph.resources import get_toolbox
from graph.state import State
from tools.registry import ToolRegistry
from tools.selection import rank_tools

EMBEDDED_MAX_TOOLS = 2


def offered_tools(
    registry: ToolRegistry, query: str, blocked: set[str], max_tools: int, must_call: bool = False
) -> list[dict[str, Any]]:
    """OpenAI tool definitions for the next call: every registered tool not in ``blocked``,
    the most relevant to ``query`` first (``tools.selection``). With a cap (``max_tools`` > 0,
    small models) only tools with some relevance are offered, at most ``max_tools`` — so
    "hello" offers none and cannot trigger a side effect — unless a call is required."""
    ranked = rank_tools([spec for spec in registry.specs() if spec.name not in blocked], query)
    if not max_tools:
        return [spec.openai_tool() for _, spec in ranked]
    relevant = [spec for score, spec in ranked if score > 0 or must_call]
    return [spec.openai_tool() for spec in relevant[:max_tools]]


def endpoint_problem(context: Context, exc: Exception) -> str:
    """A message naming the endpoint, what went wrong and what to do next."""
    where = context.base_url or "the embedded llama.cpp server"
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
    model = await load_chat_model(context)
    max_tools = context.max_tools or (EMBEDDED_MAX_TOOLS if context.model == "embedded" and not context.base_url else 0)
    tools = offered_tools(
        toolbox.registry, f"{state.goal}\n{state.progress_note}", set(state.blocked_tools), max_tools,
        must_call=state.must_call_tool,
    )
    if tools and state.must_call_tool:
        bound = model.bind_tools(tools, tool_choice="required")
    else:
        bound = model.bind_tools(tools) if tools else model
    prompt = state.prompt_messages()
    try:
        reply = await bound.ainvoke(prompt)
    except (openai.APIConnectionError, openai.AuthenticationError, openai.NotFoundError) as exc:
        raise ModelUnavailableError(endpoint_problem(context, exc)) from exc
    if not isinstance(reply, AIMessage):
        reply = AIMessage(content=str(reply.content))
    usage = reply.usage_metadata or {}
    tokens_in = usage.get("input_tokens") or count_tokens_approximately(prompt)
    tokens_out = usage.get("output_tokens") or count_tokens_approximately([reply])
    calls = [*reply.tool_calls, *reply.invalid_tool_calls]
    return {
        "messages": [reply],
        "pending_actions": [f"{c['name']}#{c['id']}" for c in calls],
        "metrics": {"model_calls": 1, "tokens_in": tokens_in, "tokens_out": tokens_out},
    }
