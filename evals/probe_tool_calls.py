"""Probe set: tool-call quality of the configured model on the flagship task's real tools
(tool-call success on a fixed probe set of ≥10 prompts), through the graph's own nodes.

Each prompt is a new goal on a fresh thread, run through ``assemble_context`` and then
``call_model`` — the nodes themselves, compiled as a two-node LangGraph graph
(:func:`first_call_graph`: run config, context, reducers), with the real toolbox (builtin tools on a generated
demo database, the team-chat MCP server): the system prompt, the goal rules' progress note and
``must_call_tool``, relevance ranking and the tool cap, masking of unrequested side effects,
``bind_tools`` and the grammar are whatever the graph does today. One model call is made.

Two prompt sets (``PROBES``):

* ``plain`` — requests in everyday words that contain none of the tools' own keywords (no word
  of a tool's name, nor its 5-letter stem that tool selection matches: no "report", "post",
  "message", "remind", "schedule", "query", "database", "list" ...): the headline figure;
* ``keyword`` — the earlier probe's prompts, which name the tools' keywords.

Each pick is classified by who made it:

* ``forced`` — the goal rules required a call (``must_call_tool``) and exactly one tool was
  offered: the grammar leaves the model no choice of tool (only the arguments);
* ``required`` — the goal rules required a call and restricted the offer to the goal's missing
  steps and read-only helpers (two or more tools): the rules chose that a call happens and
  which side-effect tool is possible, the model chose among the few offered;
* ``no_offer`` — no tool was offered (no relevance, or everything masked): the model could
  only answer;
* ``chosen`` — no call was required: the model chose among the offered tools and answering.

Scored per prompt:

* ``well_formed`` — the reply parsed: a tool call with JSON-object arguments or a plain
  answer (no ``invalid_tool_calls``);
* ``right_tool`` — the expected tool was called (or, expecting none, no tool was called);
* ``valid_args`` — the arguments pass the tool's JSON Schema;
* ``result_seen`` — after a tool result is appended, the prompt the server renders for the
  next call contains that result (llama.cpp ``/apply-template``; embedded model only).

Each embedded call also records llama.cpp's ``timings``: prompt tokens evaluated and reused
from the KV cache (``cache_n``, prompt caching across calls), prompt and generation tokens/s.

    python -m evals.probe_tool_calls [--model embedded | embedded:NAME | NAME --base-url URL] [--max-tools N] [--set plain|keyword|both]
    python -m evals.probe_tool_calls --model embedded:NAME --speed   # raw tokens/s, no grammar

``--speed`` measures the server alone through llama.cpp's ``/completion``: a fixed prompt of
``--prompt-tokens`` tokens (no cache) and ``--gen-tokens`` generated tokens, ``--reps`` times,
after one warm-up request (the first pages the weights in). Thread count, context size and
batch sizes are set with ``HERMES_EMBEDDED_*`` (``graph/embedded/server.py``).

Writes ``evals/out/probe_tool_calls[-NAME].json`` (``speed[-NAME].json``) and prints a table.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
import jsonschema
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

from graph.context import Context
from graph.model import astop_embedded_server, embedded_model, embedded_server, is_embedded, load_chat_model

# (set, prompt, expected tool or None for "no tool needed")
PROBES: list[tuple[str, str, str | None]] = [
    ("plain", "How many orders came in during October 2026?", "query_database"),
    ("plain", "What did each region earn last month?", "query_database"),
    ("plain", "Which five products sold best?", "query_database"),
    ("plain", "What tables and columns do I have to work with?", "describe_database"),
    ("plain", "Write up an analysis of September's sales as a document I can share.", "generate_report"),
    ("plain", "Put together a written summary of last month's revenue, with figures, as a file.", "generate_report"),
    ("plain", "Tell the project group that the numbers are in.", "post_message"),
    ("plain", "Let everyone in sales-team know the October figures are final.", "post_message"),
    ("plain", "What has the project group been saying lately?", "list_messages"),
    ("plain", "Every month on the 1st at 09:00, nudge me to check sales.", "schedule_reminder"),
    ("plain", "Which recurring nudges have I set up?", "list_reminders"),
    ("plain", "Say hello.", None),
    ("keyword", "How many orders were placed in October 2026? Query the sales database.", "query_database"),
    ("keyword", "What was the total revenue by region last month? Use SQL.", "query_database"),
    ("keyword", "List the five best-selling products from the database.", "query_database"),
    ("keyword", "Generate the sales analysis report for last month.", "generate_report"),
    ("keyword", "Write a Markdown sales report for 2026-09.", "generate_report"),
    ("keyword", "Post 'The October report is ready' to the project channel.", "post_message"),
    ("keyword", "Send a message to the team group saying the numbers are in.", "post_message"),
    ("keyword", "Show me the latest messages in the project channel.", "list_messages"),
    ("keyword", "Remind me on the 1st of every month at 09:00 to review sales.", "schedule_reminder"),
    ("keyword", "Set up a monthly reminder to send the sales report.", "schedule_reminder"),
    ("keyword", "Which reminders do I have scheduled?", "list_reminders"),
    ("keyword", "Say hello.", None),
]


def tool_keywords(names: list[str]) -> set[str]:
    """The 5-letter stems of the words of the tools' names (what tool selection matches)."""
    return {w[:5] for n in names for w in n.split("_") if len(w) > 2}


