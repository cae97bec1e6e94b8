"""MCP progress in the graph's custom stream and MCP scores/breakers in state metrics, through
the real ``dispatch_tools`` node in a LangGraph graph, a real Toolbox and a FastMCP server
process written here (DESIGN §3).

* every ``notifications/progress`` of a call reaches ``stream_mode="custom"`` as an
  ``mcp_progress`` event tagged with the call's id and registered name;
* after the round, ``metrics["mcp_servers"]`` holds each server's score, success, latency EMA
  and breaker state, and a later round replaces (not adds to) that snapshot."""

from __future__ import annotations

import json
import sys
import textwrap
from pathlib import Path

import pytest
from langchain_core.messages import AIMessage, HumanMessage
from langgraph.graph import END, START, StateGraph

from graph.context import Context
from graph.resources import set_toolbox
from graph.state import State
from nodes.dispatch_tools import dispatch_tools
from tools.toolbox import Toolbox

pytestmark = [pytest.mark.slow, pytest.mark.timeout(120)]

SERVER = textwrap.dedent('''
    import asyncio
    from mcp.server.fastmcp import Context, FastMCP
    from mcp.types import ToolAnnotations

    mcp = FastMCP("progress-peer", log_level="WARNING")

    @mcp.tool(annotations=ToolAnnotations(readOnlyHint=True))
    async def work(ctx: Context, steps: int = 4) -> str:
        """Works in `steps` steps, reporting progress after each one."""
        for i in range(steps):
            await asyncio.sleep(0.05)
            await ctx.report_progress(i + 1, steps, f"step {i + 1}")
        return "done"

    mcp.run("stdio")
''')


def _graph():
    builder = StateGraph(State, context_schema=Context)
    builder.add_node("dispatch_tools", dispatch_tools)
    builder.add_edge(START, "dispatch_tools")
    builder.add_edge("dispatch_tools", END)
    return builder.compile()


async def _round(graph, context: Context, call_id: str, steps: int) -> tuple[list[dict], dict]:
    state = {
        "messages": [
            HumanMessage("do the work", id="h1"),
            AIMessage(
                "",
                id=f"a-{call_id}",
                tool_calls=[{"type": "tool_call", "name": "work", "args": {"steps": steps}, "id": call_id}],
            ),
        ],
        "goal_id": "h1",
        "offered_tools": ["work"],
    }
    custom: list[dict] = []
    update: dict = {}
    async for mode, chunk in graph.astream(state, context=context, stream_mode=["custom", "updates"]):
        if mode == "custom":
            custom.append(chunk)
        elif "dispatch_tools" in chunk:
            update = chunk["dispatch_tools"]
    return custom, update


async def test_progress_streams_and_scores_reach_metrics(tmp_path: Path):
    script = tmp_path / "progress_peer.py"
    script.write_text(SERVER)
    cfg = tmp_path / "mcp.json"
    cfg.write_text(
        json.dumps(
            {
                "mcpServers": {
                    "team_chat": {"enabled": False},
                    "peer": {"command": sys.executable, "args": [str(script)], "pool": {"min": 1}},
                }
            }
        )
    )
    context = Context(data_dir=str(tmp_path / "data"), mcp_config=str(cfg))
    toolbox = await Toolbox.open(tmp_path / "data", cfg, timeout_s=10.0)
    set_toolbox(context, toolbox)
    try:
        graph = _graph()
        custom, update = await _round(graph, context, "call-1", steps=4)
        assert update["pending_results"][0]["status"] == "ok", update["pending_results"]
        progress = [e for e in custom if e.get("type") == "mcp_progress"]
        assert [e["progress"] for e in progress] == [1, 2, 3, 4]
        assert all(
            e["server"] == "peer"
            and e["tool"] == "work"
            and e["name"] == "work"
            and e["tool_call_id"] == "call-1"
            and e["total"] == 4
            for e in progress
        )
        assert progress[-1]["message"] == "step 4" and progress[0]["request_id"]

        servers = update["metrics"]["mcp_servers"]
        assert [s["name"] for s in servers] == ["peer"]
        peer = servers[0]
        assert peer["calls"] == 1 and peer["success"] > 0 and peer["score"] > 0
        assert peer["breaker"] == "closed" and peer["state"] == "ready" and peer["latency_ema_s"] > 0
        assert "mcp_servers" not in update["turn_metrics"]

        _, second = await _round(graph, context, "call-2", steps=1)
        assert second["metrics"]["mcp_servers"][0]["calls"] == 2  # the server's own count
    finally:
        await toolbox.aclose()
