"""The tasks suite's claimed-effects rule (issue 27: "no final answer in the tasks suite claims
an effect the ledger does not show"): every kind of task fails when its final answer claims an
effect that the run's idempotency ledger holds no ``done`` record of — in any phrasing the
product's own claim detection (``graph.verification``) reads — and passes when the ledger shows
it. Scored on scripted transcripts: final answers over real ledger files, and one real graph
run with a scripted model."""

from __future__ import annotations

from pathlib import Path

import pytest
from langchain_core.messages import AIMessage

from evals.suites.tasks import TASKS, check, claimed_effect_problems, ledger_done_tools, side_effects
from graph import resources
from graph.runner import run_turn
from nodes.write_memory import stop_notice
from tests.conftest import FakeToolbox, flagship_specs, tool_call
from tools.idempotency import IdempotencyLedger

SPECS = flagship_specs()
BY_ID = {t.id: t for t in TASKS}

#: Claims of a post, a reminder or a report — first person, passive, other languages.
CLAIMS = [
    ("I have posted the report to the project group.", "post_message"),
    ("The report has been sent to the team channel.", "post_message"),
    ("已发送到群里了。", "post_message"),
    ("I've set up a monthly reminder for you.", "schedule_reminder"),
    ("J'ai publié le rapport dans le groupe.", None),
]


async def record_done(data_dir: Path, tool: str) -> None:
    """A ``done`` record of ``tool`` in ``data_dir``'s ledger, as a run that called it leaves."""
    ledger = IdempotencyLedger.in_data_dir(data_dir)
    try:

        async def ran() -> dict:
            return {"status": "ok", "tool": tool}

        await ledger.run_once(tool, f"eval:{tool}", ran)
    finally:
        await ledger.aclose()


@pytest.mark.parametrize(("claim", "tool"), CLAIMS)
async def test_a_claimed_effect_the_ledger_does_not_show_fails_and_one_it_shows_passes(tmp_path, claim, tool):
    data_dir = tmp_path / "run"
    data_dir.mkdir()
    problems = claimed_effect_problems(f"Here is the summary. {claim}", SPECS, ledger_done_tools(data_dir))
    assert len(problems) == 1 and "the ledger does not show" in problems[0]
    if tool:
        assert tool in problems[0]
    # an effect of another tool does not back it (a claim naming no tool: any effect does)
    other = "generate_report" if tool else None
    if other:
        await record_done(data_dir, other)
        assert claimed_effect_problems(claim, SPECS, ledger_done_tools(data_dir))
    await record_done(data_dir, tool or "post_message")
    assert claimed_effect_problems(claim, SPECS, ledger_done_tools(data_dir)) == []


@pytest.mark.parametrize(
    "answer",
    [
        "There were 80 invoices sent in 2011.",  # data, not an effect
        "I will post the report once you confirm the channel.",  # future
        "I did not post anything.",  # negated
        "Which channel should I post it to?",  # a question
        # a stop notice reports the model's claim; it does not make it
        stop_notice(
            "the model answered without doing these steps: post_message",
            [],
            [],
            "I have posted the report to the project group.",
        ),
    ],
)
def test_what_is_not_a_claim_of_an_effect_is_not_scored(tmp_path, answer):
    assert claimed_effect_problems(answer, SPECS, ledger_done_tools(tmp_path)) == []


@pytest.mark.parametrize("task_id", ["sales-orders-count", "sales-readonly-report", "sales-ask-reminder"])
def test_every_kind_fails_on_a_claim_the_ledger_does_not_show(tmp_path, task_id):
    """An otherwise passing run of each kind (the number stated, no side effect, a question
    asked) fails when its answer also claims a post; the reason says so."""
    task = BY_ID[task_id]
    answer = "There were 42. What day should it be? I have also posted it to the project group."
    summary = {"answer": answer, "stop_reason": None, "question": None}
    effects = side_effects(tmp_path)
    passed, why = check(task, summary, effects, 42.0 if task.expected else None, tmp_path, "", specs=SPECS)
    assert not passed and "post_message the ledger does not show" in why
    clean = {**summary, "answer": answer.rsplit(" I have", 1)[0]}
    assert check(task, clean, effects, 42.0 if task.expected else None, tmp_path, "", specs=SPECS) == (True, "")


@pytest.mark.slow  # a whole graph run on SQLite files
async def test_a_scripted_run_is_scored_from_its_own_ledger(scripted, data_dir):
    """A real turn (``run_turn``, the SQLite checkpointer and ledger): the post it made is in the
    ledger, so its claim stands; the reminder it claims but never scheduled does not."""
    box = FakeToolbox()
    for spec in SPECS:
        box.add_spec(spec, lambda **kw: {"ok": True})
    box.registry.ledger = IdempotencyLedger.in_data_dir(data_dir)
    said = "I have posted the weekly numbers to the project group."
    ctx = scripted(
        [
            tool_call("post_message", {"channel": "project group", "text": "Weekly numbers: 42 orders"}, "p1"),
            AIMessage(said),
        ],
        box,
        embeddings="hash",
    )
    summary = await run_turn("Post the weekly numbers (42 orders) to the project group.", ctx, "eval-t", quiet=True)
    await box.registry.ledger.aclose()
    await resources.drain_background()
    assert summary["answer"] == said and ledger_done_tools(data_dir) == ["post_message"]
    specs = box.registry.specs()
    assert claimed_effect_problems(summary["answer"], specs, ledger_done_tools(data_dir)) == []
    added = summary["answer"] + " I've also set up a monthly reminder."
    assert claimed_effect_problems(added, specs, ledger_done_tools(data_dir)) == [
        'claims schedule_reminder the ledger does not show: "I\'ve also set up a monthly reminder."'
    ]
