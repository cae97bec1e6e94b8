"""What a goal's tool results hold, for the answer checks of :mod:`graph.verification` (DESIGN §5.5).

A :class:`Result` per successful tool result of the current goal (:func:`goal_results`), with
its tool's metadata (``ToolSpec.reads``, ``side_effect``) and the marks a tool may set on its data
(``unexpected_empty``, ``undated``, ``assumed``); the numbers a figure may come from (:func:`known_values`),
the result as the model saw it (:func:`seen`), the strings of a JSON value (:func:`strings_of`)
and a tabular result's rows (:func:`table_of`). Pure functions; nothing here knows a tool by name.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from langchain_core.messages import AIMessage, AnyMessage, ToolMessage

from graph.answer_figures import values_in
from tools.spec import ToolSpec


@dataclass(frozen=True)
class Result:
    """One successful tool result of the goal: ``name``, ``call_id``, ``reads`` (the tool's
    ``ToolSpec.reads``), ``side_effect``, ``data`` (the envelope's ``data``; the content when it
    is no envelope), ``summary``, ``handle`` (payload on disk, or None) and ``text`` (the
    content as the model saw it)."""

    name: str
    call_id: str
    reads: str | None
    side_effect: bool
    data: Any
    summary: str
    handle: str | None
    text: str
    args: Any = None

    @property
    def is_data_read(self) -> bool:
        return self.reads == "data"

    @property
    def note(self) -> str:
        """The tool's own note on its data (``data.note``: what to do about an empty result),
        "" when there is none."""
        note = self.data.get("note") if isinstance(self.data, Mapping) else None
        return note if isinstance(note, str) else ""

    @property
    def unexpected_empty(self) -> bool:
        """True when the tool says this read found nothing *despite* its period having data
        (``data.unexpected_empty``: a wrong join or date format): it supports no claim of none."""
        return isinstance(self.data, Mapping) and bool(self.data.get("unexpected_empty"))

    @property
    def undated(self) -> bool:
        """True when the tool says this read's figures belong to no one period: they cover every
        date (``data.undated``: no condition restricts a date column of its tables) or its tables
        hold no dates at all (``data.dateless``)."""
        return isinstance(self.data, Mapping) and bool(self.data.get("undated") or self.data.get("dateless"))

    @property
    def assumed(self) -> list[str]:
        """How the tool read the request where the query as written found nothing
        (``data.assumed``: "full_name = 'billing' (no agents row holds it there) → team =
        'billing'"): an interpretation an answer resting on this read must state."""
        assumed = self.data.get("assumed") if isinstance(self.data, Mapping) else None
        return [str(a) for a in assumed] if isinstance(assumed, list) else []

    @property
    def empty(self) -> bool:
        """True when this read found nothing: zero rows (``row_count`` 0, ``rows`` []), an
        empty list or object, an object whose lists are all empty, one row of NULLs or zeros (a
        SUM or COUNT over no rows), or a count of 0 (one row whose one number is 0)."""
        data = self.data
        if data is None or data in ([], {}, ""):
            return True
        if isinstance(data, Mapping):
            if data.get("row_count") == 0 or data.get("count") == 0 or data.get("total") == 0:
                return True
            rows = data.get("rows")
            if isinstance(rows, list):
                if not rows:
                    return True
                if len(rows) == 1:
                    cells = (
                        rows[0]
                        if isinstance(rows[0], list)
                        else list(rows[0].values())
                        if isinstance(rows[0], dict)
                        else [rows[0]]
                    )
                    numbers = [c for c in cells if isinstance(c, (int, float)) and not isinstance(c, bool)]
                    # SUM/COUNT over no rows: one row of NULLs or zeros; or a label with a count of 0
                    nothing = all(c is None or c == "" or (c in numbers and c == 0) for c in cells)
                    return nothing or (len(numbers) == 1 and numbers[0] == 0 and len(cells) <= 2)
                return False
            # another tool's shape ({"notes": []}, {"items": [], "next": null}): its lists are empty
            lists = [v for v in data.values() if isinstance(v, list)]
            return bool(lists) and not any(lists)
        return False


def goal_results(work: Sequence[AnyMessage], specs: Iterable[ToolSpec]) -> list[Result]:
    """The successful tool results among ``work`` (the current goal's messages), in order,
    with their tools' metadata (a tool no longer registered reads nothing)."""
    by_name = {spec.name: spec for spec in specs}
    args = {c["id"]: c.get("args") for m in work if isinstance(m, AIMessage) for c in m.tool_calls if c.get("id")}
    out: list[Result] = []
    for m in work:
        if not isinstance(m, ToolMessage) or m.status == "error" or not m.name:
            continue
        text = m.content if isinstance(m.content, str) else json.dumps(m.content, ensure_ascii=False, default=str)
        try:
            envelope = json.loads(text)
        except (TypeError, ValueError, RecursionError):  # a hostile server's 5,000-deep JSON
            envelope = None
        if isinstance(envelope, dict) and "summary" in envelope:
            data, summary, handle = envelope.get("data"), str(envelope.get("summary") or ""), envelope.get("handle")
        else:
            data, summary, handle = (envelope if envelope is not None else text), text[:200], None
        spec = by_name.get(m.name)
        out.append(
            Result(
                name=m.name,
                call_id=m.tool_call_id,
                reads=spec.reads if spec else None,
                side_effect=bool(spec and spec.side_effect),
                data=data,
                summary=summary,
                handle=handle if isinstance(handle, str) else None,
                text=text,
                args=args.get(m.tool_call_id),
            )
        )
    return out


#: Fields of a result that count rows rather than hold data.
_COUNT_FIELDS = frozenset({"row_count", "total_items", "count", "total", "truncated", "row_count_exact"})


def known_values(result: Result, parts: list[float]) -> list[float]:
    """The numbers a figure may come from in ``result`` (the days and months of its dates go to
    ``parts``). A read that found nothing (a COUNT of 0 is one row) supports no count of rows:
    "1 customer" after ``COUNT(*)`` returned 0 is the row count misread, not a figure of the data."""
    if not result.empty:
        return values_in(seen(result), parts=parts)
    data = result.data
    if isinstance(data, Mapping):
        data = {k: v for k, v in data.items() if k not in _COUNT_FIELDS}
    return values_in(data, counts=False, parts=parts)


def seen(result: Result) -> Any:
    """The result as the model saw it: the whole envelope (summary, data, totals, notes), else
    its data."""
    try:
        return json.loads(result.text)
    except (TypeError, ValueError, RecursionError):
        return result.data


def strings_of(value: Any, depth: int = 0, keys: bool = False) -> list[str]:
    """The strings and numbers (as text) of a JSON value, e.g. a call's arguments."""
    if depth > 12 or value is None or isinstance(value, bool):
        return []
    if isinstance(value, (str, int, float)):
        return [str(value)]
    if isinstance(value, Mapping):
        names = [str(k) for k in value] if keys else []
        return names + [s for item in value.values() for s in strings_of(item, depth + 1, keys)]
    if isinstance(value, list):
        return [s for item in value for s in strings_of(item, depth + 1, keys)]
    return []


def table_of(data: Any) -> tuple[list[str], list[list[object]]] | None:
    """``(columns, rows)`` of a tabular result (``{"columns": [...], "rows": [[...] | {...}]}``)."""
    if not isinstance(data, Mapping) or not isinstance(data.get("columns"), list):
        return None
    columns = [str(c) for c in data["columns"]]
    rows = [
        list(r.values()) if isinstance(r, Mapping) else list(r) if isinstance(r, list) else [r]
        for r in data.get("rows") or []
    ]
    return columns, rows


def result_summaries(messages: Iterable[AnyMessage], tools: set[str]) -> list[str]:
    """The pipeline's one-line summary of the last successful result of each tool in ``tools``,
    sorted by tool name (the tool's name when its result has no summary)."""
    found: dict[str, str] = {}
    for message in messages:
        if isinstance(message, ToolMessage) and message.name in tools and message.status != "error":
            summary = None
            if isinstance(message.content, str):
                try:
                    summary = json.loads(message.content).get("summary")
                except (TypeError, ValueError, AttributeError):
                    summary = None
            found[message.name] = str(summary or message.name)
    return [found[name] for name in sorted(found)]


def error_text(message: ToolMessage) -> str:
    """The ``error`` of a tool result envelope (the content itself when it is not one)."""
    try:
        return str(json.loads(str(message.content)).get("error") or message.content)
    except (TypeError, ValueError, AttributeError):
        return str(message.content)


def with_assumptions(answer: str, results: Sequence[Result]) -> str:
    """``answer`` with the interpretations of the goal's last data read that found rows
    (:attr:`Result.assumed`) stated after it — "(Read as: …)" — unless it states them already;
    ``answer`` itself when there are none. A read the tool ran with another column than the
    query compared answers a question the user may not have asked (``state = 'billing'`` run as
    ``product_area = 'billing'``): right when the model picked the wrong column, wrong when the
    user meant the column — either way the user sees which was counted."""
    reads = [r for r in results if r.is_data_read and not r.empty]
    said = [a for a in (reads[-1].assumed if reads else []) if a.rsplit("→", 1)[-1].strip() not in answer]
    return f"{answer} (Read as: {'; '.join(said)}.)" if said else answer
