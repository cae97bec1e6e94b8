"""Branches through the real ``langgraph dev`` server with ``langgraph_sdk``: the checkpoint tree
from ``threads.get_history``, rollback with ``threads.update_state(values=None, checkpoint=...)``
(a new head whose parent is the old checkpoint), fork with ``runs.wait(..., checkpoint_id=...)``,
and a run at the head's explicit checkpoint id continuing like one by thread id (K10).

The server is another process running the embedded model, so the assertions are about
checkpoint structure, never about what the 135M model writes."""

from __future__ import annotations

import pytest
from langgraph_sdk import get_client

from graph.checkpoint_tree import tree_from_history

pytestmark = pytest.mark.slow


@pytest.fixture
def dev_server(tmp_path, start_langgraph_dev):
    """``langgraph dev`` on a free port, tool rounds capped at 1 (tests/integration/conftest.py)."""
    return start_langgraph_dev({"HERMES_DATA_DIR": str(tmp_path / "data"), "HERMES_MAX_TOOL_ROUNDS": "1"})


def human(text: str) -> dict:
    return {"messages": [{"role": "human", "content": text}]}


def contents(values: dict) -> list[str]:
    return [m["content"] for m in values.get("messages", []) if m["type"] == "human"]


async def test_branch_tree_rollback_and_fork_through_the_sdk(dev_server):
    url, log_path = dev_server
    client = get_client(url=url)
    thread_id = (await client.threads.create())["thread_id"]

    async def run(text: str, **kwargs) -> dict:
        result = await client.runs.wait(thread_id, "agent", input=human(text), raise_error=False, **kwargs)
        log_text = log_path.read_text(errors="replace")
        assert "BlockingError" not in log_text, log_text[-3000:]
        assert isinstance(result, dict) and "messages" in result, f"run failed: {result} {log_text[-2000:]}"
        return result

    async def tree():
        history = await client.threads.get_history(thread_id, limit=1000)
        state = await client.threads.get_state(thread_id)
        return tree_from_history(thread_id, history, active=state["checkpoint"]["checkpoint_id"]), state

    await run("hi")
    t1, state1 = await tree()
    first_end = t1.active
    assert t1.heads == [first_end] and state1["next"] == [] and len(t1.roots) == 1

    # K10: a run addressed at the head's explicit checkpoint id continues the same branch
    await run("hello again", checkpoint_id=first_end)
    t2, state2 = await tree()
    assert len(t2.heads) == 1 and t2.is_ancestor(first_end, t2.active)
    assert contents(state2["values"]) == ["hi", "hello again"]
    second_end = t2.active

    # rollback: update_state with no values at the earlier checkpoint → new head, parent = it
    await client.threads.update_state(thread_id, None, checkpoint={"checkpoint_id": first_end})
    t3, state3 = await tree()
    rollback_head = t3.active
    assert state3["parent_checkpoint"]["checkpoint_id"] == first_end
    assert t3.nodes[rollback_head].source == "update" and state3["next"] == []
    assert contents(state3["values"]) == ["hi"]
    assert set(t3.heads) == {second_end, rollback_head}

    # the next run by thread id continues from the rolled-back head: "hello again" is gone
    await run("try B")
    t4, state4 = await tree()
    assert contents(state4["values"]) == ["hi", "try B"]
    assert t4.is_ancestor(rollback_head, t4.active)

    # fork: a run with an older checkpoint_id continues from it as a new branch
    await run("try C", checkpoint_id=first_end)
    t5, state5 = await tree()
    assert contents(state5["values"]) == ["hi", "try C"]
    assert len(t5.heads) == 3 and t5.active in t5.heads
    assert t5.fork_point(second_end) == first_end
    forked = t5.path_to(t5.active)
    assert forked[forked.index(first_end) + 1] in t5.nodes[first_end].children
    assert t5.nodes[forked[forked.index(first_end) + 1]].source == "input"
