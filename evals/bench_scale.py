"""Benchmark and fault eval: Hermes workers scaled out on one PostgreSQL (issue 22).

Starts its own PostgreSQL (PyPI ``pgserver``, a temp directory, stopped at the end) and runs
worker *processes* against it, each with its own data directory (as on separate machines):

* **throughput** — W worker processes (default 1, 2, 4, 8) × T concurrent threads each (default
  16), every thread K turns (default 2) of the real agent graph: a scripted model (``evals
  .fakes``: one tool call, then the answer), the tool through the real **subprocess executor**
  (a confined worker process per call), the **PostgreSQL idempotency ledger** on every call
  (the tool is a side effect), checkpoints in PostgreSQL, memory writes with the lexical
  ``hash`` embedder, background writes drained inside the timed window. Turns per second over
  the window from the first worker's start signal to the last worker's end; ratio to 1 worker.
* **overhead** — one worker, one thread, sequential turns: ms per turn with everything on
  PostgreSQL vs everything in the data directory (SQLite), alternating, same run.
* **replays** — R requests (default 250), each sent by all of 4 worker processes at once
  through the tool registry and the PostgreSQL ledger, then once more by each (a retry): 2 × 4
  × R calls; the effect (a row inserted into a table of the same database) must exist once per
  request. This is the ledger path every replay, fork and retry of a turn reaches (the request
  id is derived from the request's meaning, DESIGN §2.4); graph-level forks are tested in
  ``tests/unit/test_fork_replays.py``.
* **kill** (``--kill N``) — N rounds; in each a worker process A sends three requests; it is
  killed with SIGKILL while the third is in flight, a second worker B (another process) then
  sends all three again. Even rounds: a non-idempotent ``post_note``, killed *after* its effect
  (B must state the outcome unknown, never post again). Odd rounds: an idempotent
  ``set_flag``, killed *before* its effect (B takes the orphaned claim over once A's session,
  its lease, has ended, and runs it). Counts: duplicate effects (a request with more than one
  effect), lost acknowledged writes (a result A printed as done that B does not get back as a
  replay, or whose effect is missing).

    python -m evals.bench_scale [--workers 1,2,4,8] [--threads 16] [--turns 2] [--replays 250]
    python -m evals.bench_scale --kill 20 --only kill

Prints a table and writes ``evals/out/bench_scale.json`` (and ``bench_scale.png`` when
matplotlib is installed). Modules: ``bench_scale_procs`` (the PostgreSQL, worker processes),
``bench_scale_turns`` (throughput, overhead), ``bench_scale_ledger`` (replays, kill); this one
runs them and writes the report.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from evals.bench_scale_ledger import kill_rounds, replay_worker, replays, survivor, victim
from evals.bench_scale_procs import Postgres
from evals.bench_scale_turns import overhead, throughput, turn_worker

OUT = Path(__file__).parent / "out"


# -- report --------------------------------------------------------------------------------------


def plot(result: dict[str, Any], path: Path) -> bool:
    try:
        import matplotlib as mpl

        mpl.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    rows = result["throughput"]["rows"]
    fig, ax = plt.subplots(figsize=(5, 3.2))
    ax.plot([r["workers"] for r in rows], [r["turns_per_s"] for r in rows], marker="o")
    ax.set_xlabel("worker processes (16 threads each)")
    ax.set_ylabel("turns / s")
    ax.set_title("Hermes on one PostgreSQL (2 shared cores)")
    ax.set_xticks([r["workers"] for r in rows])
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return True


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m evals.bench_scale", description=__doc__.split("\n")[0])
    parser.add_argument("--workers", default="1,2,4,8", help="worker counts for throughput (comma-separated)")
    parser.add_argument("--threads", type=int, default=16)
    parser.add_argument("--turns", type=int, default=2, help="turns per thread")
    parser.add_argument("--overhead-turns", type=int, default=10)
    parser.add_argument("--overhead-rounds", type=int, default=2)
    parser.add_argument("--replays", type=int, default=250, help="requests, each sent by 4 workers, twice")
    parser.add_argument("--kill", type=int, default=0, help="kill -9 rounds (0: none)")
    parser.add_argument("--only", default="", help="comma-separated parts: throughput,overhead,replays,kill")
    parser.add_argument("--turn-worker", nargs=6, help=argparse.SUPPRESS)
    parser.add_argument("--replay-worker", nargs=5, help=argparse.SUPPRESS)
    parser.add_argument("--victim", nargs=4, help=argparse.SUPPRESS)
    parser.add_argument("--survivor", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)

    if args.turn_worker:
        data, url, threads, turns, ready, go = args.turn_worker
        out = asyncio.run(turn_worker(Path(data), url, int(threads), int(turns), Path(ready), Path(go)))
        print(json.dumps(out))
        return 0
    if args.replay_worker:
        data, url, n, ready, go = args.replay_worker
        print(json.dumps(asyncio.run(replay_worker(Path(data), url, int(n), Path(ready), Path(go)))))
        return 0
    if args.victim:
        data, url, r, marker = args.victim
        asyncio.run(victim(Path(data), url, int(r), Path(marker)))
        return 0
    if args.survivor:
        data, url = args.survivor
        asyncio.run(survivor(Path(data), url))
        return 0

    parts = set(filter(None, args.only.split(","))) or {"throughput", "overhead", "replays"} | (
        {"kill"} if args.kill else set()
    )
    OUT.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix="hermes-bench-scale-"))
    pg = Postgres()
    result: dict[str, Any] = {"load_start": os.getloadavg(), "cpus": os.cpu_count()}
    began = time.perf_counter()
    try:
        if "throughput" in parts:
            print("throughput:", flush=True)
            counts = [int(x) for x in args.workers.split(",")]
            result["throughput"] = throughput(pg, tmp, counts, args.threads, args.turns)
        if "overhead" in parts:
            print("overhead (one worker, one thread, sequential turns):", flush=True)
            result["overhead"] = overhead(pg, tmp, args.overhead_turns, args.overhead_rounds)
        if "replays" in parts:
            print("replays/retries across 4 workers:", flush=True)
            result["replays"] = replays(pg, tmp, args.replays)
        if "kill" in parts:
            print(f"kill -9 mid side effect, {args.kill or 20} rounds:", flush=True)
            result["kill"] = kill_rounds(pg, tmp, args.kill or 20)
    finally:
        pg.close()
        shutil.rmtree(tmp, ignore_errors=True)
    result["load_end"] = os.getloadavg()
    result["seconds"] = time.perf_counter() - began
    name = "bench_scale" + ("_kill" if parts == {"kill"} else "")
    (OUT / f"{name}.json").write_text(json.dumps(result, indent=2))
    if "throughput" in result and plot(result, OUT / f"{name}.png"):
        print(f"plot: {OUT / f'{name}.png'}")
    print(
        f"wrote {OUT / f'{name}.json'} ({result['seconds']:.0f} s, load {result['load_start'][0]:.1f} → "
        f"{result['load_end'][0]:.1f})"
    )
    if "kill" in result:
        k = result["kill"]
        print(
            f"kill -9: {k['rounds']} rounds, {k['duplicate_effects']} duplicate effects, "
            f"{k['lost_acknowledged_writes']} lost acknowledged writes, third call as expected in "
            f"{k['third_as_expected']}/{k['rounds']}"
        )
        if k["duplicate_effects"] or k["lost_acknowledged_writes"] or k["third_as_expected"] != k["rounds"]:
            return 1
    if "replays" in result and result["replays"]["duplicates"]:
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
