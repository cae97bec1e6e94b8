"""Tool schema versions and the change rules (DESIGN §2.6; seed §6.3: "on
every schema change decide by change type whether to expire caches and whether to rewrite the
affected messages in history; complex field refactors also get a migration note injected into
the system prompt so the model knows how the old and new interface differ").

A tool's version is the SHA-256 of its canonical ``parameters`` JSON. :class:`SchemaStore`
keeps the current version of every tool (and the history) in SQLite; when a tool is registered
with a different schema, :func:`classify` tells what changed (top-level fields):

=====================  ==================  ===========================  ==================
class                  expire cached       mark earlier calls invalid   migration note
                       results (ledger)
=====================  ==================  ===========================  ==================
optional_added         no                  no                           no
constraints_changed    yes                 those the new schema rejects no
required_added         yes                 calls without the field      yes
field_removed          yes                 calls that passed it         yes
field_renamed          yes                 calls that used the old name yes
type_changed           yes                 calls that passed the field  yes
=====================  ==================  ===========================  ==================

A rename is a removed field and an added field of the same type (same sub-schema first).
An optional field made required counts as ``required_added``. A change can hold several
classes; ``SchemaChange.kind`` is the most severe one. Earlier calls are found by
:func:`invalid_calls` (pure: LangChain messages in, ids of AIMessages out), which also rejects
any call whose arguments no longer validate against the new schema.
"""

from __future__ import annotations

import concurrent.futures
import copy
import hashlib
import json
import sqlite3
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import jsonschema

from tools.sqlite_thread import SqliteThread

#: File name of the schema store inside a data_dir.
SCHEMA_FILE = "tool_schemas.db"

#: Change classes, least to most severe.
KINDS = (
    "none",
    "optional_added",
    "constraints_changed",
    "required_added",
    "field_removed",
    "field_renamed",
    "type_changed",
)
_EXPIRE = {"constraints_changed", "required_added", "field_removed", "field_renamed", "type_changed"}
_NOTE = {"required_added", "field_removed", "field_renamed", "type_changed"}

_DOC_KEYS = ("description", "title", "examples", "$comment")


def canonical(schema: dict[str, Any] | None) -> str:
    """Canonical JSON of a schema (sorted keys, no whitespace)."""
    return json.dumps(schema or {}, sort_keys=True, separators=(",", ":"), default=str)


def schema_hash(schema: dict[str, Any] | None) -> str:
    """The version id of a parameters schema: SHA-256 hex of :func:`canonical`."""
    return hashlib.sha256(canonical(schema).encode()).hexdigest()


def _strip_docs(schema: Any) -> Any:
    if isinstance(schema, dict):
        return {k: _strip_docs(v) for k, v in schema.items() if k not in _DOC_KEYS}
    if isinstance(schema, list):
        return [_strip_docs(v) for v in schema]
    return schema


def _type_of(sub: Any) -> str:
    """A short type label of a property's schema: ``string``, ``integer|null``, ``$ref:#/..``..."""
    if not isinstance(sub, dict):
        return "any"
    t = sub.get("type")
    if isinstance(t, list):
        return "|".join(sorted(str(x) for x in t))
    if isinstance(t, str):
        return t
    if "$ref" in sub:
        return f"$ref:{sub['$ref']}"
    for key in ("anyOf", "oneOf"):
        if isinstance(sub.get(key), list):
            return "|".join(sorted(_type_of(s) for s in sub[key]))
    if "enum" in sub:
        return "enum"
    if "const" in sub:
        return "const"
    return "any"


