"""The memory suite's answer-F1 path (issue 20, Deliver 5): Hermes's memory block against the
last-turns window of equal tokens, on a fixed, seeded sample stratified by category. No model:
the answerer is a fake that records the context each arm was given."""

from __future__ import annotations

import asyncio
import json
from collections import Counter

import pytest

from evals.locomo.answers import ANSWER_CATEGORIES, answer_sample
from evals.locomo.baselines import last_turns_window
from evals.locomo.run import run
from memory.retrieval import approx_tokens

LINES = [
    f"[2023-05-{8 + i // 10:02d}] {'Caroline' if i % 2 else 'Melanie'}: turn {i} "
    + "about painting, the lake and the support group " * (1 + i % 4)
    for i in range(40)
]


def _tokens(lines: list[str]) -> int:
    return sum(approx_tokens(x) for x in lines)


@pytest.mark.parametrize("budget", [0, 1, 7, 40, 233, 600, 10_000])
def test_the_window_never_takes_more_tokens_than_the_block(budget):
    window = last_turns_window(LINES, budget)
    assert _tokens(window) <= budget
    if _tokens(LINES) > budget >= 40:
        assert _tokens(window) >= budget - 3  # equal tokens: the oldest turn is cut to what is left


def test_the_window_is_the_most_recent_turns_newest_first():
    window = last_turns_window(LINES, 400)
    whole = window[:-1]  # the last, oldest line is cut short to the tokens left
    assert whole == LINES[::-1][: len(whole)]
    assert window[-1].endswith("…") and LINES[-len(window)].startswith(window[-1][:-1])
    assert 2 < len(whole) < len(LINES)
    # the whole conversation when the budget holds it, newest first, nothing cut
    assert last_turns_window(LINES, 10_000) == LINES[::-1]


def _samples() -> list[dict]:
    """Three conversations; categories 1-4 and adversarial (5), open-domain (3) scarce."""
    sizes = {1: 9, 2: 7, 3: 2, 4: 12, 5: 6}
    out = []
    for c in range(3):
        qa = [{"question": f"q{c}-{cat}-{i}", "category": cat} for cat, n in sizes.items() for i in range(n)]
        out.append({"sample_id": f"conv-{c}", "qa": qa})
    return out


def _category(samples: list[dict], key: tuple[str, int]) -> int:
    return next(s for s in samples if s["sample_id"] == key[0])["qa"][key[1]]["category"]


def test_the_sample_is_stratified_by_category_and_leaves_adversarial_out():
    samples = _samples()
    chosen = answer_sample(samples, per_category=5, seed=0)
    counts = Counter(_category(samples, key) for key in chosen)
    assert counts == {1: 5, 2: 5, 3: 5, 4: 5}  # open-domain has 6 over the three conversations
    assert set(ANSWER_CATEGORIES) == {1, 2, 3, 4}
    assert len(set(chosen)) == len(chosen)  # without replacement
    # interleaved: a run stopped early has every category about equally
    assert [_category(samples, key) for key in chosen[:8]] == [1, 2, 3, 4, 1, 2, 3, 4]
    # a category with fewer questions than asked gives all it has
    scarce = answer_sample(samples, per_category=20, seed=0)
    assert Counter(_category(samples, key) for key in scarce)[3] == 6


def test_the_sample_is_fixed_by_its_seed():
    samples = _samples()
    assert answer_sample(samples, 3, seed=0) == answer_sample(_samples(), 3, seed=0)
    assert answer_sample(samples, 3, seed=1) != answer_sample(samples, 3, seed=0)
    # pinned: the cited run's sample must not move under a refactor with the seed fixed
    assert answer_sample(samples, 3, seed=0) == PINNED_SEED_0


PINNED_SEED_0 = [
    ("conv-1", 3),
    ("conv-0", 10),
    ("conv-1", 17),
    ("conv-2", 24),
    ("conv-2", 6),
    ("conv-1", 10),
    ("conv-2", 17),
    ("conv-1", 28),
    ("conv-1", 4),
    ("conv-2", 11),
    ("conv-1", 16),
    ("conv-1", 19),
]


def _conversation(tmp_path):
    turns = [
        {"speaker": "Caroline" if i % 2 else "Melanie", "dia_id": f"D1:{i + 1}", "text": text}
        for i, text in enumerate(
            [
                "I painted a lake at sunrise last week.",
                "That's lovely! I went to a support group yesterday.",
                "How did the support group go?",
                "It was great, everyone shared their stories.",
            ]
            + [f"Just chatting about the weather on day {n}, nothing much." for n in range(30)]
        )
    ]
    qa = [
        {"question": "What did Melanie paint?", "answer": "a lake at sunrise", "evidence": ["D1:1"], "category": 4},
        {"question": "Where did Caroline go?", "answer": "a support group", "evidence": ["D1:2"], "category": 2},
        {"question": "Is this adversarial?", "adversarial_answer": "no", "evidence": ["D1:3"], "category": 5},
    ]
    sample = {
        "sample_id": "conv-t",
        "conversation": {
            "speaker_a": "Melanie",
            "speaker_b": "Caroline",
            "session_1_date_time": "1:56 pm on 8 May, 2023",
            "session_1": turns,
        },
        "qa": qa,
    }
    path = tmp_path / "locomo-test.json"
    path.write_text(json.dumps([sample]))
    return path


@pytest.mark.slow  # ingests through the real LanceDB store (in process, ~1 s)
def test_each_sampled_question_is_answered_from_the_block_and_from_an_equal_token_window(tmp_path):
    seen: list[tuple[str, str]] = []

    async def answerer(question: str, context: str) -> str:
        seen.append((question, context))
        return "a lake at sunrise" if "painted a lake" in context else "I don't know"

    rows: list[dict] = []
    ids = [("conv-t", 0), ("conv-t", 1)]
    result = asyncio.run(
        run(
            _conversation(tmp_path),
            "hash",
            [5, 10],
            14.0,
            False,
            None,
            answerer=answerer,
            answer_ids=ids,
            on_answer=rows.append,
        )
    )
    assert [r["qa_index"] for r in rows] == [0, 1] and result["answered"] == result["to_answer"] == 2
    assert len(seen) == 4  # two arms per question, adversarial never asked
    for row in rows:
        window = next(c for q, c in seen[:2] if q == row["question"]).split("\n")  # the window arm goes first
        block = next(c for q, c in seen[2:] if q == row["question"]).split("\n")
        assert _tokens(window) == row["window_tokens"] <= row["block_tokens"] == _tokens(block)
        assert row["window_tokens"] >= row["block_tokens"] - 3
        assert window[0].endswith("nothing much.") and "day 29" in window[0]  # the last turn first
        assert row["window_evidence"] == 0.0  # the evidence is the conversation's first turns
    painted = rows[0]
    assert painted["f1_hermes"] == 1.0 and painted["f1_window"] == 0.0
    assert result["categories"]["single-hop"]["f1_diff"] == 1.0
