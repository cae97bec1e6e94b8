"""ToolSpec lint, schema normalisation (K6) and ToolRegistry behaviour (K4, K5, K3-like args)."""

from __future__ import annotations

import asyncio
import json

import pytest

from tools.errors import DuplicateToolError, ToolDefinitionError, ToolFailed, ToolTimeout, ToolTransportError
from tools.registry import ToolRegistry
from tools.schema_normalization import normalize_schema
from tools.spec import HEAVY_TIMEOUT_S, ORDINARY_TIMEOUT_S, ToolSpec, lint

GOOD_DESC = "Adds two integers and returns the sum; use it only for integer arithmetic."
ADD_PARAMS = {
    "type": "object",
    "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
    "required": ["a", "b"],
    "additionalProperties": False,
}


def spec(name: str = "add_numbers", **kw) -> ToolSpec:
    return ToolSpec(
        name=name, description=kw.pop("description", GOOD_DESC), parameters=kw.pop("parameters", ADD_PARAMS), **kw
    )


async def add_runner(args: dict, request_id: str) -> dict:
    return {"sum": args["a"] + args["b"]}


# -- lint -------------------------------------------------------------------------------------


def test_timeouts_follow_the_seed():
    assert (ORDINARY_TIMEOUT_S, HEAVY_TIMEOUT_S) == (10.0, 30.0)
    assert spec().timeout_s == ORDINARY_TIMEOUT_S


def test_clean_spec_has_no_lint_problems():
    assert lint(spec()) == []
    assert lint(spec(name="team_chat__post_message", source="mcp:team_chat")) == []


@pytest.mark.parametrize("bad", ["AddNumbers", "addNumbers", "ad", "add-numbers", "1add", "_add", "a" * 65])
def test_lint_rejects_bad_names(bad):
    assert any("name" in p for p in lint(spec(name=bad)))


def test_lint_flags_short_description_missing_properties_and_required():
    problems = lint(spec(description="Adds.", parameters={"type": "object"}))
    assert any("description" in p for p in problems)
    assert any('"properties"' in p for p in problems)
    assert any('"required"' in p for p in problems)


def test_lint_flags_required_name_not_in_properties_and_invalid_schema():
    p1 = lint(spec(parameters={"type": "object", "properties": {}, "required": ["x"]}))
    assert any("not declared" in p for p in p1)
    p2 = lint(spec(parameters={"type": "object", "properties": {"a": {"type": "no-such-type"}}, "required": []}))
    assert any("valid JSON Schema" in p for p in p2)


def test_lint_flags_bad_source():
    assert any("source" in p for p in lint(spec(source="somewhere")))


# -- K6 normalisation ---------------------------------------------------------------------------


def test_k6_schema_without_properties_is_normalised():
    raw = {"$schema": "http://json-schema.org/draft-07/schema#", "type": "object"}
    assert normalize_schema(raw) == {"type": "object", "properties": {}}
    assert "$schema" in raw  # input untouched


def test_normalize_recurses_into_nested_objects_and_combinators():
    raw = {
        "$schema": "x",
        "type": "object",
        "properties": {
            "opts": {"type": "object", "$schema": "y"},
            "list": {"type": "array", "items": {"type": "object"}},
            "either": {"anyOf": [{"type": "object"}, {"type": "string"}]},
        },
        "$defs": {"Thing": {"type": ["object", "null"]}},
    }
    out = normalize_schema(raw)
    assert "$schema" not in out and "$schema" not in out["properties"]["opts"]
    assert out["properties"]["opts"]["properties"] == {}
    assert out["properties"]["list"]["items"]["properties"] == {}
    assert out["properties"]["either"]["anyOf"][0]["properties"] == {}
    assert "properties" not in out["properties"]["either"]["anyOf"][1]
    assert out["$defs"]["Thing"]["properties"] == {}


def test_normalize_empty_schema_becomes_empty_object():
    assert normalize_schema(None) == {"type": "object", "properties": {}}
    assert normalize_schema({}) == {"type": "object", "properties": {}}


