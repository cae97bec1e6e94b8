"""The memory suite's baseline (issue 20): plain BM25 over the raw turns, so Hermes's lift over a
keyword index of the transcript is reported beside its recall."""

from __future__ import annotations

from datetime import UTC, datetime

from evals.locomo.baselines import RawTurnBM25

WHEN = datetime(2023, 5, 8, tzinfo=UTC)


def _turn(dia_id: str, speaker: str, text: str) -> tuple[int, datetime, dict]:
    return (1, WHEN, {"dia_id": dia_id, "speaker": speaker, "text": text})


def test_raw_turn_bm25_ranks_the_turn_sharing_the_question_words():
    turns = [
        _turn("D1:1", "Caroline", "I went to a support group yesterday."),
        _turn("D1:2", "Melanie", "I painted a lake at sunrise last week."),
        _turn("D1:3", "Caroline", "That is lovely, what colours did you use?"),
    ]
    bm25 = RawTurnBM25(turns)
    assert bm25.search("When did Melanie paint the lake?", k=2)[0] == "D1:2"
    assert bm25.search("is the", k=3) == []  # stop words only: nothing searchable
    assert bm25.search("pottery", k=3) == []  # no shared word: no hit, never "everything"
