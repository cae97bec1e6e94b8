"""Tool-result pipeline (seed §2.3, DESIGN §2.5): bound every result before it enters history.

Three stages, applied by the ``compress_results`` node:

1. **validate**: when the tool declares a result schema, check it with ``jsonschema``; a result
   that fails keeps only the properties the schema declares and says what was dropped.
2. **bound**: arrays over ``MAX_ITEMS`` (20) are sampled evenly (first and last kept) with the
   true total stated; strings over ``MAX_FIELD_CHARS`` are truncated with a notice; the whole
   rendered result is capped at ``MAX_RESULT_CHARS``. The full payload stays on disk, outside
   the prompt, under a ``handle`` (case K2).
3. **summarise**: a rule template for structured results (a DB query: columns, row count,
   sample rows); for long unstructured text (:func:`needs_model_summary`) the caller passes a
   model-written ``summary`` aimed at the current goal (the ``compress_results`` node does).

Output shape (the envelope the model sees, JSON; :data:`ENVELOPE_SCHEMA`): ``{"status": "ok"|"error", "summary": str,
"handle": str, "data": <bounded content>}`` — ``handle`` (where the full payload is on disk)
whenever the caller has one, right after the summary, so that a result the context window must
cut for its budget still says what it was and where the rest is (:func:`essential_chars`,
``graph/window.py``) — plus, only when they apply, ``"truncated": true``,
``"total_items": int`` (a list was sampled), ``"notes": [str]`` (what was cut) and
``"error": str`` (with ``"suggestion": {arg: value}`` when the refusal names the values to send
instead: ``tools.errors.InvalidValueError``). Other empty fields are left out: every result is in every later prompt and
in every checkpoint, so its keys cost tokens and time.
Unparseable raw output degrades to a plain-text summary.
"""

from __future__ import annotations

import json
from typing import Any

import jsonschema

MAX_ITEMS = 20
MAX_DEPTH = 12  # deeper structure is cut to a text preview (and never recursed into)
MAX_FIELD_CHARS = 1500
MAX_RESULT_CHARS = 4000
#: What a cut text ends with, everywhere Hermes cuts text for the prompt (results, history,
#: the window): one spelling, so a reader — and the model — can tell a cut from an ending.
TRUNCATION_MARK = " …[truncated]"


def cut_text(text: str, limit: int) -> str:
    """``text`` cut to ``limit`` chars plus :data:`TRUNCATION_MARK` (no check of its length)."""
    return text[:limit] + TRUNCATION_MARK


#: Shortest cut of a tool result's text the context window makes when no envelope head is found.
MIN_RESULT_CHARS = 160


def essential_chars(text: str) -> int:
    """How many leading characters of a tool message's ``text`` hold its envelope's ``status``,
    ``summary`` and ``handle`` (what a result cut for the context budget must keep: what it was
    and where the full payload is); :data:`MIN_RESULT_CHARS` when ``text`` does not start with
    such a head (not an envelope, or fields in another order), never more than ``len(text)``."""
    parsed = _parse(text)
    if isinstance(parsed, dict) and "summary" in parsed:
        head = {k: parsed[k] for k in ("status", "summary", "handle") if k in parsed}
        prefix = json.dumps(head, ensure_ascii=False, default=str)[:-1]
        if text.startswith(prefix):
            return min(len(text), max(len(prefix) + 1, MIN_RESULT_CHARS))
    return min(len(text), MIN_RESULT_CHARS)


def _sample(items: list[Any], limit: int = MAX_ITEMS) -> list[Any]:
    if len(items) <= limit:
        return items
    step = (len(items) - 1) / (limit - 1)
    return [items[round(i * step)] for i in range(limit)]


def _preview(value: Any, limit: int = 200) -> str:
    try:
        text = json.dumps(value, ensure_ascii=False, default=str)
    except (TypeError, ValueError, RecursionError):
        text = repr(value)
    return cut_text(text, limit)


