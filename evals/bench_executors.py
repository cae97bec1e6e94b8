"""Benchmark: per-call overhead of each executor backend and of the idempotency ledger, as
ratios measured in one run (DESIGN §2.2).

Arms, all running the same no-op tool (``bench_tool:noop``, returns None), interleaved in
rounds so machine noise hits them alike; each figure is the median over rounds of the
per-round median per call:

    in_process       ``await`` of an async runner calling the function in this process
    bare_spawn       asyncio spawn of ``python -c "from bench_tool import noop; print(json...)"``
    subprocess       SubprocessExecutor (confined: limits, pids cgroup, Landlock, audit hook)
    container        ContainerExecutor (bubblewrap), when a sandbox works here
    remote           RemoteExecutor → tools.remote_server on 127.0.0.1 (server-side subprocess)
    registry_plain   ToolRegistry.call, tool without side effect (no ledger), subprocess runner
    registry_ledger  the same tool marked side-effecting: every call claims + records a row
                     in the SQLite ledger (fresh request_id per call)
    ledger_inproc_*  the same two registry arms with the in-process runner (the ledger's
                     absolute cost, without a process spawn to hide behind)

Target: subprocess ≤ 1.5 × bare_spawn. The ledger's cost is stated as an absolute time per
side-effect call (ledger_inproc_ledger − ledger_inproc_plain: the same registry call of an
in-process no-op with and without the ledger, so no process spawn hides it) and as a ratio to
that no-op in-process registry call; its share of a subprocess call is given for context only.

    python -m evals.bench_executors [--calls 20] [--rounds 5]

Prints a table and writes ``evals/out/executors.json``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import platform
import select
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "evals" / "out" / "executors.json"
TOOL_SOURCE = "def noop():\n    return None\n"


def _spec(side_effect: bool):
    from tools.spec import ToolSpec

    return ToolSpec(
        name="bench_noop",
        side_effect=side_effect,
        description="Does nothing and returns null; the benchmark's no-op tool.",
        parameters={"type": "object", "properties": {}, "required": []},
    )


def _start_server(data: Path, helpers: Path) -> tuple[subprocess.Popen, str]:
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "tools.remote_server",
            "--data-dir",
            str(data),
            "--port",
            "0",
            "--allow",
            "bench_tool:",
            "--extra-path",
            str(helpers),
        ],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        start_new_session=True,
    )
    deadline = time.monotonic() + 30
    assert proc.stdout is not None
    while time.monotonic() < deadline:
        if select.select([proc.stdout], [], [], 0.2)[0]:
            line = proc.stdout.readline()
            if line.startswith("HERMES_REMOTE_READY"):
                return proc, line.split()[1]
            if not line:
                break
    proc.kill()
    raise RuntimeError("reference server did not start")


def _stop_server(proc: subprocess.Popen) -> None:
    from tools.procs import kill_process_tree

    proc.terminate()
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(5)
    kill_process_tree(proc.pid, 1.0, pgid=proc.pid)
    proc.wait(5)
    if proc.stdout:
        proc.stdout.close()


async def bench(calls: int, rounds: int) -> dict[str, Any]:
    from tools.executors import make_executor
    from tools.executors.cgroups import pids_cgroup_parent
    from tools.executors.container import SandboxUnavailable
    from tools.executors.subprocess import scrubbed_env
    from tools.executors.worker import landlock_abi
    from tools.idempotency import IdempotencyLedger
    from tools.registry import ToolRegistry

    tmp = Path(tempfile.mkdtemp(prefix="hermes-bench-"))
    helpers = tmp / "helpers"
    helpers.mkdir()
    (helpers / "bench_tool.py").write_text(TOOL_SOURCE)
    data = tmp / "data"
    data.mkdir()
    sys.path.insert(0, str(helpers))
    import bench_tool  # type: ignore[import-not-found]  # the same function, in process

    sub = make_executor("subprocess", data, extra_paths=(str(helpers),))
    container = None
    container_note = ""
    try:
        container = await asyncio.to_thread(make_executor, "container", data, extra_paths=(str(helpers),))
        container_note = str(getattr(container, "engine", "container"))
    except SandboxUnavailable as exc:
        container_note = f"unavailable: {exc}"
    server, url = await asyncio.to_thread(_start_server, tmp / "server", helpers)
    remote = make_executor("remote", data, remote_url=url)
    bare_env = scrubbed_env((str(helpers),))
    bare_code = "import json\nfrom bench_tool import noop\nprint(json.dumps(noop()))"

    async def in_process_runner(args: dict, request_id: str) -> Any:
        return bench_tool.noop(**args)

    async def sub_runner(args: dict, request_id: str) -> Any:
        return await sub.run("bench_tool:noop", args, timeout_s=10, request_id=request_id)

    ledger = IdempotencyLedger(data / "bench_ledger.db")
    regs = {}
    for name, runner in (("sub", sub_runner), ("inproc", in_process_runner)):
        plain, led = ToolRegistry(), ToolRegistry(ledger=ledger)
        plain.register(_spec(False), runner)
        led.register(_spec(True), runner)
        regs[name] = (plain, led)

    async def bare_spawn() -> None:
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-c", bare_code, stdout=asyncio.subprocess.PIPE, env=bare_env, cwd=str(data)
        )
        out, _ = await proc.communicate()
        assert json.loads(out) is None

    def registry_arm(reg) -> Callable[[], Awaitable[None]]:
        async def arm() -> None:
            out = await reg.call("bench_noop", {}, uuid.uuid4().hex)
            assert out.status == "ok", out.error

        return arm

    def executor_arm(ex) -> Callable[[], Awaitable[None]]:
        async def arm() -> None:
            assert await ex.run("bench_tool:noop", {}, timeout_s=10, request_id=uuid.uuid4().hex) is None

        return arm

    async def in_process() -> None:
        await in_process_runner({}, "r")

    arms: dict[str, Callable[[], Awaitable[None]]] = {
        "in_process": in_process,
        "bare_spawn": bare_spawn,
        "subprocess": executor_arm(sub),
        "remote": executor_arm(remote),
        "registry_plain": registry_arm(regs["sub"][0]),
        "registry_ledger": registry_arm(regs["sub"][1]),
        "ledger_inproc_plain": registry_arm(regs["inproc"][0]),
        "ledger_inproc_ledger": registry_arm(regs["inproc"][1]),
    }
    if container is not None:
        arms["container"] = executor_arm(container)
    fast = {"in_process", "ledger_inproc_plain", "ledger_inproc_ledger"}
    per_round: dict[str, list[float]] = {k: [] for k in arms}
    try:
        for arm in arms.values():  # warm-up (imports, pyc, first connections)
            await arm()
        for r in range(rounds):
            order = list(arms.items())
            if r % 2:
                order.reverse()
            for name, arm in order:
                n = calls * 50 if name in fast else calls
                samples = []
                for _ in range(n):
                    t = time.perf_counter()
                    await arm()
                    samples.append(time.perf_counter() - t)
                per_round[name].append(statistics.median(samples))
    finally:
        await remote.aclose()
        await ledger.aclose()
        await asyncio.to_thread(_stop_server, server)
    med = {k: statistics.median(v) for k, v in per_round.items()}
    ms = {k: round(v * 1000, 4) for k, v in med.items()}

    def ratio(a: str, b: str) -> float | None:
        return round(med[a] / med[b], 3) if a in med and b in med else None

    ledger_us = (med["ledger_inproc_ledger"] - med["ledger_inproc_plain"]) * 1e6
    ledger_pct = (med["registry_ledger"] / med["registry_plain"] - 1) * 100
    report = {
        "calls_per_round": calls,
        "rounds": rounds,
        "machine": {
            "python": platform.python_version(),
            "cpus": os.cpu_count(),
            "kernel": platform.release(),
            "landlock_abi": landlock_abi(),
            "pids_cgroup": str(pids_cgroup_parent() or "none"),
            "container": container_note,
        },
        "median_ms_per_call": ms,
        "ratios": {
            "subprocess_vs_bare_spawn": ratio("subprocess", "bare_spawn"),
            "container_vs_bare_spawn": ratio("container", "bare_spawn"),
            "remote_vs_bare_spawn": ratio("remote", "bare_spawn"),
            "remote_vs_subprocess": ratio("remote", "subprocess"),
            "subprocess_vs_in_process": ratio("subprocess", "in_process"),
            "container_vs_in_process": ratio("container", "in_process"),
            "remote_vs_in_process": ratio("remote", "in_process"),
            "ledger_on_subprocess_call": ratio("registry_ledger", "registry_plain"),
            "ledger_on_in_process_call": ratio("ledger_inproc_ledger", "ledger_inproc_plain"),
        },
        "ledger_cost_us_per_call": round(ledger_us, 1),
        "noop_inproc_registry_call_us": round(med["ledger_inproc_plain"] * 1e6, 1),
        "noop_inproc_await_us": round(med["in_process"] * 1e6, 2),
        "ledger_vs_noop_inproc_registry_call": ratio("ledger_inproc_ledger", "ledger_inproc_plain"),
        "ledger_overhead_pct_on_subprocess_call": round(ledger_pct, 2),
        "targets": {
            "subprocess_vs_bare_spawn<=1.5": (ratio("subprocess", "bare_spawn") or 99) <= 1.5,
        },
    }
    import shutil

    shutil.rmtree(tmp, ignore_errors=True)
    return report


def print_table(rep: dict[str, Any]) -> None:
    print(f"\nexecutor overhead, no-op tool (median of {rep['rounds']} rounds; machine: {rep['machine']})")
    print(f"{'arm':<24}{'ms / call':>12}")
    for name, value in rep["median_ms_per_call"].items():
        print(f"{name:<24}{value:>12.3f}")
    print(f"\n{'ratio':<34}{'value':>10}")
    for name, value in rep["ratios"].items():
        print(f"{name:<34}{'-' if value is None else value:>10}")
    print(
        f"\nledger: +{rep['ledger_cost_us_per_call']} µs per side-effect call = "
        f"{rep['ledger_vs_noop_inproc_registry_call']}× a no-op in-process registry call "
        f"({rep['noop_inproc_registry_call_us']} µs; a bare await {rep['noop_inproc_await_us']} µs); "
        f"for context {rep['ledger_overhead_pct_on_subprocess_call']:+.2f}% of a subprocess call"
    )
    for name, ok in rep["targets"].items():
        print(f"target {name}: {'met' if ok else 'MISSED'}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--calls", type=int, default=20, help="calls per arm per round (x50 for in-process arms)")
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args(argv)
    rep = asyncio.run(bench(args.calls, args.rounds))
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(rep, indent=2) + "\n")
    print_table(rep)
    print(f"\nwritten to {OUT.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
