"""``schedule_reminder`` and ``list_reminders`` (seed §5.1 "remind me every month"), persisted in
``data_dir/reminders.db`` (SQLite, WAL, busy timeout) or, with ``HERMES_POSTGRES_URL``, in that
PostgreSQL database (:mod:`tools.builtin.reminder_store` chooses). Run inside the executor's
worker process.
Firing them is :mod:`tools.scheduler`'s job (``hermes reminders run``, ``hermes serve``, the
``reminders`` server graph); this module only stores and describes them.

Table ``reminders``::

    id INTEGER PK, text TEXT, day_of_month INTEGER 1-31, time TEXT 'HH:MM' (local time),
    recurrence TEXT 'monthly', created_at TEXT ISO-8601, next_run TEXT ISO-8601 local time,
    action TEXT JSON (NULL = run the text as a task), last_fired_period TEXT 'YYYY-MM' or NULL,
    last_fired_at TEXT ISO-8601 or NULL

**A fired reminder reminds**: every firing delivers the reminder's text to the user as a notice
(table ``deliveries``, shown by ``hermes reminders list`` and ``hermes reminders history``;
:mod:`tools.scheduler`). The reminder's own text is never run as a request (firing N times
creates no reminder). An *action*, which the user asked for, says what firing does besides,
without knowing any particular tool:

* ``{"kind": "notify"}`` — nothing besides the notice: the default (no action, a task action
  without a task, or a task that is the reminder's own text);
* ``{"kind": "task", "task": "<text run as a user request>", "thread_id": "<optional>"}`` — the
  agent runs the task as a turn on ``thread_id`` (default ``reminder-<id>``), bound to the
  request that created the reminder (its destinations come from that request) and unable to
  schedule anything;
* ``{"kind": "tool", "tool": "<tool name>", "args": {...}}`` — the tool is called through the
  tool registry with request id ``reminder:<id>:<period>`` (its idempotency ledger makes a
  replay of the same period a no-op). It is checked when it is scheduled, not a month later
  when it fires: the tool must be one the registry has registered in this data directory and
  ``args`` must fit its parameters. This module runs in the executor's worker, which has no
  registry; what the registry registered is in ``data_dir/tool_schemas.db``
  (:mod:`tools.schema_versions`: every tool's current parameters, written by the registry of
  every toolbox opened on the data directory), read here read-only. A data directory no
  registry has used yet (no such file: a bare ``data_dir`` in a test, a remote function server's
  own directory) has nothing to check against and the action is stored as given; a firing
  still reports an unknown tool or bad arguments as a failed firing. Where the action's effect
  goes (its destination arguments) must come from the request that creates it: that check
  runs in the agent, which has the request (``tools.destination_guard.guard_calls``, before this
  function runs), records the request with the action, and runs again when it fires.

Periods are months (``"2026-12"``). A day beyond a month's length runs on that month's last day
(``day_of_month=31`` runs on 30 November, 28 or 29 February): that is a stated adjustment
(``adjustment`` in the result), never an error. A day outside 1-31 or a time that is not
``HH:MM`` is an error and nothing is written. All clocks are injectable (``now``).

The function is called outside the tool's JSON Schema too (tests, the CLI, other code), so it
applies the schema's bounds itself: ``text`` at most :data:`MAX_TEXT_CHARS` chars,
``action.task`` at most :data:`MAX_TASK_CHARS`, ``action.args`` plain JSON (an object with
string keys and finite numbers, at most :data:`MAX_ARGS_DEPTH` levels deep and
:data:`MAX_ARGS_CHARS` chars as JSON text). Every pattern must match the whole value (a time
with a trailing newline is not a time).
"""

from __future__ import annotations

import datetime as dt
import json
import math
import re
import reprlib
import sqlite3
from pathlib import Path
from typing import Any

import jsonschema
import referencing.exceptions

from base.sqlite_files import open_sqlite
from tools.builtin.reminder_periods import adjustment_for, local_now, month_add, scheduled_at
from tools.builtin.reminder_store import open_schedule
from tools.schema_versions import SCHEMA_FILE

