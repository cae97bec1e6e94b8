"""Answer F1: the original LoCoMo scorer's normalisation and token F1 (:func:`f1`), the fixed,
seeded sample of questions answered (:func:`answer_sample`), the answerer over an
OpenAI-compatible endpoint (:func:`endpoint_answerer`) and the scoring of one answered question
into its category's totals (:func:`score_answer`)."""

from __future__ import annotations

import os
import random
import re
import string
from collections import Counter
from collections.abc import Awaitable, Callable


def normalise_answer(text: str) -> str:
    """The original LoCoMo scorer's normalisation: lower case, no commas, punctuation or
    articles ("a", "an", "the", "and"), single spaces."""
    text = str(text).lower().replace(",", "")
    text = "".join(ch for ch in text if ch not in set(string.punctuation))
    text = re.sub(r"\b(a|an|the|and)\b", " ", text)
    return " ".join(text.split())


def f1(prediction: str, truth: str) -> float:
    """The original scorer's token F1 (0-1) of ``prediction`` against ``truth``, both normalised."""
    p, t = normalise_answer(prediction).split(), normalise_answer(truth).split()
    common = Counter(p) & Counter(t)
    same = sum(common.values())
    if same == 0:
        return 0.0
    precision, recall = same / len(p), same / len(t)
    return 2 * precision * recall / (precision + recall)


#: ``answerer(question, context)`` → the answer text.
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
    categories interleaved (one of each in turn; ``evals.locomo.run.run`` answers conversation after
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


def score_answer(item: dict, totals: dict[str, list[float]]) -> None:
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