def keywords_in(prompt: str, names: list[str]) -> list[str]:
    """Words of ``prompt`` whose stem is a tool-name stem (empty for a ``plain`` prompt)."""
    stems = tool_keywords(names)
    return [w for w in re.findall(r"[a-z]+", prompt.lower()) if len(w) > 2 and w[:5] in stems]


def who_picked(must_call: bool, offered: list[str]) -> str:
    """``forced`` / ``required`` / ``chosen`` / ``no_offer`` (see the module docstring)."""
    if not offered:
        return "no_offer"
    if must_call:
        return "forced" if len(offered) == 1 else "required"
    return "chosen"


def first_call_graph() -> Any:
    """``START → assemble_context → call_model → END``: the agent graph's first two nodes,
    compiled as LangGraph runs them (run config, context, reducers), stopping before dispatch."""
    from langgraph.graph import END, START, StateGraph

    from graph.state import InputState, State
    from nodes.assemble_context import assemble_context
    from nodes.call_model import call_model

    builder = StateGraph(State, input_schema=InputState, context_schema=Context)
    builder.add_node("assemble_context", assemble_context)
    builder.add_node("call_model", call_model)
    builder.add_edge(START, "assemble_context")
    builder.add_edge("assemble_context", "call_model")
    builder.add_edge("call_model", END)
    return builder.compile()


