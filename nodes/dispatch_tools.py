"""Node ``dispatch_tools``: run the last AI message's tool calls through the registry.

**The offer is enforced here**: a call to a tool that was not bound to the model call that made
it (``state.offered_tools``: blocked, masked, or a side-effect tool no clause of the goal asks
for) gets an error result naming the offered tools and never runs — whatever the model.

Each call carries ``request_id = "<thread_id>:<goal message id>:<hash of tool and canonical
arguments>"``: it names what the call *means*, not the model's call id, so a fork or rollback
that replays the goal, a new call id for the same request, a retry after a timeout, or a
restart finds the ledger's record and never repeats a side effect. The registry validates the
arguments against the tool's JSON Schema and runs the tool in an executor outside this process
(or over an MCP session); it never raises for a tool problem, it returns an error outcome
(unknown name with the valid names, K4; exception text, K4; timeout; MCP ``isError``, K7; dead
server, K8). Calls whose arguments were not valid JSON (``invalid_tool_calls``, K3) get an
error result without running anything.

**Side effects go only where the user asked** (DESIGN §2.8, ``tools.destination_guard.guard_calls``):
a side-effect call whose destination (channel, recipient, path, URL) the request, the user's
answers or the configuration did not name, or whose content carries sensitive data to a
destination the request did not name, gets an error result (``destination_refused``) with the
reason and never runs; a run a reminder's firing started never runs a tool that schedules.

Failure classes (``graph.failures``): timeouts and transport failures are retried with backoff
under the same ``request_id`` only where the registry reports them as retryable (read-only or
idempotent tools, or a request never sent); a side-effect call whose outcome is unknown is
not retried and the model is told so (``outcome_unknown``); a call missing required
arguments asks the user with LangGraph ``interrupt()`` — before any call of the round runs —
and continues with the answer when resumed with ``Command(resume=...)`` (a value, or a dict
``{field: value}``); other errors go back to the model to regenerate.

Update: ``pending_results`` — one record per call, ``{"tool_call_id", "name", "status",
"error", "error_kind", "payload_path", "latency_s", "attempts", "replayed"}`` (``replayed``: the
idempotency ledger returned the request's recorded outcome, nothing ran); the raw payload is written
to ``<data_dir>/payloads/`` so it never enters a checkpoint or the prompt (K2); ``metrics``
and ``turn_metrics`` (``tool_calls`` and ``tool_latency_s`` per tool, ``tool_errors``,
``tool_retries``);
``pending_actions`` cleared; ``metrics["mcp_servers"]``: after a round that ran calls, the
MCP servers' scores and circuit breakers (:meth:`tools.mcp.client.MCPClient.metrics`; a list, so
the reducer replaces it: the latest snapshot).

Progress (DESIGN §3): every MCP ``notifications/progress`` of a call is written to LangGraph's
custom stream (``runtime.stream_writer``: ``stream_mode="custom"``, Studio) as a
:class:`tools.mcp.progress.ProgressEvent` plus ``tool_call_id`` and ``name`` (the registered
tool) — through the sink of :func:`tools.mcp.progress.progress_to`, so the tools layer imports
nothing of the graph.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import re
from pathlib import Path
from typing import Any

from langchain_core.messages import AIMessage, HumanMessage, ToolCall, ToolMessage
from langgraph.runtime import Runtime
from langgraph.types import interrupt
from tenacity import AsyncRetrying, RetryCallState, retry_if_result, stop_after_attempt, wait_exponential

from graph.context import NO_THREAD, Context, run_thread_id
from graph.failures import CUT_OFF, MAX_RETRIES, RETRY_BACKOFF_S, Recovery, recovery_for
from graph.progress import call_signature, goal_message_id, request_id
from graph.request_identity import goal_key
from graph.resources import get_toolbox
from graph.state import State
from graph.tracing import tool_span
from tools.content_checks import content_refusals, content_suggestions, unspecified_content
from tools.destination_guard import goal_results, guard_calls, user_words
from tools.mcp.progress import ProgressEvent, ProgressSink, progress_to
from tools.registry import ToolOutcome, ToolRegistry


def _write_payload(path: Path, payload: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        text = json.dumps(payload, ensure_ascii=False, default=str)
    except (TypeError, ValueError, RecursionError) as exc:  # e.g. non-string keys, cycles
        text = json.dumps(f"(payload not JSON-serialisable: {exc}) {str(payload)[:100_000]}")
    # lone surrogates from a model or a tool must not crash the write
    path.write_bytes(text.encode("utf-8", "replace"))


def payload_name(call_id: str) -> str:
    """A safe file name for a tool call's payload: the id is model-supplied (no path parts)."""
    readable = re.sub(r"[^A-Za-z0-9_-]", "_", call_id)[:40]
    return f"{readable}-{hashlib.sha256(call_id.encode('utf-8', 'replace')).hexdigest()[:10]}.json"