# Matched with ``fullmatch`` only: ``$`` also matches before a trailing newline.
TIME_RE = re.compile(r"([01]\d|2[0-3]):([0-5]\d)")
TOOL_NAME_RE = re.compile(r"[a-z][a-z0-9_]{2,63}")
THREAD_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:-]{0,99}")
RECURRENCES = ("monthly",)
ACTION_KINDS = ("notify", "task", "tool")
#: The action of a plain reminder: its notice only.
NOTIFY = {"kind": "notify"}
MAX_TEXT_CHARS = 500  # the tool schema's text maxLength (tools/builtin/catalog.py)
MAX_TASK_CHARS = 2000  # the tool schema's action.task maxLength
# The biggest real arguments (generate_report: 8 queries of up to 4000 chars of SQL) are about
# 35 000 chars; the depth bound keeps every later json.dumps/loads and schema check far from
# the recursion limit.
MAX_ARGS_CHARS = 64_000
MAX_ARGS_DEPTH = 32
MAX_ACTION_CHARS = 4 * (MAX_ARGS_CHARS + MAX_TASK_CHARS)  # an action given as JSON text (room for escapes)
# A registered schema jsonschema cannot use (not a valid schema, an unknown type, a $ref that
# resolves nowhere or only to itself): what validating against it raises.
_UNUSABLE_SCHEMA = (
    jsonschema.exceptions.SchemaError,
    jsonschema.exceptions.UnknownType,
    jsonschema.exceptions.UndefinedTypeCheck,
    referencing.exceptions.Unresolvable,
    RecursionError,
    re.error,
)
_COLUMNS = (
    "id",
    "text",
    "day_of_month",
    "time",
    "recurrence",
    "created_at",
    "next_run",
    "action",
    "last_fired_period",
    "last_fired_at",
)


# -- validation ---------------------------------------------------------------------------------


_REPR = reprlib.Repr()  # (keyword arguments only from Python 3.12)
_REPR.maxlevel, _REPR.maxstring, _REPR.maxother = 3, 60, 60
_REPR.maxlist = _REPR.maxdict = _REPR.maxtuple = _REPR.maxset = 4


def _short(value: Any) -> str:
    """A bounded ``repr`` for error messages: a megabyte or a 5000-deep value must not be echoed
    (nor make ``repr`` itself raise RecursionError)."""
    return _REPR.repr(value)


def plain_json_problem(value: Any, where: str = "args") -> str | None:
    """What keeps ``value`` from being plain JSON within the bounds of ``action.args``, or None.

    Plain JSON: dicts with ``str`` keys, lists, ``str``, ``int``, ``bool``, finite ``float``,
    None (no tuple, set, bytes, NaN or Infinity, which ``json.dumps`` would silently turn into
    something else or into non-standard JSON), at most :data:`MAX_ARGS_DEPTH` containers deep
    and at most :data:`MAX_ARGS_CHARS` chars as JSON text. The walk is iterative and stops as
    soon as a bound is passed, so no size or depth of input exhausts the stack or the clock."""
    budget = MAX_ARGS_CHARS  # counts down a lower bound of the JSON text's length
    stack: list[tuple[Any, tuple[str, ...]]] = [(value, ())]
    while stack:
        item, path = stack.pop()
        if len(path) > MAX_ARGS_DEPTH:
            return f"{where} nest deeper than {MAX_ARGS_DEPTH} levels"
        budget -= 1 + (len(item) if isinstance(item, (dict, list)) else 0)  # before a huge one is walked
        if budget < 0:
            return f"{where} are over {MAX_ARGS_CHARS} chars as JSON"
        if isinstance(item, dict):
            for key, sub in item.items():
                if not isinstance(key, str):
                    at = _short("/".join((where, *path)))
                    return f"{at} has a key that is not a string: {_short(key)} ({type(key).__name__})"
                budget -= len(key) + 3
                stack.append((sub, (*path, key)))
        elif isinstance(item, list):
            stack.extend((sub, (*path, str(i))) for i, sub in enumerate(item))
        elif isinstance(item, str):
            budget -= len(item) + 2
        elif isinstance(item, float):
            if not math.isfinite(item):
                return f"{_short('/'.join((where, *path)))} is {item!r}; JSON has no NaN or Infinity"
        elif item is not None and not isinstance(item, int):  # bool is an int
            return f"{_short('/'.join((where, *path)))} is a {type(item).__name__}, not a JSON value"
        if budget < 0:
            return f"{where} are over {MAX_ARGS_CHARS} chars as JSON"
    if len(json.dumps(value, ensure_ascii=False, allow_nan=False)) > MAX_ARGS_CHARS:
        return f"{where} are over {MAX_ARGS_CHARS} chars as JSON"
    return None


def _same_text(task: Any, text: Any) -> bool:
    """``task`` is ``text`` up to case and spacing (then running it would re-run the reminder)."""
    return isinstance(task, str) and " ".join(task.lower().split()) == " ".join(str(text).lower().split())


