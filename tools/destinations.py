"""Side effects bound to the user's request (DESIGN §2.8): where an effect goes, and what
sensitive data may go there.

**Destinations.** The arguments that decide where a side effect goes — a channel, a recipient,
a path, a URL: :meth:`tools.spec.ToolSpec.destination_params` — must come from the user, never
from a tool result alone. A value passes when it is

* named in the user's request (:func:`named_in`: case, ``#``/``@`` and separators ignored,
  ``#sales-team`` = ``sales team`` = ``Sales_Team``; a run of words may be written joined,
  ``projectgroup``); the request is the user's messages of the conversation
  (:func:`user_words`) and the user's answers to questions;
* the default the tool's own schema gives the argument (the call leaves it out, or sets it
  to that default): the tool's configuration, not the model's choice;
* allowed by the user's configuration (:class:`Rules`): ``allowed`` patterns, always allowed
  (``fnmatch``, case-insensitive: ``sales-team``, ``*@example.com``, ``/srv/reports/*``), and
  ``aliases`` ``{phrase: destination}``, allowed when the request names the phrase
  (``{"project group": "sales-team"}``: "post it to the project group" may post to
  ``sales-team``).

**Sensitive content.** Data the user marks sensitive (:class:`Rules` ``sensitive``:
``"table"``, ``"table.column"`` or ``"*.column"``; or a tool whose every result is
sensitive, ``ToolSpec.sensitive_results``) gives the results that touched it a marker
(:func:`sensitive_values`: a mark matches when the call's arguments name the table and the
column is named there or is a field of the result). A side-effect call whose content (its
arguments other than the destinations) contains a value taken from such a result goes only
to a destination the request names or an alias of a phrase it names — not a configured or
default one.

**Deferred calls.** A tool that keeps a call to run later (``ToolSpec.deferred_call_arg``: a
reminder's action) is checked at creation against the request that creates it, and that
request is recorded with the deferred call in ``data_dir/request_bindings.db``
(:func:`record_binding`); when the call runs (a reminder fires) it is checked again against
the recorded request and the configuration of that moment (:func:`binding_for`). A deferred
call nobody recorded (a reminder from before this check, or stored by other means) has no
request: only configured destinations pass.

Limits (stated, not hidden): a word the user wrote anywhere in the request names a
destination (``general`` in "in general, post it to sales"); lineage is by name, so a view
that exposes a sensitive column under another name must be marked itself.

Knows nothing of the graph: callers pass the request texts, the rules and the prior results.
"""

from __future__ import annotations

import base64
import datetime as dt
import fnmatch
import hashlib
import json
import re
import sqlite3
import unicodedata
import urllib.parse
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tools.spec import ToolSpec, is_destination_name

#: The binding store of deferred calls, in the data directory.
BINDINGS_FILE = "request_bindings.db"
#: Shortest string value of a sensitive result matched in a call's content (shorter values —
#: "US", "ok" — would match everywhere).
MIN_VALUE_CHARS = 3
#: Numbers are matched from this many characters on (ids, phone numbers), not counts.
MIN_NUMBER_CHARS = 5
#: Bound on the values collected from one result.
MAX_VALUES = 20_000
#: Longest run of request words a joined destination (``projectgroup``) may span.
MAX_JOINED_WORDS = 4

_TOKEN_RE = re.compile(r"[^\W_]+")
_WORD_RE = re.compile(r"\w+")


@dataclass(frozen=True)
class Rules:
    """The user's configuration of destinations and sensitive data (``Context`` fields
    ``allowed_destinations``, ``destination_aliases``, ``sensitive_data``)."""

    allowed: tuple[str, ...] = ()
    aliases: Mapping[str, str] = field(default_factory=dict)
    sensitive: tuple[str, ...] = ()


# -- matching ---------------------------------------------------------------------------------


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


def _occurs(needle: str, hay: str, glued: str | None = None) -> bool:
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
        if _occurs(wanted, hay, glued):
            return True
        words, glue = hay.split(), [g == _GLUE for g in glued if g in (" ", _GLUE)]
        for n in range(2, MAX_JOINED_WORDS + 1):
            for i in range(len(words) - n + 1):
                cut = (i > 0 and glue[i - 1]) or (i + n < len(words) and glue[i + n - 1])
                if "".join(words[i : i + n]) == joined and not cut:
                    return True
    return False


def _same(value: str, other: str) -> bool:
    return _norm(value) == _norm(other) and bool(_norm(value))


def _pattern_allows(value: str, pattern: str) -> bool:
    strip = "#@ "
    v, p = str(value).strip().lstrip(strip).casefold(), str(pattern).strip().lstrip(strip).casefold()
    if not p:
        return False
    if any(c in p for c in "*?["):
        return fnmatch.fnmatchcase(v, p)
    return v == p or _same(v, p)


