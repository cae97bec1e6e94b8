"""Generic rules carry no workload's words (issue 21, Deliver 7): whether a clause states a taste
(``graph.progress.NOT_A_REQUEST``) and whether a goal is a piece of work
(``memory.policy.kinds_for_task``) are told by grammar words, so a request or a preference about
invoices, tickets or shipments is recognised exactly as one about reports or sales."""

from __future__ import annotations

import pytest

from graph.progress import required_steps
from memory.policy import is_task_request, kinds_for_task
from tools.spec import ToolSpec

# a side-effect tool of another workload: which clause asks for it is its own metadata
POST = ToolSpec(
    name="post_message",
    description="Post a message to a team-chat channel (test copy).",
    side_effect=True,
    requested_by=(r"\b(post|send|share|announce)\b.{0,80}\b(group|channel|team|chat)\b",),
)
KINDS = ("reports", "invoices", "tickets", "shipments")


@pytest.mark.parametrize("kind", KINDS)
def test_a_taste_for_a_kind_of_thing_asks_for_nothing_whatever_the_kind(kind):
    assert required_steps(f"I'd like {kind} to be short when you post them to the team channel.", [POST]) == set()
    assert required_steps(f"I would like {kind} kept brief when you send them to the channel.", [POST]) == set()


@pytest.mark.parametrize("kind", KINDS)
def test_i_would_like_with_you_or_a_determiner_is_still_a_request(kind):
    assert required_steps(f"I'd like you to post the {kind} to the team channel.", [POST]) == {"post_message"}
    assert required_steps(f"I'd like a post to the team channel about the {kind}.", [POST]) == {"post_message"}
    assert required_steps(f"Post the {kind} to the team channel.", [POST]) == {"post_message"}


WORK = [
    "Summarise last month's {kind} into an analysis report and post it to the project group.",
    "Archive the stale {kind}",
    "Export the open {kind} to CSV",
    "Please compile the {kind} totals by region",
    "Could you close the old {kind}?",
    "I need the {kind} for October",
    "I'd like the {kind} of last month as a table",
    "ok, count the {kind} opened this week",
]
NOT_WORK = [
    "What did Caroline say about the {kind}?",
    "When did Caroline run the {kind} report?",
    "I prefer PDF {kind}.",
    "Tell me what Caroline said about the {kind}",
    "Can you tell me what Caroline said about the {kind}?",
]


@pytest.mark.parametrize("kind", (*KINDS, "sales"))
@pytest.mark.parametrize("goal", WORK)
def test_a_request_is_work_whatever_it_is_about(goal, kind):
    kinds = kinds_for_task(goal.format(kind=kind))
    assert kinds is not None and "task" in kinds and "conversation" not in kinds


@pytest.mark.parametrize("kind", (*KINDS, "sales"))
@pytest.mark.parametrize("goal", NOT_WORK)
def test_a_question_a_statement_or_a_recall_is_not_work_whatever_it_is_about(goal, kind):
    assert kinds_for_task(goal.format(kind=kind)) is None


@pytest.mark.parametrize(
    ("goal", "work"),
    [
        ("把上个月的发票汇总成表", True),
        ("请整理工单", True),
        ("帮我关闭旧工单", True),
        ("上个月的工单有多少？", False),
        ("我喜欢喝茶", False),
        ("你好", False),
        ("hello", False),
        ("thanks!", False),
        ("", False),
    ],
)
def test_chinese_requests_and_small_talk(goal, work):
    assert is_task_request(goal) is work
