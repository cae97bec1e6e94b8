"""Claimed effects (DESIGN §5.5): an answer may claim only effects done in this goal.

A sentence claiming an effect (``memory.policy.effect_claims``) is attributed to the
side-effect tool whose ``requested_by`` words it shares most (:func:`claim_words`); it is
backed only when that tool succeeded in this goal (a claim no tool's words match is backed by
any side effect done). :func:`unbacked_claims` finds the others and :func:`correct_claims`
rewrites the answer so it says what was and was not done. Pure functions; nothing here knows a
tool by name.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

from memory.policy import effect_claims
from tools.spec import ToolSpec

_ESCAPE = re.compile(r"\\[A-Za-z]")
_IRREGULAR = {
    "sent": "send",
    "wrote": "write",
    "written": "write",
    "made": "make",
    "built": "build",
    "told": "tell",
    "set": "set",
    "put": "put",
}
_FIRST_PERSON = re.compile(
    # a Chinese sentence that starts with 已/已经 has dropped its subject: the speaker's
    r"\b(?:I|I've|I'd|we|we've|us)\b|我|^\s*已|j'ai|\bnous\s+avons\b|\b(?:he|hemos)\b|\b(?:ich|wir)\b"
    r"|しました|いたしました",
    re.IGNORECASE,
)
_CJK_RUN = re.compile(r"[\u4e00-\u9fff\u3040-\u30ff]+")


def _stems(text: str) -> set[str]:
    words = re.findall(r"[a-zà-ÿ]{3,}", text.lower())
    stems = {(_IRREGULAR.get(w, w))[:4] for w in words if len(w) >= 4 or w in _IRREGULAR}
    for run in _CJK_RUN.findall(text):
        stems |= {run[i : i + 2] for i in range(max(1, len(run) - 1))}
    return stems


def claim_words(spec: ToolSpec) -> set[str]:
    """The words (4-letter stems, CJK pairs) of a side-effect tool's ``requested_by`` patterns:
    what a sentence claiming its effect shares with a request for it."""
    return {w for p in spec.request_patterns() for w in _stems(_ESCAPE.sub(" ", p.pattern))}


def unbacked_claims(answer: str, specs: Iterable[ToolSpec], done: Iterable[str]) -> list[tuple[str, str | None]]:
    """``(sentence, tool)`` for each sentence of ``answer`` claiming an effect that no
    successful call of this goal shows (``done``: names of the tools that succeeded); ``tool`` is
    the side-effect tool the sentence is about (its ``requested_by`` words it shares most), or
    None when it names none and no side effect succeeded. A sentence not in the first person
    counts only when it shares two of a tool's words ("the report has been sent to the team"),
    so a sentence about the data ("80 invoices were sent in 2011") claims nothing."""
    done = set(done)
    tools = [(s.name, claim_words(s)) for s in specs if s.side_effect]
    any_effect = bool(done & {name for name, _ in tools})
    out: list[tuple[str, str | None]] = []
    for sentence in effect_claims(answer):
        stems = _stems(sentence)
        scored = sorted(((len(stems & words), name) for name, words in tools), reverse=True)
        # "I posted …" is the assistant's claim; "80 invoices were sent in 2011" describes data:
        # a sentence not in the first person claims an effect only with the tool's verb and
        # object ("the report has been sent to the team": two of its words)
        mine = bool(_FIRST_PERSON.search(sentence))
        best = scored[0] if scored and scored[0][0] >= (1 if mine else 2) else None
        if best is None and not mine:
            continue
        if best is not None:
            top = [name for n, name in scored if n == best[0]]
            if not done & set(top):
                out.append((sentence, best[1]))
        elif not any_effect:
            out.append((sentence, None))
    return out


def correct_claims(answer: str, unbacked: Sequence[tuple[str, str | None]], done_effects: Sequence[str]) -> str:
    """``answer`` without its unbacked claims, followed by a note of what was not done and
    what was (the side-effect tools that succeeded)."""
    body = answer
    for sentence, _ in unbacked:
        body = body.replace(sentence, "").strip()
    lines = [body] if body else []
    for sentence, tool in unbacked:
        why = f"no {tool} call succeeded in this request" if tool else "no action with an effect ran in this request"
        lines.append(f"Not done: “{sentence[:200]}” — {why}.")
    lines.append("Done: " + (", ".join(done_effects) if done_effects else "no action with an effect") + ".")
    return "\n".join(lines)


# the speaker announcing what it will do next: "I will now query …", "Let me check", "Je vais …"
_ANNOUNCES = re.compile(
    r"\b(?:I|we)\s*(?:'ll|\s+will|\s+am\s+going\s+to|'m\s+going\s+to|\s+are\s+going\s+to|\s+shall)\s+(?:now\s+)?"
    r"(?!not\b|be\s+happy\b)\w+"
    r"|\blet\s+me\s+(?!know\b)\w+|\blet's\s+\w+|\bI\s+need\s+to\s+(?:run|query|check|look|read|call|fetch)\b"
    r"|\bje\s+vais\b|\bnous\s+allons\b|\bich\s+werde\b|\bwir\s+werden\b|\blass\s+(?:mich|uns)\b"
    r"|\bvoy\s+a\b|\bvamos\s+a\b|我将|我会|我来|让我|接下来我|確認します|調べます|してみます",
    re.IGNORECASE,
)


def announces_action(answer: str) -> bool:
    """True when ``answer`` announces what the speaker will do next ("I will now adjust my
    approach by querying …", "Let me check the table", "Je vais interroger …", 让我查询一下)
    instead of giving a result: a narration, not an answer. "Let me know …" is no announcement.
    Measured (Qwen2.5-Coder-1.5B, Chinook): sent to read, the model answered "I will now adjust
    my approach by querying the 'Country' table directly" — and the run stopped as unanswered."""
    return bool(_ANNOUNCES.search(answer or ""))


def repeats_result(answer: str, texts: Iterable[str], least: int = 40) -> bool:
    """True when ``answer`` is a tool's own note (at least ``least`` characters of it, compared
    with whitespace collapsed, appear in one of ``texts``, the notes of the goal's results): the
    model repeated "No rows, although … query again" instead of acting on it. Data quoted from a
    result is an answer, not a note. Measured (Qwen2.5-Coder
    -1.5B): twice in a row, the answer was the query tool's note about a wrong join."""
    said = " ".join((answer or "").split())
    if len(said) < least:
        return False
    return any(said[:200] in " ".join(text.split()).replace('\\"', '"') for text in texts)


def echoed_note(answer: str, notes: Iterable[str], least: int = 40) -> str | None:
    """The note of ``notes`` that ``answer`` repeats (as :func:`repeats_result`), or None."""
    return next((note for note in notes if repeats_result(answer, [note], least)), None)


# the sentences of a tool's no-data note that state facts about the data (its dates), not advice
_DATA_FACT = re.compile(r"\bhas data from\b|\bholds no dates\b|\blatest (?:full )?month\b", re.IGNORECASE)


def none_found_answer(note: str) -> str:
    """The user's answer when the model repeated ``note``, a data read's note that it found
    nothing (``"No data for this query: … orders.order_date has data from 2026-06-01 to
    2026-11-30; the latest full month with data is 2026-11. Use a period with data, or tell the
    user …"``): that there is none, with the note's facts about the data and without its advice
    to the model. Measured (Qwen2.5-Coder-1.5B, "How many orders have come in this month?" on
    data ending last month): ``COUNT(*) = 0`` read, its note repeated as the answer, sent back,
    the same query three times, stopped — the answer was in hand."""
    facts = [s.strip() for s in re.split(r"(?<=\.)\s+|;\s*", note) if _DATA_FACT.search(s)]
    found = "; ".join(f.rstrip(".") for f in facts)
    return f"There is none: no rows match what was asked{f' ({found})' if found else ''}."
