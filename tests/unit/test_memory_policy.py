"""memory.policy: rule-based preference detection and the task trigger (seed §4.2, §6.4)."""

from __future__ import annotations

import pytest

from memory import fact_extraction, policy, task_outcome, triggers
from memory.task_outcome import TurnEvidence, assess_task
from memory.triggers import detect_preferences


@pytest.mark.parametrize(
    "text",
    [
        "I prefer Markdown reports.",
        "I'd prefer tables over charts",
        "I would really prefer short answers.",
        "My preference is PDF.",
        "Always use metric units.",
        "Never send the report to the whole team.",
        "please use ISO dates",
        "Please reply in French.",
        "From now on, send the summary to the sales group.",
        "Going forward, keep answers under 100 words.",
        "Could you always reply in English?",
        "I don't like long tables.",
        "我喜欢Markdown格式的报告",
        "我更喜欢先预览再执行。",
        "以后都用PDF。",
        "请总是用中文回复",
        "从现在开始，报告发到项目群。",
        "请不要在报告里放表格。",
    ],
)
def test_explicit_preferences_fire(text):
    assert detect_preferences(text) == [text.strip()]


@pytest.mark.parametrize(
    "text",
    [
        "What do you prefer, tables or charts?",
        "Do you always fail on Mondays?",
        "The server is always-on.",
        "It always fails after 5 pm, fix the cron job.",  # "always" mid-sentence, not an instruction
        "Please summarise the sales report.",
        "I'd like the report for October.",
        "Please use a concise style this time.",  # one-off: working memory (seed §4.1)
        "Run the monthly sales report.",
        "",
        "这次用简洁风格回复。",
        "以后再说吧。",
        "要不要加图表？",
        "你喜欢什么颜色？",
        "不要紧，继续。",
    ],
)
def test_non_preferences_do_not_fire(text):
    assert detect_preferences(text) == []


def test_only_the_preference_sentence_is_returned():
    text = "Summarise last month's sales. I prefer Markdown. Then send it to the team."
    assert detect_preferences(text) == ["I prefer Markdown."]


def test_several_preferences_in_order_without_duplicates():
    text = "I prefer PDF. 以后都用中文回复。\nI prefer PDF."
    assert detect_preferences(text) == ["I prefer PDF.", "以后都用中文回复。"]


STEPS = TurnEvidence(
    required_steps=("make_report",),
    steps_done=("make_report",),
    tools_succeeded=("make_report",),
    side_effects_done=("make_report",),
    artifacts=("out/r.md",),
    result_texts=('{"data": {"path": "out/r.md"}}',),
)
READ = TurnEvidence(tools_succeeded=("lookup",), result_texts=('{"summary": "1 row", "data": [[4217]]}',))


@pytest.mark.parametrize(
    "answer, stop_reason, evidence, expected",
    [
        ("Here is the report: out/r.md", None, STEPS, "completed"),  # every step done
        ("Total: 4217.", None, READ, "completed"),  # no step asked; answer drawn from a result
        ("partial", "max_tool_rounds", READ, "stopped"),  # stopped, but work was done
        ("Sorry, I stopped.", "no_progress", TurnEvidence(), None),  # stopped, nothing done
        ("Here is the report.", None, TurnEvidence(), None),  # the model's word alone
        ("", None, TurnEvidence(), None),
        ("   ", None, TurnEvidence(), None),
    ],
)
def test_task_outcome_needs_evidence(answer, stop_reason, evidence, expected):
    assert assess_task("make the report", answer, stop_reason, evidence).outcome == expected


def test_threshold_and_expiry_constants_follow_the_seed():
    assert policy.EPISODIC_TTL_DAYS == 30 and policy.SEMANTIC_TTL_DAYS == 180
    assert policy.passes_threshold(policy.MIN_CONFIDENCE)
    assert not policy.passes_threshold(policy.MIN_CONFIDENCE - 0.01)
    assert task_outcome.TASK_STOPPED_CONFIDENCE >= policy.MIN_CONFIDENCE


# --- one-off instructions, cross-session references, facts, behaviour --------------


@pytest.mark.parametrize(
    "text",
    ["Give me short answers this time.", "Just this once, use a table.", "这次简短回答", "For now reply in French."],
)
def test_one_off_instructions_are_working_memory(text):
    assert triggers.detect_one_off(text) and fact_extraction.extract_facts(text) == []


@pytest.mark.parametrize(
    "text, phrase",
    [
        ("Do it like last time", "like last time"),
        ("Send the report from March again", "the report from March"),
        ("same as before please", "same as before"),
        ("像上次一样做个报告", "像上次"),
        ("Summarise this month's sales", None),
    ],
)
def test_cross_session_references(text, phrase):
    found = triggers.detect_cross_session(text)
    assert (found is None) if phrase is None else (phrase.casefold() in found.casefold())


@pytest.mark.parametrize(
    "text, expected",
    [
        ("I prefer PDF reports.", [("user", "prefers_format", "pdf")]),
        ("From now on please use markdown for reports", [("user", "prefers_format", "markdown")]),
        ("I prefer detailed answers", [("user", "prefers_answer_length", "detailed")]),
        ("Please always reply in Chinese", [("user", "prefers_language", "chinese")]),
        ("我喜欢简短的回答", [("user", "prefers_answer_length", "short")]),
        (
            "I report to Alice Smith. Alice Smith is in the Data Platform group.",
            [("user", "reports_to", "Alice Smith"), ("Alice Smith", "member_of", "Data Platform group")],
        ),
        ("My manager is Bob", [("user", "reports_to", "Bob")]),
        ("我向张伟汇报", [("user", "reports_to", "张伟")]),
        ("Carol leads the sales team", [("Carol", "leads", "sales team")]),
        ("Do you always use PDF?", []),
        ("Summarise last month's sales", []),
    ],
)
def test_rule_based_fact_extraction(text, expected):
    assert [(f.subject, f.predicate, f.object) for f in fact_extraction.extract_facts(text)] == expected


def test_behaviour_values_are_uses_not_statements():
    assert fact_extraction.behaviour_values("Send me the sales report as markdown") == [("prefers_format", "markdown")]
    assert fact_extraction.behaviour_values("keep the answer short") == [("prefers_answer_length", "short")]
    assert fact_extraction.behaviour_values("hello") == []


def test_kinds_for_task():
    assert "task" in policy.kinds_for_task("generate the sales report") and "conversation" not in policy.kinds_for_task(
        "generate the sales report"
    )
    assert policy.kinds_for_task("what did Caroline say about the parade?") is None