@dataclass
class SchemaChange:
    """What changed between two versions of a tool's parameters schema, and the rule's actions.

    kinds           every class present (see module table); ``kind`` = the most severe.
    added_optional / added_required / removed: field names; renamed: ``[(old, new)]``;
    type_changed    ``[(field, old_type, new_type)]``; made_required: optional → required.
    expire_cache    drop the tool's recorded results (idempotency ledger).
    mark_history    earlier calls of the tool may be invalid: see :meth:`invalid_calls`.
    migration_note  text for the system prompt, or None.
    """

    tool: str
    old: dict[str, Any]
    new: dict[str, Any]
    old_version: str
    new_version: str
    kinds: list[str] = field(default_factory=list)
    added_optional: list[str] = field(default_factory=list)
    added_required: list[str] = field(default_factory=list)
    made_required: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    renamed: list[tuple[str, str]] = field(default_factory=list)
    type_changed: list[tuple[str, str, str]] = field(default_factory=list)
    constraints_changed: list[str] = field(default_factory=list)

    @property
    def kind(self) -> str:
        return max(self.kinds, key=KINDS.index) if self.kinds else "none"

    @property
    def expire_cache(self) -> bool:
        return any(k in _EXPIRE for k in self.kinds)

    @property
    def mark_history(self) -> bool:
        return self.expire_cache

    @property
    def migration_note(self) -> str | None:
        if not any(k in _NOTE for k in self.kinds):
            return None
        props = self.new.get("properties", {})
        parts = [f"field '{old}' was renamed to '{new}'" for old, new in self.renamed]
        parts += [f"new required field '{name}' ({_type_of(props.get(name))})" for name in self.added_required]
        parts += [f"field '{name}' is now required" for name in self.made_required]
        parts += [f"field '{name}' was removed" for name in self.removed]
        parts += [f"field '{name}' is now {new_t} (was {old_t})" for name, old_t, new_t in self.type_changed]
        parts += [f"new optional field '{name}'" for name in self.added_optional]
        return (
            f"Tool '{self.tool}' changed its parameters (version {self.old_version[:8]} → "
            f"{self.new_version[:8]}): " + "; ".join(parts) + ". Earlier calls of "
            f"'{self.tool}' in this conversation used the old form: do not copy their arguments."
        )

    def invalid_calls(self, messages: Sequence[Any]) -> list[str]:
        """Ids of the AIMessages in ``messages`` whose calls of this tool are no longer valid."""
        return invalid_calls(messages, self)


def classify(old: dict[str, Any] | None, new: dict[str, Any] | None, *, tool: str = "") -> SchemaChange:
    """Compare two parameters schemas (top-level fields) and classify the change."""
    old = copy.deepcopy(old or {})
    new = copy.deepcopy(new or {})
    change = SchemaChange(tool=tool, old=old, new=new, old_version=schema_hash(old), new_version=schema_hash(new))
    if change.old_version == change.new_version:
        return change
    op: dict[str, Any] = old.get("properties") or {}
    np: dict[str, Any] = new.get("properties") or {}
    oreq, nreq = set(old.get("required") or []), set(new.get("required") or [])
    removed = [n for n in op if n not in np]
    added = [n for n in np if n not in op]
    # Renames: a removed and an added field of the same shape (exact sub-schema first, then type).
    for exact in (True, False):
        for r in list(removed):
            for a in added:
                same = (_strip_docs(op[r]) == _strip_docs(np[a])) if exact else (_type_of(op[r]) == _type_of(np[a]))
                if same:
                    change.renamed.append((r, a))
                    removed.remove(r)
                    added.remove(a)
                    break
    change.removed = removed
    change.added_required = [a for a in added if a in nreq]
    change.added_optional = [a for a in added if a not in nreq]
    for name, old_prop in op.items():
        if name not in np:
            continue
        if _type_of(old_prop) != _type_of(np[name]):
            change.type_changed.append((name, _type_of(old_prop), _type_of(np[name])))
        elif _strip_docs(old_prop) != _strip_docs(np[name]):
            change.constraints_changed.append(name)
        if name in nreq and name not in oreq:
            change.made_required.append(name)
    rest_old = {k: v for k, v in _strip_docs(old).items() if k not in ("properties", "required")}
    rest_new = {k: v for k, v in _strip_docs(new).items() if k not in ("properties", "required")}
    if rest_old != rest_new:  # additionalProperties, type, combinators...
        change.constraints_changed.append("(schema)")
    kinds = []
    if change.added_optional:
        kinds.append("optional_added")
    if change.constraints_changed:
        kinds.append("constraints_changed")
    if change.added_required or change.made_required:
        kinds.append("required_added")
    if change.removed:
        kinds.append("field_removed")
    if change.renamed:
        kinds.append("field_renamed")
    if change.type_changed:
        kinds.append("type_changed")
    change.kinds = kinds  # empty: only descriptions changed
    return change


