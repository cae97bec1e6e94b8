"""Node ``dispatch_tools``: run the last AI message's tool calls through the registry.

Each call carries ``request_id = "<thread_id>:<tool_call_id>"``. The registry validates the
arguments against the tool's JSON Schema and runs the tool in an executor outside this process
(or over an MCP session); it never raises for a tool problem, it returns an error outcome
(unknown name with the valid names, K4; exception text, K4; timeout; MCP ``isError``, K7; dead
server, K8). Calls whose arguments were not valid JSON (``invalid_tool_calls``, K3) get an
error result without running anything.

Update: ``pending_results`` — one record per call, ``{"tool_call_id", "name", "status",
"error", "error_kind", "payload_path", "latency_s"}``; the raw payload is written to
``<data_dir>/payloads/`` so it never enters a checkpoint or the prompt (K2); ``metrics``
(``tool_calls`` and cumulative ``tool_latency_s`` per tool, ``tool_errors``);
``pending_actions`` cleared.
"""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path
from typing import Any

from langchain_core.messages import AIMessage
from langgraph.config import get_config
from langgraph.runtime import Runtime

from graph.context import Context
from graph.resources import get_toolbox
from graph.state import State


def _write_payload(path: Path, payload: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(payload, ensure_ascii=False, default=str))


async def dispatch_tools(state: State, runtime: Runtime[Context]) -> dict[str, Any]:
    """Graph node: see the module docstring for the update it returns."""
    context = runtime.context or Context()
    last = next((m for m in reversed(state.messages) if isinstance(m, AIMessage)), None)
    if last is None:
        return {"pending_results": [], "pending_actions": []}
    thread_id = str(get_config().get("configurable", {}).get("thread_id", "local"))
    safe_thread = re.sub(r"[^A-Za-z0-9_.-]", "_", thread_id)
    payload_dir = Path(context.data_dir) / "payloads" / safe_thread
    registry = (await get_toolbox(context)).registry
    results: list[dict[str, Any]] = []
    counts: dict[str, int] = {}
    latency: dict[str, float] = {}
    errors = 0
    for bad in last.invalid_tool_calls:
        errors += 1
        results.append(
            {
                "tool_call_id": bad["id"],
                "name": bad.get("name") or "unknown",
                "status": "error",
                "error_kind": "invalid_arguments",
                "error": f"arguments were not valid JSON ({bad.get('error') or 'parse error'}): "
                f"{str(bad.get('args'))[:300]}. Send the call again with a JSON object.",
                "payload_path": None,
                "latency_s": 0.0,
            }
        )
    for call in last.tool_calls:
        outcome = await registry.call(call["name"], call["args"], request_id=f"{thread_id}:{call['id']}")
        counts[call["name"]] = counts.get(call["name"], 0) + 1
        latency[call["name"]] = latency.get(call["name"], 0.0) + outcome.latency_s
        path = payload_dir / f"{call['id']}.json"
        await asyncio.to_thread(_write_payload, path, outcome.content)
        if outcome.status != "ok":
            errors += 1
        results.append(
            {
                "tool_call_id": call["id"],
                "name": call["name"],
                "status": outcome.status,
                "error_kind": outcome.error_kind,
                "error": outcome.error,
                "payload_path": str(path),
                "latency_s": round(outcome.latency_s, 4),
            }
        )
    return {
        "pending_results": results,
        "pending_actions": [],
        "metrics": {"tool_calls": counts, "tool_latency_s": latency, "tool_errors": errors},
    }
