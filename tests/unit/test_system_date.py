"""The system turn states today's date, so relative periods ("last month", "this quarter")
resolve against the user's calendar, not the model's training cut-off."""

from __future__ import annotations

from datetime import date, datetime

from langchain_core.messages import AIMessage, HumanMessage
from langgraph.checkpoint.memory import InMemorySaver

from graph.builder import make_graph
from nodes.assemble_context import build_system_prompt
from tests.conftest import FakeToolbox


def test_the_date_is_stated_with_its_weekday_and_only_when_given():
    assert "Today is Tuesday, 2026-12-01." in build_system_prompt([], today=date(2026, 12, 1))
    assert "Today is" not in build_system_prompt([])


async def test_every_model_call_sees_the_users_local_date(scripted):
    ctx = scripted([AIMessage("It is December.")], FakeToolbox())
    agent = make_graph(InMemorySaver())
    before = datetime.now().astimezone().date()
    await agent.ainvoke(
        {"messages": [HumanMessage("which month is it?")]}, {"configurable": {"thread_id": "date"}}, context=ctx
    )
    after = datetime.now().astimezone().date()
    system = str(scripted.models[ctx.model].seen[-1][0].content)
    assert f"Today is {before:%A}, {before.isoformat()}." in system or after.isoformat() in system
