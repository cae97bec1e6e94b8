"""A reminder's tool action is checked when it is scheduled, not when it fires a month later:
the tool must be one the data directory's registry has registered (``tool_schemas.db``, the
registry's schema store) and the arguments must fit its parameters. A refused action writes
nothing; a data directory no registry has used has nothing to check against (stored as given,
as before). The store is written by a real :class:`ToolRegistry` here, as the toolbox does."""

from __future__ import annotations

import asyncio
import datetime as dt
import sqlite3

import pytest

from tools.builtin.reminders import list_reminders, registered_tools, schedule_reminder
from tools.registry import ToolRegistry
from tools.schema_versions import SCHEMA_FILE, SchemaStore
from tools.spec import ToolSpec

NOW = dt.datetime(2026, 11, 20, 12, 0)

POST = ToolSpec(
    name="post_note",
    description="Post a note to a channel (test tool with a side effect).",
    parameters={
        "type": "object",
        "properties": {"channel": {"type": "string", "minLength": 1}, "text": {"type": "string"}},
        "required": ["channel", "text"],
        "additionalProperties": False,
    },
    side_effect=True,
)
LOOKUP = ToolSpec(
    name="lookup_rows",
    description="Look rows up by a query string (read-only test tool).",
    parameters={
        "type": "object",
        "properties": {"q": {"type": "string"}, "limit": {"type": "integer"}},
        "required": ["q"],
    },
)


async def _noop(args: dict, request_id: str) -> dict:
    return {}


async def _register(data_dir, *specs: ToolSpec) -> None:
    store = SchemaStore.in_data_dir(data_dir)
    try:
        await asyncio.to_thread(store.load)
        registry = ToolRegistry(schema_store=store)
        for spec in specs:
            registry.register(spec, _noop)
        await store.flush()
    finally:
        store.close()


@pytest.fixture
def registered(tmp_path):
    asyncio.run(_register(tmp_path, POST, LOOKUP))
    return tmp_path


def schedule(data_dir, action):
    return schedule_reminder("post the numbers", 1, "09:00", action=action, data_dir=data_dir, now=NOW)


BAD = {
    "unknown_tool": (
        {"kind": "tool", "tool": "no_such_tool", "args": {}},
        ["'no_such_tool' is not a registered tool", "lookup_rows, post_note"],
    ),
    "typo_in_tool_name": (
        {"kind": "tool", "tool": "post_notes", "args": {"channel": "p", "text": "t"}},
        ["'post_notes' is not a registered tool"],
    ),
    "missing_required": (
        {"kind": "tool", "tool": "post_note", "args": {"channel": "p"}},
        ["do not fit the parameters of 'post_note'", "'text' is a required property", "required: channel, text"],
    ),
    "no_args_at_all": ({"kind": "tool", "tool": "post_note"}, ["'channel' is a required property"]),
    "misspelt_field": (
        {"kind": "tool", "tool": "post_note", "args": {"chanel": "p", "text": "t"}},
        ["do not fit the parameters of 'post_note'", "takes channel, text"],
    ),
    "wrong_type": (
        {"kind": "tool", "tool": "lookup_rows", "args": {"q": "x", "limit": "ten"}},
        ["'ten' is not of type 'integer'", "args/limit"],
    ),
    "constraint": ({"kind": "tool", "tool": "post_note", "args": {"channel": "", "text": "t"}}, ["args/channel"]),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_a_tool_action_that_could_never_fire_is_refused_and_nothing_is_written(registered, case):
    action, phrases = BAD[case]
    with pytest.raises(ValueError) as err:
        schedule(registered, action)
    for phrase in phrases:
        assert phrase in str(err.value), str(err.value)
    assert list_reminders(data_dir=registered)["count"] == 0


@pytest.mark.parametrize(
    "action",
    [
        {"kind": "tool", "tool": "post_note", "args": {"channel": "project", "text": "numbers"}},
        {"kind": "tool", "tool": "lookup_rows", "args": {"q": "x", "limit": 3}},
        {"kind": "task", "task": "summarise the sales"},
        None,
    ],
)
def test_actions_that_fit_are_stored(registered, action):
    out = schedule(registered, action)
    assert out["already_existed"] is False
    assert list_reminders(data_dir=registered)["count"] == 1


def test_a_data_dir_no_registry_has_used_stores_the_action_as_given(tmp_path):
    out = schedule(tmp_path, {"kind": "tool", "tool": "no_such_tool", "args": {}})
    assert out["action"]["tool"] == "no_such_tool"
    assert registered_tools(tmp_path) is None


def test_an_empty_or_tableless_store_is_nothing_to_check_against(tmp_path):
    sqlite3.connect(tmp_path / SCHEMA_FILE).close()  # a file without the table
    assert registered_tools(tmp_path) is None
    asyncio.run(_register(tmp_path))  # the table, no tool yet
    assert registered_tools(tmp_path) is None
    assert schedule(tmp_path, {"kind": "tool", "tool": "anything_goes", "args": {}})["id"] == 1


def test_the_store_is_read_without_writing(registered):
    before = (registered / SCHEMA_FILE).read_bytes()  # (a WAL reader may make its -shm index: SQLite's own)
    assert sorted(registered_tools(registered)) == ["lookup_rows", "post_note"]
    assert (registered / SCHEMA_FILE).read_bytes() == before
