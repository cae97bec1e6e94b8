"""Sensitive data in side effects (DESIGN §2.8): which values of a tool result are sensitive
(the user's ``sensitive_data`` marks, or a tool whose every result is sensitive) and whether a
side-effect call's content carries one — then it may go only to a destination the request names
(``tools.destinations.destination_refusal``). Values are also found decoded (NFKC, URL escapes,
base64) and with separators squashed out. Pure: no I/O.
"""

from __future__ import annotations

import base64
import json
import re
import unicodedata
import urllib.parse
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from tools.name_matching import occurs_whole
from tools.spec import ToolSpec

#: Shortest string value of a sensitive result matched in a call's content (shorter values —
#: "US", "ok" — would match everywhere).
MIN_VALUE_CHARS = 3
#: Numbers are matched from this many characters on (ids, phone numbers), not counts.
MIN_NUMBER_CHARS = 5
#: Bound on the values collected from one result.
MAX_VALUES = 20_000

_WORD_RE = re.compile(r"\w+")


def _marks(entries: Iterable[str]) -> list[tuple[str | None, str | None, str]]:
    """``"table"`` → (table, None); ``"table.column"`` → (table, column); ``"*.column"`` →
    (None, column); each with its text. Lower-cased."""
    out = []
    for entry in entries:
        text = str(entry).strip()
        if not text:
            continue
        table, _, column = text.casefold().partition(".")
        out.append((None if table in ("", "*") else table, column or None, text))
    return out


def _field_names(payload: Any, out: set[str], depth: int = 0) -> None:
    if depth > 20:
        return
    if isinstance(payload, dict):
        for key, value in payload.items():
            out.add(str(key).casefold())
            if key == "columns" and isinstance(value, list):
                out.update(str(c).casefold() for c in value if isinstance(c, str))
            _field_names(value, out, depth + 1)
    elif isinstance(payload, list):
        for item in payload[:1000]:
            _field_names(item, out, depth + 1)


def _cells(payload: Any, column: str | None, out: list[Any], depth: int = 0) -> None:
    """Values of ``column`` (every cell when None) of the tables in ``payload``: a
    ``{"columns": [...], "rows": [[...]]}`` table, a list of records, or a plain value where
    no table is recognised and ``column`` is None."""
    if depth > 20 or len(out) >= MAX_VALUES:
        return
    if isinstance(payload, dict):
        cols, rows = payload.get("columns"), payload.get("rows")
        if isinstance(cols, list) and isinstance(rows, list):
            index = [i for i, c in enumerate(cols) if column is None or str(c).casefold() == column]
            for row in rows:
                if isinstance(row, (list, tuple)):
                    out.extend(row[i] for i in index if i < len(row))
                elif isinstance(row, dict):
                    out.extend(v for k, v in row.items() if column is None or str(k).casefold() == column)
        for key, value in payload.items():
            if key in ("columns", "rows"):
                continue
            if column is not None and str(key).casefold() == column and not isinstance(value, (dict, list)):
                out.append(value)
            else:
                _cells(value, column, out, depth + 1)
    elif isinstance(payload, list):
        for item in payload:
            _cells(item, column, out, depth + 1)
    elif column is None:
        out.append(payload)


def _matchable(values: Iterable[Any]) -> set[str]:
    keep: set[str] = set()
    for v in values:
        if isinstance(v, bool) or v is None or isinstance(v, (dict, list)):
            continue
        text = str(v).strip().casefold()
        if isinstance(v, (int, float)):
            if len(text) >= MIN_NUMBER_CHARS:
                keep.add(text)
        elif len(text) >= MIN_VALUE_CHARS:
            keep.add(text)
    return keep


def sensitive_values(spec: ToolSpec | None, args: Any, payload: Any, marks: Sequence[str]) -> dict[str, set[str]]:
    """The sensitive values of one successful result: ``{mark: values}`` (empty: nothing
    sensitive). A tool with ``sensitive_results`` marks all of its values; a configured mark
    (``table``, ``table.column``, ``*.column``) matches when the call's arguments name the
    table (as a word) and the column is named there or is a field of the result, and then
    takes the column's values (every value for a table mark, or when the column was renamed
    away)."""
    found: dict[str, set[str]] = {}
    if spec is not None and spec.sensitive_results:
        cells: list[Any] = []
        _cells(payload, None, cells)
        found[f"results of {spec.name}"] = _matchable(cells)
    parsed = _marks(marks)
    if not parsed:
        return found
    arg_words = set(_WORD_RE.findall(json.dumps(args, ensure_ascii=False, default=str).casefold()))
    fields: set[str] = set()
    _field_names(payload, fields)
    for table, column, text in parsed:
        if table is not None and table not in arg_words:
            continue
        if column is not None and column not in arg_words and column not in fields:
            continue
        cells = []
        _cells(payload, column if column in fields else None, cells)
        values = _matchable(cells)
        if values:
            found[text] = values
    return found


def _content_text(spec: ToolSpec, args: Mapping[str, Any]) -> str:
    skip = set(spec.destination_params())
    content = {k: v for k, v in args.items() if k not in skip}
    return json.dumps(content, ensure_ascii=False, default=str).casefold()


def sensitive_in_content(spec: ToolSpec, args: Mapping[str, Any], marked: Mapping[str, set[str]]) -> list[str]:
    """The marks (keys of ``marked``, as :func:`sensitive_values` gives them, merged over the
    goal's results) whose values occur in the call's content (every argument but the
    destinations)."""
    if not marked:
        return []
    text = _content_text(spec, args)
    skip = set(spec.destination_params())
    given = " ".join(str(v) for k, v in args.items() if isinstance(v, str) and k not in skip)
    raw = given.casefold()
    plain = _decoded(given)  # before casefolding: base64 is case-sensitive
    squashed = _squash(plain)
    hits = []
    for mark, values in marked.items():
        if any(
            occurs_whole(v, text)
            or occurs_whole(v, raw)
            or occurs_whole(_decoded(v), plain)
            or (len(_squash(v)) >= MIN_SQUASHED_CHARS and _squash(v) in squashed)
            for v in values
        ):
            hits.append(mark)
    return hits


#: A sensitive value is also looked for with everything but its letters and digits removed
#: (``a-l-i-c-e @ example.com``) from this many letters and digits on (shorter ones would
#: match inside ordinary words).
MIN_SQUASHED_CHARS = 8
_BASE64_RE = re.compile(r"[A-Za-z0-9+/_-]{12,}={0,2}")


def _decoded(text: str) -> str:
    """``text`` as a reader would see it: NFKC (full-width letters), invisible format
    characters (zero-width spaces) removed, URL escapes decoded, casefolded; base64 runs are
    added decoded."""
    plain = "".join(c for c in unicodedata.normalize("NFKC", text) if unicodedata.category(c) != "Cf")
    plain = urllib.parse.unquote(plain).casefold()
    extra = []
    for run in _BASE64_RE.findall(text):
        body = run.rstrip("=")
        for alphabet in (base64.b64decode, base64.urlsafe_b64decode):
            try:
                extra.append(alphabet(body + "=" * (-len(body) % 4)).decode("utf-8").casefold())
                break
            except (ValueError, UnicodeDecodeError):
                continue
    return " ".join([plain, *extra])


def _squash(text: str) -> str:
    return "".join(c for c in _decoded(text) if c.isalnum())
