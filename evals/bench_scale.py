"""Benchmark and fault eval: Hermes workers scaled out on one PostgreSQL (issue 22).

Starts its own PostgreSQL (PyPI ``pgserver``, a temp directory, stopped at the end) and runs
worker *processes* against it, each with its own data directory (as on separate machines):

* **throughput** — W worker processes (default 1, 2, 4) × T concurrent threads each (default
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

    python -m evals.bench_scale [--workers 1,2,4] [--threads 16] [--turns 2] [--replays 250]
    python -m evals.bench_scale --kill 20 --only kill

Prints a table and writes ``evals/out/bench_scale.json`` (and ``bench_scale.png`` when
matplotlib is installed).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any, cast

OUT = Path(__file__).parent / "out"
ROOT = Path(__file__).resolve().parents[1]
TOOL_SOURCE = "def record_value(key):\n    return {'key': key, 'value': len(key) * 7}\n"


# -- PostgreSQL ----------------------------------------------------------------------------------


class Postgres:
    """A pgserver PostgreSQL in a temp directory; :meth:`database` makes a new empty database."""

    def __init__(self) -> None:
        import pgserver

        self.dir = Path(tempfile.mkdtemp(prefix="hermes-bench-pg-"))
        self.server = pgserver.get_server(self.dir, cleanup_mode="stop")
        self.url = self.server.get_uri()

    def database(self) -> str:
        import psycopg

        name = f"b_{uuid.uuid4().hex[:10]}"
        with psycopg.connect(self.url, autocommit=True) as con:
            con.execute(f"CREATE DATABASE {name}")
        return self.url.replace("/postgres?", f"/{name}?", 1)

    def close(self) -> None:
        self.server.cleanup()
        shutil.rmtree(self.dir, ignore_errors=True)


def load() -> float:
    return os.getloadavg()[0]


def spawn(*args: str, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "evals.bench_scale", *args],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT), **(env or {})},
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )


def stop(proc: subprocess.Popen[str]) -> None:
    if proc.poll() is None:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.wait()


def wait_files(paths: list[Path], procs: list[subprocess.Popen[str]], limit_s: float = 600) -> None:
    deadline = time.monotonic() + limit_s
    while not all(p.exists() for p in paths):
        for proc in procs:
            if proc.poll() is not None:
                raise RuntimeError(f"a worker exited early: {proc.communicate()[1][-3000:]}")
        if time.monotonic() > deadline:
            raise RuntimeError("workers did not get ready")
        time.sleep(0.05)


# -- the turn worker (throughput, overhead) ------------------------------------------------------


def _helpers(data: Path) -> Path:
    """The data directory and the folder of the benchmark tool's module the executor imports."""
    data.mkdir(parents=True, exist_ok=True)
    helpers = data.parent / f"{data.name}-helpers"
    helpers.mkdir(exist_ok=True)
    (helpers / "bench_tool.py").write_text(TOOL_SOURCE)
    return helpers


def ready_then_go(ready: Path, go: Path) -> None:
    """Say this worker is ready, then wait for the start signal (all workers start together)."""
    ready.write_text("ready")
    while not go.exists():
        time.sleep(0.005)


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


# -- the registry worker (replays, kill) ---------------------------------------------------------

EFFECTS = "bench_effects"


def _effects_table(url: str) -> None:
    import psycopg

    with psycopg.connect(url, autocommit=True) as con:
        con.execute(
            f"CREATE TABLE IF NOT EXISTS {EFFECTS} (request_id TEXT NOT NULL, tool TEXT NOT NULL, "
            "worker TEXT NOT NULL, at TIMESTAMPTZ NOT NULL DEFAULT clock_timestamp())"
        )


def effect_counts(url: str) -> dict[str, int]:
    import psycopg

    with psycopg.connect(url, autocommit=True) as con:
        rows = con.execute(f"SELECT request_id, COUNT(*) FROM {EFFECTS} GROUP BY request_id").fetchall()
    return {str(r): int(n) for r, n in rows}


