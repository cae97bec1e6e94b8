"""Replays and kill -9 rounds of ``evals.bench_scale``: requests sent by several worker processes
through the tool registry and the PostgreSQL idempotency ledger, each effect a row in the same
database, counted per request (exactly once; nothing acknowledged lost)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from evals.bench_scale_procs import Postgres, ready_then_go, spawn, stop, wait_files

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
        with contextlib.suppress(subprocess.TimeoutExpired):
            b.wait(timeout=30)
        stop(b)
    return {
        "rounds": rounds,
        "duplicate_effects": duplicates,
        "lost_acknowledged_writes": lost,
        "third_as_expected": sum(1 for d in details if d["third_as_expected"]),
        "details": details,
    }