def bound(value: Any, notes: list[str], path: str = "$", depth: int = 0) -> Any:
    """Stage 2 on any JSON value. Appends a human-readable note per cut to ``notes``."""
    if depth >= MAX_DEPTH and isinstance(value, (list, dict)):
        notes.append(f"{path}: nested deeper than {MAX_DEPTH} levels, cut to a preview")
        return _preview(value)
    if isinstance(value, str):
        if len(value) > MAX_FIELD_CHARS:
            notes.append(f"{path}: text truncated from {len(value)} to {MAX_FIELD_CHARS} chars")
            return cut_text(value, MAX_FIELD_CHARS)
        return value
    if isinstance(value, list):
        if len(value) > MAX_ITEMS:
            notes.append(f"{path}: {len(value)} items, {MAX_ITEMS} sampled evenly")
        return [bound(v, notes, f"{path}[{i}]", depth + 1) for i, v in enumerate(_sample(value))]
    if isinstance(value, dict):
        return {str(k): bound(v, notes, f"{path}.{k}", depth + 1) for k, v in value.items()}
    return value


def validate(value: Any, schema: dict[str, Any] | None, notes: list[str]) -> Any:
    """Stage 1: drop structure the result schema does not allow (top-level properties)."""
    if not schema:
        return value
    errors = list(jsonschema.Draft202012Validator(schema).iter_errors(value))
    if not errors:
        return value
    notes.append("result did not match its schema: " + "; ".join(e.message for e in errors[:3]))
    if isinstance(value, dict) and isinstance(schema.get("properties"), dict):
        allowed = schema["properties"]
        dropped = sorted(set(value) - set(allowed))
        if dropped:
            notes.append(f"dropped undeclared fields: {', '.join(dropped)}")
        return {k: v for k, v in value.items() if k in allowed}
    return value


def summarise(tool: str, value: Any, total_items: int | None) -> str:
    """Stage 3: a rule template per result shape."""
    if isinstance(value, dict) and "columns" in value and "rows" in value:
        return _summarise_table(tool, value)
    if isinstance(value, dict):
        scalars = [f"{k}={str(v)[:60]}" for k, v in value.items() if isinstance(v, (str, int, float, bool))]
        others = [k for k, v in value.items() if not isinstance(v, (str, int, float, bool, type(None)))]
        text = ", ".join(scalars[:5]) or "object"
        return f"{tool}: {text}" + (f" (+ {', '.join(map(str, others[:5]))})" if others else "")
    if isinstance(value, list):
        return f"{tool}: list of {total_items if total_items is not None else len(value)} items"
    text = str(value)
    return f"{tool}: " + (cut_text(text, 160) if len(text) > 160 else text)


def _summarise_table(tool: str, value: dict[str, Any]) -> str:
    """A table's summary. One row is stated as ``column = value`` pairs: small models read
    "1 rows" as the answer to "how many …?" when the only row holds ``COUNT(*) = 0`` (measured,
    evals data suite 2026-12-03: 4 of 18 answers were "1" after a count of 0)."""
    rows, columns = value["rows"], [str(c) for c in value["columns"]]
    count = value.get("row_count", len(rows) if isinstance(rows, list) else "?")
    if count == 0 or rows == []:
        return f"{tool}: no rows (columns {', '.join(columns)})"
    if count == 1 and isinstance(rows, list) and len(rows) == 1 and isinstance(rows[0], list | tuple | dict):
        row = rows[0]
        cells = list(row.items()) if isinstance(row, dict) else list(zip(columns, row))
        pairs = [f"{c} = {cut_text(str(v), 60) if len(str(v)) > 60 else v}" for c, v in cells[:6]]
        more = f" (+ {len(cells) - 6} more columns)" if len(cells) > 6 else ""
        return f"{tool}: one row: {', '.join(pairs)}{more}"
    return f"{tool}: {count} rows, columns {', '.join(columns)}"


