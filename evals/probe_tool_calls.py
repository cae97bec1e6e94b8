"""Probe set: tool-call quality of the configured model on the flagship task's real tools
(issue #2: "tool-call success on a fixed probe set of ≥10 prompts").

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

    python -m evals.probe_tool_calls [--model embedded | --model NAME --base-url URL]

Writes ``evals/out/probe_tool_calls.json`` and prints a table.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import tempfile
import time
from pathlib import Path

import httpx
import jsonschema
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage

from graph.context import Context
from graph.model import astop_embedded_server, load_chat_model
from nodes.assemble_context import SYSTEM_PROMPT
from graph.progress import required_steps
from nodes.call_model import EMBEDDED_MAX_TOOLS, offered_tools
from tools.toolbox import Toolbox

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
    with tempfile.TemporaryDirectory() as tmp:
        toolbox = await Toolbox.open(Path(tmp))
        try:
            model = await load_chat_model(context)
            rows = []
            embedded = context.model == "embedded" and not context.base_url
            max_tools = context.max_tools or (EMBEDDED_MAX_TOOLS if embedded else 0)
            for prompt, expected in PROBES:
                # exactly what the graph sends for a new goal: assemble_context's prompt and
                # progress note, call_model's tool offer and tool_choice
                steps = sorted(required_steps(prompt, toolbox.registry.names()))
                note = f"Steps of this task: {', '.join(steps)}." if steps else ""
                tools = offered_tools(toolbox.registry, f"{prompt}\n{note}", set(), max_tools, must_call=bool(steps))
                bound = model.bind_tools(tools, tool_choice="required") if tools and steps else (
                    model.bind_tools(tools) if tools else model)
                messages = [SystemMessage(SYSTEM_PROMPT), HumanMessage(prompt)] + ([SystemMessage(note)] if note else [])
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
                if call and embedded:
                    marker = f"probe-result-{len(rows)}"
                    follow = [*messages, reply, ToolMessage(json.dumps({"marker": marker}), tool_call_id=call["id"], name=call["name"])]
                    payload = model._get_request_payload(follow)
                    base = str(model.openai_api_base).removesuffix("/v1")
                    async with httpx.AsyncClient(timeout=30) as client:
                        rendered = (await client.post(f"{base}/apply-template", json={"messages": payload["messages"], "tools": tools})).json()["prompt"]
                    row["result_seen"] = marker in rendered
                rows.append(row)
        finally:
            await toolbox.aclose()
            await astop_embedded_server()
    n = len(rows)
    called = [r for r in rows if r["called"]]
    summary = {
        "model": context.model if not context.base_url else f"{context.model} @ {context.base_url}",
        "prompts": n,
        "well_formed": sum(r["well_formed"] for r in rows),
        "right_tool": sum(r["right_tool"] for r in rows),
        "valid_args": sum(r["valid_args"] for r in rows),
        "result_seen": f"{sum(bool(r.get('result_seen')) for r in called)}/{len(called)}",
        "median_latency_s": sorted(r["latency_s"] for r in rows)[n // 2],
    }
    out = Path(__file__).parent / "out"
    out.mkdir(exist_ok=True)
    (out / "probe_tool_calls.json").write_text(json.dumps({"summary": summary, "rows": rows}, indent=2))
    return {"summary": summary, "rows": rows}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="embedded")
    parser.add_argument("--base-url", default="")
    args = parser.parse_args()
    result = asyncio.run(probe(Context(model=args.model, base_url=args.base_url)))
    for row in result["rows"]:
        print(f"{'✓' if row['right_tool'] else '✗'} {row['expected'] or '-':>18} ← {row['called'] or '(answer)':<18} "
              f"args {'ok' if row['valid_args'] else 'bad'}  seen={row.get('result_seen', '-')}  {row['prompt'][:50]}")
    for key, value in result["summary"].items():
        print(f"{key:>18}: {value}")


if __name__ == "__main__":
    main()
