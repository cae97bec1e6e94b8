"""graph/progress.py: which goals require which steps — read from each tool's own metadata
(``requested_by``, ``side_effect``, ``artifact_field``), never from tool names in the runtime."""

from __future__ import annotations

import json

import pytest
from langchain_core.messages import ToolMessage

from graph.intent import tag_intent
from graph.progress import artifacts, later_side_effects, required_steps, unrequested_side_effects
from tools.builtin.catalog import BUILTIN_TOOLS
from tools.spec import ToolSpec

BUILTIN = {spec.name: spec for spec, _ in BUILTIN_TOOLS}
# the bundled team-chat server declares the same patterns in its tool's _meta
POST = ToolSpec(
    name="post_message",
    description="Post a message to a team-chat channel (test copy).",
    side_effect=True,
    requested_by=(
        r"\b(post|send|share|announce)\b.{0,80}\b(group|channel|team|chat)\b",
        r"(发到|发送到|发给).{0,20}(群|频道)",
    ),
)
FLAGSHIP = [BUILTIN["generate_report"], POST, BUILTIN["schedule_reminder"], BUILTIN["query_database"]]


@pytest.mark.parametrize(
    ("goal", "steps"),
    [
        (
            "Summarise last month's sales into an analysis report, post it to the project group, and remind me every month.",
            {"generate_report", "post_message", "schedule_reminder"},
        ),
        ("Write the sales report for last month.", {"generate_report"}),
        ("Send a note to the team channel saying we are done", {"post_message"}),
        ("Set up a monthly reminder to review sales", {"schedule_reminder"}),
        ("把上个月的销售总结成报告，发到项目群，每月提醒我", {"generate_report", "post_message", "schedule_reminder"}),
        # asks for nothing: negation, question, preference, plain chat
        ("Don't post anything to the group. What was the revenue last month?", set()),
        ("Did you already send the report to the group?", set()),
        ("I prefer short reports.", set()),
        ("hello", set()),
        ("What was the total revenue last month?", set()),
        ("Do not remind me about this.", set()),
        ("What time is it in Tokyo?", set()),
    ],
)
def test_required_steps_come_from_the_tools_metadata(goal, steps):
    assert required_steps(goal, FLAGSHIP) == steps


def test_only_registered_tools_are_required():
    assert required_steps("Write the report and post it to the group", [BUILTIN["generate_report"]]) == {
        "generate_report"
    }


def test_a_new_tool_gets_step_tracking_from_its_own_metadata():
    """A newcomer's tool: no change in graph/ or nodes/; its patterns make it a step."""
    deploy = ToolSpec(
        name="deploy_service",
        description="Deploy a service to production (test tool).",
        side_effect=True,
        requested_by=(r"\b(deploy|ship|roll out)\b",),
    )
    assert required_steps("Please roll out the billing service", [deploy]) == {"deploy_service"}
    assert required_steps("Is the billing service deployed?", [deploy]) == set()
    assert unrequested_side_effects("Is the billing service deployed?", [deploy]) == {"deploy_service"}


def test_without_patterns_a_tool_is_a_step_only_of_requests_that_name_it():
    write = ToolSpec(name="write_file", description="Write text to a file in the workspace (test).", side_effect=True)
    assert required_steps("write the notes to a file", [write]) == {"write_file"}
    assert required_steps("what time is it in Tokyo?", [write]) == set()
    # an MCP-namespaced name uses the tool's own part
    spaced = write.model_copy(update={"name": "fs__write_file"})
    assert required_steps("write a file called notes.txt", [spaced]) == {"fs__write_file"}


def test_read_only_requests_leave_every_side_effect_tool_unoffered():
    tokyo = "What time is it in Tokyo?"
    assert unrequested_side_effects(tokyo, FLAGSHIP) == {"generate_report", "post_message", "schedule_reminder"}
    assert unrequested_side_effects("Post the summary to the team channel", FLAGSHIP) == {
        "generate_report",
        "schedule_reminder",
    }


def test_artifacts_are_read_from_the_declared_result_field():
    spec = ToolSpec(
        name="make_chart",
        description="Render a chart into a PNG file (test tool).",
        side_effect=True,
        artifact_field="file",
    )
    ok = ToolMessage(json.dumps({"status": "ok", "data": {"file": "/tmp/c.png"}}), tool_call_id="1", name="make_chart")
    failed = ToolMessage(
        json.dumps({"status": "error", "data": {"file": "/x"}}), tool_call_id="2", name="make_chart", status="error"
    )
    other = ToolMessage(json.dumps({"status": "ok", "data": {"file": "/y"}}), tool_call_id="3", name="other_tool")
    assert artifacts([ok, failed, other, ok], [spec]) == ["/tmp/c.png"]


def test_intent_tags_name_the_requested_tools_or_the_speech_act():
    assert tag_intent("Summarise last month's sales into a report", FLAGSHIP) == "task:generate_report"
    assert tag_intent("remind me every month", FLAGSHIP) == "task:schedule_reminder"
    assert tag_intent("What was the revenue?", FLAGSHIP) == "question"
    assert tag_intent("I prefer short answers", FLAGSHIP) == "preference"
    assert tag_intent("hello", FLAGSHIP) == "chat"


def test_side_effect_steps_are_offered_in_the_order_the_request_states_them():
    from langchain_core.messages import HumanMessage

    goal = (
        "Summarise last month's sales into an analysis report, post it to the project group, and remind me every month."
    )
    start = [HumanMessage(goal)]
    assert later_side_effects(goal, start, FLAGSHIP) == {"post_message", "schedule_reminder"}
    done = [*start, ToolMessage(json.dumps({"status": "ok"}), tool_call_id="1", name="generate_report")]
    assert later_side_effects(goal, done, FLAGSHIP) == {"schedule_reminder"}
    # another order in the request, another order of steps
    other = "Remind me every month to check sales, and post a note to the team channel."
    assert later_side_effects(other, [HumanMessage(other)], FLAGSHIP) == {"post_message"}