def registry(data: Path, url: str, who: str, hang: tuple[str, str, Path] | None = None) -> Any:
    """A tool registry on the PostgreSQL ledger with two side-effect tools whose effect is a row
    in :data:`EFFECTS`: ``post_note`` (not idempotent) and ``set_flag`` (idempotent). ``hang``:
    ``(request id, "before"|"after", marker)``: that call writes ``marker`` and hangs, before
    or after its effect."""
    import psycopg

    from tools.ledgers import open_ledger
    from tools.registry import ToolRegistry
    from tools.spec import ToolSpec

    con = psycopg.connect(url, autocommit=True)
    reg = ToolRegistry(ledger=open_ledger(data, url))
    params = {
        "type": "object",
        "properties": {"channel": {"type": "string"}, "text": {"type": "string"}},
        "required": ["channel", "text"],
    }

    def make(tool: str):
        async def run(args: dict, request_id: str) -> dict:
            if hang and hang[0] == request_id and hang[1] == "before":
                hang[2].write_text("in flight")
                await asyncio.sleep(600)
            row = await asyncio.to_thread(
                lambda: con.execute(
                    f"INSERT INTO {EFFECTS} (request_id, tool, worker) VALUES (%s, %s, %s) RETURNING at::text",
                    (request_id, tool, who),
                ).fetchone()
            )
            if hang and hang[0] == request_id and hang[1] == "after":
                hang[2].write_text("effect done")
                await asyncio.sleep(600)
            return {"posted": args["text"], "at": row[0] if row else None, "by": who}

        return run

    reg.register(
        ToolSpec(name="post_note", side_effect=True, parameters=params, description="Post a note to a channel."),
        make("post_note"),
    )
    reg.register(
        ToolSpec(
            name="set_flag", side_effect=True, idempotent=True, parameters=params, description="Set a channel's flag."
        ),
        make("set_flag"),
    )
    return reg


def outcome_json(out: Any) -> dict[str, Any]:
    return {
        "status": out.status,
        "replayed": out.replayed,
        "content": out.content,
        "error_kind": out.error_kind,
        "error": (out.error or "")[:300],
    }


async def replay_worker(data: Path, url: str, requests: int, ready: Path, go: Path) -> list[dict[str, Any]]:
    reg = registry(data, url, data.name)
    try:
        await asyncio.to_thread(ready_then_go, ready, go)
        sem = asyncio.Semaphore(16)  # 16 concurrent calls per worker

        async def call(i: int) -> dict[str, Any]:
            async with sem:
                out = await reg.call("post_note", {"channel": "ops", "text": f"note {i}"}, f"replay-{i}")
                return outcome_json(out)

        first = await asyncio.gather(*(call(i) for i in range(requests)))
        retry = await asyncio.gather(*(call(i) for i in range(requests)))  # the same requests again
        return list(first) + list(retry)
    finally:
        await reg.ledger.aclose()


def replays(pg: Postgres, tmp: Path, requests: int, workers: int = 4) -> dict[str, Any]:
    url = pg.database()
    _effects_table(url)
    go = tmp / "go-replays"
    readies = [tmp / f"ready-replays-{i}" for i in range(workers)]
    procs = [
        spawn("--replay-worker", str(tmp / f"replay-{i}"), url, str(requests), str(readies[i]), str(go))
        for i in range(workers)
    ]
    start = time.perf_counter()
    try:
        wait_files(readies, procs)
        go.write_text("go")
        start = time.perf_counter()
        outs = []
        for proc in procs:
            out, err = proc.communicate(timeout=1800)
            if proc.returncode != 0:
                raise RuntimeError(f"replay worker failed: {err[-3000:]}")
            outs.extend(json.loads(out.strip().splitlines()[-1]))
    finally:
        for proc in procs:
            stop(proc)
    wall = time.perf_counter() - start
    counts = effect_counts(url)
    ok = sum(1 for o in outs if o["status"] == "ok")
    result = {
        "requests": requests,
        "workers": workers,
        "calls": len(outs),
        "ok": ok,
        "replayed": sum(1 for o in outs if o["replayed"]),
        "effects": sum(counts.values()),
        "requests_with_one_effect": sum(1 for i in range(requests) if counts.get(f"replay-{i}") == 1),
        "duplicates": sum(1 for n in counts.values() if n > 1),
        "wall_s": wall,
    }
    print(
        f"  replays: {result['calls']} calls of {requests} requests by {workers} workers → "
        f"{result['effects']} effects, {result['requests_with_one_effect']} requests with exactly one, "
        f"{result['duplicates']} duplicated ({wall:.1f} s)",
        flush=True,
    )
    return result


def kill_args(round_no: int) -> tuple[str, str]:
    """(tool, phase) of a round: even → post_note killed after its effect; odd → set_flag before."""
    return ("post_note", "after") if round_no % 2 == 0 else ("set_flag", "before")


