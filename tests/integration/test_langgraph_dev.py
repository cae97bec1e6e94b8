"""The real ``langgraph dev`` server serves the ``agent`` graph (langgraph.json) and runs a turn
on the embedded model through ``langgraph_sdk``: threads, runs, state history."""

from __future__ import annotations

import pytest
from langgraph_sdk import get_client

pytestmark = pytest.mark.slow
TASK = "Write last month's sales report and post it to the project group."


@pytest.fixture
def dev_server(agent_dev_server):
    return agent_dev_server(3)


async def test_dev_server_runs_a_turn_and_keeps_checkpoint_history(dev_server):
    url, log_path = dev_server
    client = get_client(url=url)
    assistants = await client.assistants.search(graph_id="agent")
    assert assistants, "the agent graph from langgraph.json is not served"
    thread = await client.threads.create()
    result = await client.runs.wait(
        thread["thread_id"],
        "agent",
        input={"messages": [{"role": "human", "content": TASK}]},
        raise_error=False,
    )
    log_text = log_path.read_text(errors="replace")
    assert "BlockingError" not in log_text, log_text[-3000:]
    assert isinstance(result, dict) and "messages" in result, f"run failed: {result} {log_text[-2000:]}"
    last = result["messages"][-1]
    assert last["type"] == "ai" and (last["content"] or last.get("tool_calls"))
    assert result["metrics"]["model_calls"] >= 1
    # a goal with known steps forces a tool call first: dispatch, compression and the MCP
    # session all ran inside the server's event loop without a BlockingError
    assert sum(result["metrics"]["tool_calls"].values()) >= 1
    assert any(m["type"] == "tool" for m in result["messages"])
    history = await client.threads.get_history(thread["thread_id"])
    nodes = {h["metadata"].get("source") for h in history}
    assert len(history) >= 4 and "loop" in nodes
    state = await client.threads.get_state(thread["thread_id"])
    assert state["values"]["goal"] == TASK
    assert (log_path.parent / "data").is_dir()
    assert not (log_path.parent / "data" / "sales.db").exists()  # the toolbox never generates data