def earlier_unknown_outcomes(messages: list[Any], goal_id: str) -> set[str]:
    """Call signatures (``graph.progress.call_signature``) whose result, under an earlier goal
    than ``goal_id``, is "outcome unknown": a side effect sent before a run stopped (a timeout,
    a lost connection, a process killed mid-call) that may have taken effect. Under the new goal
    the same call has a new request id, so the ledger would run it again: it is confirmed first."""
    calls: dict[str, str] = {}
    goal, found = "", set()
    for m in messages:
        if isinstance(m, HumanMessage):
            goal = goal_key(m)
        elif isinstance(m, AIMessage):
            calls.update({str(c["id"]): call_signature(c) for c in m.tool_calls if c.get("id")})
        elif (
            isinstance(m, ToolMessage)
            and goal != goal_id
            and m.tool_call_id in calls
            and m.additional_kwargs.get("error_kind") == "outcome_unknown"
        ):
            found.add(calls[m.tool_call_id])
    return found


def confirm_repeat(signature: str) -> dict[str, Any]:
    """Interrupt payload asking whether to run again a side effect that may already have run."""
    return {
        "type": "confirm_repeat",
        "call": signature,
        "question": f"{signature[:300]} may already have run: an earlier run stopped after sending it, so its "
        "outcome is unknown. Check it. Run it again? (yes/no)",
    }


def is_yes(answer: Any) -> bool:
    """A resume value that confirms: True, or "yes"/"y"/"ok"/"sure"/"是"/"はい" (any case)."""
    if isinstance(answer, bool):
        return answer
    return str(answer or "").strip().lower().rstrip(".!") in {"yes", "y", "ok", "sure", "run it", "是", "好", "はい"}


def missing_arguments(registry: ToolRegistry, name: str, args: dict[str, Any]) -> list[str]:
    """Required parameters of tool ``name`` absent from ``args`` (none for unknown tools)."""
    spec = registry.get(name)
    if spec is None or not isinstance(args, dict):
        return []
    return [f for f in spec.parameters.get("required", []) if f not in args]


def ask_for(name: str, missing: list[str], registry: ToolRegistry) -> dict[str, Any]:
    """Interrupt payload asking the user for ``missing`` arguments of tool ``name``."""
    spec = registry.get(name)
    props = (spec.parameters.get("properties") or {}) if spec else {}
    hints = [f"{f} ({props.get(f, {}).get('description') or props.get(f, {}).get('type', 'value')})" for f in missing]
    return {
        "type": "missing_arguments",
        "tool": name,
        "missing": missing,
        "question": f"To run {name} I need: {', '.join(hints)}. "
        + ("What should it be?" if len(missing) == 1 else "Answer with a JSON object of these fields."),
    }


def fill(args: dict[str, Any], missing: list[str], answer: Any) -> dict[str, Any]:
    """Merge the user's answer into ``args``: a dict by field, or one value for one field."""
    if isinstance(answer, str) and answer.strip().startswith("{"):
        with contextlib.suppress(json.JSONDecodeError):
            answer = json.loads(answer)
    if isinstance(answer, dict):
        return {**args, **{k: v for k, v in answer.items() if k in missing}}
    return {**args, missing[0]: answer} if missing else args


def _last_outcome(state: RetryCallState) -> ToolOutcome:
    """Out of retries: keep the last error."""
    assert state.outcome is not None
    last: ToolOutcome = state.outcome.result()  # tenacity's future of the retried call's result
    return last


async def _call_with_retry(registry: ToolRegistry, name: str, args: Any, request_id: str) -> tuple[ToolOutcome, int]:
    """``registry.call`` with the retry recovery of ``graph.failures``; returns the final
    outcome and the number of attempts (1 + retries)."""
    attempts = 0
    outcome: ToolOutcome | None = None
    async for attempt in AsyncRetrying(
        stop=stop_after_attempt(1 + MAX_RETRIES),
        wait=wait_exponential(multiplier=RETRY_BACKOFF_S, max=4),
        retry=retry_if_result(lambda o: o.status != "ok" and recovery_for(o.error_kind) is Recovery.RETRY),
        retry_error_callback=_last_outcome,
    ):
        with attempt:
            attempts += 1
            outcome = await registry.call(name, args, request_id=request_id)
        attempt_outcome = attempt.retry_state.outcome
        if attempt_outcome is not None and not attempt_outcome.failed:
            attempt.retry_state.set_result(outcome)
    assert outcome is not None
    return outcome, attempts


