"""The agent graph against an unreachable OpenAI-compatible endpoint (a real connection attempt
to 127.0.0.1:9): a clear model-unavailable error. The graph's logic: tests/unit/test_graph_loop.py."""

from __future__ import annotations

from langchain_core.messages import HumanMessage
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.memory import InMemorySaver

from graph.builder import make_graph
from graph.state import InputState
from tests.conftest import FakeToolbox


async def run(context, text: str, thread: str = "t1"):
    agent = make_graph(checkpointer=InMemorySaver())
    config: RunnableConfig = {"configurable": {"thread_id": thread}}
    return await agent.ainvoke(InputState(messages=[HumanMessage(text)]), config, context=context)


async def test_an_unreachable_endpoint_is_a_clear_model_unavailable_error(tmp_path):
    import pytest

    from graph import resources
    from graph.context import Context
    from graph.model import ModelUnavailableError

    ctx = Context(model="some-model", base_url="http://127.0.0.1:9/v1", data_dir=str(tmp_path))
    resources.set_toolbox(ctx, FakeToolbox())
    with pytest.raises(ModelUnavailableError) as info:
        await run(ctx, "hello")
    assert "http://127.0.0.1:9/v1" in str(info.value) and "HERMES_BASE_URL" in str(info.value)
