"""Node ``compress_results``: turn this round's raw tool results into bounded tool messages.

Reads ``pending_results`` (raw payloads on disk, written by ``dispatch_tools``) and runs the
three-stage pipeline of ``tools.results`` (validate, bound, summarise; seed §2.3, DESIGN §2.5, case K2), so
every result that enters history — and so every later prompt — is bounded, its
``tool_call_id`` pairing intact, and the full payload reachable through ``handle`` (the
payload file's path relative to the data dir; a paging tool can read the rest by it).

Stage 3 for long unstructured text (``tools.results.needs_model_summary``) is a model call
aimed at the current goal (``context.summarise_unstructured``) with its own budget
(``summary_timeout_s``, ``summary_max_tokens``); if it times out or fails, the rule summary (a
truncated excerpt) stands and a note in the envelope says so.

A result the idempotency ledger replayed (``pending_results[i]["replayed"]``: the same request
already ran — on another branch, before a fork or a restart, under another call id — and did not
run again) says so where every reader looks: ``additional_kwargs["replayed"] = True`` on the
``ToolMessage`` and :data:`REPLAYED_NOTE` at the end of the envelope's summary, so the model,
the progress notes and the stop notice report the effect as done once, not as a new run.

Update: ``messages`` (one ``ToolMessage`` per call; ``status="error"`` for failures, with the
error text in the envelope) and ``pending_results`` cleared.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

from langchain_core.messages import HumanMessage, SystemMessage, ToolMessage
from langgraph.runtime import Runtime

from graph.context import Context
from graph.resources import get_model, get_toolbox
from graph.state import State
from tools.results import compress, needs_model_summary

SUMMARY_INPUT_CHARS = 8000  # what the summarising model reads of a long text
#: Appended to the summary of a replayed result (module docstring).
REPLAYED_NOTE = " (already done for this request earlier: the idempotency ledger's recorded result; not run again)"


async def model_summary(context: Context, goal: str, text: str) -> tuple[str | None, str | None]:
    """A short summary of ``text`` for ``goal`` by the configured model, bounded by its own
    budget: ``context.summary_timeout_s`` seconds and ``context.summary_max_tokens`` tokens
    (issue of the embedded default: an unbounded summary call took 250 s on 2 cores).
    Returns ``(summary, None)``, or ``(None, note)`` when the call timed out or failed — the
    rule summary (a truncated excerpt) then stands and the note says why."""
    try:
        model = (await get_model(context)).bind(max_tokens=context.summary_max_tokens)
        reply = await asyncio.wait_for(
            model.ainvoke(
                [
                    SystemMessage(f"Summarise the tool output for this goal in at most 3 sentences: {goal}"),
                    HumanMessage(text[:SUMMARY_INPUT_CHARS]),
                ]
            ),
            context.summary_timeout_s,
        )
    except TimeoutError:
        return None, (
            f"no model summary: it took over {context.summary_timeout_s:g} s (summary_timeout_s); "
            "the summary is a truncated excerpt"
        )
    except Exception as exc:  # noqa: BLE001 - the rule summary stands; the envelope says so
        return None, f"no model summary ({type(exc).__name__}: {str(exc)[:120]}); the summary is a truncated excerpt"
    content = reply.content if isinstance(reply.content, str) else ""
    summary = content.strip()[:600]
    return (summary, None) if summary else (None, "the model's summary was empty; the summary is a truncated excerpt")


def _handle(payload_path: str | None, data_dir: str) -> str | None:
    """The payload's path relative to the data dir: the handle a paging tool takes."""
    if not payload_path:
        return None
    try:
        return str(Path(payload_path).relative_to(Path(data_dir)))
    except ValueError:
        return payload_path


def _read_payload(path: str | None) -> Any:
    if not path:
        return None
    try:
        return json.loads(Path(path).read_text())
    except (OSError, json.JSONDecodeError) as exc:
        return f"(payload unreadable: {exc})"


async def compress_results(state: State, runtime: Runtime[Context]) -> dict[str, Any]:
    """Graph node: see the module docstring for the update it returns."""
    context = runtime.context or Context()
    registry = (await get_toolbox(context)).registry
    messages: list[ToolMessage] = []
    for result in state.pending_results:
        raw = await asyncio.to_thread(_read_payload, result.get("payload_path"))
        status = result["status"]
        spec = registry.get(result["name"])
        summary = summary_note = None
        if result["status"] == "ok" and context.summarise_unstructured and needs_model_summary(raw):
            summary, summary_note = await model_summary(context, state.goal, raw)
        try:
            envelope = compress(
                result["name"],
                raw,
                status=result["status"],
                error=result.get("error"),
                result_schema=getattr(spec, "result_schema", None),
                handle=_handle(result.get("payload_path"), context.data_dir),
                summary=summary,
                summary_note=summary_note,
                suggestion=(result.get("suggestion") or {}).get("args"),
            )
            if result.get("replayed"):
                envelope["summary"] = f"{envelope['summary']}{REPLAYED_NOTE}"
            content = json.dumps(envelope, ensure_ascii=False, default=str)
        except Exception as exc:  # noqa: BLE001 - a result that breaks the pipeline must not break the run
            content = json.dumps(
                {
                    "status": "error",
                    "summary": f"{result['name']}: result could not be processed",
                    "error": f"{type(exc).__name__}: {str(exc)[:300]}",
                    "handle": _handle(result.get("payload_path"), context.data_dir),
                }
            )
            status = "error"
        messages.append(
            ToolMessage(
                # lone surrogates would break the checkpoint serialiser: replace them
                content=content.encode("utf-8", "replace").decode("utf-8"),
                tool_call_id=result["tool_call_id"],
                name=result["name"],
                status="error" if status != "ok" else "success",
                # the failure class and a replay travel with the result (write_memory, Studio)
                additional_kwargs={
                    **({"error_kind": result["error_kind"]} if result.get("error_kind") else {}),
                    **({"replayed": True} if result.get("replayed") else {}),
                    # a refusal's structured fields (what to send instead; DESIGN §5.6)
                    **({"suggestion": result["suggestion"]} if result.get("suggestion") else {}),
                },
            )
        )
    return {"messages": messages, "pending_results": []}
