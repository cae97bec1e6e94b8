"""Names as an answer states them, and whether a text holds them (DESIGN §5.5). Pure parsing.

An answer about data names things — the top five countries, the artist with the most tracks,
the best-selling product. A small model often names ones its reads never returned ("USA,
Canada, Germany, France and Italy" where the query's rows hold Brazil, not Germany or Italy).
:func:`stated_names` finds the names an answer states where they are the answer:

* quoted spans (``"Queen"``, ``'Queen'``, “…”, «…», 「…」, 『…』);
* items of a list — one per line after a marker (``1.``, ``2)``, ``-``, ``*``, ``•``), each
  cut before its figures ("1. Laptop Pro 14 - $12,345" names "Laptop Pro 14");
* an enumeration after a colon or a copula ("… are: USA, Canada and France", "… sind A, B
  und C", "…是 A、B 和 C"): at least two short items;
* one capitalised name that ends a sentence after a copula ("The top artist is Iron Maiden.").

Markdown emphasis, list numbering, trailing figures, currency and parenthesised remarks are
taken off. Shape: ``str -> list[str]`` (as written, in order, without repeats); never raises.

:func:`missing_names` keeps those that a text (the goal's tool results, the request, the
tools' own descriptions) does not hold: compared case-, accent- and punctuation-blind, as a
whole or word by word, so "Helena Holý" is held by ``{"FirstName": "Helena", "LastName":
"Holý"}``.
"""

from __future__ import annotations

import functools
import re
import unicodedata
from collections.abc import Iterable

_QUOTED = re.compile(
    r"\"([^\"\n]{2,80})\"|“([^”\n]{2,80})”|«\s?([^»\n]{2,80}?)\s?»|「([^」\n]{1,80})」|『([^』\n]{1,80})』"
    r"|(?<![\w])'([^'\n]{2,80})'(?![\w])|‘([^’\n]{2,80})’"
)
# [^\S\n]: blanks within the line (\s would run over every following newline at each line start)
_ITEM_LINE = re.compile(r"(?m)^[^\S\n]*(?:\d{1,3}[.)、]|[-*•])[^\S\n]+(.+?)[^\S\n]*$")
# where an item's name ends: a dash or colon before its figures, a parenthesis, a verb ("- USA is
# first" names USA), "with"/"at" + figure
_ITEM_END = re.compile(
    r"\s+[-–—]\s|\s*[:：]\s|\s*\(|（|\s+(?:is|are|was|were|has|have|had|ist|sind|est|sont|es|son)\s|\s+(?:with|at|for|mit|avec|con|con un|de)\s+[$€£¥]?\d|\s+[$€£¥]?\d|,\s*[$€£¥]?\d"
)
# "United States (USA)": a name and, in brackets, another name for it (no figure inside)
_ALIAS = re.compile(r"^(?P<name>[^()（）]{1,80}?)\s*[(（](?P<alias>[^()（）\d]{1,40})[)）](?P<rest>.{0,200})$")
_COPULA = (
    r"(?:are|is|were|was|include|includes|included|sind|ist|waren|war|sont|est|étaient|était|son|es|eran|era"
    r"|是|为|は|が)"
)
_ENUMERATION = re.compile(rf"(?:[:：]|\b{_COPULA}\b|(?<=[是为はが]))\s*(?P<items>[^.!?。！？\n:：]+)", re.IGNORECASE)
# items of an enumeration (、 in Chinese and Japanese; "，" joins clauses: see stated_names)
_SPLIT = re.compile(r"\s*(?:,|、|;)\s*(?:and\s+|und\s+|et\s+|y\s+|e\s+)?|\s+(?:and|und|et|y|e|&)\s+|和|及|と")
_FINAL_NAME = re.compile(
    r"\b(?:is|was|are|were|ist|war|est|était|es|era)\s+(?:the\s+|der\s+|die\s+|das\s+|le\s+|la\s+|el\s+)?"
    r"(?P<name>(?:[A-ZÀ-Þ][\w'’&.-]*)(?:\s+(?:[A-ZÀ-Þ&][\w'’&.-]*|of|de|du|la|le|van|von|y|and|the)){0,5})"
    # the sentence ends there, or goes on with the name's figures ("…, with $49.62", "(213)")
    r"(?:\s*[.!]?\s*$|,?\s+(?:with|at|for|mit|avec|con)\s+[^A-Za-z]*\d|\s*\()"
)
# markdown emphasis; an underscore inside a word ("row_count", "query_database") is part of it
_EMPHASIS = re.compile(r"[*`]+|(?<!\w)_+|_+(?!\w)")
_BLANKS = re.compile(r"\s{2,}|[^\S\n ]")
# an article before a name is no part of it ("les USA, le Canada et la France")
_ARTICLE = re.compile(r"^(?:(?:the|les|le|la|der|die|das|el|los|las|il|lo|gli)\s+|l['’]\s*)(?=\S)", re.IGNORECASE)
_NUMBERING = re.compile(r"^\s*(?:\d{1,3}[.)、]\s*|#\d+\s*)")
# words that are no name of the data: currency and units a figure carries
_NOT_NAMES = frozenset(
    "usd eur gbp jpy cny rmb chf cad aud brl inr krw dollars dollar euros euro pounds yen yuan "
    "percent total none n/a".split()
)
# a period is checked as figures (graph.answer_figures), not as a name: months and weekdays
_CALENDAR = frozenset(
    "january february march april may june july august september october november december "
    "jan feb mar apr jun jul aug sep sept oct nov dec "
    "januar februar marz juni juli oktober dezember janvier fevrier mars avril mai juin juillet aout "
    "septembre octobre novembre decembre enero febrero marzo abril mayo junio julio agosto septiembre "
    "octubre noviembre diciembre monday tuesday wednesday thursday friday saturday sunday q1 q2 q3 q4 "
    "of the de in".split()
)
_MAX_WORDS = 6
_JOINERS = frozenset("and of the de du la le van von y und et".split())
# a list line "Label: value" whose value is no figure ("- Result: USA")
_LABELLED = re.compile(r"^[^:：]{1,40}?[:：]\s+(?![$€£¥]?\d)(?P<value>.+)$")