async def test_k6_normalised_tool_is_callable_with_empty_args():
    reg = ToolRegistry()
    params = normalize_schema({"$schema": "http://json-schema.org/draft-07/schema#", "type": "object"})

    async def hello(args, rid):
        return "hello"

    reg.register(
        ToolSpec(
            name="say_hello",
            description="Says hello; a K6 regression tool for tests.",
            parameters=params,
            source="mcp:x",
        ),
        hello,
        strict=False,
    )
    out = await reg.call("say_hello", {}, "r1")
    assert out.status == "ok" and out.content == "hello"
    assert reg.openai_tools()[0]["function"]["parameters"] == {"type": "object", "properties": {}}


# -- registration ---------------------------------------------------------------------------------


def test_k5_duplicate_name_is_refused_naming_both_sources():
    reg = ToolRegistry()
    reg.register(spec("account_action", source="mcp:server_a"), add_runner)
    with pytest.raises(DuplicateToolError) as err:
        reg.register(spec("account_action", source="mcp:server_b"), add_runner)
    assert "mcp:server_a" in str(err.value) and "mcp:server_b" in str(err.value)
    assert reg.get("account_action").source == "mcp:server_a"  # the first one is kept


def test_lint_errors_refuse_registration_in_strict_mode():
    reg = ToolRegistry()
    with pytest.raises(ToolDefinitionError):
        reg.register(spec(name="BadName"), add_runner)
    with pytest.raises(ToolDefinitionError):
        reg.register(spec(description="short"), add_runner)
    assert reg.names() == []


def test_non_strict_keeps_soft_problems_as_warnings_but_refuses_bad_names():
    reg = ToolRegistry()
    reg.register(spec(name="echo_tool", description="Echo", source="mcp:s"), add_runner, strict=False)
    assert "echo_tool" in reg.names() and reg.warnings["echo_tool"]
    with pytest.raises(ToolDefinitionError):
        reg.register(spec(name="Echo-Tool", source="mcp:s"), add_runner, strict=False)


def test_openai_tools_shape():
    reg = ToolRegistry()
    reg.register(spec(), add_runner)
    [tool] = reg.openai_tools()
    assert tool == {
        "type": "function",
        "function": {"name": "add_numbers", "description": GOOD_DESC, "parameters": ADD_PARAMS},
    }


# -- calls --------------------------------------------------------------------------------------------


@pytest.fixture
def reg() -> ToolRegistry:
    r = ToolRegistry()
    r.register(spec(), add_runner)

    async def exploding(args, rid):
        raise ValueError("boom")

    r.register(spec("exploding_tool", parameters={"type": "object", "properties": {}, "required": []}), exploding)
    return r


async def test_ok_call_records_latency_and_ids(reg):
    out = await reg.call("add_numbers", {"a": 2, "b": 3}, "call_1")
    assert out.status == "ok" and out.content == {"sum": 5}
    assert out.tool == "add_numbers" and out.request_id == "call_1" and out.error is None
    assert out.latency_s >= 0


async def test_k4_unknown_tool_lists_valid_names(reg):
    out = await reg.call("does_not_exist", {}, "c")
    assert out.status == "error" and out.error_kind == "unknown_tool"
    assert "add_numbers" in out.error and "exploding_tool" in out.error


async def test_k4_exception_in_tool_becomes_error_outcome(reg):
    out = await reg.call("exploding_tool", {}, "c")
    assert out.status == "error" and out.error_kind == "tool_error"
    assert "boom" in out.error and "ValueError" in out.error


@pytest.mark.parametrize(
    "args, fragment",
    [
        ({"a": 1}, "'b' is a required property"),
        ({"a": "1", "b": 2}, "is not of type 'integer'"),
        ({"a": 1, "b": 2, "c": 3}, "Additional properties"),
    ],
)
async def test_schema_invalid_args_are_refused_before_running(reg, args, fragment):
    out = await reg.call("add_numbers", args, "c")
    assert out.status == "error" and out.error_kind == "invalid_arguments"
    assert fragment in out.error


