"""Images in tool results reach a model that accepts images as image blocks, read from their
saved files at call time; other models see the described placeholder; the state keeps only
placeholders and handles (no base64 in checkpoints)."""

from __future__ import annotations

import base64
from pathlib import Path

import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.memory import InMemorySaver
from mcp import types

from graph.builder import make_graph
from graph.state import InputState
from tests.conftest import FakeToolbox, tool_call
from tools.mcp.results import result_to_json

PNG = b"\x89PNG\r\n\x1a\n" + b"7" * 40


@pytest.mark.parametrize("accepts", [True, False])
async def test_a_chart_from_a_tool_is_shown_to_an_image_model_only(scripted, tmp_path: Path, accepts: bool):
    result = types.CallToolResult(
        content=[
            types.TextContent(type="text", text="the chart"),
            types.ImageContent(type="image", data=base64.b64encode(PNG).decode(), mimeType="image/png"),
        ]
    )
    box = FakeToolbox()
    box.add("draw_chart", lambda: result_to_json(result, None, tmp_path / "images"))
    ctx = scripted(
        [tool_call("draw_chart", {}, "c1"), AIMessage("Here is the chart.")], box, model_accepts_images=accepts
    )
    agent = make_graph(InMemorySaver())
    config: RunnableConfig = {"configurable": {"thread_id": f"img-{accepts}"}}
    await agent.ainvoke(InputState(messages=[HumanMessage("draw the chart")]), config, context=ctx)
    prompt = scripted.models[ctx.model].seen[-1]
    tool_message = next(m for m in prompt if isinstance(m, ToolMessage))
    if accepts:
        assert isinstance(tool_message.content, list)
        image = tool_message.content[1]
        assert isinstance(image, dict) and image["type"] == "image" and base64.b64decode(image["base64"]) == PNG
    else:
        assert isinstance(tool_message.content, str) and '"handle"' in tool_message.content
    state = (await agent.aget_state(config)).values
    stored = next(m for m in state["messages"] if isinstance(m, ToolMessage))
    assert isinstance(stored.content, str) and base64.b64encode(PNG).decode() not in stored.content
