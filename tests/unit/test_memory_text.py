"""Keyword tokens of the keyword half: words, CJK unigrams+bigrams, emoji; K11 key."""

from __future__ import annotations

from memory.text import content_hash, has_searchable, keyword_tokens, query_terms


def test_words_are_case_folded_and_full_width_normalised():
    assert keyword_tokens("Hello ＷＯＲＬＤ１, it's") == ["hello", "world1", "it", "s"]


def test_cjk_runs_give_unigrams_and_bigrams():
    assert keyword_tokens("喝茶") == ["喝", "茶", "喝茶"]
    tokens = keyword_tokens("我们讨论了人工智能")
    assert {"人工", "工智", "智能"} <= set(tokens)
    assert {"東京"} <= set(keyword_tokens("明日は東京で")) and {"서울"} <= set(keyword_tokens("서울에서"))


def test_emoji_are_tokens_and_skin_tones_are_dropped():
    assert keyword_tokens("party 🎉!!") == ["party", "🎉"]
    assert keyword_tokens("👍🏽") == ["👍"]


def test_nothing_searchable():
    for q in ("", "  ", "!!!", "？？。", "…", "\n"):
        assert not has_searchable(q) and query_terms(q) == []
    assert has_searchable("🎉") and has_searchable("茶")


def test_query_terms_are_distinct_and_bounded():
    assert query_terms("a a b") == ["a", "b"]
    assert len(query_terms(" ".join(f"w{i}" for i in range(500)))) == 64


def test_content_hash_ignores_case_and_whitespace():
    assert content_hash("The  Dog ") == content_hash("the dog")
    assert content_hash("the dog") != content_hash("the dogs")


def test_symbols_only_tells_a_symbol_lookup_from_a_query_with_words():
    from memory.text import symbols_only

    assert symbols_only("😂😂") and symbols_only("🎉 👍") and symbols_only("★★★") and symbols_only("👍🏽!")
    assert not symbols_only("party 🎉") and not symbols_only("喝茶 🍵") and not symbols_only("42 😂")
    assert not symbols_only("") and not symbols_only("!!!")