async def test_string_args_parsed_and_broken_json_refused(reg):
    ok = await reg.call("add_numbers", json.dumps({"a": 1, "b": 1}), "c1")
    assert ok.status == "ok" and ok.content == {"sum": 2}
    bad = await reg.call("add_numbers", '{"a": 1, "b": ', "c2")  # K3: cut off
    assert bad.error_kind == "invalid_arguments" and "not valid JSON" in bad.error
    arr = await reg.call("add_numbers", "[1, 2]", "c3")
    assert arr.error_kind == "invalid_arguments" and "JSON object" in arr.error


async def test_runner_errors_map_to_kinds():
    reg = ToolRegistry()
    empty = {"type": "object", "properties": {}, "required": []}

    def raising(exc):
        async def run(args, rid):
            raise exc

        return run

    reg.register(spec("times_out", parameters=empty), raising(ToolTimeout("over 10 s")))
    reg.register(spec("dead_server", parameters=empty), raising(ToolTransportError("srv_a", "connection lost")))
    reg.register(spec("is_error", parameters=empty), raising(ToolFailed("file not found")))
    assert (await reg.call("times_out", {}, "1")).error_kind == "timeout"
    dead = await reg.call("dead_server", {}, "2")
    assert dead.error_kind == "transport" and "srv_a" in dead.error
    k7 = await reg.call("is_error", {}, "3")
    assert k7.error_kind == "tool_error" and "file not found" in k7.error


async def test_registry_enforces_timeout_on_hanging_runner(monkeypatch):
    import tools.registry as registry_mod

    monkeypatch.setattr(registry_mod, "TIMEOUT_SLACK_S", 0.0)
    reg = ToolRegistry()

    async def hang(args, rid):
        await asyncio.sleep(60)

    reg.register(
        spec("hangs_forever", parameters={"type": "object", "properties": {}, "required": []}, timeout_s=0.2), hang
    )
    out = await reg.call("hangs_forever", {}, "c")
    assert out.error_kind == "timeout" and out.latency_s < 5


async def test_side_effect_calls_are_idempotent_per_request_id():
    reg = ToolRegistry()
    runs = []

    async def write(args, rid):
        runs.append(rid)
        return {"written": len(runs)}

    reg.register(spec("write_file", side_effect=True), write)
    first = await reg.call("write_file", {"a": 1, "b": 2}, "req-1")
    again = await reg.call("write_file", {"a": 1, "b": 2}, "req-1")
    other = await reg.call("write_file", {"a": 1, "b": 2}, "req-2")
    assert runs == ["req-1", "req-2"]
    assert again.replayed and again.content == first.content == {"written": 1}
    assert other.content == {"written": 2} and not other.replayed
    concurrent = await asyncio.gather(*(reg.call("write_file", {"a": 1, "b": 2}, "req-3") for _ in range(3)))
    assert runs.count("req-3") == 1 and all(o.content == {"written": 3} for o in concurrent)


async def test_failed_side_effect_call_may_be_retried():
    reg = ToolRegistry()
    attempts = []

    async def flaky(args, rid):
        attempts.append(rid)
        if len(attempts) == 1:
            raise RuntimeError("temporary")
        return "done"

    reg.register(spec("flaky_write", side_effect=True), flaky)
    assert (await reg.call("flaky_write", {"a": 1, "b": 2}, "r")).status == "error"
    assert (await reg.call("flaky_write", {"a": 1, "b": 2}, "r")).content == "done"
    assert len(attempts) == 2


@pytest.mark.parametrize("name", ["good_name\n", "good_name\r\n"])
def test_a_name_with_a_trailing_line_break_is_refused_by_lint(name):
    # `$` matches before a final newline: names are checked whole (fullmatch)
    params = {"type": "object", "properties": {}, "required": []}
    spec = ToolSpec(name=name, description="A tool whose name ends in a line break.", parameters=params)
    assert any("must match" in p for p in lint(spec))


def test_a_month_with_a_trailing_newline_is_refused_by_the_demo_generator(tmp_path):
    from tools.builtin.demo_db import generate_sales_db

    with pytest.raises(ValueError):
        generate_sales_db(tmp_path / "x.db", end_month="2026-01\n")
    assert not (tmp_path / "x.db").exists()
