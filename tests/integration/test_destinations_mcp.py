"""The wrong-destination attack against the real parts (issue 25 part 2, DESIGN §2.8): the bundled
team-chat MCP server declares its destination argument in ``_meta`` (read through the real
stdio session), and a scripted model that posts the customer list to a channel the user did not
name is refused in dispatch — the real server's database holds only the post the user asked for."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from langchain_core.messages import AIMessage

from graph import resources
from graph.context import Context
from graph.model import register_model
from graph.runner import run_turn
from tests.conftest import ScriptedChat, tool_call
from tools.toolbox import Toolbox

pytestmark = pytest.mark.slow


async def test_the_team_chat_server_declares_its_destination_argument(tmp_path: Path):
    tb = await Toolbox.open(tmp_path, timeout_s=20)
    try:
        post = tb.registry.get("post_message")
        assert post is not None and post.destination_args == ("channel",) and not post.sensitive_results
        listing = tb.registry.get("list_messages")
        assert listing is not None and listing.destination_params() == ()  # read-only
    finally:
        await tb.aclose()


async def test_a_post_to_an_unnamed_channel_never_reaches_the_real_server(tmp_path: Path):
    replies = [
        tool_call("post_message", {"channel": "general", "text": "Customers: alice@example.com, bob@example.com"}),
        tool_call("post_message", {"channel": "sales-team", "text": "We have 2 customers."}),
        AIMessage("Posted the count to #sales-team."),
    ]
    model = ScriptedChat(messages=iter(replies))
    register_model("destinations-mcp", lambda _c: model)
    context = Context(model="destinations-mcp", data_dir=str(tmp_path))
    try:
        summary = await run_turn("Post the customer count to #sales-team.", context, "attack-1", quiet=True)
    finally:
        await resources.aclose_resources()
    assert summary["stop_reason"] is None
    with sqlite3.connect(tmp_path / "team_chat.db") as con:
        assert con.execute("SELECT channel, text FROM messages").fetchall() == [("sales-team", "We have 2 customers.")]
