"""Periods without data, the graph's part (issue 18 point 4, DESIGN §5.6): a refusal that names the
value to send instead (``InvalidValueError.suggestion``: the latest period with data) is never
met with rounds of retries.

* a side-effect task asks the user (LangGraph ``interrupt()``) — "Your data ends in 2011-12;
  there is none for <last month>. Shall I report 2011-12 …?"; yes → the report of the latest
  month, titled so; no → stop, saying so, nothing written;
* a request that itself allows the latest ("the latest month") is not asked: the report of the
  latest month, titled so;
* a question (no side effect) is not asked either: the answer is the refusal's reason.

The real ``generate_report`` runs in process on a database whose data ends in 2011-12; the model
is scripted and can call only what the graph offers (``ScriptedChat``)."""

from __future__ import annotations

from pathlib import Path

import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command

from graph.builder import make_graph
from graph.suggestions import USER_ANSWER, is_yes
from tests.conftest import FakeToolbox, flagship_specs, tool_call
from tools.builtin.database.periods import month_before
from tools.builtin.demo_db import generate_sales_db
from tools.builtin.report import generate_report
from tools.errors import InvalidValueError
from tools.spec import ToolSpec

END = "2011-12"
LAST = month_before(__import__("datetime").date.today())
UNDATED = [
    {"label": "Orders", "sql": "SELECT COUNT(*) AS orders FROM orders"},
    {
        "label": "Revenue",
        "sql": "SELECT ROUND(SUM(i.quantity * i.unit_price), 2) AS revenue FROM orders o "
        "JOIN order_items i ON i.order_id = o.order_id",
    },
]
DATED = [{**q, "sql": q["sql"] + f" WHERE strftime('%Y-%m', order_date) = '{END}'"} for q in UNDATED]
TASK = "Summarise last month's sales into an analysis report."


@pytest.fixture
def old_sales(tmp_path: Path, generated_db) -> Path:
    return generated_db(generate_sales_db, tmp_path / "user" / "sales.db", months=6, end_month=END)


def report_box(db: Path, out: Path) -> FakeToolbox:
    """The flagship tools' real metadata; ``generate_report`` is the real one, in process."""
    box = FakeToolbox()
    for spec in flagship_specs():
        if spec.name == "generate_report":
            box.add_spec(spec, lambda **kw: generate_report(**kw, database=str(db), data_dir=out))
        elif spec.name in ("describe_database", "query_database"):
            box.add_spec(spec, lambda **kw: {"columns": [], "rows": [], "row_count": 0})
    return box


def report(period: str, queries: list[dict[str, str]], call_id: str) -> AIMessage:
    return tool_call("generate_report", {"title": "Sales report", "queries": queries, "period": period}, call_id)


def reports(out: Path) -> list[Path]:
    return sorted((out / "reports").glob("*.md")) if (out / "reports").exists() else []


async def test_a_side_effect_task_asks_before_reporting_the_latest_month_and_yes_reports_it(
    scripted, old_sales, tmp_path
):
    out = tmp_path / "out"
    ctx = scripted(
        [report("last month", UNDATED, "r1"), report("latest", DATED, "r2"), AIMessage("The report is written.")],
        report_box(old_sales, out),
    )
    agent = make_graph(InMemorySaver())
    config = {"configurable": {"thread_id": "ask"}}
    first = await agent.ainvoke({"messages": [HumanMessage(TASK)]}, config, context=ctx)
    asked = first["__interrupt__"][0].value
    assert asked["type"] == "confirm_suggestion" and asked["suggestion"] == {"period": "latest"}
    assert asked["question"].startswith(f"Your data ends in {END}; there is none for {LAST}. Shall I report {END}")
    assert reports(out) == [] and len(ctx_model(scripted, ctx).seen) == 1  # asked at once, no retry round

    done = await agent.ainvoke(Command(resume="yes"), config, context=ctx)
    model = ctx_model(scripted, ctx)
    assert model.offers[1] == ["generate_report"], "after yes: that tool again, nothing else"
    assert "The user agreed" in str(model.seen[1][-1].content) and '"period": "latest"' in str(
        model.seen[1][-1].content
    )
    [written] = reports(out)
    assert written.read_text().startswith(
        f"# Sales report — {END} (latest month with data; last month, {LAST}, has none)"
    )
    assert not done.get("stop_reason")
    refused = next(m for m in done["messages"] if isinstance(m, ToolMessage) and m.tool_call_id == "r1")
    assert refused.additional_kwargs[USER_ANSWER] == "yes", "the answer is kept with the refusal (asked once)"


