"""Benchmark: framework overhead per turn of the Hermes graph vs LangGraph's prebuilt ReAct
agent, same fake model, same tool, same SQLite checkpointer, measured in one run.

Each turn = user message → tool call → tool result → answer. Both arms run interleaved in
rounds so machine noise hits both alike; the report is the ratio of medians.

    python -m evals.bench_overhead [--turns 60] [--rounds 5]

Target: ratio ≤ 1.5. Prints a table and writes ``evals/out/overhead.json``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import tempfile
import time
import warnings
from pathlib import Path

from langchain_core.messages import HumanMessage
from langchain_core.tools import tool
from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

from evals.fakes import OneToolThenAnswer
from graph import resources
from graph.builder import make_graph
from graph.context import Context
from graph.model import register_model
from tools.registry import ToolRegistry
from tools.spec import ToolSpec


def lookup_value(key: str) -> dict:
    return {"key": key, "value": len(key) * 7}


class _Toolbox:
    def __init__(self) -> None:
        self.registry = ToolRegistry()

        async def runner(args: dict, request_id: str) -> dict:
            return lookup_value(**args)

        self.registry.register(
            ToolSpec(name="lookup", description="Look up the value stored under a key (benchmark tool).",
                     parameters={"type": "object", "properties": {"key": {"type": "string"}}, "required": ["key"]}),
            runner,
        )

    async def aclose(self) -> None:
        pass


async def time_hermes(turns: int, workdir: Path) -> float:
    context = Context(model="bench-fake", data_dir=str(workdir / "hermes"))
    register_model("bench-fake", lambda _c: OneToolThenAnswer())
    resources.set_toolbox(context, _Toolbox())  # type: ignore[arg-type]
    async with AsyncSqliteSaver.from_conn_string(str(workdir / "hermes.sqlite")) as saver:
        agent = make_graph(checkpointer=saver)
        config = {"configurable": {"thread_id": "bench"}}
        await agent.ainvoke({"messages": [HumanMessage("warm up")]}, config, context=context)
        start = time.perf_counter()
        for i in range(turns):
            await agent.ainvoke({"messages": [HumanMessage(f"what is k{i}?")]}, config, context=context)
        return (time.perf_counter() - start) / turns


async def time_prebuilt(turns: int, workdir: Path) -> float:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from langgraph.prebuilt import create_react_agent

    @tool
    def lookup(key: str) -> dict:
        """Look up the value stored under a key (benchmark tool)."""
        return lookup_value(key)

    async with AsyncSqliteSaver.from_conn_string(str(workdir / "prebuilt.sqlite")) as saver:
        agent = create_react_agent(OneToolThenAnswer(), [lookup], checkpointer=saver)
        config = {"configurable": {"thread_id": "bench"}}
        await agent.ainvoke({"messages": [HumanMessage("warm up")]}, config)
        start = time.perf_counter()
        for i in range(turns):
            await agent.ainvoke({"messages": [HumanMessage(f"what is k{i}?")]}, config)
        return (time.perf_counter() - start) / turns


async def main(turns: int, rounds: int) -> dict:
    hermes, prebuilt = [], []
    for r in range(rounds):
        with tempfile.TemporaryDirectory() as tmp:
            work = Path(tmp)
            # alternate the order so neither arm always runs on a warmer machine
            arms = [(time_hermes, hermes), (time_prebuilt, prebuilt)]
            for fn, sink in (arms if r % 2 == 0 else arms[::-1]):
                sink.append(await fn(turns, work))
    report = {
        "turns_per_round": turns,
        "rounds": rounds,
        "hermes_ms_per_turn": round(statistics.median(hermes) * 1000, 2),
        "prebuilt_ms_per_turn": round(statistics.median(prebuilt) * 1000, 2),
    }
    report["ratio"] = round(report["hermes_ms_per_turn"] / report["prebuilt_ms_per_turn"], 2)
    report["target"] = "<= 1.5"
    out = Path(__file__).parent / "out"
    out.mkdir(exist_ok=True)
    (out / "overhead.json").write_text(json.dumps(report, indent=2))
    return report


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--turns", type=int, default=60)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    result = asyncio.run(main(args.turns, args.rounds))
    for key, value in result.items():
        print(f"{key:>22}: {value}")