async def probe(context: Context, which: str = "both") -> dict:
    # the graph's own pieces, imported here so that --speed needs only the model layer
    from graph import resources
    from graph.state import State
    from tools.builtin.demo_db import generate_sales_db

    probes = [p for p in PROBES if which in ("both", p[0])]
    with tempfile.TemporaryDirectory() as tmp:
        db = generate_sales_db(Path(tmp) / "user" / "sales.db")
        context = context.model_copy(update={"data_dir": str(Path(tmp) / "data"), "database": str(db)})
        graph = first_call_graph()
        rows = []
        embedded = is_embedded(context)
        try:
            toolbox = await resources.get_toolbox(context)
            names = toolbox.registry.names()
            model: Any = await load_chat_model(context) if embedded else None
            for n, (group, prompt, expected) in enumerate(probes):
                start = time.perf_counter()
                values = await graph.ainvoke(
                    {"messages": [HumanMessage(prompt, id=f"probe-{n}")]},
                    {"configurable": {"thread_id": f"probe-{n}"}},
                    context=context,
                )
                latency = time.perf_counter() - start  # both nodes: recall + the one model call
                state = State(**{k: v for k, v in values.items() if k in State.__dataclass_fields__})
                reply = state.messages[-1]
                offered = list(state.offered_tools)
                call = reply.tool_calls[0] if isinstance(reply, AIMessage) and reply.tool_calls else None
                spec = toolbox.registry.get(call["name"]) if call else None
                valid = False
                if call and spec:
                    valid = not list(jsonschema.Draft202012Validator(spec.parameters).iter_errors(call["args"]))
                row: dict[str, Any] = {
                    "set": group,
                    "prompt": prompt,
                    "tool_keywords": keywords_in(prompt, names),
                    "expected": expected,
                    "offered": offered,
                    "must_call": state.must_call_tool,
                    "picked_by": who_picked(state.must_call_tool, offered),
                    "called": call["name"] if call else None,
                    "well_formed": not getattr(reply, "invalid_tool_calls", None)
                    and (bool(call) or bool(reply.content)),
                    "right_tool": (call["name"] if call else None) == expected,
                    "valid_args": valid if call else expected is None,
                    "latency_s": round(latency, 2),
                }
                timings = reply.response_metadata.get("timings") or {}
                if timings:
                    row["timings"] = {
                        k: round(float(timings[k]), 1)
                        for k in ("prompt_n", "cache_n", "prompt_per_second", "predicted_n", "predicted_per_second")
                        if k in timings
                    }
                if call and model is not None:
                    marker = f"probe-result-{n}"
                    follow = [
                        *[m for m in state.prompt_messages() if m is not reply and m.id != reply.id],
                        reply,
                        ToolMessage(json.dumps({"marker": marker}), tool_call_id=call["id"], name=call["name"]),
                    ]
                    tools = [found.openai_tool() for t in offered if (found := toolbox.registry.get(t))]
                    payload = model._get_request_payload(follow)
                    base = str(model.openai_api_base).removesuffix("/v1")
                    async with httpx.AsyncClient(timeout=30) as client:
                        rendered = (
                            await client.post(
                                f"{base}/apply-template", json={"messages": payload["messages"], "tools": tools}
                            )
                        ).json()["prompt"]
                    row["result_seen"] = marker in rendered
                rows.append(row)
        finally:
            await resources.aclose_resources()
            await astop_embedded_server()
    summary: dict[str, Any] = {
        "model": context.model if not context.base_url else f"{context.model} @ {context.base_url}",
        "max_tools": context.max_tools or ("catalog" if embedded else 0),
    }
    for group in ("plain", "keyword"):
        rs = [r for r in rows if r["set"] == group]
        if not rs:
            continue
        called = [r for r in rs if r["called"]]
        part: dict[str, Any] = {
            "prompts": len(rs),
            "prompts_with_tool_keywords": sum(bool(r["tool_keywords"]) for r in rs),
            "well_formed": sum(r["well_formed"] for r in rs),
            "right_tool": sum(r["right_tool"] for r in rs),
            "valid_args": sum(r["valid_args"] for r in rs),
            "result_seen": f"{sum(bool(r.get('result_seen')) for r in called)}/{len(called)}",
        }
        for who in ("forced", "required", "chosen", "no_offer"):
            picks = [r for r in rs if r["picked_by"] == who]
            part[f"right_{who}"] = f"{sum(r['right_tool'] for r in picks)}/{len(picks)}"
        summary[group] = part
    n = len(rows)
    timed = [r["timings"] for r in rows if r.get("timings")]
    summary["median_latency_s"] = sorted(r["latency_s"] for r in rows)[n // 2] if rows else 0
    summary["total_latency_s"] = round(sum(r["latency_s"] for r in rows), 1)
    if timed:
        summary["prompt_tokens_evaluated"] = int(sum(t.get("prompt_n", 0) for t in timed))
        summary["prompt_tokens_from_cache"] = int(sum(t.get("cache_n", 0) for t in timed))
        summary["median_prompt_tok_s"] = statistics.median(t["prompt_per_second"] for t in timed)
        summary["median_gen_tok_s"] = statistics.median(t["predicted_per_second"] for t in timed)
    summary["load_avg_1min"] = round(os.getloadavg()[0], 2)
    out = Path(__file__).parent / "out"
    out.mkdir(exist_ok=True)
    suffix = f"-{embedded_model(context).name}" if embedded else ""
    (out / f"probe_tool_calls{suffix}.json").write_text(json.dumps({"summary": summary, "rows": rows}, indent=2))
    return {"summary": summary, "rows": rows}


SPEED_TEXT = (
    "The quarterly sales report lists revenue by region, product and month; each order has an "
    "id, a date, a customer, a product, a quantity and a price. "
) * 400


async def speed(context: Context, prompt_tokens: int, gen_tokens: int, reps: int) -> dict:
    """Raw prompt and generation tokens/s of the embedded server (see the module docstring)."""
    entry = embedded_model(context)
    with tempfile.TemporaryDirectory() as tmp:
        server = embedded_server(tmp)
        start = time.perf_counter()
        try:
            base = (await server.start(entry)).removesuffix("/v1")
            started = time.perf_counter() - start
            async with httpx.AsyncClient(timeout=1800) as client:
                tokens = (await client.post(f"{base}/tokenize", json={"content": SPEED_TEXT})).json()["tokens"]
                tokens = tokens[:prompt_tokens]

                async def once(n_prompt: int, n_gen: int) -> dict:
                    body = {
                        "prompt": tokens[:n_prompt],
                        "n_predict": n_gen,
                        "cache_prompt": False,
                        "temperature": 0,
                        "ignore_eos": True,
                    }
                    return (await client.post(f"{base}/completion", json=body)).json()["timings"]

                await once(32, 8)  # warm-up: pages the weights in
                runs = [await once(len(tokens), gen_tokens) for _ in range(reps)]
        finally:
            await server.astop()
    result: dict[str, Any] = {
        "model": entry.name,
        "file_mib": round(entry.size / 2**20),
        "threads": int(os.environ.get("HERMES_EMBEDDED_THREADS") or entry.threads or os.cpu_count() or 1),
        "batch_threads": int(
            os.environ.get("HERMES_EMBEDDED_BATCH_THREADS") or entry.batch_threads or os.cpu_count() or 1
        ),
        "omp_wait_policy": os.environ.get("OMP_WAIT_POLICY", "PASSIVE"),
        "start_s": round(started, 1),
        "prompt_tokens": len(tokens),
        "gen_tokens": gen_tokens,
        "prompt_tok_s": [round(r["prompt_per_second"], 1) for r in runs],
        "gen_tok_s": [round(r["predicted_per_second"], 1) for r in runs],
        "load_avg_1min": round(os.getloadavg()[0], 2),
    }
    # generation reads every weight once per token: file size x tokens/s is the bandwidth used
    result["gen_weight_read_gb_s"] = round(entry.size * max(result["gen_tok_s"]) / 1e9, 1)
    out = Path(__file__).parent / "out"
    out.mkdir(exist_ok=True)
    (out / f"speed-{entry.name}.json").write_text(json.dumps(result, indent=2))
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--model",
        default="embedded",
        help="embedded (the default bundled model), embedded:NAME, or an endpoint's model name",
    )
    parser.add_argument("--base-url", default="")
    parser.add_argument(
        "--max-tools", type=int, default=0, help="tools offered per call (0: as the graph does, 2 for embedded models)"
    )
    parser.add_argument(
        "--set",
        dest="which",
        choices=["plain", "keyword", "both"],
        default="both",
        help="prompt set: plain (no tool keywords), keyword (the earlier probe's), both",
    )
    parser.add_argument("--speed", action="store_true", help="raw tokens/s of the embedded server instead")
    parser.add_argument("--prompt-tokens", type=int, default=512)
    parser.add_argument("--gen-tokens", type=int, default=64)
    parser.add_argument("--reps", type=int, default=3)
    args = parser.parse_args()
    context = Context(model=args.model, base_url=args.base_url, max_tools=args.max_tools)
    if args.speed:
        print(json.dumps(asyncio.run(speed(context, args.prompt_tokens, args.gen_tokens, args.reps)), indent=2))
        return
    result = asyncio.run(probe(context, args.which))
    for row in result["rows"]:
        print(
            f"{'✓' if row['right_tool'] else '✗'} {row['set']:<7} {row['picked_by']:<8} "
            f"{row['expected'] or '-':>18} ← {row['called'] or '(answer)':<18} "
            f"args {'ok' if row['valid_args'] else 'bad'}  seen={row.get('result_seen', '-')}  "
            f"{row['latency_s']:>5.1f}s  {row['prompt'][:50]}"
        )
    for key, value in result["summary"].items():
        print(f"{key:>18}: {value}")


if __name__ == "__main__":
    main()
