"""Tool schemas normalised for every provider (K6 and its siblings) and MCP results turned into
what the model sees (K7: isError with structured content; images, resources, links)."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import jsonschema
import pytest
from mcp import types
from pydantic import AnyUrl

from tools.errors import ToolFailed
from tools.mcp.results import result_to_json
from tools.mcp.tool_listing import tools_from_listing
from tools.schema_normalization import RECURSION_DEPTH, SchemaNormalizationError, normalize_schema
from tools.spec import schema_error


def _walk(node):
    if isinstance(node, dict):
        yield node
        for v in node.values():
            yield from _walk(v)
    elif isinstance(node, list):
        for v in node:
            yield from _walk(v)


def _strict_ok(schema: dict) -> None:
    """What strict OpenAI / Gemini-style endpoints and the embedded grammar reject."""
    for node in _walk(schema):
        assert "$ref" not in node and "$defs" not in node and "definitions" not in node, node
        assert "$schema" not in node and "oneOf" not in node and "nullable" not in node, node
        assert not isinstance(node.get("type"), list), node
        if node.get("type") == "object":
            assert isinstance(node.get("properties"), dict), node


def test_k6_no_properties_and_schema_keyword():
    out = normalize_schema({"$schema": "http://json-schema.org/draft-07/schema#", "type": "object"})
    assert out == {"type": "object", "properties": {}}
    assert normalize_schema(None) == {"type": "object", "properties": {}}


def test_refs_inlined_unions_and_nullable_rewritten_validation_unchanged():
    schema = {
        "type": "object",
        "$defs": {
            "Point": {"type": "object", "properties": {"x": {"type": "number"}}, "required": ["x"]},
            "Tag": {"type": ["string", "null"], "maxLength": 5},
        },
        "properties": {
            "at": {"$ref": "#/$defs/Point", "description": "where"},
            "tag": {"$ref": "#/$defs/Tag"},
            "mode": {"oneOf": [{"const": "a"}, {"const": "b"}]},
            "limit": {"type": "integer", "nullable": True},
            "old": {"$ref": "#/definitions/Old"},
        },
        "definitions": {"Old": {"type": "boolean"}},
        "required": ["at"],
    }
    out = normalize_schema(schema)
    _strict_ok(out)
    assert out["properties"]["at"]["description"] == "where"
    assert out["properties"]["tag"] == {"anyOf": [{"type": "string", "maxLength": 5}, {"type": "null"}]}
    for good in (
        {"at": {"x": 1}},
        {"at": {"x": 1}, "tag": None, "limit": None, "mode": "a"},
        {"at": {"x": 2}, "tag": "abc", "limit": 3, "old": True},
    ):
        if good.get("limit", 0) is not None:  # "nullable" is OpenAPI, not JSON Schema
            jsonschema.validate(good, schema)
        jsonschema.validate(good, out)
    for bad in (
        {},
        {"at": {}},
        {"at": {"x": 1}, "tag": "toolong"},
        {"at": {"x": 1}, "limit": "3"},
        {"at": {"x": 1}, "mode": "c"},
    ):
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate(bad, out)


def _depth(schema: dict, key: str) -> int:
    n = 0
    while key in schema.get("properties", {}):
        schema, n = schema["properties"][key], n + 1
    return n


@pytest.mark.parametrize(
    "schema, key, leaf_type",
    [
        (  # a linked list through $defs
            {
                "type": "object",
                "properties": {"next": {"$ref": "#/$defs/Node"}},
                "$defs": {"Node": {"type": "object", "properties": {"next": {"$ref": "#/$defs/Node"}}}},
            },
            "next",
            "object",
        ),
        (  # the root refers to itself (a tree of objects)
            {"type": "object", "properties": {"label": {"type": "string"}, "child": {"$ref": "#"}}},
            "child",
            "object",
        ),
        (  # draft-07 definitions, the recursion inside an array
            {
                "type": "object",
                "properties": {"tree": {"$ref": "#/definitions/T"}},
                "definitions": {
                    "T": {
                        "type": "object",
                        "properties": {"kids": {"type": "array", "items": {"$ref": "#/definitions/T"}}},
                    }
                },
            },
            None,
            None,
        ),
    ],
)
def test_a_recursive_schema_is_cut_at_a_depth_and_stays_usable(schema, key, leaf_type):
    """Issue 23 kind 5: recursive tools were skipped at load; now the recursion is inlined
    RECURSION_DEPTH levels and cut to the bare type, valid for every provider."""
    out = normalize_schema(schema)
    assert schema_error(out) is None and "$ref" not in json.dumps(out) and "$defs" not in json.dumps(out)
    if key:
        assert _depth(out, key) == RECURSION_DEPTH + 1
        leaf = out
        for _ in range(RECURSION_DEPTH + 1):
            leaf = leaf["properties"][key]
        assert leaf["type"] == leaf_type and leaf["properties"] == {}
        deep = {key: {key: {key: {key: {key: {"anything": 1}}}}}}
        jsonschema.validate(deep, out)  # deeper arguments are the server's to check
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate({key: "not an object"}, out)
    else:
        tree = out["properties"]["tree"]
        assert tree["properties"]["kids"]["items"]["properties"]["kids"]["type"] == "array"
        jsonschema.validate({"tree": {"kids": [{"kids": [{"kids": [{"kids": []}]}]}]}}, out)


def test_bad_refs_raise():
    with pytest.raises(SchemaNormalizationError, match="points nowhere"):
        normalize_schema({"type": "object", "properties": {"a": {"$ref": "#/$defs/Missing"}}})
    with pytest.raises(SchemaNormalizationError, match="not a local"):
        normalize_schema({"type": "object", "properties": {"a": {"$ref": "https://x/schema.json"}}})
    with pytest.raises(SchemaNormalizationError, match="valid JSON Schema"):
        normalize_schema({"type": "object", "properties": {"a": {"type": "strnig"}}})


def test_a_bad_schema_skips_only_that_tool():
    listed = [
        types.Tool(name="good", description="fine", inputSchema={"type": "object", "properties": {}}),
        types.Tool(
            name="loop",
            description="cyclic",
            inputSchema={
                "type": "object",
                "properties": {"n": {"$ref": "#/$defs/N"}},
                "$defs": {"N": {"type": "object", "properties": {"n": {"$ref": "#/$defs/N"}}}},
            },
        ),
    ]
    listed.append(
        types.Tool(
            name="elsewhere",
            description="a $ref outside the document",
            inputSchema={"type": "object", "properties": {"a": {"$ref": "https://x/schema.json"}}},
        )
    )
    tools, skipped = tools_from_listing("srv", listed)
    assert sorted(tools) == ["good", "loop"]  # a recursive schema is offered, cut at a depth
    assert list(skipped) == ["elsewhere"]
    assert (
        "srv" in skipped["elsewhere"]
        and "'elsewhere'" in skipped["elsewhere"]
        and "not a local" in skipped["elsewhere"]
    )


PNG = base64.b64encode(b"\x89PNG\r\n\x1a\n" + b"0" * 100).decode()


def test_images_become_placeholders_with_a_handle(tmp_path: Path):
    result = types.CallToolResult(
        content=[
            types.TextContent(type="text", text="here it is"),
            types.ImageContent(type="image", data=PNG, mimeType="image/png"),
        ]
    )
    out = result_to_json(result, None, tmp_path)
    text, image = out
    assert text == "here it is"
    assert image["type"] == "image" and image["mime_type"] == "image/png" and image["bytes"] == 108
    assert Path(image["handle"]).read_bytes().startswith(b"\x89PNG") and "saved at" in image["description"]
    assert PNG not in json.dumps(out)
    assert "handle" not in result_to_json(result, None, None)[1]  # nowhere to save: still no base64


def test_resources_links_and_structured_content(tmp_path: Path):
    result = types.CallToolResult(
        content=[
            types.EmbeddedResource(
                type="resource",
                resource=types.TextResourceContents(
                    uri=AnyUrl("file:///notes.txt"), mimeType="text/plain", text="hello"
                ),
            ),
            types.EmbeddedResource(
                type="resource",
                resource=types.BlobResourceContents(
                    uri=AnyUrl("file:///a.bin"),
                    mimeType="application/octet-stream",
                    blob=base64.b64encode(b"xyz").decode(),
                ),
            ),
            types.ResourceLink(
                type="resource_link", uri=AnyUrl("file:///big.csv"), name="big.csv", mimeType="text/csv"
            ),
        ]
    )
    text_res, blob_res, link = result_to_json(result, None, tmp_path)
    assert text_res == {"type": "resource", "uri": "file:///notes.txt", "mime_type": "text/plain", "text": "hello"}
    assert blob_res["uri"] == "file:///a.bin" and Path(blob_res["handle"]).read_bytes() == b"xyz"
    assert link == {"type": "resource_link", "uri": "file:///big.csv", "name": "big.csv", "mime_type": "text/csv"}
    # structuredContent: the value when content is empty or repeats it (FastMCP's {"result": x})
    only = types.CallToolResult(content=[], structuredContent={"temp": 21})
    assert result_to_json(only) == {"temp": 21}
    wrapped = types.CallToolResult(content=[types.TextContent(type="text", text="3")], structuredContent={"result": 3})
    assert result_to_json(wrapped) == 3
    both = types.CallToolResult(
        content=[types.TextContent(type="text", text="It is 21 C")], structuredContent={"temp": 21}
    )
    assert result_to_json(both) == {"content": "It is 21 C", "structured": {"temp": 21}}


def test_is_error_carries_the_structured_error_payload():
    result = types.CallToolResult(
        isError=True,
        content=[types.TextContent(type="text", text="rate limited")],
        structuredContent={"code": "RATE_LIMIT", "retry_after": 30},
    )
    with pytest.raises(ToolFailed) as err:
        result_to_json(result)
    assert "rate limited" in str(err.value) and '"retry_after": 30' in str(err.value)
    assert "RATE_LIMIT" in str(err.value)
