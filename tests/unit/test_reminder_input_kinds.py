"""``schedule_reminder`` refuses every bad input with ValueError and a message that names it,
and writes nothing; it never lets another exception out (RecursionError from a deep value,
AttributeError from a non-string text, jsonschema's UnknownType from a broken registered
schema). Kinds: values nested too deep, a broken registered schema, patterns that a trailing
newline used to satisfy, args that are not a plain-JSON object, inputs over the bounds the
tool's own JSON Schema sets (the function is also called outside that schema)."""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import sqlite3
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from tools.builtin.catalog import SCHEDULE_REMINDER
from tools.builtin.reminders import (
    MAX_ACTION_CHARS,
    MAX_ARGS_CHARS,
    MAX_ARGS_DEPTH,
    MAX_TASK_CHARS,
    MAX_TEXT_CHARS,
    list_reminders,
    schedule_reminder,
)
from tools.registry import ToolRegistry
from tools.schema_versions import SCHEMA_FILE, SchemaStore
from tools.spec import ToolSpec

NOW = dt.datetime(2026, 11, 20, 12, 0)

LOOSE = ToolSpec(
    name="loose_tool",
    description="Takes any arguments at all (test tool for the shape of the arguments).",
    parameters={"type": "object", "properties": {"x": {}}, "required": []},
)
STRICT = ToolSpec(
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
#: Registered (valid) first, then its stored parameters are replaced by a broken schema: the
#: registry would never register one, so only a damaged store holds such a row.
BROKEN = ToolSpec(
    name="broken_tool",
    description="Its stored schema is replaced by a broken one (test tool).",
    parameters={"type": "object", "properties": {"x": {}}, "required": []},
)


async def _noop(args: dict, request_id: str) -> dict:
    return {}


async def _register(data_dir: Path, *specs: ToolSpec) -> None:
    store = SchemaStore.in_data_dir(data_dir)
    try:
        await asyncio.to_thread(store.load)
        registry = ToolRegistry(schema_store=store)
        for spec in specs:
            registry.register(spec, _noop)
        await store.flush()
    finally:
        store.close()


def _store_parameters(data_dir: Path, tool: str, parameters_json: str) -> None:
    con = sqlite3.connect(data_dir / SCHEMA_FILE)
    try:
        assert con.execute("UPDATE tool_schemas SET parameters = ? WHERE tool = ?", (parameters_json, tool)).rowcount
        con.commit()
    finally:
        con.close()


@pytest.fixture
def registered(tmp_path: Path) -> Path:
    asyncio.run(_register(tmp_path, LOOSE, STRICT, BROKEN))
    return tmp_path


def schedule(data_dir: Path, text: Any = "post the numbers", **kwargs: Any) -> dict[str, Any]:
    kwargs.setdefault("day_of_month", 1)
    kwargs.setdefault("time", "09:00")
    return schedule_reminder(text, data_dir=data_dir, now=NOW, **kwargs)


def refused(data_dir: Path, *phrases: str, **kwargs: Any) -> str:
    """Scheduling raises ValueError containing every phrase, and nothing is stored."""
    before = list_reminders(data_dir=data_dir)["count"]
    with pytest.raises(ValueError) as err:
        schedule(data_dir, **kwargs)
    message = str(err.value)
    for phrase in phrases:
        assert phrase in message, message
    assert len(message) < 1000, message  # a huge input is not echoed back
    assert list_reminders(data_dir=data_dir)["count"] == before
    return message


def nested_dicts(depth: int) -> dict[str, Any]:
    top: dict[str, Any] = {}
    cur = top
    for _ in range(depth):
        cur["a"] = {}
        cur = cur["a"]
    return top


def nested_lists(depth: int) -> list[Any]:
    top: list[Any] = []
    cur = top
    for _ in range(depth):
        cur.append([])
        cur = cur[0]
    return top


def tool_action(args: Any, tool: str = "loose_tool") -> dict[str, Any]:
    return {"kind": "tool", "tool": tool, "args": args}


# -- values nested too deep: ValueError, never RecursionError --------------------------------------

DEEP_OBJECTS = {
    "dict_5000": tool_action(nested_dicts(5000)),
    "list_5000": tool_action({"x": nested_lists(5000)}),
    "dict_just_over": tool_action(nested_dicts(MAX_ARGS_DEPTH + 1)),
    "deep_kind": {"kind": nested_lists(5000)},
    "deep_tool_name": {"kind": "tool", "tool": nested_lists(5000)},
    "deep_thread_id": {"kind": "task", "task": "x", "thread_id": nested_dicts(5000)},
}


@pytest.mark.parametrize("case", sorted(DEEP_OBJECTS))
def test_a_deeply_nested_action_is_a_value_error(registered, case):
    refused(registered, "action", action=DEEP_OBJECTS[case])


DEEP_TEXTS = {
    "lists_100000": '{"kind":"tool","tool":"loose_tool","args":{"x":' + "[" * 100_000 + "]" * 100_000 + "}}",
    "dicts_20000": '{"kind":"tool","tool":"loose_tool","args":' + '{"a":' * 20_000 + "{}" + "}" * 20_000 + "}",
    "unclosed_50000": '{"kind":"tool","tool":"loose_tool","args":{"x":' + "[" * 50_000,
}


@pytest.mark.parametrize("case", sorted(DEEP_TEXTS))
def test_an_action_given_as_deeply_nested_json_text_is_a_value_error(registered, case):
    refused(registered, "action", action=DEEP_TEXTS[case])


def test_json_text_parsed_within_the_depth_bound_is_still_checked_for_depth(registered):
    text = '{"kind":"tool","tool":"loose_tool","args":' + '{"a":' * 200 + "{}" + "}" * 200 + "}"
    refused(registered, f"nest deeper than {MAX_ARGS_DEPTH} levels", action=text)


def test_args_at_the_depth_bound_are_stored(registered):
    out = schedule(registered, action=tool_action(nested_dicts(MAX_ARGS_DEPTH)))
    assert out["already_existed"] is False
    assert list_reminders(data_dir=registered)["reminders"][0]["action"]["args"] == nested_dicts(MAX_ARGS_DEPTH)


# -- a broken registered schema: the tool is known, its args cannot be checked: stored ----------

BROKEN_SCHEMAS = {
    "unknown_type": {"type": "objectx"},
    "unknown_type_in_list": {"type": ["object", "nope"]},
    "unknown_nested_type": {"type": "object", "properties": {"x": {"type": "strng"}}},
    "bad_keyword_value": {"type": "object", "minProperties": "two"},
    "bad_regex": {"type": "object", "properties": {"x": {"type": "string", "pattern": "("}}},
    "ref_to_nowhere": {"$ref": "#/$defs/missing"},
    "ref_to_unknown_uri": {"$ref": "urn:nowhere:schema"},
    "ref_to_itself": {"$ref": "#"},
    "ref_loop": {"$defs": {"a": {"$ref": "#/$defs/b"}, "b": {"$ref": "#/$defs/a"}}, "$ref": "#/$defs/a"},
    "schema_uri_not_a_string": {"$schema": 5, "type": "object"},
    "schema_uri_a_list": {"$schema": ["x"], "type": "object"},
}


@pytest.mark.parametrize("case", sorted(BROKEN_SCHEMAS))
def test_a_broken_registered_schema_does_not_crash_scheduling(registered, case):
    _store_parameters(registered, "broken_tool", json.dumps(BROKEN_SCHEMAS[case]))
    action = tool_action({"x": "a"}, tool="broken_tool")
    out = schedule(registered, action=action)
    assert out["action"] == action
    assert schedule(registered, action=action)["already_existed"] is True
    assert list_reminders(data_dir=registered)["count"] == 1
    # the other tools' schemas are still checked
    refused(registered, "do not fit the parameters of 'post_note'", action=tool_action({"channel": "p"}, "post_note"))


def test_a_registered_schema_too_deep_to_parse_is_left_out_not_a_crash(registered):
    _store_parameters(registered, "broken_tool", "[" * 100_000 + "]" * 100_000)
    refused(registered, "'broken_tool' is not a registered tool", action=tool_action({}, tool="broken_tool"))


# -- patterns must match the whole value: a trailing newline is not part of a time or a name ----

TRAILING = {
    "time_newline": {"time": "09:00\n"},
    "time_crlf": {"time": "09:00\r\n"},
    "time_leading_newline": {"time": "\n09:00"},
    "time_space": {"time": "09:00 "},
    "time_extra_digits": {"time": "09:001"},
    "thread_newline": {"action": {"kind": "task", "task": "x", "thread_id": "weekly\n"}},
    "thread_inner_newline": {"action": {"kind": "task", "task": "x", "thread_id": "week\nly"}},
    "tool_newline": {"action": tool_action({}, tool="loose_tool\n")},
    "tool_newline_as_json_text": {"action": '{"kind": "tool", "tool": "loose_tool\\n", "args": {}}'},
}


@pytest.mark.parametrize("case", sorted(TRAILING))
def test_a_trailing_or_embedded_newline_does_not_pass_a_pattern(registered, case):
    field = "time" if "time" in TRAILING[case] else "action."
    refused(registered, field, **TRAILING[case])


def test_a_refused_time_with_a_newline_leaves_one_reminder_per_time(registered):
    refused(registered, "time must be HH:MM", time="09:00\n")
    first = schedule(registered, time="09:00")
    again = schedule(registered, time="09:00")
    assert (first["already_existed"], again["already_existed"]) == (False, True)
    assert [r["time"] for r in list_reminders(data_dir=registered)["reminders"]] == ["09:00"]


def test_whole_values_that_match_are_stored(registered):
    out = schedule(registered, time="23:59", action={"kind": "task", "task": "x", "thread_id": "a.b:c-d_1"})
    assert (out["time"], out["action"]["thread_id"]) == ("23:59", "a.b:c-d_1")


# -- args must be a plain-JSON object ------------------------------------------------------------

NOT_AN_OBJECT = {
    "empty_list": ([], "got list"),
    "list": ([1], "got list"),
    "empty_string": ("", "got str"),
    "json_text": ("{}", "got str"),
    "zero": (0, "got int"),
    "zero_float": (0.0, "got float"),
    "false": (False, "got bool"),
    "true": (True, "got bool"),
    "empty_tuple": ((), "got tuple"),
}


@pytest.mark.parametrize("case", sorted(NOT_AN_OBJECT))
def test_args_that_are_not_an_object_are_refused_even_when_falsy(registered, case):
    args, phrase = NOT_AN_OBJECT[case]
    refused(registered, "action.args must be an object", phrase, action=tool_action(args))


NOT_PLAIN_JSON = {
    "nan": ({"x": float("nan")}, "NaN or Infinity"),
    "infinity": ({"x": float("inf")}, "NaN or Infinity"),
    "minus_infinity_in_list": ({"x": [1, float("-inf")]}, "NaN or Infinity"),
    "int_key": ({1: 2}, "key that is not a string"),
    "none_key": ({None: 2}, "key that is not a string"),
    "bool_key_nested": ({"x": {True: 1}}, "key that is not a string"),
    "tuple_key": ({(1, 2): 1}, "key that is not a string"),
    "mixed_keys": ({"a": 1, 2: 3}, "key that is not a string"),
    "tuple_value": ({"x": (1, 2)}, "tuple"),
    "set_value": ({"x": {1, 2}}, "set"),
    "bytes_value": ({"x": b"ab"}, "bytes"),
    "decimal_value": ({"x": Decimal("1.5")}, "Decimal"),
    "object_value": ({"x": object()}, "object"),
}


@pytest.mark.parametrize("case", sorted(NOT_PLAIN_JSON))
def test_args_that_are_not_plain_json_are_refused_not_converted(registered, case):
    args, phrase = NOT_PLAIN_JSON[case]
    refused(registered, "action.args must be plain JSON", phrase, action=tool_action(args))


@pytest.mark.parametrize("literal", ["NaN", "Infinity", "-Infinity"])
def test_nan_in_an_action_given_as_json_text_is_refused(registered, literal):
    text = '{"kind": "tool", "tool": "loose_tool", "args": {"x": ' + literal + "}}"
    refused(registered, "NaN or Infinity", action=text)


def test_non_string_action_keys_are_a_value_error(registered):
    refused(registered, "action keys must be strings", action={"kind": "task", 1: 2})


@pytest.mark.parametrize(
    "args, stored",
    [(None, {}), ({}, {}), ({"x": [1, 2.5, True, None, "s", {"y": -3}]}, None)],
    ids=["none", "empty", "every_json_type"],
)
def test_plain_json_args_and_no_args_are_stored(registered, args, stored):
    out = schedule(registered, action=tool_action(args))
    assert out["action"]["args"] == (args if stored is None else stored)
    assert list_reminders(data_dir=registered)["count"] == 1


# -- bounds: the tool schema's limits hold for direct calls too ----------------------------------


def test_the_bounds_are_the_tool_schemas():
    props = SCHEDULE_REMINDER.parameters["properties"]
    assert props["text"]["maxLength"] == MAX_TEXT_CHARS
    assert props["action"]["properties"]["task"]["maxLength"] == MAX_TASK_CHARS


TOO_BIG = {
    "text_1mb": ({"text": "a" * 1_000_000}, ["text is 1000000 chars", f"limit is {MAX_TEXT_CHARS}"]),
    "text_one_over": ({"text": "b" * (MAX_TEXT_CHARS + 1)}, [f"limit is {MAX_TEXT_CHARS}"]),
    "task_one_over": ({"action": {"kind": "task", "task": "c" * (MAX_TASK_CHARS + 1)}}, [f"limit is {MAX_TASK_CHARS}"]),
    "args_20mb_string": ({"action": tool_action({"x": "a" * 20_000_000})}, [f"over {MAX_ARGS_CHARS} chars"]),
    "args_200000_keys": ({"action": tool_action({f"k{i}": i for i in range(200_000)})}, [f"over {MAX_ARGS_CHARS}"]),
    "args_long_list": ({"action": tool_action({"x": [0] * 1_000_000})}, [f"over {MAX_ARGS_CHARS} chars"]),
    "args_one_over": ({"action": tool_action({"x": "d" * MAX_ARGS_CHARS})}, [f"over {MAX_ARGS_CHARS} chars"]),
    "args_escapes_over": ({"action": tool_action({"x": "\n" * (MAX_ARGS_CHARS // 2)})}, [f"over {MAX_ARGS_CHARS}"]),
    "action_text_over": ({"action": " " * (MAX_ACTION_CHARS + 1)}, [f"limit is {MAX_ACTION_CHARS}"]),
}


@pytest.mark.parametrize("case", sorted(TOO_BIG))
def test_inputs_over_the_bounds_are_refused(registered, case):
    kwargs, phrases = TOO_BIG[case]
    refused(registered, *phrases, **kwargs)


def test_inputs_at_the_bounds_are_stored(registered):
    assert schedule(registered, text="t" * MAX_TEXT_CHARS)["already_existed"] is False
    task = {"kind": "task", "task": "u" * MAX_TASK_CHARS}
    assert schedule(registered, text="task at the bound", action=task)["action"] == task
    args = {"x": "v" * (MAX_ARGS_CHARS - len('{"x": ""}'))}
    assert schedule(registered, text="args at the bound", action=tool_action(args))["action"]["args"] == args
    assert list_reminders(data_dir=registered)["count"] == 3


# -- text of another type: ValueError, not AttributeError ---------------------------------------


@pytest.mark.parametrize("text", [123, ["a"], 1.5, b"pay", {"text": "pay"}, True], ids=repr)
def test_text_that_is_not_a_string_is_a_value_error(registered, text):
    refused(registered, "text must be a string", type(text).__name__, text=text)


@pytest.mark.parametrize("text", [None, "", "   \n"], ids=repr)
def test_missing_text_is_still_empty_text(registered, text):
    refused(registered, "text is empty", text=text)


def test_a_task_that_is_not_a_string_is_named_as_such(registered):
    refused(registered, "action.task must be a string", "got int", action={"kind": "task", "task": 5})
