"""Intent tags of user turns (seed §1.1: "every turn gets an intent tag; history is chosen by
intent match or time decay"). Rule-based and tool-agnostic: a request is tagged with the tools
its clauses ask for (each tool's own ``requested_by`` metadata, ``graph.progress``), so two
turns asking for the same work match; other turns get a speech-act tag.

Tags: ``task:<tool>+<tool>`` | ``question`` | ``preference`` | ``chat``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from graph.progress import required_steps
from tools.spec import ToolSpec

QUESTION = re.compile(
    r"[?？]\s*$|^\s*(what|when|where|which|who|why|how|is|are|do|does|did|can|could)\b|吗\s*$|什么|怎么|多少",
    re.IGNORECASE,
)
PREFERENCE = re.compile(r"\b(i prefer|i like|always|never|from now on|this time)\b|我喜欢|以后|这次", re.IGNORECASE)


def tag_intent(text: str, specs: Iterable[ToolSpec] = ()) -> str:
    """The intent tag of one user turn (see the module docstring for the tags)."""
    steps = required_steps(text, specs)
    if steps:
        return "task:" + "+".join(sorted(steps))
    if PREFERENCE.search(text):
        return "preference"
    if QUESTION.search(text):
        return "question"
    return "chat"
