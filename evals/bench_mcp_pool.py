"""MCP benchmarks P1, P2, P10 (DESIGN §3.3, §3.4), every ratio measured in one run against its baseline.

* **P1** — one tool call over stdio: Hermes's pool (:class:`tools.mcp.client.MCPServer`) vs
  ``langchain-mcp-adapters``' default (``MultiServerMCPClient.get_tools()``: a new session, so a
  new server process, per call) vs a raw ``mcp`` ``ClientSession`` kept open. Targets: ≥ 50×
  faster than the adapter default, ≤ 1.3× the raw session.
* **P2** — three replicas of one read-only tool (one crashes on 30 % of calls, one answers in
  2 s, one healthy), N calls, C at a time: scoring + failover (the Toolbox's
  :func:`tools.mcp.replicas.call_replicas`) vs round-robin without failover vs a single server
  (the healthy one alone: the p95 reference; the crashing one alone: the success floor).
  Targets: ≥ 99.5 % success and p95 ≤ 1.5× the healthy server alone.
* **P10** — 50 concurrent calls of a tool that blocks its server process for 100 ms: pool
  (min 2, max 10) vs one session (min 1, max 1); throughput ratio, cold (the pool grows during
  the burst) and warm (a second burst).

Run: ``.venv/bin/python -m evals.bench_mcp_pool [p1|p2|p10|all] [--n N]``. Writes
``evals/out/bench_mcp_pool.json`` and, with matplotlib, ``evals/out/mcp_pool.png`` (ignored by git;
the plot evals/README.md cites is a copy in ``evals/reports/``). The
servers are FastMCP scripts written to a temp dir; every process is stopped at the end.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import statistics
import sys
import tempfile
import textwrap
import time
from pathlib import Path
from typing import Any

from tools.mcp.client import MCPServer
from tools.mcp.replicas import Replica, call_replicas

OUT = Path(__file__).parent / "out" / "bench_mcp_pool.json"
PLOT = Path(__file__).parent / "out" / "mcp_pool.png"

SERVER = textwrap.dedent('''
    import asyncio, os, random, sys, time
    from mcp.server.fastmcp import FastMCP
    from mcp.types import ToolAnnotations

    mode = os.environ.get("BENCH_MODE", "healthy")
    mcp = FastMCP("bench-" + mode, log_level="WARNING")
    RO = ToolAnnotations(readOnlyHint=True, idempotentHint=True)

    @mcp.tool(annotations=RO)
    async def lookup(key: str) -> str:
        """Looks a key up (read-only). crash: dies on 30 % of calls; slow: answers in 2 s."""
        if mode == "crash" and random.random() < 0.3:
            os._exit(1)
        if mode == "slow":
            await asyncio.sleep(2.0)
        return key.upper()

    @mcp.tool(annotations=RO)
    def block(ms: int = 100) -> int:
        """Blocks this server process for `ms` milliseconds (a synchronous tool)."""
        time.sleep(ms / 1000)
        return os.getpid()

    mcp.run("stdio")
''')


def _pct(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    s = sorted(values)
    return s[min(len(s) - 1, round(q * (len(s) - 1)))]


def _entry(script: Path, mode: str = "healthy", **extra: Any) -> dict[str, Any]:
    return {"command": sys.executable, "args": [str(script)], "env": {"BENCH_MODE": mode}, **extra}


async def p1(script: Path, n: int, adapter_calls: int | None = None) -> dict[str, Any]:
    from langchain_mcp_adapters.client import MultiServerMCPClient
    from mcp import ClientSession, StdioServerParameters
    from mcp.client.stdio import stdio_client

    # Hermes pool
    server = MCPServer("p1", _entry(script, pool={"min": 1, "max": 2}))
    await server.start()
    for _ in range(5):
        await server.call_tool("lookup", {"key": "w"}, timeout_s=10)
    pool_ms = []
    for i in range(n):
        t0 = time.perf_counter()
        await server.call_tool("lookup", {"key": f"k{i}"}, timeout_s=10)
        pool_ms.append((time.perf_counter() - t0) * 1000)
    await server.aclose()
    # raw ClientSession kept open
    params = StdioServerParameters(
        command=sys.executable, args=[str(script)], env={**os.environ, "BENCH_MODE": "healthy"}
    )
    raw_ms = []
    async with stdio_client(params) as (r, w), ClientSession(r, w) as session:
        await session.initialize()
        for _ in range(5):
            await session.call_tool("lookup", {"key": "w"})
        for i in range(n):
            t0 = time.perf_counter()
            await session.call_tool("lookup", {"key": f"k{i}"})
            raw_ms.append((time.perf_counter() - t0) * 1000)
    # langchain-mcp-adapters default: a session (a process) per call
    client = MultiServerMCPClient(
        {
            "p1": {
                "transport": "stdio",
                "command": sys.executable,
                "args": [str(script)],
                "env": {**os.environ, "BENCH_MODE": "healthy"},
            }
        }
    )
    tools = {t.name: t for t in await client.get_tools()}
    adapter_ms = []
    for i in range(adapter_calls or max(5, n // 20)):
        t0 = time.perf_counter()
        await tools["lookup"].ainvoke({"key": f"k{i}"})
        adapter_ms.append((time.perf_counter() - t0) * 1000)
    pool, raw, adapter = (statistics.median(x) for x in (pool_ms, raw_ms, adapter_ms))
    return {
        "calls": n,
        "adapter_calls": len(adapter_ms),
        "pool_ms_median": round(pool, 3),
        "raw_session_ms_median": round(raw, 3),
        "adapter_default_ms_median": round(adapter, 1),
        "adapter_over_pool": round(adapter / pool, 1),
        "pool_over_raw": round(pool / raw, 3),
        "targets": {"adapter_over_pool": ">= 50", "pool_over_raw": "<= 1.3"},
    }


async def _servers(script: Path, pool: dict[str, int]) -> dict[str, MCPServer]:
    servers = {
        m: MCPServer(m, _entry(script, m, pool=pool), startup_timeout_s=20) for m in ("crash", "slow", "healthy")
    }
    await asyncio.gather(*(s.start() for s in servers.values()))
    return servers


async def _drive(n: int, concurrency: int, one_call) -> tuple[list[float], int]:
    latencies: list[float] = []
    ok = 0
    queue = list(range(n))

    async def worker() -> None:
        nonlocal ok
        while queue:
            i = queue.pop()
            t0 = time.perf_counter()
            try:
                await one_call(i)
                ok += 1
            except Exception:  # noqa: BLE001 - counted as a failed call
                pass
            latencies.append(time.perf_counter() - t0)

    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return latencies, ok


P2_MODES = ("single_healthy", "scoring_failover", "round_robin", "single_crashing")


async def p2(script: Path, n: int, concurrency: int, modes: tuple[str, ...] = P2_MODES) -> dict[str, Any]:
    random.seed(9)
    results: dict[str, Any] = {"calls": n, "concurrency": concurrency}
    pool = {"min": 1, "max": 4}

    async def run(mode: str) -> dict[str, Any]:
        servers = await _servers(script, pool)
        reps = [Replica(s, "lookup", 5.0, 30.0) for s in servers.values()]
        try:
            if mode == "scoring_failover":

                async def one(i: int) -> Any:
                    return await call_replicas(reps, {"key": str(i)}, request_id=f"r{i}", retry_safe=True)
            elif mode == "round_robin":

                async def one(i: int) -> Any:
                    rep = reps[i % 3]
                    return await rep.server.call_tool(
                        "lookup", {"key": str(i)}, timeout_s=5.0, retry_safe=True, local_retry=False
                    )
            else:
                target = servers["healthy" if mode == "single_healthy" else "crash"]

                async def one(i: int) -> Any:
                    return await target.call_tool(
                        "lookup", {"key": str(i)}, timeout_s=5.0, retry_safe=True, local_retry=False
                    )

            t0 = time.perf_counter()
            lat, ok = await _drive(n, concurrency, one)
            wall = time.perf_counter() - t0
            out: dict[str, Any] = {
                "success": round(ok / n, 4),
                "p50_ms": round(_pct(lat, 0.5) * 1000, 1),
                "p95_ms": round(_pct(lat, 0.95) * 1000, 1),
                "wall_s": round(wall, 1),
            }
            if mode == "scoring_failover":
                out["servers"] = {
                    s.name: {k: s.status()[k] for k in ("score", "calls", "failures", "reconnects")}
                    | {"breaker_trips": s.breaker.trips}
                    for s in servers.values()
                }
            return out
        finally:
            await asyncio.gather(*(s.aclose() for s in servers.values()))

    for mode in modes:
        results[mode] = await run(mode)
        print(f"P2 {mode}: {results[mode]}", flush=True)
    results["p95_over_healthy"] = round(results["scoring_failover"]["p95_ms"] / results["single_healthy"]["p95_ms"], 2)
    results["targets"] = {"success": ">= 0.995", "p95_over_healthy": "<= 1.5"}
    return results


async def p10(script: Path, calls: int = 50) -> dict[str, Any]:
    out: dict[str, Any] = {"calls": calls, "tool_ms": 100}
    for name, pool in (("one_session", {"min": 1, "max": 1}), ("pool_2_10", {"min": 2, "max": 10})):
        server = MCPServer(name, _entry(script, pool=pool), startup_timeout_s=20)
        await server.start()
        await asyncio.sleep(1.0)  # the pool's second warm session
        try:
            rounds = []
            for _ in range(2):  # cold (the pool grows during the burst), then warm
                t0 = time.perf_counter()
                res = await asyncio.gather(
                    *(server.call_tool("block", {"ms": 100}, timeout_s=30) for _ in range(calls))
                )
                wall = time.perf_counter() - t0
                rounds.append(
                    {"wall_s": round(wall, 3), "calls_per_s": round(calls / wall, 1), "processes": len(set(res))}
                )
            out[name] = {"cold": rounds[0], "warm": rounds[1]}
        finally:
            await server.aclose()
    out["throughput_ratio_cold"] = round(
        out["pool_2_10"]["cold"]["calls_per_s"] / out["one_session"]["cold"]["calls_per_s"], 2
    )
    out["throughput_ratio_warm"] = round(
        out["pool_2_10"]["warm"]["calls_per_s"] / out["one_session"]["warm"]["calls_per_s"], 2
    )
    return out


def _plot(data: dict[str, Any]) -> None:
    try:
        import matplotlib as mpl

        mpl.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return
    fig, axes = plt.subplots(1, 3, figsize=(14, 4))
    draw(data, axes)
    fig.tight_layout()
    PLOT.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(PLOT, dpi=90)


def draw(data: dict[str, Any], axes: Any) -> None:
    """The P1 / P2 / P10 panels on three matplotlib axes (also used by ``evals.suites.mcp``)."""
    if "p1" in data:
        d = data["p1"]
        axes[0].bar(
            ["pool", "raw session", "adapter default"],
            [d["pool_ms_median"], d["raw_session_ms_median"], d["adapter_default_ms_median"]],
            color=["C0", "C2", "C3"],
        )
        axes[0].set_yscale("log")
        axes[0].set_title(
            f"P1 stdio call, median ms\nadapter/pool {d['adapter_over_pool']}×, pool/raw {d['pool_over_raw']}×"
        )
    if "p2" in data:
        d = data["p2"]
        modes = [m for m in P2_MODES if m in d]
        axes[1].bar([m.replace("_", "\n") for m in modes], [d[m]["success"] * 100 for m in modes], color="C1")
        axes[1].set_ylim(0, 105)
        axes[1].set_title("P2 success % (bars) / p95 ms (labels)")
        for i, m in enumerate(modes):
            axes[1].text(i, 2, f"p95\n{d[m]['p95_ms']:.0f} ms", ha="center", color="white", fontsize=8)
    if "p10" in data:
        d = data["p10"]
        x = ["one session\ncold", "pool\ncold", "one session\nwarm", "pool\nwarm"]
        y = [
            d["one_session"]["cold"]["calls_per_s"],
            d["pool_2_10"]["cold"]["calls_per_s"],
            d["one_session"]["warm"]["calls_per_s"],
            d["pool_2_10"]["warm"]["calls_per_s"],
        ]
        axes[2].bar(x, y, color=["C3", "C0", "C3", "C0"])
        axes[2].set_title(f"P10 {d['calls']} concurrent calls, calls/s\nwarm ratio {d['throughput_ratio_warm']}×")


async def main_async(which: str, n: int, concurrency: int) -> dict[str, Any]:
    data: dict[str, Any] = {"load_avg_at_start": os.getloadavg(), "cpus": os.cpu_count()}
    with tempfile.TemporaryDirectory() as tmp:
        script = Path(tmp) / "bench_server.py"
        script.write_text(SERVER)
        if which in ("p1", "all"):
            data["p1"] = await p1(script, n)
            print("P1:", data["p1"], flush=True)
        if which in ("p10", "all"):
            data["p10"] = await p10(script)
            print("P10:", data["p10"], flush=True)
        if which in ("p2", "all"):
            data["p2"] = await p2(script, n if which == "p2" else max(n, 1000), concurrency)
    data["load_avg_at_end"] = os.getloadavg()
    return data


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("which", nargs="?", default="all", choices=["p1", "p2", "p10", "all"])
    ap.add_argument("--n", type=int, default=1000, help="calls (P1 pool/raw, P2)")
    ap.add_argument("--concurrency", type=int, default=10, help="P2 calls in flight")
    args = ap.parse_args()
    data = asyncio.run(main_async(args.which, args.n, args.concurrency))
    OUT.parent.mkdir(parents=True, exist_ok=True)
    old = json.loads(OUT.read_text()) if OUT.exists() else {}
    old.update(data)
    OUT.write_text(json.dumps(old, indent=2))
    _plot(old)
    print(json.dumps(data, indent=2))


if __name__ == "__main__":
    main()