def normalize_action(action: Any, text: str) -> dict[str, Any]:
    """A checked action dict (see module doc); None → ``{"kind": "notify"}``, and so is a task
    action without a task or whose task is the reminder's own ``text`` (a reminder's text is
    never run as a request). ``action`` may be given as JSON text (at most
    :data:`MAX_ACTION_CHARS` chars). Raises ValueError naming what is wrong, whatever the value
    (never a TypeError or RecursionError)."""
    if action is None:
        return dict(NOTIFY)
    if isinstance(action, str):
        if len(action) > MAX_ACTION_CHARS:
            raise ValueError(f"action is {len(action)} chars of JSON; the limit is {MAX_ACTION_CHARS}")
        try:
            action = json.loads(action)
        except json.JSONDecodeError:
            raise ValueError('action must be an object like {"kind": "task", "task": "..."}') from None
        except RecursionError:
            raise ValueError(f"action is JSON nested too deep; args may nest {MAX_ARGS_DEPTH} levels") from None
    if not isinstance(action, dict):
        raise ValueError(f"action must be an object, got {type(action).__name__}")
    odd = [key for key in action if not isinstance(key, str)]
    if odd:
        raise ValueError(f"action keys must be strings, got {_short(odd[0])} ({type(odd[0]).__name__})")
    kind = action.get("kind", "task")
    if kind not in ACTION_KINDS:
        raise ValueError(f"action.kind must be one of {ACTION_KINDS}, got {_short(kind)}")
    if kind == "notify":
        unknown = sorted(set(action) - {"kind"})
        if unknown:
            raise ValueError(f"a notify action takes only kind; unknown: {unknown}")
        return dict(NOTIFY)
    if kind == "task":
        unknown = sorted(set(action) - {"kind", "task", "thread_id"})
        if unknown:
            raise ValueError(f"a task action takes kind, task, thread_id; unknown: {unknown}")
        task = action.get("task")
        if task is not None:
            if not isinstance(task, str):
                raise ValueError(f"action.task must be a string, got {type(task).__name__} {_short(task)}")
            if not task.strip():
                raise ValueError("action.task is empty; say what the agent should do when it fires")
            if len(task) > MAX_TASK_CHARS:
                raise ValueError(f"action.task is {len(task)} chars; the limit is {MAX_TASK_CHARS}")
        out: dict[str, Any] = {"kind": "task", "task": (task or "").strip()}
        thread = action.get("thread_id")
        if thread not in (None, ""):
            if not isinstance(thread, str) or not THREAD_RE.fullmatch(thread):
                raise ValueError(f"action.thread_id must match {THREAD_RE.pattern}, got {_short(thread)}")
            out["thread_id"] = thread
        if task is None or _same_text(task, text):
            return dict(NOTIFY)  # the reminder's own text is a reminder, not a request
        return out
    unknown = sorted(set(action) - {"kind", "tool", "args"})
    if unknown:
        raise ValueError(f"a tool action takes kind, tool, args; unknown: {unknown}")
    tool = action.get("tool")
    if not isinstance(tool, str) or not TOOL_NAME_RE.fullmatch(tool):
        raise ValueError(f"action.tool must be a tool name ({TOOL_NAME_RE.pattern}), got {_short(tool)}")
    args = action.get("args")
    args = {} if args is None else args  # only a missing args means none: [] or "" is not {}
    if not isinstance(args, dict):
        raise ValueError(f"action.args must be an object, got {type(args).__name__} {_short(args)}")
    problem = plain_json_problem(args, "action.args")
    if problem:
        raise ValueError(f"action.args must be plain JSON: {problem}")
    return {"kind": "tool", "tool": tool, "args": args}


def registered_tools(data_dir: Path | str) -> dict[str, dict[str, Any]] | None:
    """The tools the registry has registered in ``data_dir``: name → parameters JSON Schema,
    read read-only from ``data_dir/tool_schemas.db``; None when no registry has used the data
    directory (no file, no table or no row yet). Rows that are not JSON are left out."""
    path = Path(data_dir) / SCHEMA_FILE
    if not path.is_file():
        return None
    try:
        con = open_sqlite(path, read_only=True)
        try:
            rows = con.execute("SELECT tool, parameters FROM tool_schemas").fetchall()
        finally:
            con.close()
    except sqlite3.OperationalError as exc:
        if "no such table" in str(exc):
            return None
        raise
    known: dict[str, dict[str, Any]] = {}
    for tool, params in rows:
        try:
            schema = json.loads(params)
        except (TypeError, ValueError, RecursionError):
            continue
        if isinstance(schema, dict):
            known[str(tool)] = schema
    return known or None  # an empty store: its registry's first writes are still queued


