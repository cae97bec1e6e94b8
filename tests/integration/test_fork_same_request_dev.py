"""A Studio-style fork with the same text posts once, through the real ``langgraph dev`` (issue 23,
DESIGN §2.4 "the same request").

The server runs the agent graph against a scripted OpenAI-compatible model (another process
cannot use a registered Python model) and the bundled team-chat MCP server; the client is
``langgraph_sdk``. A thread says "hi", then asks for a post (one message in the chat). Then, as
Studio's "edit message and rerun" with the text unchanged (or the SDK's ``runs.wait(thread,
checkpoint_id=<the checkpoint before that message>, input=<the same text>)``), the request is
sent again from the checkpoint before it: a new message on a new branch, the model calls the
post again — and the chat still holds one message: the ledger replayed it, marked replayed. An
edited text from the same checkpoint is a new request and posts (the user's edit)."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest
from langgraph_sdk import get_client

from tests.support.scripted_openai import ScriptedOpenAI

pytestmark = pytest.mark.slow  # langgraph dev, an MCP server, a model stub

TASK = "Post the order count to the sales-team channel"
EDITED = "Post the order count to the sales-team channel, marked as final"
POST = {"channel": "sales-team", "text": "Order count: 42"}


def reply(body: dict[str, Any]) -> dict[str, Any]:
    """The model: a greeting for "hi"; for a post request, the post, then an answer once the
    request has a tool result."""
    messages = body["messages"]
    start = max(i for i, m in enumerate(messages) if m["role"] == "user")
    if "order count" not in str(messages[start].get("content")).lower():
        return {"content": "Hello."}
    if any(m["role"] == "tool" for m in messages[start:]):
        return {"content": "Posted the order count to #sales-team."}
    return {"tool_calls": [{"name": "post_message", "arguments": POST}]}


def posts(data: Path) -> list[tuple[str, str]]:
    with sqlite3.connect(data / "team_chat.db") as con:
        return con.execute("SELECT channel, text FROM messages ORDER BY id").fetchall()


def human(text: str) -> dict[str, Any]:
    return {"messages": [{"role": "human", "content": text}]}


def post_results(values: dict[str, Any]) -> list[dict[str, Any]]:
    """The post results of the latest turn."""
    messages = values["messages"]
    start = max(i for i, m in enumerate(messages) if m["type"] == "human")
    return [m for m in messages[start:] if m["type"] == "tool" and m.get("name") == "post_message"]


async def test_a_studio_fork_with_the_same_text_posts_once(tmp_path, start_langgraph_dev):
    data = tmp_path / "data"
    with ScriptedOpenAI(reply) as stub:
        url, log_path = start_langgraph_dev({"HERMES_DATA_DIR": str(data), "HERMES_EMBEDDINGS": "hash", **stub.env()})
        client = get_client(url=url)
        thread = (await client.threads.create())["thread_id"]

        async def run(text: str, **kwargs: Any) -> dict[str, Any]:
            result = await client.runs.wait(thread, "agent", input=human(text), raise_error=False, **kwargs)
            assert isinstance(result, dict) and "messages" in result, (
                f"run failed: {result} {log_path.read_text(errors='replace')[-3000:]}"
            )
            return result

        await run("hi")
        first = await run(TASK)
        assert posts(data) == [("sales-team", POST["text"])]
        original = [m for m in first["messages"] if m["type"] == "human"][-1]

        # the checkpoint Studio forks from to rerun the request: where the "hi" turn finished
        history = await client.threads.get_history(thread, limit=1000)
        base = next(
            s["checkpoint"]["checkpoint_id"]
            for s in history
            if s["next"] == []
            and [m["content"] for m in s["values"].get("messages", []) if m["type"] == "human"] == ["hi"]
        )
        calls_before = len(stub.requests)
        fork = await run(TASK, checkpoint_id=base)
        assert len(stub.requests) > calls_before  # the model ran, and called the post again
        assert posts(data) == [("sales-team", POST["text"])]  # posted once over both branches
        results = post_results(fork)
        assert len(results) == 1 and results[0]["additional_kwargs"].get("replayed") is True
        again = [m for m in fork["messages"] if m["type"] == "human"][-1]
        assert again["id"] != original["id"]
        assert again["additional_kwargs"]["same_request_as"] == original["id"]

        # an edited text from the same checkpoint is a new request: the edit posts
        await run(EDITED, checkpoint_id=base)
        assert posts(data) == [("sales-team", POST["text"])] * 2
