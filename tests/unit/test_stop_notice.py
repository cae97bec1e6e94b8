"""The stop notice's next step fits the stop: a missing setting or an effect of unknown
outcome is the user's to fix (no "stronger model" advice); a model that stalls is not."""

from __future__ import annotations

from langchain_core.messages import AIMessage, HumanMessage
from langgraph.checkpoint.memory import InMemorySaver

from graph.builder import make_graph
from tests.conftest import FakeToolbox, tool_call
from tools.errors import ConfigurationError


def no_database() -> dict:
    raise ConfigurationError("no database configured: set HERMES_DATABASE to the SQLite file")


async def test_a_missing_setting_says_fix_the_setting_not_change_the_model(scripted):
    box = FakeToolbox()
    box.add("read_sales", no_database)
    ctx = scripted([tool_call("read_sales", {}, "c1"), AIMessage("unused")], box)
    out = await make_graph(InMemorySaver()).ainvoke(
        {"messages": [HumanMessage("read the sales")]}, {"configurable": {"thread_id": "cfg"}}, context=ctx
    )
    notice = str(out["messages"][-1].content)
    assert "HERMES_DATABASE" in notice and "stronger" not in notice and "rephrase" not in notice
    assert "do what the reason above says" in notice


async def test_a_model_that_loops_is_told_to_rephrase_or_use_a_stronger_model(scripted):
    def lookup(q: int) -> dict:
        raise RuntimeError("nothing found")

    box = FakeToolbox()
    box.add("lookup", lookup, {"type": "object", "properties": {"q": {"type": "integer"}}, "required": ["q"]})
    ctx = scripted([tool_call("lookup", {"q": i}, f"c{i}") for i in range(5)], box)
    out = await make_graph(InMemorySaver()).ainvoke(
        {"messages": [HumanMessage("look it up")]}, {"configurable": {"thread_id": "loop"}}, context=ctx
    )
    notice = str(out["messages"][-1].content)
    assert "no progress" in notice and "stronger" in notice and "do what the reason" not in notice