def progress_writer(runtime: Runtime[Context], call: ToolCall) -> ProgressSink | None:
    """The progress sink of one call: LangGraph's custom stream (None when the runtime has no
    writer), each event tagged with the call's ``tool_call_id`` and registered ``name``."""
    writer = getattr(runtime, "stream_writer", None)
    if writer is None:
        return None

    def write(event: ProgressEvent) -> None:
        writer({**event, "tool_call_id": call["id"], "name": call["name"]})

    return write


def refusal_results(calls: list[Any], reasons: dict[str, str], kind: str) -> tuple[list[dict[str, Any]], list[Any]]:
    """Split ``calls`` by ``reasons`` (call id → why it may not run): an error result of
    ``error_kind`` ``kind`` for each refused call (it never ran), and the calls left to run."""
    results = [
        {
            "tool_call_id": c["id"],
            "name": c["name"],
            "status": "error",
            "error_kind": kind,
            "error": reasons[str(c["id"])],
            "payload_path": None,
            "latency_s": 0.0,
            "attempts": 0,
        }
        for c in calls
        if str(c["id"]) in reasons
    ]
    return results, [c for c in calls if str(c["id"]) not in reasons]


async def dispatch_tools(state: State, runtime: Runtime[Context]) -> dict[str, Any]:
    """Graph node: see the module docstring for the update it returns."""
    context = runtime.context or Context()
    last = next((m for m in reversed(state.messages) if isinstance(m, AIMessage)), None)
    if last is None:
        return {"pending_results": [], "pending_actions": []}
    thread_id = run_thread_id() or NO_THREAD
    safe_thread = re.sub(r"[^A-Za-z0-9_.-]", "_", thread_id)
    payload_dir = Path(context.data_dir) / "payloads" / safe_thread
    toolbox = await get_toolbox(context)
    registry = toolbox.registry
    goal_id = state.goal_id or goal_message_id(state.messages)
    offered = set(state.offered_tools)
    refused = [c for c in last.tool_calls if c["name"] not in offered]

    # Missing data, or a side effect that may already have run: ask before anything runs
    # (interrupt() re-runs this node on resume and returns the answer).
    calls: list[ToolCall] = []
    declined: list[ToolCall] = []
    answers: dict[str, list[str]] = {}  # the user's answers are the user's words (destinations)
    uncertain = earlier_unknown_outcomes(state.messages, goal_id)
    request_words = user_words(state.messages, state.goal)
    shared = [n for n, _, _ in goal_results(state.messages, goal_id) if getattr(registry.get(n), "share_field", None)]
    for call in last.tool_calls:
        if call["name"] not in offered:
            continue
        args = call["args"]
        # a call in the shape a tool had before it changed mid-thread is the model's to fix
        # (the registry's error names the fields and the new shape), not a question to the user
        ask = context.ask_user_for_missing and registry.stale_call(call["name"], args) is None
        missing = missing_arguments(registry, call["name"], args) if ask else []
        if ask and not missing and not context.fired_reminder:
            # content the request gives nothing for is the user's to give, not the model's to
            # make up (DESIGN §2.9; tools/content_checks.py)
            unsaid = unspecified_content(registry.get(call["name"]), args, request_words, shares=len(shared))
            missing = [unsaid] if unsaid else []
        if missing:
            answer = interrupt(ask_for(call["name"], missing, registry))
            answers[str(call["id"])] = [json.dumps(answer, ensure_ascii=False, default=str)]
            args = fill(args, missing, answer)
        spec = registry.get(call["name"])
        sig = call_signature({**call, "args": args})
        if (
            spec is not None
            and spec.side_effect
            and not spec.idempotent
            and sig in uncertain
            and not is_yes(interrupt(confirm_repeat(sig)))
        ):
            declined.append({**call, "args": args})
            continue
        calls.append({**call, "args": args})

    # Side effects go only where the user asked (DESIGN §2.8, tools/destinations.py): a refused
    # call becomes an error result naming the value and the request; the run goes on.
    unbound = await guard_calls(
        calls,
        spec_of=registry.get,
        request=[context.on_behalf_of] if context.fired_reminder else user_words(state.messages, state.goal),
        answers=answers,
        prior=[(n, a, payload_dir / payload_name(i)) for n, a, i in goal_results(state.messages, goal_id)],
        rules=context.destination_rules(),
        data_dir=context.data_dir,
        fired=context.fired_reminder,
    )
    results, calls = refusal_results(calls, unbound, "destination_refused")
    # Shared content carries the substance (DESIGN §2.9, tools/content_checks.py): content that
    # only narrates the act, or leaves out the result it shares, is refused with what to include.
    thin = (
        {}
        if context.fired_reminder
        else content_refusals(
            calls,
            spec_of=registry.get,
            prior=[(n, payload_dir / payload_name(i)) for n, _, i in goal_results(state.messages, goal_id)],
            request=user_words(state.messages, state.goal),
        )
    )
    ready = content_suggestions(
        calls,
        thin,
        spec_of=registry.get,
        prior=[(n, payload_dir / payload_name(i)) for n, _, i in goal_results(state.messages, goal_id)],
    )
    thin_results, calls = refusal_results(calls, thin, "content_refused")
    for thin_result in thin_results:  # the ready content, as the value to send instead (DESIGN §5.6)
        if suggestion := ready.get(str(thin_result["tool_call_id"])):
            thin_result["suggestion"] = suggestion
    results += thin_results
    errors = len(results)
    counts: dict[str, int] = {}
    latency: dict[str, float] = {}
    retries = 0
    for bad in last.invalid_tool_calls:
        errors += 1
        results.append(
            {
                "tool_call_id": bad["id"],
                "name": bad.get("name") or "unknown",
                "status": "error",
                "error_kind": "invalid_arguments",
                "error": str(bad["error"])
                if str(bad.get("error") or "").startswith(CUT_OFF)
                else f"arguments were not valid JSON ({bad.get('error') or 'parse error'}): "
                f"{str(bad.get('args'))[:300]}. Send the call again with a JSON object.",
                "payload_path": None,
                "latency_s": 0.0,
                "attempts": 0,
            }
        )
    for call in declined:
        errors += 1
        results.append(
            {
                "tool_call_id": call["id"],
                "name": call["name"],
                "status": "error",
                "error_kind": "outcome_unknown",
                "error": f"not run: {call_signature(call)[:200]} may already have run before an earlier run "
                "stopped, and the user did not confirm running it again",
                "payload_path": None,
                "latency_s": 0.0,
                "attempts": 0,
            }
        )
    for call in refused:
        errors += 1
        allowed = ", ".join(sorted(offered)) or "none (answer the user directly)"
        why = "is not a tool" if call["name"] not in registry else "was not offered in this round"
        results.append(
            {
                "tool_call_id": call["id"],
                "name": call["name"],
                "status": "error",
                "error_kind": "unknown_tool" if call["name"] not in registry else "not_offered",
                "error": f"{'unknown tool' if call['name'] not in registry else 'tool'} {call['name']!r} {why}, "
                f"so it was not run. Tools you may call now: {allowed}.",
                "payload_path": None,
                "latency_s": 0.0,
                "attempts": 0,
            }
        )
    for call in calls:
        rid = request_id(thread_id, goal_id, call["name"], call["args"])
        spec = registry.get(call["name"])
        # a span per call (its retries inside it) under this node's span, for any tracer
        async with tool_span(
            call["name"], call["args"], call["id"], {"tool_source": spec.source if spec else None}
        ) as span:
            with progress_to(progress_writer(runtime, call)):
                outcome, attempts = await _call_with_retry(registry, call["name"], call["args"], rid)
            span.end({"status": outcome.status, "attempts": attempts}, outcome.error or None)
        retries += attempts - 1
        counts[call["name"]] = counts.get(call["name"], 0) + 1
        latency[call["name"]] = latency.get(call["name"], 0.0) + outcome.latency_s
        path = payload_dir / payload_name(call["id"] or "")
        await asyncio.to_thread(_write_payload, path, outcome.content)
        if outcome.status != "ok":
            errors += 1
        results.append(
            {
                "tool_call_id": call["id"],
                "name": call["name"],
                "status": outcome.status,
                "error_kind": outcome.error_kind,
                "error": outcome.error + (f" (after {attempts} attempts)" if attempts > 1 else "")
                if outcome.error
                else None,
                "payload_path": str(path),
                "latency_s": round(outcome.latency_s, 4),
                "attempts": attempts,
                # the ledger's recorded outcome of this request: it did not run again
                "replayed": outcome.replayed,
                # a refusal's structured fields: the value to send instead (DESIGN §5.6)
                **({"suggestion": outcome.suggestion} if outcome.suggestion else {}),
            }
        )
    tallies = {"tool_calls": counts, "tool_latency_s": latency, "tool_errors": errors, "tool_retries": retries}
    mcp = getattr(toolbox, "mcp", None)
    servers = mcp.metrics() if calls and mcp is not None and mcp.servers else []
    return {
        "pending_results": results,
        "pending_actions": [],
        "metrics": {**tallies, "mcp_servers": servers} if servers else tallies,
        "turn_metrics": tallies,
    }