def _values_of(value: Any) -> list[str]:
    """A destination argument's values: a string, each item of a list, else its text."""
    if value is None:
        return []
    if isinstance(value, (list, tuple)):
        return [str(v) for v in value if v is not None]
    return [str(value)]


def destination_values(spec: ToolSpec, args: Mapping[str, Any]) -> list[tuple[str, Any]]:
    """``(argument, value)`` of every destination in the call ``args``: the top-level
    :meth:`~tools.spec.ToolSpec.destination_params` the call gives (one it leaves out is the
    tool's own default: its configuration, not the model's choice), and, for a tool that does
    not declare ``destination_args``, every key inside an object or list argument whose name
    says destination (``{"message": {"channel": ...}}`` → ``message.channel``)."""
    top = spec.destination_params()
    found: list[tuple[str, Any]] = [(name, args[name]) for name in top if name in args]
    if spec.destination_args is not None or not spec.side_effect:
        return found

    def walk(value: Any, where: str, depth: int) -> None:
        if depth > 20:
            return
        if isinstance(value, Mapping):
            for key, inner in value.items():
                path = f"{where}.{key}"
                if is_destination_name(str(key)) and not isinstance(inner, Mapping):
                    found.append((path, inner))
                else:
                    walk(inner, path, depth + 1)
        elif isinstance(value, (list, tuple)):
            for item in value[:1000]:
                walk(item, where, depth + 1)

    for name, value in args.items():
        if name not in top and isinstance(value, (Mapping, list, tuple)):
            walk(value, str(name), 0)
    return found


def _short(value: str, limit: int = 80) -> str:
    return value if len(value) <= limit else value[: limit - 1] + "…"


def _asked(texts: Sequence[str]) -> str:
    shown = " / ".join(_short(" ".join(t.split()), 200) for t in texts if t.strip())
    return repr(shown) if shown else "nothing (no request is recorded)"


# -- the check --------------------------------------------------------------------------------


def destination_refusal(
    spec: ToolSpec,
    args: Mapping[str, Any],
    *,
    request: Sequence[str],
    rules: Rules,
    sensitive: Sequence[str] = (),
    request_label: str = "your request",
) -> str | None:
    """Why the side-effect call ``spec.name(args)`` must not run, or None when it may.

    ``request``: the user's words the destinations may come from; ``sensitive``: the marks of
    sensitive data whose values the call's content carries (:func:`sensitive_in_content`),
    which restrict it to destinations the request names. The reason names the argument, the
    value, what the user asked and how to allow it."""
    if not spec.side_effect:
        return None
    props = spec.parameters.get("properties") or {} if isinstance(spec.parameters, dict) else {}
    for name, given in destination_values(spec, args):
        default = (props.get(name) or {}).get("default") if isinstance(props.get(name), dict) else None
        for value in _values_of(given):
            by_request = named_in(value, request)
            by_alias = any(named_in(phrase, request) and _same(value, dest) for phrase, dest in rules.aliases.items())
            if sensitive:
                if by_request or by_alias:
                    continue
                return (
                    f"{spec.name} not run: its content includes values from data marked sensitive "
                    f"({', '.join(sensitive)}), which may go only to a destination the user named, and "
                    f"{name}={_short(value)!r} is not named in {request_label} (the user asked: "
                    f"{_asked(request)}). Send it only where the user asked, or leave the sensitive "
                    "values out."
                )
            if by_request or by_alias or (default is not None and _same(value, str(default))):
                continue
            if any(_pattern_allows(value, p) for p in rules.allowed):
                continue
            return (
                f"{spec.name} not run: {name}={_short(value)!r} is not a destination the user chose — it is "
                f"not named in {request_label} (the user asked: {_asked(request)}) nor in "
                "allowed_destinations (HERMES_ALLOWED_DESTINATIONS); a destination must come from the user, "
                "never from a tool result. Use the destination the request names, or ask the user."
            )
    return None


# -- sensitive data ---------------------------------------------------------------------------


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
            _occurs(v, text)
            or _occurs(v, raw)
            or _occurs(_decoded(v), plain)
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


# -- deferred calls ---------------------------------------------------------------------------