#: JSON Schema of the envelope every tool result becomes (the storage-layer normaliser, seed §1.2; DESIGN §1.4).
ENVELOPE_SCHEMA: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "title": "ToolResultEnvelope",
    "type": "object",
    "properties": {
        "status": {"enum": ["ok", "error"]},
        "summary": {"type": "string"},
        "data": {},
        "truncated": {"const": True},
        "total_items": {"type": "integer", "minimum": 0},
        "handle": {"type": ["string", "null"]},
        "notes": {"type": "array", "items": {"type": "string"}},
        "error": {"type": "string"},
        "suggestion": {"type": "object"},
    },
    "required": ["status", "summary"],
    "additionalProperties": False,
}

MODEL_SUMMARY_CHARS = 2000  # unstructured text longer than this gets a model summary


def needs_model_summary(raw: Any) -> bool:
    """True for long text that is not JSON (a web page, a log): rules cannot summarise it."""
    return isinstance(raw, str) and len(raw) > MODEL_SUMMARY_CHARS and not isinstance(_parse(raw), (dict, list))


def _parse(raw: Any) -> Any:
    if isinstance(raw, str):
        stripped = raw.strip()
        if stripped[:1] in "[{":
            try:
                return json.loads(stripped)
            except json.JSONDecodeError:
                return raw
    return raw


def _largest_list_len(value: Any, depth: int = 0) -> int | None:
    if depth >= MAX_DEPTH:
        return None
    if isinstance(value, list):
        return len(value)
    if isinstance(value, dict):
        lengths = [n for v in value.values() if (n := _largest_list_len(v, depth + 1)) is not None]
        return max(lengths) if lengths else None
    return None


def compress(
    tool: str,
    raw: Any,
    *,
    status: str = "ok",
    error: str | None = None,
    result_schema: dict[str, Any] | None = None,
    handle: str | None = None,
    summary: str | None = None,
    summary_note: str | None = None,
    suggestion: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Run the three stages on one tool result and return the envelope (module docstring).
    ``summary``, when given, replaces the rule summary of stage 3 (a model's summary);
    ``summary_note`` (why there is none: a timeout, say) is added to the envelope's notes;
    ``suggestion`` (the argument values a refusal names) goes next to the ``error``."""
    notes: list[str] = []
    value = _parse(raw)
    if status == "ok":
        value = validate(value, result_schema, notes)
    total = _largest_list_len(value)
    data = bound(value, notes)
    envelope: dict[str, Any] = {
        "status": status,
        "summary": (f"{tool}: {summary}" if summary else summarise(tool, value, total))
        if status == "ok"
        else f"{tool} failed: {error}",
    }
    if handle:
        # right after the summary: a result the context window has to cut (graph/window.py) still
        # shows what it was and where the whole payload is (:func:`essential_chars`)
        envelope["handle"] = handle
    envelope["data"] = data
    if notes:
        envelope.update(truncated=True, handle=handle, notes=notes)
        if total is not None and total > MAX_ITEMS:
            envelope["total_items"] = total
    if summary_note and status == "ok":
        envelope.setdefault("notes", []).append(summary_note)
    if error:
        envelope["error"] = error
        if suggestion:
            envelope["suggestion"] = suggestion
        envelope["summary"] = f"{tool} failed"
        if data is None:
            del envelope["data"]
    text = json.dumps(envelope, ensure_ascii=False, default=str)
    if len(text) > MAX_RESULT_CHARS:
        # Still too big (many medium fields): keep the summary and a plain-text preview only.
        preview = cut_text(json.dumps(data, ensure_ascii=False, default=str), MAX_RESULT_CHARS // 2)
        envelope.update(data=preview, truncated=True, handle=handle)
        if total is not None:
            envelope["total_items"] = total
        envelope.setdefault("notes", []).append(f"result of {len(text)} chars cut to a preview")
    return envelope
