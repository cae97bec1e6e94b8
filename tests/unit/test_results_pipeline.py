"""tools/results.py: the three-stage result pipeline (seed §2.3, case K2)."""

from __future__ import annotations

import json

from tools.results import MAX_ITEMS, MAX_RESULT_CHARS, compress


def test_rows_are_sampled_with_the_true_total_and_a_rule_summary():
    raw = {"columns": ["id", "amount"], "rows": [[i, i * 1.5] for i in range(10_000)], "row_count": 10_000}
    env = compress("query_database", raw, handle="/tmp/payload.json")
    assert env["total_items"] == 10_000 and env["truncated"] and env["handle"] == "/tmp/payload.json"
    assert len(env["data"]["rows"]) == MAX_ITEMS
    assert env["data"]["rows"][0] == [0, 0.0] and env["data"]["rows"][-1] == [9999, 14998.5]
    assert env["summary"] == "query_database: 10000 rows, columns id, amount"
    assert len(json.dumps(env)) <= MAX_RESULT_CHARS


def test_a_single_row_is_stated_as_its_values_not_as_a_row_count():
    # "1 rows" beside COUNT(*) = 0 was answered "1" by the embedded model (evals data suite).
    for tool, raw, want in [
        ("query_database", {"columns": ["COUNT(*)"], "rows": [[0]], "row_count": 1}, "one row: COUNT(*) = 0"),
        (
            "sql_read",
            {"columns": ["name", "total"], "rows": [["Cleo Park", 41]]},
            "one row: name = Cleo Park, total = 41",
        ),
        ("any_tool", {"columns": ["n"], "rows": [{"n": 3}], "row_count": 1}, "one row: n = 3"),
    ]:
        summary = compress(tool, raw, handle="h")["summary"]
        assert summary == f"{tool}: {want}" and "1 rows" not in summary
    empty = compress("query_database", {"columns": ["id"], "rows": [], "row_count": 0}, handle="h")
    assert empty["summary"] == "query_database: no rows (columns id)"


def test_long_text_is_truncated_with_a_notice():
    env = compress("fetch_page", "x" * 500_000, handle="h")
    assert env["truncated"] and "truncated" in json.dumps(env["notes"])
    assert len(json.dumps(env)) <= MAX_RESULT_CHARS + 100


def test_many_medium_fields_still_fit():
    raw = {f"k{i}": "y" * 1000 for i in range(50)}
    env = compress("wide", raw, handle="h")
    assert len(json.dumps(env)) <= MAX_RESULT_CHARS + 300 and env["truncated"]


def test_schema_violations_drop_undeclared_fields():
    schema = {"type": "object", "properties": {"path": {"type": "string"}}, "additionalProperties": False}
    env = compress("generate_report", {"path": "/r.md", "secret_internal": 1}, result_schema=schema)
    assert env["data"] == {"path": "/r.md"}
    assert any("secret_internal" in n for n in env["notes"])


def test_unparseable_output_degrades_to_text_and_errors_keep_their_message():
    env = compress("legacy", "{not json at all")
    assert env["data"] == "{not json at all" and env["status"] == "ok"
    err = compress("post_message", None, status="error", error="file not found")
    assert err == {"status": "error", "summary": "post_message failed", "error": "file not found"}


def test_small_results_pass_unchanged():
    env = compress("t", {"a": 1, "b": [1, 2, 3]})
    assert env == {"status": "ok", "summary": "t: a=1 (+ b)", "data": {"a": 1, "b": [1, 2, 3]}}


def test_deeply_nested_results_are_cut_not_crashed():
    deep: dict = {"leaf": 1}
    for _ in range(900):
        deep = {"n": deep}
    env = compress("deep_json", deep, handle="h")
    assert env["truncated"] and any("nested deeper" in n for n in env["notes"])
    assert len(json.dumps(env)) <= MAX_RESULT_CHARS + 300


def test_non_string_keys_and_odd_values_do_not_crash():
    env = compress("odd", {("a", 1): {1, 2}, "nan": float("nan"), 3: b"bytes"})
    assert env["status"] == "ok" and "('a', 1)" in env["data"]


def test_every_envelope_matches_the_envelope_schema():
    import jsonschema

    from tools.results import ENVELOPE_SCHEMA

    cases = [
        compress(
            "q", {"columns": ["a"], "rows": [[i] for i in range(500)], "row_count": 500}, handle="payloads/x.json"
        ),
        compress("t", "y" * 10_000, handle="payloads/y.json"),
        compress("e", None, status="error", error="boom"),
        compress("s", {"a": 1}),
        compress("odd", {("k",): {1}}),
    ]
    for envelope in cases:
        jsonschema.validate(json.loads(json.dumps(envelope, default=str)), ENVELOPE_SCHEMA)
