"""Probe set: tool-call quality of the configured model on the flagship task's real tools
(tool-call success on a fixed probe set of ≥10 prompts).

For each prompt the model gets exactly what the graph sends for a new goal: the system prompt,
the request, the progress note naming the goal's known steps, and the real tool definitions
offered as ``call_model`` offers them (ranked by relevance, cut to ``max_tools``, a call
required when the goal has known steps). One call is made. Scored per prompt:

* ``well_formed`` — the reply parsed: a tool call with JSON-object arguments or a plain
  answer (no ``invalid_tool_calls``);
* ``right_tool`` — the expected tool was called;
* ``valid_args`` — the arguments pass the tool's JSON Schema;
* ``result_seen`` — after a tool result is appended, the prompt the server renders for the
  next call contains that result (llama.cpp ``/apply-template``; embedded model only).

Each embedded call also records llama.cpp's ``timings``: prompt tokens evaluated and reused
from the KV cache (``cache_n``, prompt caching across calls), prompt and generation tokens/s.

    python -m evals.probe_tool_calls [--model embedded | embedded:NAME | NAME --base-url URL] [--max-tools N]
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
import statistics
import tempfile
import time
from pathlib import Path

import httpx
import jsonschema
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage

from graph.context import Context
from graph.model import astop_embedded_server, embedded_model, embedded_server, is_embedded, load_chat_model

# (prompt, expected tool or None for "no tool needed")
PROBES: list[tuple[str, str | None]] = [
    ("How many orders were placed in October 2026? Query the sales database.", "query_database"),
    ("What was the total revenue by region last month? Use SQL.", "query_database"),
    ("List the five best-selling products from the database.", "query_database"),
    ("Generate the sales analysis report for last month.", "generate_report"),
    ("Write a Markdown sales report for 2026-09.", "generate_report"),
    ("Post 'The October report is ready' to the project channel.", "post_message"),
    ("Send a message to the team group saying the numbers are in.", "post_message"),
    ("Show me the latest messages in the project channel.", "list_messages"),
    ("Remind me on the 1st of every month at 09:00 to review sales.", "schedule_reminder"),
    ("Set up a monthly reminder to send the sales report.", "schedule_reminder"),
    ("Which reminders do I have scheduled?", "list_reminders"),
    ("Say hello.", None),
]


async def probe(context: Context) -> dict:
    # the graph's own pieces, imported here so that --speed needs only the model layer
    from graph.progress import required_steps
    from nodes.assemble_context import SYSTEM_PROMPT
    from nodes.call_model import EMBEDDED_MAX_TOOLS, offered_tools
    from tools.toolbox import Toolbox

    with tempfile.TemporaryDirectory() as tmp:
        toolbox = await Toolbox.open(Path(tmp))
        try:
            model = await load_chat_model(context)
            rows = []
            embedded = is_embedded(context)
            max_tools = context.max_tools or (EMBEDDED_MAX_TOOLS if embedded else 0)
            for prompt, expected in PROBES:
                # exactly what the graph sends for a new goal: assemble_context's prompt and
                # progress note, call_model's tool offer and tool_choice
                steps = sorted(required_steps(prompt, toolbox.registry.specs()))
                note = f"Steps of this task: {', '.join(steps)}." if steps else ""
                tools = offered_tools(toolbox.registry, f"{prompt}\n{note}", set(), max_tools, must_call=bool(steps))
                bound = (
                    model.bind_tools(tools, tool_choice="required")
                    if tools and steps
                    else (model.bind_tools(tools) if tools else model)
                )
                messages = [SystemMessage(SYSTEM_PROMPT), HumanMessage(prompt)] + (
                    [SystemMessage(note)] if note else []
                )
                start = time.perf_counter()
                reply = await bound.ainvoke(messages)
                latency = time.perf_counter() - start
                call = reply.tool_calls[0] if isinstance(reply, AIMessage) and reply.tool_calls else None
                spec = toolbox.registry.get(call["name"]) if call else None
                valid = False
                if call and spec:
                    valid = not list(jsonschema.Draft202012Validator(spec.parameters).iter_errors(call["args"]))
                row = {
                    "prompt": prompt,
                    "expected": expected,
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
                if call and embedded:
                    marker = f"probe-result-{len(rows)}"
                    follow = [
                        *messages,
                        reply,
                        ToolMessage(json.dumps({"marker": marker}), tool_call_id=call["id"], name=call["name"]),
                    ]
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
            await toolbox.aclose()
            await astop_embedded_server()
    n = len(rows)
    called = [r for r in rows if r["called"]]
    timed = [r["timings"] for r in rows if r.get("timings")]
    summary = {
        "model": context.model if not context.base_url else f"{context.model} @ {context.base_url}",
        "max_tools": max_tools,
        "prompts": n,
        "well_formed": sum(r["well_formed"] for r in rows),
        "right_tool": sum(r["right_tool"] for r in rows),
        "valid_args": sum(r["valid_args"] for r in rows),
        "result_seen": f"{sum(bool(r.get('result_seen')) for r in called)}/{len(called)}",
        "median_latency_s": sorted(r["latency_s"] for r in rows)[n // 2],
        "total_latency_s": round(sum(r["latency_s"] for r in rows), 1),
    }
    if timed:
        summary["prompt_tokens_evaluated"] = int(sum(t.get("prompt_n", 0) for t in timed))
        summary["prompt_tokens_from_cache"] = int(sum(t.get("cache_n", 0) for t in timed))
        summary["median_prompt_tok_s"] = statistics.median(t["prompt_per_second"] for t in timed)
        summary["median_gen_tok_s"] = statistics.median(t["predicted_per_second"] for t in timed)
    summary["load_avg_1min"] = round(os.getloadavg()[0], 2)
    out = Path(__file__).parent / "out"
    out.mkdir(exist_ok=True)
    suffix = f"-{embedded_model(context).name}" if is_embedded(context) else ""
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
    result = {
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
    parser.add_argument("--speed", action="store_true", help="raw tokens/s of the embedded server instead")
    parser.add_argument("--prompt-tokens", type=int, default=512)
    parser.add_argument("--gen-tokens", type=int, default=64)
    parser.add_argument("--reps", type=int, default=3)
    args = parser.parse_args()
    context = Context(model=args.model, base_url=args.base_url, max_tools=args.max_tools)
    if args.speed:
        print(json.dumps(asyncio.run(speed(context, args.prompt_tokens, args.gen_tokens, args.reps)), indent=2))
        return
    result = asyncio.run(probe(context))
    for row in result["rows"]:
        print(
            f"{'✓' if row['right_tool'] else '✗'} {row['expected'] or '-':>18} ← {row['called'] or '(answer)':<18} "
            f"args {'ok' if row['valid_args'] else 'bad'}  seen={row.get('result_seen', '-')}  "
            f"{row['latency_s']:>5.1f}s  {row['prompt'][:50]}"
        )
    for key, value in result["summary"].items():
        print(f"{key:>18}: {value}")


if __name__ == "__main__":
    main()