def _tool_calls(message: Any) -> list[dict[str, Any]]:
    if isinstance(message, dict):
        if message.get("type") not in ("ai", "AIMessage", "assistant") and message.get("role") != "assistant":
            return []
        return list(message.get("tool_calls") or [])
    if getattr(message, "type", None) != "ai":
        return []
    return list(getattr(message, "tool_calls", None) or [])


def _message_id(message: Any) -> str | None:
    return message.get("id") if isinstance(message, dict) else getattr(message, "id", None)


def invalid_calls(messages: Iterable[Any], change: SchemaChange) -> list[str]:
    """Ids of AIMessages whose calls of ``change.tool`` are invalid under the new schema: they
    lack a new required field, pass a removed or renamed field, pass a field whose type changed,
    or otherwise fail validation against ``change.new``. Pure; messages are not modified.
    Accepts LangChain messages or their dict form; AIMessages without an id are skipped."""
    if not change.kinds or change.kind == "optional_added":
        return []
    validator = None
    try:
        validator = jsonschema.validators.validator_for(change.new)(change.new)
    except Exception:  # noqa: BLE001 - an invalid new schema: fall back to the field rules
        validator = None
    gone = set(change.removed) | {old for old, _ in change.renamed} | {n for n, _, _ in change.type_changed}
    needed = set(change.added_required) | set(change.made_required)
    ids: list[str] = []
    for message in messages:
        mid = _message_id(message)
        if mid is None:
            continue
        for call in _tool_calls(message):
            if call.get("name") != change.tool:
                continue
            args = call.get("args") or {}
            if isinstance(args, str):
                try:
                    args = json.loads(args)
                except json.JSONDecodeError:
                    args = {}
            bad = bool(gone & set(args)) or bool(needed - set(args))
            if not bad and validator is not None and isinstance(args, dict):
                bad = next(validator.iter_errors(args), None) is not None
            if bad:
                ids.append(mid)
                break
    return ids


def parameters_summary(schema: dict[str, Any] | None) -> str:
    """The top-level fields of a parameters schema in words: ``channel (string, required), text
    (string)``; "(no fields)" when it has none."""
    props: dict[str, Any] = (schema or {}).get("properties") or {}
    required = set((schema or {}).get("required") or [])
    if not props:
        return "(no fields)"
    return ", ".join(f"{n} ({_type_of(sub)}{', required' if n in required else ''})" for n, sub in props.items())


def stale_arguments(change: SchemaChange, args: Any) -> str | None:
    """Why ``args`` are a call of ``change.tool`` in the shape it had before ``change``: they pass a
    field the change renamed or removed, or a value of the field's old type where the type
    changed. One message naming each such field, what it is now, and the tool's current fields;
    None when the call is not in the old shape (a call that only lacks a new required field is
    not: that value may be the user's to give). Pure."""
    if not isinstance(args, dict) or not change.kinds:
        return None
    problems: list[str] = []
    for old, new in change.renamed:
        if old in args and new not in args:
            problems.append(f"field '{old}' was renamed to '{new}'")
    problems.extend(f"field '{name}' was removed" for name in change.removed if name in args)
    props = change.new.get("properties") or {}
    for name, old_t, new_t in change.type_changed:
        if name not in args or not isinstance(props.get(name), dict):
            continue
        try:
            ok = jsonschema.validators.validator_for(props[name])(props[name]).is_valid(args[name])
        except Exception:  # noqa: BLE001 - an unusable sub-schema: the registry's validation reports it
            ok = True
        if not ok:
            problems.append(
                f"field '{name}' is now {new_t} (was {old_t}; got {json.dumps(args[name], default=str)[:60]})"
            )
    if not problems:
        return None
    return (
        f"'{change.tool}' changed its parameters since this conversation last used it, and this call is in "
        f"its old shape: {'; '.join(problems)}. Its fields now: {parameters_summary(change.new)}. "
        "Call it again in this shape."
    )


