"""What a written report offers to share (``generate_report``'s ``share`` result field, declared
as its ``ToolSpec.share_field``): a ready message with the title, the period, the headline
figures and where the report is, plus what a message about it must hold
(:mod:`tools.content_checks`)."""

from __future__ import annotations

from typing import Any

#: Headline figures taken from a report at most.
MAX_FIGURES = 4


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _shown(value: float) -> str:
    return f"{value:,.2f}" if isinstance(value, float) else f"{value:,}"


def headline_figures(results: list[dict[str, Any]]) -> list[tuple[str, float]]:
    """``(what, value)`` of the report's headline figures, at most MAX_FIGURES: each numeric cell
    of a one-row result (``label`` or ``label, column``), the first row of a longer one
    (``label: <its first text cell>``)."""
    out: list[tuple[str, float]] = []
    for r in results:
        rows, columns = r.get("rows") or [], r.get("columns") or []
        if not rows or r.get("no_data"):
            continue
        first = rows[0]
        numeric = [(c, v) for c, v in zip(columns, first) if _number(v)]
        if len(rows) == 1:
            for c, v in numeric:
                out.append((r["label"] if len(numeric) == 1 else f"{r['label']}, {c}", v))
        elif numeric:
            name = next((str(v) for v in first if isinstance(v, str) and v.strip()), "")
            out.append(
                (f"{r['label']}: {name}".rstrip(": ") + f" (first of {r.get('row_count', len(rows))})", numeric[0][1])
            )
        if len(out) >= MAX_FIGURES:
            break
    return out[:MAX_FIGURES]


def share(title: str, period: str, path: str, results: list[dict[str, Any]]) -> dict[str, Any]:
    """``{"text", "must_include", "figures"}`` of a written report (see the module doc)."""
    figures = headline_figures(results)
    lines = [title + (f" — period {period}" if period and period not in title else "")]
    lines += [f"- {what}: {_shown(value)}" for what, value in figures]
    lines.append(f"Full report: {path}")
    return {
        "text": "\n".join(lines),
        "must_include": [x for x in (period, path) if x],
        "figures": [value for _, value in figures],
    }
