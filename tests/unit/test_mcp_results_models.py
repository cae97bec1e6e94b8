"""MCP results for models: images as LangChain image blocks for a model that accepts images, the
described placeholder (with its handle) otherwise; output schemas compiled once (DESIGN §3)."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest
from mcp import types

from tools.errors import ToolFailed
from tools.mcp.results import model_content, output_validator, result_to_json
from tools.mcp.tool_listing import MCPTool

PNG_BYTES = b"\x89PNG\r\n\x1a\n" + b"1" * 64


def _image_result() -> types.CallToolResult:
    return types.CallToolResult(
        content=[
            types.TextContent(type="text", text="a chart"),
            types.ImageContent(type="image", data=base64.b64encode(PNG_BYTES).decode(), mimeType="image/png"),
        ]
    )


def test_a_vision_model_gets_the_image_others_the_placeholder(tmp_path: Path):
    value = result_to_json(_image_result(), None, tmp_path)
    text = json.dumps({"status": "ok", "data": value})
    assert model_content(text, value, accepts_images=False) == text  # placeholder: type, bytes, handle
    assert '"handle"' in text and "an image (image/png, 72 bytes)" in text

    content = model_content(text, value, accepts_images=True)
    assert isinstance(content, list) and content[0] == {"type": "text", "text": text}
    image = content[1]
    assert isinstance(image, dict) and image["type"] == "image" and image["mime_type"] == "image/png"
    assert base64.b64decode(image["base64"]) == PNG_BYTES
    # twice the same image (same handle) → one block; too big → placeholder only
    assert len(model_content(text, [value, value], accepts_images=True)) == 2
    assert model_content(text, value, accepts_images=True, max_bytes=10) == text


def test_no_handle_or_a_missing_file_stays_text(tmp_path: Path):
    unsaved = result_to_json(_image_result(), None, None)  # nowhere to save it: no handle
    assert model_content("t", unsaved, accepts_images=True) == "t"
    saved = result_to_json(_image_result(), None, tmp_path)
    Path(saved[1]["handle"]).unlink()
    assert model_content("t", saved, accepts_images=True) == "t"


def test_output_schema_is_compiled_once_and_still_checked():
    schema = {"type": "object", "properties": {"temp": {"type": "number"}}, "required": ["temp"]}
    tool = MCPTool(name="weather", description="d", input_schema={"type": "object"}, output_schema=schema)
    validator = tool.output_validator
    assert validator is not None and tool.output_validator is validator
    ok = types.CallToolResult(content=[], structuredContent={"temp": 21})
    assert result_to_json(ok, validator) == {"temp": 21}
    bad = types.CallToolResult(content=[], structuredContent={"temp": "warm"})
    with pytest.raises(ToolFailed, match="does not match the tool's output schema"):
        result_to_json(bad, validator)
    with pytest.raises(ToolFailed, match="does not match"):
        result_to_json(bad, schema)  # a plain schema still works (compiled for that call)


def test_an_invalid_output_schema_is_ignored_with_a_warning(caplog):
    assert output_validator({"type": "no-such-type"}, "MCP tool 'x'") is None
    assert "MCP tool 'x'" in caplog.text
    assert output_validator(None) is None