_STORE_SCHEMA = """
CREATE TABLE IF NOT EXISTS tool_schemas (
    tool       TEXT PRIMARY KEY,
    version    INTEGER NOT NULL,
    hash       TEXT NOT NULL,
    parameters TEXT NOT NULL,
    updated    REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS tool_schema_history (
    tool       TEXT NOT NULL,
    version    INTEGER NOT NULL,
    hash       TEXT NOT NULL,
    parameters TEXT NOT NULL,
    kind       TEXT,
    note       TEXT,
    created    REAL NOT NULL,
    PRIMARY KEY (tool, version)
);
"""


class SchemaStore:
    """Current schema version per tool, persisted in SQLite (``data_dir / SCHEMA_FILE``).

    ``load()`` (blocking, call from a thread) reads every tool's last schema into :attr:`known`;
    ``record_nowait(tool, parameters, change)`` queues the new version on the store's own thread
    (safe to call from the event loop); ``await flush()`` waits for queued writes.
    ``path=None``: in memory.
    """

    def __init__(self, path: Path | None = None) -> None:
        self.path = Path(path) if path is not None else None
        self._db = SqliteThread(self.path, _STORE_SCHEMA, "hermes-schemas")
        self.known: dict[str, dict[str, Any]] = {}
        self._last: concurrent.futures.Future[None] | None = None

    @classmethod
    def in_data_dir(cls, data_dir: Path) -> SchemaStore:
        return cls(Path(data_dir) / SCHEMA_FILE)

    def load(self) -> dict[str, dict[str, Any]]:
        rows = self._db.submit(lambda con: con.execute("SELECT tool, parameters FROM tool_schemas").fetchall()).result()
        self.known = {tool: json.loads(params) for tool, params in rows}
        return self.known

    def record_nowait(
        self, tool: str, parameters: dict[str, Any], change: SchemaChange | None = None
    ) -> concurrent.futures.Future[None]:
        self.known[tool] = copy.deepcopy(parameters)
        self._last = self._db.submit(
            _record,
            tool,
            canonical(parameters),
            schema_hash(parameters),
            change.kind if change else None,
            change.migration_note if change else None,
        )
        return self._last

    async def flush(self) -> None:
        await self._db.call(lambda con: None)

    async def versions(self, tool: str) -> list[tuple[int, str, str | None]]:
        """``[(version, hash, kind)]`` of ``tool``, oldest first."""
        return await self._db.call(
            lambda con: con.execute(
                "SELECT version, hash, kind FROM tool_schema_history WHERE tool = ? ORDER BY version", (tool,)
            ).fetchall()
        )

    def close(self) -> None:
        self._db.close()


def _record(con: sqlite3.Connection, tool: str, params: str, digest: str, kind: str | None, note: str | None) -> None:
    row = con.execute("SELECT version, hash FROM tool_schemas WHERE tool = ?", (tool,)).fetchone()
    if row is not None and row[1] == digest:
        return
    version = (row[0] + 1) if row else 1
    now = time.time()
    con.execute(
        "INSERT OR REPLACE INTO tool_schemas (tool, version, hash, parameters, updated) VALUES (?, ?, ?, ?, ?)",
        (tool, version, digest, params, now),
    )
    con.execute(
        "INSERT OR REPLACE INTO tool_schema_history (tool, version, hash, parameters, kind, note, created) "
        "VALUES (?, ?, ?, ?, ?, ?, ?)",
        (tool, version, digest, params, kind, note, now),
    )


__all__ = [
    "KINDS",
    "SCHEMA_FILE",
    "SchemaChange",
    "SchemaStore",
    "classify",
    "invalid_calls",
    "parameters_summary",
    "schema_hash",
    "stale_arguments",
]
