"""Semantic memory on SQLite: multi-hop queries over a knowledge graph of 10,000 entities and
50,000 relations, through the real code path (``memory.semantic.SemanticMemory``).

    .venv/bin/python -m evals.bench_memory_semantic [--entities 10000] [--relations 50000] [--queries 200]

Graph: people report to people, belong to groups, groups belong to departments (random, fixed
seed), confidences 0.5–1.0, 5% of facts superseded (not valid any more). Measured: p50/p95 of
``traverse`` for 1, 2 and 3 hops with the confidence and validity filters ("who is in the
group the user reports to" is the 3-hop one), ``reachable`` within 2 hops (recursive CTE), and
``upsert`` of a new fact with its duplicate / conflict check. Load average recorded.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import sqlite3
import statistics
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Literal

from memory.semantic import SemanticMemory, entity_key

NOW = datetime(2026, 11, 29, tzinfo=UTC)


def pct(values, q):
    values = sorted(values)
    return values[min(len(values) - 1, round(q * (len(values) - 1)))]


def build(path: Path, entities: int, relations: int, seed: int = 5) -> None:
    rng = random.Random(seed)
    people = [f"person {i}" for i in range(int(entities * 0.9))]
    groups = [f"group {i}" for i in range(entities - len(people) - 20)]
    depts = [f"dept {i}" for i in range(20)]
    con = sqlite3.connect(path)
    con.executescript(__import__("memory.semantic", fromlist=["SCHEMA"]).SCHEMA)
    stamp = (NOW - timedelta(days=10)).isoformat(timespec="microseconds")
    con.executemany(
        "INSERT INTO semantic_entities VALUES (?, ?, ?, ?, ?)",
        [("u", entity_key(n), n, "thing", stamp) for n in ["user", *people, *groups, *depts]],
    )
    rows = []
    for i in range(relations):
        kind = rng.random()
        if kind < 0.4:
            s, p, o = rng.choice(people), "reports_to", rng.choice(people)
        elif kind < 0.9:
            s, p, o = rng.choice(people), "member_of", rng.choice(groups)
        else:
            s, p, o = rng.choice(groups), "part_of", rng.choice(depts)
        status = "superseded" if rng.random() < 0.05 else "confirmed"
        rows.append(
            (
                f"f{i}",
                "u",
                entity_key(s),
                p,
                entity_key(o),
                o,
                1,
                round(rng.uniform(0.5, 1.0), 3),
                "direct",
                "[]",
                status,
                stamp,
                stamp if status == "superseded" else None,
                stamp,
                stamp,
                None,
                0,
                None,
                None,
                None,
            )
        )
    rows.append(
        (
            "fu",
            "u",
            "user",
            "reports_to",
            entity_key(people[0]),
            people[0],
            1,
            0.9,
            "direct",
            "[]",
            "confirmed",
            stamp,
            None,
            stamp,
            stamp,
            None,
            0,
            None,
            None,
            None,
        )
    )
    con.executemany(
        "INSERT INTO semantic_facts VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", rows
    )
    con.commit()
    con.close()


async def measure(path: Path, queries: int, entities: int) -> dict:
    kg = SemanticMemory(path)
    rng = random.Random(9)
    starts = [f"person {rng.randrange(int(entities * 0.9))}" for _ in range(queries)]
    shapes: dict[str, list[tuple[str, Literal["out", "in"]]]] = {
        "1_hop (reports_to)": [("reports_to", "out")],
        "2_hop (manager's groups)": [("reports_to", "out"), ("member_of", "out")],
        "3_hop (members of the manager's groups)": [("reports_to", "out"), ("member_of", "out"), ("member_of", "in")],
    }
    out: dict = {}
    for name, steps in shapes.items():
        ms, sizes = [], []
        for s in starts:
            t0 = time.perf_counter()
            got = await kg.traverse("u", s, steps, min_confidence=0.6, now=NOW)
            ms.append((time.perf_counter() - t0) * 1000)
            sizes.append(len(got))
        out[name] = {
            "p50_ms": round(statistics.median(ms), 2),
            "p95_ms": round(pct(ms, 0.95), 2),
            "results_mean": round(statistics.mean(sizes), 1),
        }
    ms = []
    for s in starts[:50]:
        t0 = time.perf_counter()
        await kg.reachable("u", s, max_hops=2, now=NOW)
        ms.append((time.perf_counter() - t0) * 1000)
    out["reachable_2_hops (recursive CTE)"] = {
        "p50_ms": round(statistics.median(ms), 2),
        "p95_ms": round(pct(ms, 0.95), 2),
    }
    ms = []
    for i in range(100):
        t0 = time.perf_counter()
        await kg.upsert(
            "u", f"person {i}", "works_at", f"company {i % 7}", object_is_entity=True, confidence=0.8, now=NOW
        )
        ms.append((time.perf_counter() - t0) * 1000)
    out["upsert (duplicate/conflict check + write)"] = {
        "p50_ms": round(statistics.median(ms), 2),
        "p95_ms": round(pct(ms, 0.95), 2),
    }
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--entities", type=int, default=10_000)
    ap.add_argument("--relations", type=int, default=50_000)
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--out", type=Path, default=Path("evals/out/bench_memory_semantic.json"))
    args = ap.parse_args()
    path = Path(tempfile.mkdtemp(prefix="hermes-kg-")) / "memory.db"
    build(path, args.entities, args.relations)
    report = {
        "entities": args.entities,
        "relations": args.relations,
        "store": "SQLite (memory.semantic)",
        **asyncio.run(measure(path, args.queries, args.entities)),
        "load_avg": [round(x, 2) for x in os.getloadavg()],
        "cores": os.cpu_count(),
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