def _fold(text: str) -> str:
    """Case-, accent-, width- and punctuation-blind form: words joined by single spaces."""
    text = unicodedata.normalize("NFKD", unicodedata.normalize("NFKC", text)).casefold()
    if not text.isascii():  # ASCII has no combining marks: skip the walk over every character
        text = "".join(c for c in text if not unicodedata.combining(c))
    return " ".join(re.findall(r"\w+", text))


def _clean(item: str) -> str:
    """An item without emphasis, numbering, trailing figures, remarks and end punctuation; a
    name given with another name for it in brackets keeps both ("United States (USA)"): either
    one held is enough (:func:`missing_names`)."""
    item = _ARTICLE.sub("", _NUMBERING.sub("", _EMPHASIS.sub("", item)).strip())
    alias = _ALIAS.match(item)
    rest = alias["rest"] if alias else ""
    ends = not rest.strip() or rest.strip()[0] in ".,;!?" or _ITEM_END.match(rest)
    if alias and ends and re.search(r"[^\W\d_]", alias["alias"]) and not _ITEM_END.search(alias["name"]):
        return f"{alias['name'].strip()} ({alias['alias'].strip()})"
    cut = _ITEM_END.search(item)
    if cut:
        item = item[: cut.start()]
    return item.strip(" \t.,;:!?。、，\"'“”‘’«»「」『』()[]")


def _is_name(item: str) -> bool:
    """A short span with letters, not a bare currency or unit word, not a whole clause."""
    words = item.split()
    if not words or len(words) > _MAX_WORDS or not re.search(r"[^\W\d_]", item):
        return False
    folded = _fold(item)
    if folded in _NOT_NAMES:
        return False
    return not all(w in _CALENDAR or w.isdigit() for w in folded.split())


def _enumerations(text: str) -> list[str]:
    out: list[str] = []
    for m in _ENUMERATION.finditer(text):
        items = [_clean(i) for i in _SPLIT.split(m["items"]) if i and i.strip()]
        items = [i for i in items if i]
        # an enumeration names things: two or more short items, each capitalised or not Latin
        if len(items) >= 2 and all(
            _is_name(i) and (i[0].isupper() or not i[0].isascii() or i[0].isdigit()) for i in items
        ):
            out.extend(items)
    return out


def stated_names(answer: str) -> list[str]:
    """The names ``answer`` states as its answer (module docstring), as written, in order,
    without repeats."""
    return list(_stated_names(answer or ""))