def check_tool_action(action: dict[str, Any], data_dir: Path | str) -> None:
    """Raise ValueError when the tool action (as :func:`normalize_action` returns it) names a
    tool the registry of ``data_dir`` has not registered, or its ``args`` do not fit that
    tool's parameters (the JSON Schema the registry validates calls against, so the firing
    would be refused the same way). Nothing to check against (see :func:`registered_tools`):
    no error. A registered schema that jsonschema cannot use (not a valid JSON Schema, an
    unknown type, a ``$ref`` that resolves nowhere or only to itself) is not the caller's
    fault and cannot be checked against: the tool is known, so the action is accepted without
    the arguments check (the registry refuses to register such a schema, so the row is a
    damaged store's; a firing reports any failure of the call)."""
    known = registered_tools(data_dir)
    if known is None:
        return
    tool = action["tool"]
    schema = known.get(tool)
    if schema is None:
        names = sorted(known)
        listed = ", ".join(names[:40]) + (f" … ({len(names)} in all)" if len(names) > 40 else "")
        raise ValueError(
            f"action.tool {tool!r} is not a registered tool, so the reminder could never fire; "
            f"registered tools: {listed or 'none'}"
        )
    try:
        if not isinstance(schema.get("$schema", ""), str):  # validator_for would raise AttributeError
            raise jsonschema.exceptions.SchemaError(f"$schema is not a string: {_short(schema['$schema'])}")
        cls = jsonschema.validators.validator_for(schema)
        cls.check_schema(schema)
        error = jsonschema.exceptions.best_match(cls(schema).iter_errors(action.get("args") or {}))
    except _UNUSABLE_SCHEMA:
        return
    if error is not None:
        where = "/".join(str(part) for part in error.absolute_path)
        message = error.message if len(error.message) <= 300 else error.message[:299] + "…"
        fields = sorted((schema.get("properties") or {}).keys())
        required = schema.get("required") or []
        raise ValueError(
            f"action.args do not fit the parameters of {tool!r}: {message}"
            + (f" (at 'args/{where}')" if where else "")
            + f"; {tool} takes {', '.join(fields) or 'no arguments'}"
            + (f" (required: {', '.join(map(str, required))})" if required else "")
        )


def row_to_reminder(row: tuple[Any, ...]) -> dict[str, Any]:
    """A ``reminders`` row (``_COLUMNS`` order) as the tools return it (``action`` decoded)."""
    out = dict(zip(_COLUMNS, row))
    try:
        action = json.loads(out["action"]) if out.get("action") else dict(NOTIFY)
        if not isinstance(action, dict):
            raise ValueError("the action is not a JSON object")
        if action.get("kind") == "task" and _same_text(action.get("task"), out["text"]):
            action = dict(NOTIFY)  # stored before the rule: its own text is never run as a request
    except (ValueError, RecursionError) as exc:  # a corrupt row is shown as such; it must not hide the others
        out["damaged"] = f"its action record cannot be read ({exc}); schedule it again and delete this one"
        action = {"kind": "damaged", "raw": str(out.get("action"))[:200]}
    out["action"] = action
    return out


def _general_adjustment(day_of_month: int) -> str | None:
    if day_of_month <= 28:
        return None
    return (
        f"day {day_of_month} does not exist in every month: in shorter months the reminder runs on the month's last day"
    )


# -- the tools ----------------------------------------------------------------------------------


