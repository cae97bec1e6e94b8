"""Content the request gives nothing for is asked of the user, not made up (DESIGN §2.9;
``tools/content_checks.py: unspecified_content``, hook in ``nodes/dispatch_tools.py``).

Measured (Qwen2.5-Coder-1.5B, the tasks suite): "Set up a reminder for me." → a reminder of
made-up text; "Send a message to the team." → "Hello, everyone! I hope you're doing well."
posted. Siblings: other tools with a content argument (an MCP chat tool), other phrasings.
"""

from __future__ import annotations

import pytest
from langchain_core.messages import AIMessage, HumanMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command

from graph.builder import make_graph
from tests.conftest import POST_MESSAGE, FakeToolbox, tool_call
from tools.builtin.catalog import SCHEDULE_REMINDER
from tools.content_checks import unspecified_content
from tools.spec import ToolSpec

CHAT = POST_MESSAGE.model_copy(update={"content_arg": "text"})
# an MCP chat tool: content in "body", destination "room"
ROOM = ToolSpec(
    name="chat__say",
    description="Say something in a chat room that people read.",
    parameters={
        "type": "object",
        "properties": {"room": {"type": "string"}, "body": {"type": "string"}},
        "required": ["room", "body"],
    },
    side_effect=True,
    destination_args=("room",),
    content_arg="body",
    source="mcp:chat",
)


@pytest.mark.parametrize(
    "spec, args, request_",
    [
        (SCHEDULE_REMINDER, {"text": "Check in", "cron": "0 9 * * 1"}, "Set up a reminder for me."),
        (SCHEDULE_REMINDER, {"text": "Check in", "cron": "0 9 1 * *"}, "Please set a reminder for me every month."),
        (CHAT, {"channel": "project", "text": "Hello, everyone!"}, "Send a message to the team."),
        (CHAT, {"channel": "ops", "text": "Hi all"}, "Post a message to #ops please"),
        (ROOM, {"room": "general", "body": "Hi"}, "Say something in the general room."),
    ],
)
def test_a_request_that_names_only_the_act_gives_no_content(spec, args, request_):
    assert unspecified_content(spec, args, [request_]) == spec.content_arg


@pytest.mark.parametrize(
    "spec, args, request_, shares",
    [
        (
            SCHEDULE_REMINDER,
            {"text": "Check the invoices", "cron": "0 9 * * 1"},
            "Remind me every Monday to check the invoices.",
            0,
        ),
        (CHAT, {"channel": "ops", "text": "deploy done"}, "Post 'deploy done' to #ops", 0),
        (CHAT, {"channel": "project", "text": "Report: …"}, "Post it to the project group.", 1),  # a result to share
        (SCHEDULE_REMINDER, {"text": "Pay rent", "cron": "0 9 1 * *"}, "Rappelle-moi de payer le loyer.", 0),
    ],
)
def test_a_request_that_says_what_to_send_is_not_asked(spec, args, request_, shares):
    assert unspecified_content(spec, args, [request_], shares=shares) is None


async def test_the_user_is_asked_for_the_text_and_it_is_what_gets_posted(scripted):
    posts: list[tuple[str, str]] = []
    box = FakeToolbox()
    box.add_spec(CHAT, lambda channel="project", text="": posts.append((channel, text)) or {"id": len(posts)})
    ctx = scripted(
        [
            tool_call("post_message", {"channel": "project", "text": "Hello, everyone! I hope you're well."}, "p1"),
            AIMessage("Posted."),
        ],
        box,
        embeddings="hash",
    )
    agent = make_graph(InMemorySaver())
    config = {"configurable": {"thread_id": "unsaid"}}
    first = await agent.ainvoke(
        {"messages": [HumanMessage("Send a message to the project channel.")]}, config, context=ctx
    )
    asked = first["__interrupt__"][0].value
    assert asked["tool"] == "post_message" and asked["missing"] == ["text"] and asked["question"].endswith("?")
    assert posts == []  # the made-up text never went out
    done = await agent.ainvoke(Command(resume="Stand-up moves to 10:00 tomorrow."), config, context=ctx)
    assert posts == [("project", "Stand-up moves to 10:00 tomorrow.")] and not done.get("stop_reason")