def deferred_key(deferred: Any) -> str | None:
    """The key of a deferred call (a reminder's action) in the binding store: SHA-256 of the
    canonical ``{"kind": "tool", "tool", "args"}`` (missing args = ``{}``) or ``{"kind": "task",
    "task"}`` (stripped); None for anything else (a notification has nothing to bind)."""
    if isinstance(deferred, str):
        try:
            deferred = json.loads(deferred)
        except (ValueError, RecursionError):
            return None
    if not isinstance(deferred, dict):
        return None
    kind = deferred.get("kind", "task")
    if kind == "tool" and isinstance(deferred.get("tool"), str):
        body: dict[str, Any] = {"kind": "tool", "tool": deferred["tool"], "args": deferred.get("args") or {}}
    elif kind == "task" and isinstance(deferred.get("task"), str) and deferred["task"].strip():
        body = {"kind": "task", "task": deferred["task"].strip()}
    else:
        return None
    try:
        text = json.dumps(body, sort_keys=True, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
    except (TypeError, ValueError, RecursionError):
        return None
    return hashlib.sha256(text.encode("utf-8", "replace")).hexdigest()


def _open(data_dir: Path | str) -> sqlite3.Connection:
    con = sqlite3.connect(Path(data_dir) / BINDINGS_FILE, timeout=30.0)
    con.execute("PRAGMA busy_timeout=30000")
    con.execute(
        "CREATE TABLE IF NOT EXISTS bindings (key TEXT PRIMARY KEY, request TEXT NOT NULL, "
        "sensitive TEXT NOT NULL, created_at TEXT NOT NULL)"
    )
    return con


def record_binding(data_dir: Path | str, deferred: Any, request: Sequence[str], sensitive: Sequence[str] = ()) -> bool:
    """Record that the user's ``request`` asked for ``deferred`` (a reminder's action), with the
    sensitive marks its content carries; False when it has no key (:func:`deferred_key`).
    Requests accumulate: the same action asked for twice keeps both requests' words."""
    key = deferred_key(deferred)
    if key is None:
        return False
    con = _open(data_dir)
    try:
        with con:
            row = con.execute("SELECT request, sensitive FROM bindings WHERE key = ?", (key,)).fetchone()
            texts = list(dict.fromkeys([*(json.loads(row[0]) if row else []), *(t for t in request if t)]))
            marks = list(dict.fromkeys([*(json.loads(row[1]) if row else []), *sensitive]))
            con.execute(
                "INSERT OR REPLACE INTO bindings (key, request, sensitive, created_at) VALUES (?, ?, ?, ?)",
                (key, json.dumps(texts), json.dumps(marks), dt.datetime.now(dt.UTC).isoformat(timespec="seconds")),
            )
    finally:
        con.close()
    return True


def binding_for(data_dir: Path | str, deferred: Any) -> dict[str, Any] | None:
    """``{"request": [texts], "sensitive": [marks], "created_at"}`` recorded for ``deferred``,
    or None (no store, no key, or never recorded)."""
    key = deferred_key(deferred)
    if key is None or not (Path(data_dir) / BINDINGS_FILE).is_file():
        return None
    con = _open(data_dir)
    try:
        row = con.execute("SELECT request, sensitive, created_at FROM bindings WHERE key = ?", (key,)).fetchone()
    finally:
        con.close()
    if row is None:
        return None
    return {"request": json.loads(row[0]), "sensitive": json.loads(row[1]), "created_at": row[2]}


def deferred_refusal(
    spec: ToolSpec | None, deferred: Mapping[str, Any], *, data_dir: Path | str, rules: Rules, label: str
) -> str | None:
    """The check of a deferred tool call when it runs: its destinations against the request
    recorded with it (:func:`binding_for`) and today's ``rules``; None when it may run.
    ``label`` names the deferred call in the reason ("reminder 3")."""
    if spec is None or deferred.get("kind") != "tool":
        return None
    binding = binding_for(data_dir, deferred) or {"request": [], "sensitive": []}
    return destination_refusal(
        spec,
        deferred.get("args") or {},
        request=binding["request"],
        rules=rules,
        sensitive=binding["sensitive"],
        request_label=f"the request that created {label}",
    )


# -- the guard of one round of calls (the dispatch hook) ---------------------------------------


def goal_results(messages: Sequence[Any], goal_id: str) -> list[tuple[str, Any, str]]:
    """``(tool name, args, tool_call_id)`` of every successful tool result after the human
    message ``goal_id`` (the whole list when it is not found): what this goal has read."""
    from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

    start = next((i for i, m in enumerate(messages) if isinstance(m, HumanMessage) and m.id == goal_id), 0)
    calls: dict[str, tuple[str, Any]] = {}
    out = []
    for m in messages[start:]:
        if isinstance(m, AIMessage):
            calls.update({str(c["id"]): (c["name"], c["args"]) for c in m.tool_calls if c.get("id")})
        elif isinstance(m, ToolMessage) and m.status != "error" and m.tool_call_id in calls:
            name, args = calls[m.tool_call_id]
            out.append((name, args, m.tool_call_id))
    return out


#: How many of the conversation's latest user messages count as the request's words.
MAX_USER_MESSAGES = 20


def user_words(messages: Sequence[Any], goal: str = "") -> list[str]:
    """The user's words in this conversation (its active branch): ``goal`` and the text of the
    latest :data:`MAX_USER_MESSAGES` human messages — a destination named in an earlier turn
    ("post the count to #sales-team" … "October") is still the user's."""
    from langchain_core.messages import HumanMessage

    texts = [m.text if isinstance(m.content, list) else str(m.content) for m in messages if isinstance(m, HumanMessage)]
    return list(dict.fromkeys([goal, *texts[-MAX_USER_MESSAGES:]]))


def _read(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8", errors="replace"))
    except (OSError, ValueError, RecursionError):
        return None


def _deferred_value(value: Any) -> dict[str, Any] | None:
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except (ValueError, RecursionError):
            return None
    return value if isinstance(value, dict) else None


async def guard_calls(
    calls: Sequence[Mapping[str, Any]],
    *,
    spec_of: Any,
    request: Sequence[str],
    answers: Mapping[str, Sequence[str]],
    prior: Sequence[tuple[str, Any, Path]],
    rules: Rules,
    data_dir: Path | str,
    fired: str = "",
) -> dict[str, str]:
    """The calls of one round that must not run: ``{tool_call_id: reason}``.

    ``calls``: ``{"id", "name", "args"}``; ``spec_of(name)`` → :class:`ToolSpec` or None;
    ``request``: the user's words of this goal; ``answers``: per call id, the user's answers
    that filled its arguments (they are the user's words too); ``prior``: ``(tool name, args,
    payload path)`` of the goal's successful results (sensitive data, :func:`sensitive_values`);
    ``fired``: the firing that started this run (``"reminder:3:2026-12"``), "" for a user's
    turn — a fired run never runs a tool that ``schedules``.

    A deferred call in an allowed call (``ToolSpec.deferred_call_arg``) is checked the same way
    and, when allowed, recorded with the request (:func:`record_binding`) before the call runs.
    File work runs in threads (safe on the event loop)."""
    import asyncio

    refused: dict[str, str] = {}
    marked: dict[str, set[str]] | None = None

    async def sensitive_data() -> dict[str, set[str]]:
        nonlocal marked
        if marked is None:
            marked = {}
            for name, args, path in prior:
                spec = spec_of(name)
                if not rules.sensitive and not (spec is not None and spec.sensitive_results):
                    continue
                payload = await asyncio.to_thread(_read, Path(path))
                for mark, values in sensitive_values(spec, args, payload, rules.sensitive).items():
                    marked.setdefault(mark, set()).update(values)
        return marked

    for call in calls:
        spec = spec_of(call["name"])
        if spec is None or not spec.side_effect or not isinstance(call.get("args"), dict):
            continue
        args = call["args"]
        if fired and spec.schedules:
            refused[call["id"]] = (
                f"{spec.name} not run: this run was started by the firing {fired}; a fired reminder delivers "
                "its notice and runs its action, it never schedules anything (the reminder already recurs)"
            )
            continue
        texts = [*request, *answers.get(call["id"], ())]
        data = await sensitive_data()
        reason = destination_refusal(
            spec, args, request=texts, rules=rules, sensitive=sensitive_in_content(spec, args, data)
        )
        deferred = _deferred_value(args.get(spec.deferred_call_arg)) if spec.deferred_call_arg else None
        later_sensitive: list[str] = []
        if reason is None and deferred is not None and deferred.get("kind") == "tool":
            later = spec_of(str(deferred.get("tool")))
            given = deferred.get("args")
            later_args: dict[str, Any] = given if isinstance(given, dict) else {}
            if later is not None:
                later_sensitive = sensitive_in_content(later, later_args, data)
                why = destination_refusal(later, later_args, request=texts, rules=rules, sensitive=later_sensitive)
                if why is not None:
                    reason = (
                        f"{spec.name} not run: its {spec.deferred_call_arg} would run {later.name} later, and {why}"
                    )
        if reason is not None:
            refused[call["id"]] = reason
        elif deferred is not None:
            await asyncio.to_thread(record_binding, data_dir, deferred, texts, later_sensitive)
    return refused


__all__ = [
    "BINDINGS_FILE",
    "Rules",
    "binding_for",
    "deferred_key",
    "deferred_refusal",
    "destination_refusal",
    "destination_values",
    "goal_results",
    "guard_calls",
    "named_in",
    "record_binding",
    "sensitive_in_content",
    "sensitive_values",
    "user_words",
]