def schedule_reminder(
    text: str,
    day_of_month: int = 1,
    time: str = "09:00",
    recurrence: str = "monthly",
    action: dict[str, Any] | None = None,
    *,
    data_dir: Path,
    now: dt.datetime | None = None,
    postgres_url: str | None = None,
) -> dict[str, Any]:
    """Persist a recurring reminder; return it as ``{"id", "text", "day_of_month", "time",
    "recurrence", "created_at", "next_run", "action", "last_fired_period", "last_fired_at",
    "adjustment", "already_existed"}``.

    ``adjustment`` is None, or says how an impossible date is handled (day 31 in a 30-day
    month, day 30 in February: the month's last day), naming the next run when it is affected.
    A reminder identical in text (case and spacing ignored), day, time and recurrence is not
    created twice: the existing one is returned with ``already_existed: true`` (asking twice
    must not remind twice; a different ``action`` is not applied, ``note`` says so). Raises
    ValueError (nothing written; never another exception for a bad value) for text that is not
    a string, empty or over :data:`MAX_TEXT_CHARS` chars, a day outside 1-31, a time not exactly
    ``HH:MM`` (24 h), a recurrence other than ``monthly``, a malformed action (see
    :func:`normalize_action`: ``args`` must be a plain-JSON object within
    :data:`MAX_ARGS_CHARS` chars and :data:`MAX_ARGS_DEPTH` levels), or a tool action naming a
    tool the data directory's registry does not know or arguments that do not fit it
    (:func:`check_tool_action`). ``now``: the clock (default: the real one). ``postgres_url``:
    the schedule's PostgreSQL database (:func:`tools.builtin.reminder_store.schedule_url`; None:
    ``HERMES_POSTGRES_URL``; "" : ``data_dir/reminders.db``)."""
    if text is not None and not isinstance(text, str):
        raise ValueError(f"text must be a string, got {type(text).__name__} {_short(text)}")
    text = (text or "").strip()
    if not text:
        raise ValueError("text is empty; say what to remind about")
    if len(text) > MAX_TEXT_CHARS:
        raise ValueError(f"text is {len(text)} chars; the limit is {MAX_TEXT_CHARS} (put details in action.task)")
    if isinstance(day_of_month, bool) or not isinstance(day_of_month, int) or not 1 <= day_of_month <= 31:
        raise ValueError(f"day_of_month must be a whole number 1-31, got {_short(day_of_month)}")
    if not isinstance(time, str) or not TIME_RE.fullmatch(time):
        raise ValueError(f"time must be HH:MM (24 h, e.g. 09:00), got {_short(time)}")
    if recurrence not in RECURRENCES:
        raise ValueError(f"recurrence must be one of {RECURRENCES}, got {_short(recurrence)}")
    checked = normalize_action(action, text)
    if checked["kind"] == "tool":
        check_tool_action(checked, data_dir)
    default_action = checked == NOTIFY
    now = local_now(now)
    nxt = scheduled_at(day_of_month, time, now.year, now.month)
    if nxt <= now:
        nxt = scheduled_at(day_of_month, time, *month_add(now.year, now.month, 1))
    adjustment = adjustment_for(day_of_month, nxt.year, nxt.month) or _general_adjustment(day_of_month)
    con = open_schedule(data_dir, postgres_url)
    try:
        con.begin()  # the duplicate check and the insert are one step
        try:
            same = " ".join(text.lower().split())
            for row in con.execute(
                f"SELECT {', '.join(_COLUMNS)} FROM reminders WHERE day_of_month = ? AND time = ? AND recurrence = ?",
                (day_of_month, time, recurrence),
            ):
                if " ".join(str(row[1]).lower().split()) == same:
                    con.commit()
                    existing = {**row_to_reminder(row), "already_existed": True}
                    try:  # the adjustment of the existing reminder's own next run
                        ran = dt.datetime.fromisoformat(existing["next_run"])
                        existing["adjustment"] = adjustment_for(
                            day_of_month, ran.year, ran.month
                        ) or _general_adjustment(day_of_month)
                    except ValueError:
                        existing["adjustment"] = _general_adjustment(day_of_month)
                    if not default_action and existing["action"] != checked:
                        existing["note"] = (
                            "a reminder with this text, day and time already exists; its "
                            "action was kept (the requested one was not applied)"
                        )
                    return existing
            cur = con.execute(
                "INSERT INTO reminders (text, day_of_month, time, recurrence, created_at, next_run, action) "
                "VALUES (?, ?, ?, ?, ?, ?, ?) RETURNING id",
                (
                    text,
                    day_of_month,
                    time,
                    recurrence,
                    now.isoformat(timespec="seconds"),
                    nxt.isoformat(timespec="minutes"),
                    None if default_action else json.dumps(checked),
                ),
            )
            rid = cur.fetchone()[0]
            con.commit()
        except BaseException:
            con.rollback()
            raise
        row = con.execute(f"SELECT {', '.join(_COLUMNS)} FROM reminders WHERE id = ?", (rid,)).fetchone()
    finally:
        con.close()
    return {**row_to_reminder(row), "adjustment": adjustment, "already_existed": False}


def list_reminders(*, data_dir: Path, postgres_url: str | None = None) -> dict[str, Any]:
    """All reminders, oldest first: ``{"reminders": [reminder, ...], "count": n}``; each
    reminder has its ``action``, ``next_run`` and ``last_fired_period`` (None until it fired).
    ``postgres_url``: as for :func:`schedule_reminder`."""
    con = open_schedule(data_dir, postgres_url)
    try:
        rows = con.execute(f"SELECT {', '.join(_COLUMNS)} FROM reminders ORDER BY id").fetchall()
    finally:
        con.close()
    return {"reminders": [row_to_reminder(r) for r in rows], "count": len(rows)}