async def test_no_stops_honestly_and_writes_nothing(scripted, old_sales, tmp_path):
    out = tmp_path / "out"
    ctx = scripted([report("last month", UNDATED, "r1"), report("latest", DATED, "r2")], report_box(old_sales, out))
    agent = make_graph(InMemorySaver())
    config = {"configurable": {"thread_id": "no"}}
    first = await agent.ainvoke({"messages": [HumanMessage(TASK)]}, config, context=ctx)
    assert first["__interrupt__"]
    done = await agent.ainvoke(Command(resume="no, leave it"), config, context=ctx)
    assert reports(out) == [] and len(ctx_model(scripted, ctx).seen) == 1, "no model call after the no"
    reason = done["stop_reason"]
    assert f"Your data ends in {END}; there is none for {LAST}" in reason and "answered 'no, leave it'" in reason
    assert "Stopped before finishing" in str(done["messages"][-1].content)


async def test_a_request_that_allows_the_latest_month_is_not_asked(scripted, old_sales, tmp_path):
    out = tmp_path / "out"
    ctx = scripted(
        [report(LAST, UNDATED, "r1"), report("latest", DATED, "r2"), AIMessage("The report is written.")],
        report_box(old_sales, out),
    )
    agent = make_graph(InMemorySaver())
    config = {"configurable": {"thread_id": "latest"}}
    done = await agent.ainvoke(
        {"messages": [HumanMessage("Summarise the sales of the latest month with data into an analysis report.")]},
        config,
        context=ctx,
    )
    assert "__interrupt__" not in done and not done.get("stop_reason")
    model = ctx_model(scripted, ctx)
    assert model.offers[1] == ["generate_report"] and "The request asks for this" in str(model.seen[1][-1].content)
    [written] = reports(out)
    assert f"{END} (latest month with data" in written.read_text().splitlines()[0]


async def test_a_question_is_answered_with_the_latest_period_and_never_asked(scripted):
    calls: list[str] = []

    def monthly_revenue(period: str) -> dict:
        calls.append(period)
        raise InvalidValueError(
            f"no rows for {period}",
            suggestion={"period": END},
            reason=f"Your data ends in {END}; there is none for {period}.",
            question=f"Shall I use {END}? (yes/no)",
        )

    box = FakeToolbox()
    box.add_spec(
        ToolSpec(
            name="monthly_revenue",
            description="Revenue of one month of the shop's data (read-only), e.g. period 2026-11.",
            parameters={"type": "object", "properties": {"period": {"type": "string"}}, "required": ["period"]},
            reads="data",
        ),
        monthly_revenue,
    )
    ctx = scripted([tool_call("monthly_revenue", {"period": LAST}, "q1")], box)
    done = await make_graph(InMemorySaver()).ainvoke(
        {"messages": [HumanMessage("What was the revenue last month?")]},
        {"configurable": {"thread_id": "question"}},
        context=ctx,
    )
    assert "__interrupt__" not in done and not done.get("stop_reason")
    assert done["messages"][-1].content == f"Your data ends in {END}; there is none for {LAST}."
    assert calls == [LAST] and len(ctx_model(scripted, ctx).seen) == 1


@pytest.mark.parametrize("answer", ["yes", "Yes, report it", "ok", "sure.", "是", "はい", "oui", True])
def test_consent(answer):
    assert is_yes(answer)


@pytest.mark.parametrize("answer", ["no", "No thanks", "not now", "不要", "いいえ", "", "maybe", False, None])
def test_no_consent(answer):
    assert not is_yes(answer)


def ctx_model(scripted, ctx):
    return scripted.models[ctx.model]
