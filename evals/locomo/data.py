"""The LoCoMo data (Maharana et al. 2024; CC BY-NC 4.0), read from its path and never copied into
this repository: where it is (:data:`DEFAULT_DATA`), loading it (:func:`load`), its categories,
a conversation's dated turns (:func:`turns_of`) as memory text (:func:`turn_text`) and as
window lines (:func:`window_line`), and a question's gold evidence (:func:`evidence_ids`).

A sample is ``{"sample_id", "conversation": {"session_<n>": [turn, ...],
"session_<n>_date_time": "1:56 pm on 8 May, 2023", ...}, "qa": [{"question", "answer" |
"adversarial_answer", "evidence": ["D1:3", ...], "category": 1-5}, ...]}``; a turn is
``{"dia_id", "speaker", "text"[, "blip_caption"]}``.
"""

from __future__ import annotations

import json
import os
import re
from datetime import UTC, datetime, timedelta
from pathlib import Path

#: ``HERMES_LOCOMO_DATA``, else ``../shared/data/locomo/locomo-dev5.json`` beside the checkout.
DEFAULT_DATA = Path(
    os.environ.get("HERMES_LOCOMO_DATA")
    or Path(__file__).resolve().parents[2].parent / "shared" / "data" / "locomo" / "locomo-dev5.json"
)
#: The original scorer's numbering; adversarial questions have no answer in the conversation.
CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop", 5: "adversarial"}


def session_date(text: str) -> datetime:
    """``"1:56 pm on 8 May, 2023"`` → aware UTC datetime."""
    return datetime.strptime(text.strip(), "%I:%M %p on %d %B, %Y").replace(tzinfo=UTC)


def turns_of(sample: dict) -> list[tuple[int, datetime, dict]]:
    conv = sample["conversation"]
    out: list[tuple[int, datetime, dict]] = []
    n = 1
    while f"session_{n}" in conv:
        when = session_date(conv[f"session_{n}_date_time"])
        out.extend((n, when + timedelta(seconds=i), turn) for i, turn in enumerate(conv[f"session_{n}"]))
        n += 1
    return out


def turn_text(turn: dict) -> str:
    text = f"{turn['speaker']}: {turn.get('text', '')}"
    if turn.get("blip_caption"):
        text += f" [shares a photo: {turn['blip_caption']}]"
    return text


def evidence_ids(qa: dict) -> set[str]:
    return {part.strip() for e in qa.get("evidence", []) for part in re.split(r"[;,]", e) if part.strip()}


def window_line(when: datetime, turn: dict) -> str:
    """A turn as a line of the last-turns window (and of the full context): ``[date] speaker: text``."""
    return f"[{when.date()}] {turn_text(turn)}"


def load(data_path: Path) -> list[dict]:
    """The LoCoMo samples at ``data_path``; FileNotFoundError saying where the data goes."""
    if not data_path.exists():
        raise FileNotFoundError(
            f"LoCoMo data not found at {data_path}: put locomo10.json or locomo-dev5.json (CC BY-NC 4.0, "
            "https://github.com/snap-research/locomo) in ../shared/data/locomo/ beside the checkout, or set "
            "HERMES_LOCOMO_DATA=PATH; it is never copied into this repository"
        )
    return json.loads(data_path.read_text())
