"""One LoCoMo run (see :mod:`evals.locomo`): each conversation ingested through Hermes's write
path, every question retrieved and scored against its evidence and the BM25 baseline, the
answer sample answered by both arms, and the per-category table."""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path

from evals.locomo.answers import Answerer, answer, score_answer
from evals.locomo.baselines import RawTurnBM25, last_turns_window
from evals.locomo.data import CATEGORIES, evidence_ids, load, turn_text, turns_of, window_line
from evals.locomo.embed_cache import CachedEmbedder
from memory.embeddings import make_embedder
from memory.episodic.base import EpisodicEvent
from memory.episodic.lance import LanceEpisodicStore
from memory.retrieval import approx_tokens, format_episode
from memory.service import MemoryService


async def run(
    data_path: Path,
    embeddings: str,
    ks: list[int],
    half_life_days: float,
    do_answer: bool,
    limit: int | None,
    *,
    max_sessions: int | None = None,
    max_questions: int | None = None,
    answerer: Answerer | None = None,
    on_question: Callable[[dict], None] | None = None,
    answer_ids: list[tuple[str, int]] | None = None,
    full_context: bool = False,
    on_answer: Callable[[dict], None] | None = None,
    answer_budget_s: float = 0.0,
) -> dict:
    """Ingest and query (see :mod:`evals.locomo`). ``max_sessions``: only each conversation's
    first N sessions, and only the questions whose evidence lies in them; ``max_questions``: the
    first N questions per conversation; ``on_question``: called with each question's retrieval
    row.

    Answer F1, with ``answerer`` (``do_answer``: the environment's endpoint): once every
    question is retrieved, each question of ``answer_ids`` (``(sample_id, qa index)``, in that
    order; None: every question run) is answered twice — from Hermes's memory block (the
    ``max(ks)`` retrieved lines) and from the last-turns window of equal tokens
    (:func:`last_turns_window`: the conversation's last turns, as LoCoMo asks its questions
    after the whole conversation) — and, with ``full_context``, a third time from the whole
    conversation (only for an endpoint with a large context). ``on_answer``: called with each
    answered question's row. ``answer_budget_s`` (> 0): no model call starts after that many
    seconds of answering; the questions answered by every arm by then are reported (``answered``
    of ``to_answer``)."""
    samples = load(data_path)[: limit or None]
    if do_answer and answerer is None:
        answerer = answer
    work = Path(tempfile.mkdtemp(prefix="hermes-locomo-"))
    embedder = make_embedder(embeddings)
    if os.environ.get("HERMES_EMBED_CACHE"):
        embedder = CachedEmbedder(embedder, Path(os.environ["HERMES_EMBED_CACHE"]))
    store = LanceEpisodicStore(
        work / "episodic.lance", embedder, half_life_days=half_life_days, ttl_days=100_000, optimize_every=10
    )
    memory = MemoryService(work, episodic=store)
    kmax = max(ks)
    per_cat: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    wanted = None if answer_ids is None else set(answer_ids)
    pending: dict[tuple[str, int], dict] = {}  # the questions to answer, retrieved
    answered = 0
    t_ingest = t_query = 0.0
    turns_total = 0
    for sample in samples:
        user = sample["sample_id"]
        turns = [t for t in turns_of(sample) if max_sessions is None or t[0] <= max_sessions]
        known = {t["dia_id"] for _, _, t in turns}
        qas = [
            (i, qa)
            for i, qa in enumerate(sample["qa"])
            if max_sessions is None or (evidence_ids(qa) and evidence_ids(qa) <= known)
        ]
        qas = qas[: max_questions or None]
        turns_total += len(turns)
        lines = [window_line(when, t) for _, when, t in turns]
        line_ids = [t["dia_id"] for _, _, t in turns]
        full = "\n".join(lines)
        full_tokens = approx_tokens(full)
        t0 = time.perf_counter()
        for session in sorted({s for s, _, _ in turns}):
            events = [
                EpisodicEvent(
                    user_id=user,
                    kind="conversation",
                    text=turn_text(t),
                    created_at=when,
                    confidence=0.9,
                    metadata={"dia_id": t["dia_id"], "session": session, "speaker": t["speaker"]},
                )
                for s, when, t in turns
                if s == session
            ]
            await memory.write_events(events)
        t_ingest += time.perf_counter() - t0
        now = max(when for _, when, _ in turns) + timedelta(days=1)
        baseline = RawTurnBM25(turns)
        for index, qa in qas:
            gold = evidence_ids(qa)
            cat = CATEGORIES.get(qa["category"], str(qa["category"]))
            t0 = time.perf_counter()
            hits = await store.search(user, qa["question"], k=kmax, now=now)
            t_query += time.perf_counter() - t0
            got = [h.event.metadata.get("dia_id") for h in hits]
            block = [format_episode(h) for h in hits]
            bm25 = baseline.search(qa["question"], kmax)
            for k in ks:
                if gold:
                    found = gold & set(got[:k])
                    per_cat[cat][f"recall@{k}"].append(len(found) / len(gold))
                    per_cat[cat][f"all@{k}"].append(float(found == gold))
                    per_cat[cat][f"bm25_recall@{k}"].append(len(gold & set(bm25[:k])) / len(gold))
                per_cat[cat][f"tokens@{k}"].append(sum(approx_tokens(x) for x in block[:k]))
            per_cat[cat]["full_tokens"].append(full_tokens)
            row = {
                "id": f"{user}/{len(per_cat[cat]['full_tokens'])}-{cat}",
                "conversation": user,
                "category": cat,
                "question": qa["question"],
                "evidence": sorted(gold),
                "retrieved": got,
                "bm25_retrieved": bm25,
                **{f"recall@{k}": (len(gold & set(got[:k])) / len(gold)) if gold else None for k in ks},
            }
            if answerer is not None and (wanted is None or (user, index) in wanted):
                budget = sum(approx_tokens(x) for x in block[:kmax])
                window = last_turns_window(lines, budget)
                # the window's whole turns are the conversation's last ones; its cut oldest line counts as out
                whole = len(window) - (1 if window and window[-1] != lines[len(lines) - len(window)] else 0)
                in_window = set(line_ids[len(lines) - whole :]) if whole else set()
                pending[(user, index)] = {
                    "id": row["id"],
                    "conversation": user,
                    "qa_index": index,
                    "category": cat,
                    "question": qa["question"],
                    "answer": str(qa.get("answer", qa.get("adversarial_answer", ""))),
                    "block": "\n".join(block[:kmax]),
                    "window": "\n".join(window),
                    "full": full if full_context else None,
                    "window_order": "newest first",
                    "block_tokens": budget,
                    "window_tokens": sum(approx_tokens(x) for x in window),
                    "window_turns": len(window),
                    "block_evidence": (len(gold & set(got[:kmax])) / len(gold)) if gold else None,
                    "window_evidence": (len(gold & in_window) / len(gold)) if gold else None,
                }
            if on_question:
                on_question(row)
    order = list(pending) if answer_ids is None else [q for q in answer_ids if q in pending]
    deadline = time.monotonic() + answer_budget_s if answer_budget_s else None
    for conversation in dict.fromkeys(user for user, _ in order):  # pragma: no cover - needs an endpoint
        keys = [key for key in order if key[0] == conversation]
        # the window arm first, question after question: its lines come newest first, so the
        # windows of one conversation share their head and llama.cpp's prompt cache evaluates
        # it once (the memory blocks share nothing and cost their whole length each)
        for key in keys:
            if deadline is not None and time.monotonic() > deadline:
                break
            item = pending[key]
            item["window_answer"] = await answerer(item["question"], item.pop("window"))  # type: ignore[misc]
        for key in keys:
            item = pending[key]
            if "window_answer" not in item or (deadline is not None and time.monotonic() > deadline):
                break
            item["hermes_answer"] = await answerer(item["question"], item.pop("block"))  # type: ignore[misc]
            if item["full"] is not None:
                item["full_answer"] = await answerer(item["question"], item["full"])  # type: ignore[misc]
            score_answer(item, per_cat[item["category"]])
            answered += 1
            if on_answer:
                on_answer(item)
    await store.close()
    shutil.rmtree(work, ignore_errors=True)
    if isinstance(embedder, CachedEmbedder):
        embedder.save()

    def mean(xs: list[float]) -> float:
        return round(sum(xs) / len(xs), 3) if xs else float("nan")

    table = {
        cat: {
            "questions": len(v["full_tokens"]),
            "answered": len(v.get("f1_hermes", [])),
            **{m: mean(xs) for m, xs in v.items()},
        }
        for cat, v in sorted(per_cat.items())
    }
    overall = defaultdict(list)
    for cat, v in per_cat.items():
        if cat != "adversarial":
            for m, xs in v.items():
                overall[m].extend(xs)
    table["all but adversarial"] = {
        "questions": len(overall["full_tokens"]),
        "answered": len(overall.get("f1_hermes", [])),
        **{m: mean(xs) for m, xs in overall.items()},
    }
    for row in table.values():  # Hermes's lift over the raw-turn BM25 baseline, per k
        for k in ks:
            if f"recall@{k}" in row and f"bm25_recall@{k}" in row:
                row[f"lift@{k}"] = round(row[f"recall@{k}"] - row[f"bm25_recall@{k}"], 3)
    return {
        "data": str(data_path.name),
        "conversations": len(samples),
        "turns": turns_total,
        "embeddings": embedder.name,
        "embed_cache": isinstance(embedder, CachedEmbedder),
        "half_life_days": half_life_days,
        "ingest_s": round(t_ingest, 1),
        "query_ms_mean": round(
            1000 * t_query / max(1, sum(v["questions"] for k, v in table.items() if k != "all but adversarial")), 1
        ),
        "answers": (
            "token F1, memory block vs the last-turns window of equal tokens"
            + (" vs full context" if full_context else "")
            + f" ({answered} of {len(order)} questions answered)"
            if answerer
            else "not run (no endpoint; retrieval metrics only)"
        ),
        "answered": answered,
        "to_answer": len(order),
        "load_avg": [round(x, 2) for x in os.getloadavg()],
        "categories": table,
    }
