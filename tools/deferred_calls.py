"""Deferred calls bound to the request that created them (DESIGN §2.8): a tool that keeps a call
to run later (``ToolSpec.deferred_call_arg``: a reminder's action) has that call recorded with
the user's request in ``data_dir/request_bindings.db`` (:func:`record_binding`); when it runs it
is checked again against the recorded request and the rules of that moment
(:func:`deferred_refusal`).
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import sqlite3
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from base.sqlite_files import open_sqlite
from tools.destinations import Rules, destination_refusal
from tools.spec import ToolSpec

#: The binding store of deferred calls, in the data directory.
BINDINGS_FILE = "request_bindings.db"


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
    return open_sqlite(
        Path(data_dir) / BINDINGS_FILE,
        schema="CREATE TABLE IF NOT EXISTS bindings (key TEXT PRIMARY KEY, request TEXT NOT NULL, "
        "sensitive TEXT NOT NULL, created_at TEXT NOT NULL)",
        autocommit=False,
    )


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
