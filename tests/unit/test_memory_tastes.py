"""Contradicting preferences (issue 23 kind 2): "I love Chinese food", a few turns later "I hate
Chinese food". Likes and dislikes become facts with a polarity (``likes`` / ``dislikes``,
``memory.fact_extraction.extract_tastes``); the later statement supersedes the earlier
(``memory.semantic``) and the prompt shows one — the earlier statement's episode is no longer
recalled. Siblings: other phrasings and languages, a change back, two different things."""

from __future__ import annotations

from datetime import timedelta

import pytest

from memory.fact_extraction import extract_facts, extract_tastes
from memory.triggers import detect_preferences
from tests.unit.test_memory_service import NOW, make, write

PAIRS = [
    ("I love Chinese food.", "I hate Chinese food.", "chinese food"),
    ("I really like jazz.", "Honestly, I don't like jazz anymore.", "jazz"),
    ("I'm a big fan of spreadsheets.", "I'm not a fan of spreadsheets.", "spreadsheets"),
    ("我喜欢中餐。", "我讨厌中餐。", "中餐"),
    ("寿司が好きです。", "寿司は嫌いです。", "寿司"),
    ("Me encanta la comida china.", "Odio la comida china.", "comida china"),
    ("J'adore la cuisine chinoise.", "Je déteste la cuisine chinoise.", "cuisine chinoise"),
    ("Ich liebe chinesisches Essen.", "Ich hasse chinesisches Essen.", "chinesisches essen"),
]


@pytest.mark.parametrize("first, second, thing", PAIRS)
def test_likes_and_dislikes_are_facts_with_a_polarity(first, second, thing):
    assert extract_tastes(detect_preferences(first)[0]) == [("likes", thing)]
    assert [(f.predicate, f.object) for f in extract_facts(second)] == [("dislikes", thing)]


@pytest.mark.parametrize(
    "text", ["I like to get the report early.", "I like it when answers are short.", "How many customers like jazz?"]
)
def test_what_is_not_a_taste_yields_none(text):
    assert [f for f in extract_facts(text) if f.predicate in ("likes", "dislikes")] == []


@pytest.mark.parametrize("first, second, thing", PAIRS)
async def test_the_later_statement_wins_and_the_prompt_shows_one(tmp_path, first, second, thing):
    mem = make(tmp_path)
    try:
        await write(mem, goal=first, tools_used=[], answer="Noted.", thread_id="t1", now=NOW)
        for i in range(3):  # a few turns in between
            await write(mem, goal=f"What is {i} + {i}?", tools_used=[], answer=str(2 * i), now=NOW)
        counts = await write(
            mem, goal=second, tools_used=[], answer="Noted.", thread_id="t1", now=NOW + timedelta(minutes=5)
        )
        assert counts["resolved"] >= 1 or counts["facts"] >= 1
        live = await mem.semantic.facts("u", subject="user")
        tastes = [(f.predicate, f.object) for f in live if f.predicate in ("likes", "dislikes")]
        assert tastes == [("dislikes", thing)]
        (old,) = [f for f in await mem.semantic.facts("u", statuses=("superseded",)) if f.object == thing]
        assert old.predicate == "likes" and old.superseded_by and old.valid_to is not None

        block = await mem.recall_for_turn("u", "t2", f"{thing} {first} {second}", k=20, now=NOW + timedelta(minutes=6))
        text = "\n".join(block.lines)
        assert first not in text, text  # the contradicted statement is not recalled as a preference
        assert second in text or "dislikes" in text, text
    finally:
        await mem.aclose()


async def test_a_change_back_wins_again(tmp_path):
    mem = make(tmp_path)
    try:
        for minute, goal in enumerate(["I love Chinese food.", "I hate Chinese food.", "I love Chinese food again."]):
            await write(mem, goal=goal, tools_used=[], answer="Noted.", now=NOW + timedelta(minutes=minute))
        live = [(f.predicate, f.object) for f in await mem.semantic.facts("u") if f.predicate in ("likes", "dislikes")]
        assert live == [("likes", "chinese food")]
    finally:
        await mem.aclose()


async def test_two_different_things_do_not_contradict(tmp_path):
    mem = make(tmp_path)
    try:
        await write(mem, goal="I love Chinese food.", tools_used=[], answer="Noted.", now=NOW)
        await write(mem, goal="I hate Mexican food.", tools_used=[], answer="Noted.", now=NOW + timedelta(minutes=1))
        live = {(f.predicate, f.object) for f in await mem.semantic.facts("u") if f.predicate in ("likes", "dislikes")}
        assert live == {("likes", "chinese food"), ("dislikes", "mexican food")}
    finally:
        await mem.aclose()


@pytest.mark.parametrize(
    "text",
    [
        "I always prefer reports in PDF format.",  # issue 26: stored nothing before
        "I generally prefer reports in PDF format.",
        "I still really prefer reports in PDF format.",
        "I do prefer reports in PDF format.",
        "From now on, reports in PDF format please.",
        "Going forward, send reports in PDF format.",
        "以后报告都用PDF格式。",
        "Désormais, je préfère les rapports en PDF.",
        "A partir de ahora, prefiero los informes en PDF.",
        "Ab jetzt bevorzuge ich Berichte im PDF-Format.",
        "今後はレポートをPDF形式でお願いします。",
    ],
)
def test_preference_phrasings_are_a_kind(text):
    """Issue 26: "I always prefer reports in PDF format." stored nothing while "I prefer ..."
    did: adverbs, "from now on" and other languages are detected alike."""
    assert detect_preferences(text) != []


@pytest.mark.parametrize(
    "text",
    ["I always prefer reports in PDF format.", "I usually prefer PDF for reports.", "From now on, reports in PDF."],
)
def test_a_format_preference_with_an_adverb_is_a_fact(text):
    assert [(f.predicate, f.object) for f in extract_facts(text)] == [("prefers_format", "pdf")]