async def victim(data: Path, url: str, round_no: int, marker: Path) -> None:
    """Worker A: three requests, prints each acknowledged result, hangs in the third."""
    tool, phase = kill_args(round_no)
    reg = registry(data, url, f"A{round_no}", hang=(f"kill-{round_no}-2", phase, marker))
    for j in range(3):
        out = await reg.call(tool, {"channel": "ops", "text": f"round {round_no} note {j}"}, f"kill-{round_no}-{j}")
        print(json.dumps({"request_id": f"kill-{round_no}-{j}", **outcome_json(out)}), flush=True)


async def survivor(data: Path, url: str) -> None:
    """Worker B: for each round number on stdin, sends that round's three requests again."""
    reg = registry(data, url, "B")
    try:
        for line in sys.stdin:
            round_no = int(line)
            tool, _ = kill_args(round_no)
            outs = []
            for j in range(3):
                out = await reg.call(
                    tool, {"channel": "ops", "text": f"round {round_no} note {j}"}, f"kill-{round_no}-{j}"
                )
                outs.append({"request_id": f"kill-{round_no}-{j}", **outcome_json(out)})
            print(json.dumps(outs), flush=True)
    finally:
        await reg.ledger.aclose()


def kill_rounds(pg: Postgres, tmp: Path, rounds: int) -> dict[str, Any]:
    url = pg.database()
    _effects_table(url)
    b = spawn("--survivor", str(tmp / "survivor"), url)
    assert b.stdin is not None and b.stdout is not None
    duplicates = lost = 0
    details = []
    try:
        for r in range(rounds):
            tool, phase = kill_args(r)
            marker = tmp / f"in-flight-{r}"
            a = spawn("--victim", str(tmp / "victim"), url, str(r), str(marker))
            try:
                wait_files([marker], [a], limit_s=300)
            finally:
                stop(a)  # SIGKILL of its process group, mid-call
            acked = [json.loads(line) for line in (a.stdout.read() if a.stdout else "").splitlines() if line.strip()]
            b.stdin.write(f"{r}\n")
            b.stdin.flush()
            again = json.loads(b.stdout.readline())
            counts = effect_counts(url)
            mine = {f"kill-{r}-{j}": counts.get(f"kill-{r}-{j}", 0) for j in range(3)}
            dup = sum(1 for n in mine.values() if n > 1)
            lost_here = 0
            for ack in acked:
                if ack["status"] != "ok":
                    continue
                back = next(o for o in again if o["request_id"] == ack["request_id"])
                if not (back["replayed"] and back["content"] == ack["content"] and mine[ack["request_id"]] == 1):
                    lost_here += 1
            third = again[2]
            expected_third = (
                third["error_kind"] == "outcome_unknown" and mine[f"kill-{r}-2"] == 1
                if phase == "after"
                else third["status"] == "ok" and not third["replayed"] and mine[f"kill-{r}-2"] == 1
            )
            duplicates += dup
            lost += lost_here
            details.append(
                {
                    "round": r,
                    "tool": tool,
                    "killed": phase + " the effect",
                    "acknowledged": sum(1 for a_ in acked if a_["status"] == "ok"),
                    "effects": mine,
                    "third_after_kill": {k: third[k] for k in ("status", "replayed", "error_kind")},
                    "third_as_expected": expected_third,
                    "duplicates": dup,
                    "lost_acknowledged": lost_here,
                }
            )
            print(
                f"  kill {r + 1}/{rounds} ({tool}, killed {phase} its effect): acknowledged "
                f"{details[-1]['acknowledged']}, effects {list(mine.values())}, third → "
                f"{third['status']}/{third['error_kind'] or ('replayed' if third['replayed'] else 'ran')}",
                flush=True,
            )
    finally:
        if b.stdin:
            b.stdin.close()
        try:
            b.wait(timeout=30)
        except subprocess.TimeoutExpired:
            pass
        stop(b)
    return {
        "rounds": rounds,
        "duplicate_effects": duplicates,
        "lost_acknowledged_writes": lost,
        "third_as_expected": sum(1 for d in details if d["third_as_expected"]),
        "details": details,
    }


# -- report --------------------------------------------------------------------------------------


def plot(result: dict[str, Any], path: Path) -> bool:
    try:
        import matplotlib

        matplotlib.use("Agg")
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
    parser.add_argument("--workers", default="1,2,4", help="worker counts for throughput (comma-separated)")
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
