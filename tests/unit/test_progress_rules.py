"""graph/progress.py: which goals require which steps (the kind behind a forced side effect)."""

from __future__ import annotations

import pytest

from graph.progress import required_steps

ALL = ["generate_report", "post_message", "schedule_reminder", "query_database"]


@pytest.mark.parametrize(
    ("goal", "steps"),
    [
        ("Summarise last month's sales into an analysis report, post it to the project group, and remind me every month.",
         {"generate_report", "post_message", "schedule_reminder"}),
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
    ],
)
def test_required_steps(goal, steps):
    assert required_steps(goal, ALL) == steps


def test_only_registered_tools_are_required():
    assert required_steps("Write the report and post it to the group", ["generate_report"]) == {"generate_report"}
