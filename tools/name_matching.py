"""Whether the user's words name a value (DESIGN §2.8): the matching behind the destination
check (``tools.destinations``) and the sensitive-content check (``tools.sensitive_data``).

Case, ``#``/``@`` and separators are ignored (``#sales-team`` = ``sales team`` = ``Sales_Team``),
a run of words may be written joined (``projectgroup``), and a match may not cut a name written
joined (``sales`` is not in ``#sales-team``). Pure: no I/O.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Iterable
from typing import Any

#: Longest run of request words a joined destination (``projectgroup``) may span.
MAX_JOINED_WORDS = 4

_TOKEN_RE = re.compile(r"[^\W_]+")


def _norm(text: str) -> str:
    """Lower-cased word runs joined by one space: ``"#Sales-Team"`` → ``"sales team"``."""
    return " ".join(_TOKEN_RE.findall(str(text).casefold()))


def _ascii_alnum(ch: str) -> bool:
    return ch.isascii() and ch.isalnum()


#: Joins the words of one name written without spaces (``sales-team``, ``bob@example.com``,
#: ``hooks.example.com/T1``): in :func:`_glued` the separator between two such words is
#: :data:`_GLUE`, so that a match may not start or end inside the name.
_JOINED_NAME_RE = re.compile(r"(?<=[^\W_])[-_.@/:+~]+(?=[^\W_])")
_GLUE = "\x00"


def _glued(text: str) -> str:
    """:func:`_norm` of ``text`` with the separator inside a joined name as :data:`_GLUE`
    instead of a space (same length, same positions)."""
    marked = _JOINED_NAME_RE.sub(_GLUE, str(text).casefold())
    return " ".join(
        _GLUE.join(_TOKEN_RE.findall(piece)) for piece in re.split(r"[^\w\x00]+|_", marked) if _TOKEN_RE.search(piece)
    )


def occurs_whole(needle: str, hay: str, glued: str | None = None) -> bool:
    """``needle`` in ``hay`` as a whole: an ASCII letter or digit may not continue it on
    either side (``ann`` is not in ``annual``); other scripts (CJK) have no spaces between
    words, so there any occurrence counts. With ``glued`` (:func:`_glued` of the same text),
    a match may not cut a name written joined: ``sales`` is not in ``#sales-team``, nor ``bob``
    in ``bob@example.com``."""
    if not needle:
        return False
    start = hay.find(needle)
    while start >= 0:
        end = start + len(needle)
        before = start == 0 or not (_ascii_alnum(hay[start - 1]) and _ascii_alnum(needle[0]))
        after = end == len(hay) or not (_ascii_alnum(hay[end]) and _ascii_alnum(needle[-1]))
        if glued is not None and len(glued) == len(hay):
            before = before and not (start > 0 and glued[start - 1] == _GLUE)
            after = after and not (end < len(glued) and glued[end] == _GLUE)
        if before and after:
            return True
        start = hay.find(needle, start + 1)
    return False


def named_in(value: Any, texts: Iterable[str]) -> bool:
    """True when one of ``texts`` (the user's words) names ``value``: its words in order, case
    and punctuation ignored (``#sales-team`` ↔ "post to Sales Team"), or joined
    (``projectgroup`` ↔ "the project group", up to :data:`MAX_JOINED_WORDS` words)."""
    wanted = _norm(str(value))
    if not wanted:
        return False
    joined = wanted.replace(" ", "")
    for text in texts:
        hay, glued = _norm(text), _glued(text)
        if occurs_whole(wanted, hay, glued):
            return True
        words, glue = hay.split(), [g == _GLUE for g in glued if g in (" ", _GLUE)]
        for n in range(2, MAX_JOINED_WORDS + 1):
            for i in range(len(words) - n + 1):
                cut = (i > 0 and glue[i - 1]) or (i + n < len(words) and glue[i + n - 1])
                if "".join(words[i : i + n]) == joined and not cut:
                    return True
    return False


def same_name(value: str, other: str) -> bool:
    return _norm(value) == _norm(other) and bool(_norm(value))


def pattern_allows(value: str, pattern: str) -> bool:
    strip = "#@ "
    v, p = str(value).strip().lstrip(strip).casefold(), str(pattern).strip().lstrip(strip).casefold()
    if not p:
        return False
    if any(c in p for c in "*?["):
        return fnmatch.fnmatchcase(v, p)
    return v == p or same_name(v, p)