@functools.lru_cache(maxsize=8)  # one verdict reads an answer's names twice (names, keys)
def _stated_names(answer: str) -> tuple[str, ...]:
    # "，" (full-width) joins clauses, not items: it ends an enumeration before NFKC makes it ","
    text = unicodedata.normalize("NFKC", (answer or "").replace("，", "\n").replace("；", "\n"))
    # every run of blanks as one (a line break if it holds one): a pattern trying ``\s+`` at each
    # position of a long run of blanks takes time quadratic in its length (8,000 blanks: 9 s)
    text = _BLANKS.sub(lambda m: "\n" if "\n" in m[0] else " ", text)
    found = [_clean(next(g for g in quoted.groups() if g)) for quoted in _QUOTED.finditer(text)]
    lines = _ITEM_LINE.findall(text)
    for line in lines:
        labelled = _LABELLED.match(_EMPHASIS.sub("", line))
        value = labelled["value"] if labelled else ""
        # a capitalised value is the name ("Result: USA"); else the line names what precedes
        # its colon ("Germany: top seller"), as any item
        found.append(_clean(value if value[:1].isupper() or (value and not value[:1].isascii()) else line))
    prose = _ITEM_LINE.sub(" ", text) if lines else text
    found.extend(_enumerations(prose))
    for sentence in re.split(r"(?<=[.!?。！？])\s+|\n", prose):
        final = _FINAL_NAME.search(sentence.strip())
        if final:
            found.append(_clean(final["name"]))
    # a dict keeps the order and finds a repeat at once (an enumeration of 30,000 items)
    return tuple(dict.fromkeys(name for name in found if _is_name(name)))


def missing_names(names: Iterable[str], known: str) -> list[str]:
    """The ``names`` that ``known`` does not hold, as a whole or every word of it (module
    docstring: case-, accent- and punctuation-blind); a name with another in brackets is held
    when either is."""
    held = f" {_fold(known)} "
    words = set(held.split())

    def is_held(name: str) -> bool:
        folded = _fold(name)
        # the words that join a name's parts ("USA and Canada", "Bank of America") need not be held
        parts = folded.split()
        return (
            not folded
            or f" {folded} " in held
            or (all(w in words or w in _JOINERS for w in parts) and any(w in words for w in parts))
        )

    out: list[str] = []
    for name in names:
        alias = _ALIAS.match(name)
        if is_held(name) or (alias and (is_held(alias["name"]) or is_held(alias["alias"]))):
            continue
        out.append(name)
    return out


# --- an entity named only by its key ----------------------------------------------------------------

# a question that asks which thing or who (not how many, how much)
_WHICH = re.compile(
    r"\b(?:which|who|whom|whose)\b|\bquel(?:le)?s?\b|\bqui\b|\bwelche[rsmn]?\b|\bwer\b|\bcu[aá]l(?:es)?\b"
    r"|\bqui[eé]n(?:es)?\b|哪|谁|誰|どの|どれ",
    re.IGNORECASE,
)
# ... unless it asks for the key itself
_ASKS_KEY = re.compile(r"\b(?:ids?|numbers?|codes?|keys?|nos?\.?)\b|#|编号|番号|号码|编码", re.IGNORECASE)
# a column that holds keys: id, agent_id, AgentId, agentID
_KEY_COLUMN = re.compile(r"(?:^|_)id$|[a-z]Id$|[a-z]ID$", re.IGNORECASE)


def key_only(answer: str, goal: str, table: tuple[list[str], list[list[object]]] | None) -> list[str]:
    """``["<column> <value>", …]`` when ``answer`` names what ``goal`` asks for ("which agent …",
    "who …") only by a key: it states no name, and a figure of it is a value of a key column
    (``id``, ``*_id``, ``*Id``) of ``table`` — the last data read's ``(columns, rows)`` — which
    holds no text at all. Measured (Qwen2.5-Coder-1.5B): "Which agent has solved the most
    tickets?" → ``SELECT agent_id, COUNT(*) …`` → "… is agent ID 3". Empty otherwise (also when
    the question asks for an id or a number)."""
    if table is None or not _WHICH.search(goal or "") or _ASKS_KEY.search(goal or "") or stated_names(answer):
        return []
    columns, rows = table
    if any(isinstance(cell, str) for row in rows for cell in row):
        return []  # the read returned names (or other text): the name check judges them
    keys = [i for i, c in enumerate(columns) if _KEY_COLUMN.search(str(c))]
    said = {int(w) for w in re.findall(r"(?<![\d.,])\d+(?![\d.,]\d)", answer or "")}
    return [
        f"{columns[i]} {row[i]}"
        for row in rows
        for i in keys
        if i < len(row) and isinstance(row[i], int) and not isinstance(row[i], bool) and row[i] in said
    ][:3]
