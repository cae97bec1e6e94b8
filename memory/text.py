"""Text helpers shared by every memory store: normalisation, the K11 dedupe key, and the
keyword tokens of the keyword (BM25) half of retrieval.

Why a tokenizer of our own: LanceDB's and SQLite's built-in tokenizers split on spaces and
punctuation, so a Chinese or Japanese sentence is one token and neither 人工智能 nor 喝茶 is found
inside a stored sentence (measured); emoji are dropped as punctuation. Here text becomes
space-separated tokens before it is indexed (and the index splits on whitespace only):

* letters and digits: words, case-folded (NFKC first, so full-width ＡＢＣ１ is abc1);
* runs of CJK characters (Han, Hiragana, Katakana, Hangul): every character and every pair of
  adjacent characters (unigrams + bigrams), so 喝茶 is found in 我喜欢喝茶 and 人工智能 in
  我们讨论了人工智能 without a dictionary; works for Japanese and Korean alike;
* emoji: one token per pictograph (skin tones, variation selectors and joiners dropped).

A query that yields no token is "nothing searchable": stores return an empty result for it,
never "everything" (``has_searchable``).
"""

from __future__ import annotations

import hashlib
import re
import unicodedata

_CJK_RANGES = (
    "\u3040-\u30ff"  # Hiragana, Katakana
    "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"  # CJK ideographs
    "\u1100-\u11ff\u3130-\u318f\uac00-\ud7af"  # Hangul
    "\U00020000-\U0002fa1f"
)
_EMOJI_RANGES = (
    "\U0001f000-\U0001faff"  # pictographs, emoticons, transport, symbols & pictographs ext.
    "\u2600-\u27bf"  # misc symbols, dingbats
    "\u2b00-\u2bff"  # stars, arrows
    "\u2300-\u23ff"  # technical (⌚ ⏰)
)
_TOKEN = re.compile(rf"(?P<cjk>[{_CJK_RANGES}]+)|(?P<emoji>[{_EMOJI_RANGES}])|(?P<word>[^\W_]+)", re.UNICODE)
_SKIN_TONE = re.compile("[\U0001f3fb-\U0001f3ff]")
#: Longest token kept (longer ones are hashes, base64 ...): never matched in practice.
MAX_TOKEN_CHARS = 40


def normalise_text(text: str) -> str:
    """Whitespace collapsed, case folded: the form two texts must share to be the same memory."""
    return " ".join((text or "").split()).casefold()


def content_hash(text: str) -> str:
    """SHA-256 hex of ``normalise_text(text)``: the K11 dedupe key, computed before any I/O."""
    return hashlib.sha256(normalise_text(text).encode("utf-8")).hexdigest()


def keyword_tokens(text: str) -> list[str]:
    """The keyword tokens of ``text`` in order (duplicates kept, as BM25 counts them).

    >>> keyword_tokens("I like 喝茶 🎉!")
    ['i', 'like', '喝', '茶', '喝茶', '🎉']
    """
    text = unicodedata.normalize("NFKC", text or "").casefold()
    text = _SKIN_TONE.sub("", text)
    out: list[str] = []
    for m in _TOKEN.finditer(text):
        if m.group("cjk"):
            run = m.group("cjk")
            out.extend(run)
            out.extend(run[i : i + 2] for i in range(len(run) - 1))
        elif m.group("emoji"):
            out.append(m.group("emoji"))
        else:
            word = m.group("word")
            if len(word) <= MAX_TOKEN_CHARS:
                out.append(word)
    return out


def keyword_text(text: str) -> str:
    """``keyword_tokens`` joined by spaces: the indexed (and queried) form of ``text``."""
    return " ".join(keyword_tokens(text))


def query_terms(query: str, limit: int = 64) -> list[str]:
    """Distinct keyword tokens of a query, first ``limit`` (long pasted queries stay bounded)."""
    return list(dict.fromkeys(keyword_tokens(query)))[:limit]


def symbols_only(query: str) -> bool:
    """True when ``query`` has keyword tokens and every one is an emoji or pictographic symbol
    (no word, no CJK character): ``"😂😂"``, ``"🎉 👍"``, ``"★★★"``. Such a query is an exact-token
    lookup; an embedding model places symbols near each other, so its vector half says little."""
    text = _SKIN_TONE.sub("", unicodedata.normalize("NFKC", query or "").casefold())
    kinds = {m.lastgroup for m in _TOKEN.finditer(text)}
    return kinds == {"emoji"}


def has_searchable(query: str) -> bool:
    """True when ``query`` has at least one keyword token (a word, a CJK character, an emoji)."""
    return bool(keyword_tokens(query))
