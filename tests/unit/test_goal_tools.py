"""nodes.call_model.goal_tools: the tools rendered for an embedded model are a function of the
goal alone (so llama.cpp's cached prompt prefix survives the goal's calls), hold every
required step, and never a side-effect tool that no clause asks for."""

from __future__ import annotations

from nodes.call_model import goal_tools
from tests.conftest import FakeToolbox, flagship_specs

FLAGSHIP = (
    "Summarise last month's sales into an analysis report, post it to the project group, and remind me every month."
)


def registry():
    box = FakeToolbox()
    for spec in flagship_specs():
        box.add_spec(spec, lambda **kw: {"ok": True})
    return box.registry


def names(tools: list[dict]) -> list[str]:
    return [t["function"]["name"] for t in tools]


def test_the_goal_s_steps_and_its_most_relevant_reads_in_one_fixed_order():
    reg = registry()
    rendered = names(goal_tools(reg, FLAGSHIP, 4))
    assert {"generate_report", "post_message", "schedule_reminder"} <= set(rendered)
    assert len(rendered) <= 3 + 4
    assert rendered == names(goal_tools(reg, FLAGSHIP, 4))  # same goal, same prompt prefix


def test_a_read_only_request_renders_no_side_effect_tool():
    reg = registry()
    rendered = goal_tools(reg, "How many orders were placed last month? Don't post anything.", 4)
    side_effects = {s.name for s in reg.specs() if s.side_effect}
    assert not side_effects & set(names(rendered))


def test_small_talk_renders_nothing():
    assert goal_tools(registry(), "hello", 4) == []
