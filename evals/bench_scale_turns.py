"""Throughput and per-turn overhead of ``evals.bench_scale``: W worker processes × T concurrent
threads of the real agent graph on one PostgreSQL (turns per second, ratio to one worker), and one
worker's sequential turns with everything on PostgreSQL vs everything in the data directory."""

from __future__ import annotations

import asyncio
import json
import statistics
import time
import uuid
from pathlib import Path
from typing import Any, cast

from evals.bench_scale_procs import Postgres, load, ready_then_go, spawn, stop, wait_files

TOOL_SOURCE = "def record_value(key):\n    return {'key': key, 'value': len(key) * 7}\n"


def _helpers(data: Path) -> Path:
    """The data directory and the folder of the benchmark tool's module the executor imports."""
    data.mkdir(parents=True, exist_ok=True)
    helpers = data.parent / f"{data.name}-helpers"
    helpers.mkdir(exist_ok=True)
    (helpers / "bench_tool.py").write_text(TOOL_SOURCE)
    return helpers


async def turn_worker(data: Path, url: str, threads: int, turns: int, ready: Path, go: Path) -> dict[str, Any]:
    """Run ``threads`` × ``turns`` agent turns once ``go`` exists; the timed window's bounds."""
    from langchain_core.messages import HumanMessage

    from evals.bench_overhead import SCHEMA, TOOL, ToolThenAnswer
    from graph import resources
    from graph.builder import make_graph
    from graph.checkpoints import checkpoints_file, open_checkpointer
    from graph.context import Context
    from graph.model import register_model
    from tools.executors import make_executor
    from tools.ledgers import open_ledger
    from tools.registry import ToolRegistry
    from tools.spec import ToolSpec

    helpers = await asyncio.to_thread(_helpers, data)
    executor = make_executor("subprocess", data, extra_paths=(str(helpers),))
    context = Context(model="bench-fake", data_dir=str(data), embeddings="hash", postgres_url=url)
    register_model("bench-fake", lambda _c: ToolThenAnswer(tool_name=TOOL))

    class Box:
        def __init__(self) -> None:
            self.registry = ToolRegistry(ledger=open_ledger(data, url))

        async def aclose(self) -> None:
            await self.registry.ledger.aclose()

    async def run_tool(args: dict, request_id: str) -> Any:
        return await executor.run("bench_tool:record_value", args, timeout_s=60, request_id=request_id)

    box = Box()
    spec = ToolSpec(name=TOOL, side_effect=True, parameters=SCHEMA, description="Record the value under a key.")
    box.registry.register(spec, run_tool)
    resources.set_toolbox(context, box)  # type: ignore[arg-type]
    tag = uuid.uuid4().hex[:6]
    try:
        async with open_checkpointer(checkpoints_file(data), postgres=url) as saver:
            agent = make_graph(checkpointer=saver)

            async def thread(n: int) -> None:
                cfg: Any = {"configurable": {"thread_id": f"bench-{tag}-{n}"}}
                for k in range(turns):
                    text = f"Record the value for k{n}x{k}."
                    await agent.ainvoke(cast(Any, {"messages": [HumanMessage(text)]}), cfg, context=context)

            await thread(-1)  # warm-up: imports, tables, the first spawn
            await resources.drain_background()
            await asyncio.to_thread(ready_then_go, ready, go)
            start = time.time()
            if threads == 1:
                times = []
                for k in range(turns):
                    t0 = time.perf_counter()
                    await thread(k)
                    await resources.drain_background()
                    times.append(time.perf_counter() - t0)
            else:
                await asyncio.gather(*(thread(n) for n in range(threads)))
                await resources.drain_background()
                times = []
            end = time.time()
    finally:
        await resources.drain_background()
        await resources.get_memory(context).aclose()
        await box.aclose()
    return {"start": start, "end": end, "turns": threads * turns, "turn_s": times}


def run_turn_workers(tmp: Path, url: str, workers: int, threads: int, turns: int, label: str) -> list[dict[str, Any]]:
    go = tmp / f"go-{label}"
    readies = [tmp / f"ready-{label}-{i}" for i in range(workers)]
    procs = [
        spawn("--turn-worker", str(tmp / f"data-{label}-{i}"), url, str(threads), str(turns), str(readies[i]), str(go))
        for i in range(workers)
    ]
    try:
        wait_files(readies, procs)
        go.write_text("go")
        results = []
        for proc in procs:
            out, err = proc.communicate(timeout=1800)
            if proc.returncode != 0:
                raise RuntimeError(f"turn worker failed: {err[-3000:]}")
            results.append(json.loads(out.strip().splitlines()[-1]))
        return results
    finally:
        for proc in procs:
            stop(proc)


def throughput(pg: Postgres, tmp: Path, worker_counts: list[int], threads: int, turns: int) -> dict[str, Any]:
    rows = []
    for w in worker_counts:
        load_before = load()
        results = run_turn_workers(tmp, pg.database(), w, threads, turns, f"tp{w}")
        wall = max(r["end"] for r in results) - min(r["start"] for r in results)
        total = sum(r["turns"] for r in results)
        rows.append({"workers": w, "turns": total, "wall_s": wall, "turns_per_s": total / wall, "load": load_before})
        print(
            f"  {w} worker(s) × {threads} threads: {total} turns in {wall:.1f} s = {total / wall:.2f} turns/s",
            flush=True,
        )
    base = rows[0]["turns_per_s"]
    for row in rows:
        row["ratio"] = row["turns_per_s"] / base
    return {"threads": threads, "turns_per_thread": turns, "rows": rows}


def overhead(pg: Postgres, tmp: Path, turns: int, rounds: int) -> dict[str, Any]:
    per: dict[str, list[float]] = {"sqlite": [], "postgres": []}
    for r in range(rounds):
        order = ["sqlite", "postgres"] if r % 2 == 0 else ["postgres", "sqlite"]
        for backend in order:
            url = pg.database() if backend == "postgres" else ""
            [result] = run_turn_workers(tmp, url, 1, 1, turns, f"oh-{backend}-{r}")
            per[backend].extend(result["turn_s"])
    med = {k: statistics.median(v) * 1000 for k, v in per.items()}
    print(f"  per turn: SQLite {med['sqlite']:.0f} ms, PostgreSQL {med['postgres']:.0f} ms", flush=True)
    return {"turns": turns, "rounds": rounds, "ms_per_turn": med, "ratio": med["postgres"] / med["sqlite"]}
