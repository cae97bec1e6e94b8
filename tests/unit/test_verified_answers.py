"""Grounded, verified answers; claimed effects; honest memory; no narration calls (DESIGN §5.5,
§5.3; issue 18 points 1-3 and 6, issue 27 point 2).

The graph runs in process with a scripted model that respects the offer, the real builtin
database tools' definitions (``ToolSpec.reads``) run in process on a real SQLite database, and
the real memory service (hash embeddings). Pure checks of ``graph.verification`` cover the
number formats and languages.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langgraph.checkpoint.memory import InMemorySaver

from graph import resources
from graph.builder import make_graph
from graph.claimed_effects import unbacked_claims
from graph.goal_results import Result
from graph.state import InputState
from graph.verification import (
    UNVERIFIED_ANSWER,
    absence_claims,
    check_answer,
    unsupported_figures,
    what_the_data_shows,
)
from tests.conftest import POST_MESSAGE, FakeToolbox, ScriptedChat, flagship_specs, tool_call
from tools.builtin.catalog import DESCRIBE_DATABASE, QUERY_DATABASE
from tools.builtin.database import describe_database, query_database
from tools.spec import ToolSpec

QUESTION = "Which 5 customers ordered the most in 2025? Answer only, do not post anything."


def data_box(db: Path, *extra: ToolSpec) -> FakeToolbox:
    """The real database tools (their real metadata), run in process on ``db``."""
    box = FakeToolbox()
    box.add_spec(DESCRIBE_DATABASE, lambda: describe_database(database=str(db)))
    box.add_spec(QUERY_DATABASE, lambda sql: query_database(sql, database=str(db)))
    for spec in extra:
        box.add_spec(spec, lambda **kw: {"ok": True, "ts": "1733222222.000100"})
    return box


async def run(ctx, text: str, thread: str = "t") -> dict[str, Any]:
    out = await make_graph(InMemorySaver()).ainvoke(
        InputState(messages=[HumanMessage(text)]), {"configurable": {"thread_id": thread}}, context=ctx
    )
    await resources.drain_background()
    return out


async def task_memories(ctx) -> list:
    return await resources.get_memory(ctx).episodic.list(ctx.user_id, kinds=["task"])


def result(data: Any, name: str = "query_database", reads: str | None = "data") -> Result:
    return Result(name, "c1", reads, False, data, f"{name}: ok", None, "")


ROWS = {"columns": ["name", "total"], "rows": [["Ada", 1234.567], ["Bob", 0.1234]], "row_count": 2}


# --- pure rules: figures, roundings, formats, languages -------------------------------------------


@pytest.mark.parametrize(
    "answer",
    [
        "Ada ordered 1,234.57.",  # thousands separator, rounding to cents
        "Ada ordered 1235.",  # rounding to units
        "Ada: about 1.2 thousand; Bob 12.3%.",  # scale word; a percentage of a ratio
        "Ada a commandé 1 234,57 €.",  # French spaces and decimal comma, currency
        "Ada hat 1.234,57 bestellt.",  # German separators
        "Ada 订购了１２３５元。",  # full-width digits (NFKC)
        "The 2 customers are Ada and Bob.",  # a count of the listed items
        "In 2025: 1. Ada 1234.6\n2. Bob",  # the question's year; list markers are not figures
    ],
)
def test_a_figure_that_is_a_rounding_or_a_count_of_a_result_passes(answer):
    assert unsupported_figures(answer, QUESTION, [result(ROWS)]) == []


@pytest.mark.parametrize(
    "answer, bad",
    [("Ada ordered 1,300.", "1,300"), ("Ada ordered 1.240,00 €", "1.240,00"), ("艾达订购了 999 元", "999")],
)
def test_a_figure_in_no_result_is_unsupported(answer, bad):
    assert unsupported_figures(answer, QUESTION, [result(ROWS)]) == [bad]


REMINDER = {"id": 1, "day_of_month": 1, "time": "09:00", "recurrence": "monthly"}
EVENING = {"id": 2, "day_of_month": 1, "time": "21:30", "recurrence": "monthly"}


@pytest.mark.parametrize(
    "answer, data",
    [
        ("A reminder every month at 9 AM on the first day.", REMINDER),  # the demo's answer
        ("Reminder set for 9am on day 1.", REMINDER),
        ("Je vous le rappelle à 9h le 1er.", REMINDER),
        ("Erinnerung um 9 Uhr.", REMINDER),
        ("每月1日9点提醒您。", REMINDER),
        ("毎月1日9時にお知らせします。", REMINDER),
        ("at 9 o'clock", REMINDER),
        ("at 9:30 p.m. on the 1st", EVENING),
        ("at 9:30 PM", EVENING),
    ],
)
def test_a_time_of_day_in_clock_words_is_the_time_of_a_result(answer, data):
    assert unsupported_figures(answer, QUESTION, [result(data, "schedule_reminder", None)]) == []


@pytest.mark.parametrize("answer, bad", [("at 10 PM", "10"), ("at 9 AM", "9"), ("at 9:45 p.m.", "45")])
def test_a_time_of_day_that_is_not_the_results_is_unsupported(answer, bad):
    assert unsupported_figures(answer, QUESTION, [result(EVENING, "schedule_reminder", None)]) == [bad]


@pytest.mark.parametrize(
    "claim",
    [
        "There are no customers in the database.",
        "数据库中没有客户。",
        "Il n'y a aucun client.",
        "No hay clientes.",
        "Es gibt keine Kunden.",
        "顧客はありません。",
        "0 customers ordered in 2025.",
        # measured (2026-12-07 data suite): both passed as answers over reads marked
        # unexpected_empty (a value spelt 'Urgent' where the rows say 'urgent')
        "No urgent tickets were opened in November 2025.",
        "No revenue was brought in during November 2025 for software products.",
        "In November, no invoices were issued.",
        "We did not get any orders in 2025.",  # measured (Northwind): a none the check did not see
        "We didn’t receive any invoices.",
    ],
)
def test_a_claim_of_none_rests_only_on_a_read_that_found_nothing(claim):
    assert absence_claims(claim) == [claim]
    empty = result({"columns": ["n"], "rows": [], "row_count": 0})
    count_zero = result({"columns": ["count(*)"], "rows": [[0]], "row_count": 1})
    schema = result({"tables": [{"name": "customers", "row_count": 0}]}, "describe_database", "schema")
    assert check_answer(claim, QUESTION, [empty], needs_data=True).ok
    assert check_answer(claim, QUESTION, [count_zero], needs_data=True).ok
    null_sum = result({"columns": ["SUM(total)"], "rows": [[None]], "row_count": 1})  # SUM over no rows
    assert check_answer(claim, QUESTION, [null_sum], needs_data=True).ok
    assert not check_answer(claim, QUESTION, [result(ROWS)], needs_data=True).ok
    # a schema that lists the table (even with a row count) is not a read of its rows
    assert not check_answer(claim, QUESTION, [schema], needs_data=True).grounded


@pytest.mark.parametrize(
    "answer",
    [
        "No, Canada is not in the top five.",  # a yes/no answer
        "Products with no returns were Laptop Pro 14 and Tablet Mini 8.",
        "USA, Canada and France had the most invoices; no other country came close.",
        "No problem: Ada ordered 1,234.57.",
    ],
)
def test_a_no_that_claims_no_absence_is_not_one(answer):
    assert absence_claims(answer) == []


def test_a_count_of_zero_read_as_its_row_count_is_refused():
    """Measured (Qwen2.5-Coder-1.5B, Chinook): COUNT(*) returned [[0]], row_count 1, and the
    answer was "There are currently 1 customer in Japan"."""
    zero = result({"columns": ["COUNT(*)"], "rows": [[0]], "row_count": 1})
    assert unsupported_figures("There are currently 1 customer in Japan.", "Customers in Japan?", [zero]) == ["1"]
    assert check_answer("There are no customers in Japan.", "Customers in Japan?", [zero], needs_data=True).ok
    # the note of an empty query names the dates with data: their days are no count either
    note = result({"columns": ["n"], "rows": [], "row_count": 0, "note": "data from 2009-01-01 to 2013-12-22"})
    assert unsupported_figures("We issued 1 invoice last month.", "Invoices last month?", [note]) == ["1"]
    assert unsupported_figures("The data ends on 2013-12-22.", "Invoices last month?", [note]) == []
    one = result({"columns": ["name"], "rows": [["Aoki"]], "row_count": 1})  # one row listed: a count of 1
    assert unsupported_figures("There is 1 customer in Japan: Aoki.", "Customers in Japan?", [one]) == []


def test_a_period_with_no_data_may_be_named_from_the_query_that_found_nothing():
    """The period comes from the call's arguments (what was read), not from a result row."""
    sql = "SELECT SUM(total) FROM orders WHERE order_date >= '2026-11-01' AND order_date < '2026-12-01'"
    empty = Result(
        "query_database",
        "q1",
        "data",
        False,
        {"columns": ["s"], "rows": [], "row_count": 0},
        "",
        None,
        "",
        {"sql": sql},
    )
    assert check_answer("There were no orders in 2026-11.", "Sales last month?", [empty], needs_data=True).ok
    assert not check_answer("There were no orders in 2026-10.", "Sales last month?", [empty], needs_data=True).ok
    # measured: "We issued 1 invoice last month" after a query for 2026-11-01.. that found none
    assert unsupported_figures("We issued 1 invoice last month.", "Invoices last month?", [empty]) == ["1"]


def test_what_the_tools_say_of_themselves_is_no_claim_about_data():
    from graph.verification import verify

    answer = "I can query your database (at most 500 rows) and write reports of 1-8 queries."
    assert verify(answer, "What can you do?", "question", [], flagship_specs()).ok
    assert not verify("You have 612 customers.", "What can you do?", "question", [], flagship_specs()).grounded


# --- the graph: grounded, then verified, else honest ----------------------------------------------


async def test_a_schema_only_none_is_sent_to_read_then_ends_honest_and_is_never_a_memory(scripted, db):
    ctx = scripted(
        [
            tool_call("describe_database", {}, "d1"),
            AIMessage("There are no customers in the database."),  # no data read: sent to read
            tool_call("query_database", {"sql": "SELECT name FROM customers LIMIT 5"}, "q1"),
            AIMessage("There are no customers in the database."),  # the read found rows: back once
            AIMessage("There are none."),  # still unsupported: honest answer, stop reason
        ],
        data_box(db),
        embeddings="hash",
    )
    out = await run(ctx, QUESTION)
    model = scripted.models[ctx.model]
    # after the schema-only answer the offer is the read-only data tools, and a call is required
    assert model.offers[2] == ["query_database"]
    assert out["stop_reason"].startswith(UNVERIFIED_ANSWER)
    final = out["messages"][-1].content
    assert final.startswith("I could not establish") and "Here is what the data shows" in final
    assert "There are none" not in final
    assert await task_memories(ctx) == []


async def test_a_figure_in_no_result_goes_back_once_and_a_rounding_then_passes(scripted, db):
    sql = "SELECT COUNT(*) AS n, ROUND(AVG(unit_price) * 1000, 3) AS avg FROM products"
    rows = query_database(sql, database=str(db))["rows"][0]
    count, avg = rows[0], rows[1]
    ctx = scripted(
        [
            tool_call("query_database", {"sql": sql}, "q1"),
            AIMessage(f"There are {count + 7} products."),  # a figure in no result
            AIMessage(f"There are {count} products, averaging {avg:,.1f} per thousand."),  # a rounding
        ],
        data_box(db),
        embeddings="hash",
    )
    out = await run(ctx, "How many products are there, and their average price per thousand?")
    model = scripted.models[ctx.model]
    note = model.seen[2][-1].content
    assert f"{count + 7}" in note and "not supported" in note  # told what is unsupported, once
    assert out["stop_reason"] is None
    assert out["messages"][-1].content.startswith(f"There are {count} products")
    (memory,) = await task_memories(ctx)
    assert "answer verified against this goal's results" in memory.metadata["evidence"]
    assert any(e.startswith("evidence: query_database#q1 (request ") for e in memory.metadata["evidence"])


async def test_a_zero_row_read_supports_an_absence_claim(scripted, db):
    sql = "SELECT name FROM customers WHERE name = 'Nobody Such'"
    ctx = scripted(
        [tool_call("query_database", {"sql": sql}, "q1"), AIMessage("There is no customer named Nobody Such.")],
        data_box(db),
        embeddings="hash",
    )
    out = await run(ctx, "Is there a customer named Nobody Such?")
    assert out["stop_reason"] is None and out["messages"][-1].content == "There is no customer named Nobody Such."
    assert len(await task_memories(ctx)) == 1


async def test_a_figure_stated_without_any_read_is_sent_to_read(scripted, db):
    ctx = scripted(
        [
            AIMessage("There are 42 customers."),  # from nowhere
            tool_call("query_database", {"sql": "SELECT COUNT(*) FROM customers"}, "q1"),
            AIMessage("There are 60 customers."),
        ],
        data_box(db),
        embeddings="hash",
    )
    out = await run(ctx, "How many customers are there?")
    assert scripted.models[ctx.model].offers[1] == ["query_database"]
    assert out["stop_reason"] is None and out["messages"][-1].content == "There are 60 customers."


# --- claimed effects (issue 27 point 2) -------------------------------------------------------


@pytest.mark.parametrize(
    "claim",
    [
        "I have posted the report to #finance.",
        "The figures have been sent to the finance channel.",
        "我已将结果发送到财务群。",
    ],
)
async def test_a_claimed_effect_that_did_not_happen_is_corrected_before_it_is_shown(scripted, db, claim):
    ctx = scripted(
        [
            tool_call("query_database", {"sql": "SELECT COUNT(*) FROM customers"}, "q1"),
            AIMessage(f"There are 60 customers. {claim}"),
        ],
        data_box(db, POST_MESSAGE),
        embeddings="hash",
    )
    out = await run(ctx, "How many customers are there? Answer only, do not post anything.")
    shown = out["messages"][-1]
    assert shown.name == "hermes" and shown.content.startswith("There are 60 customers.")
    assert "Not done:" in shown.content and "post_message" in shown.content
    assert "Done: no action with an effect." in shown.content
    assert claim not in shown.content.split("Not done:")[0]
    assert await task_memories(ctx) == []  # an answer claiming an effect not done is no memory


@pytest.mark.parametrize(
    "sentence, claims",
    [
        ("I have posted it so you can see it.", True),  # a "can" after the claim negates nothing
        ("I posted the report, but could not schedule the reminder.", True),
        ("I have not posted anything.", False),
        ("I will now post the report.", False),
        ("我没有发送消息。", False),
        ("已发送到群。", True),
        ("J'ai publié le rapport dans #finance.", True),
    ],
)
def test_a_claim_is_negated_or_future_only_where_it_is_made(sentence, claims):
    from memory.task_outcome import effect_claims

    assert bool(effect_claims(sentence)) is claims


def test_claims_are_attributed_by_the_tools_requested_by_words():
    specs = flagship_specs()
    answer = "I generated the report. I have posted it to the team channel. I will now set the reminder."
    # the report was made, nothing was posted; the future sentence claims nothing
    assert unbacked_claims(answer, specs, {"generate_report"}) == [
        ("I have posted it to the team channel.", "post_message")
    ]
    assert unbacked_claims(answer, specs, {"generate_report", "post_message"}) == []
    assert unbacked_claims("已设置每月提醒。", specs, set()) == [("已设置每月提醒。", "schedule_reminder")]
    # the passive voice about the user's data claims no effect of Hermes
    for about_data in ("80 invoices were sent in 2011.", "12 tickets were created in 2026-11.", "没有订单被创建。"):
        assert unbacked_claims(about_data, specs, set()) == [], about_data
    assert unbacked_claims("The report has been sent to the team channel.", specs, {"generate_report"}) == [
        ("The report has been sent to the team channel.", "post_message")
    ]


# --- no wasted rounds (issue 18 point 6) ------------------------------------------------------


class Feed:
    """The script as an iterator that its copies share (``bind_tools`` copies the model)."""

    def __init__(self, replies: list) -> None:
        self.replies = list(replies)

    def __iter__(self) -> Feed:
        return self

    def __next__(self) -> Any:
        if not self.replies:
            raise StopIteration
        return self.replies.pop(0)


class GrammarChat(ScriptedChat):
    """A scripted model that obeys ``tool_choice="required"`` as a grammar does: under it, a
    scripted answer cannot be produced and is skipped (the model goes on with its next call)."""

    required: bool = False

    def bind_tools(self, tools: Any, **kwargs: Any) -> GrammarChat:
        bound = super().bind_tools(tools, **kwargs)
        return bound.model_copy(update={"required": kwargs.get("tool_choice") == "required"})

    async def _agenerate(self, messages, stop=None, run_manager=None, **kwargs):  # type: ignore[override]
        feed = self.messages
        if self.required and isinstance(feed, Feed):
            while feed.replies and not getattr(feed.replies[0], "tool_calls", None):
                feed.replies.pop(0)
        return await super()._agenerate(messages, stop=stop, run_manager=run_manager, **kwargs)


async def test_a_narration_between_steps_costs_no_model_call(data_dir):
    from graph.context import Context
    from graph.model import register_model

    box = FakeToolbox()
    outputs = {
        "generate_report": {"path": "reports/sales-2025-06.md", "version": 1, "queries": []},
        "post_message": {"ok": True},
        "schedule_reminder": {"id": 1, "next_run": "2025-07-01T09:00"},
    }
    for spec in flagship_specs():
        box.add_spec(spec, lambda _o=outputs.get(spec.name, {"ok": True}), **kw: _o)
    script = [
        AIMessage("I will now write the report."),
        tool_call("generate_report", {"title": "Sales 2025-06", "queries": [{"label": "n", "sql": "SELECT 1"}]}),
        AIMessage("I will now post the report."),
        tool_call("post_message", {"channel": "project group", "text": "Report: reports/sales-2025-06.md"}),
        AIMessage("I will now schedule the reminder."),
        tool_call("schedule_reminder", {"text": "send the sales report"}),
        AIMessage("Done: report reports/sales-2025-06.md, posted, reminder set."),
    ]
    model = GrammarChat(messages=Feed(script))
    model.seen, model.offers = [], []
    register_model("grammar-narrator", lambda _ctx: model)
    ctx = Context(model="grammar-narrator", data_dir=str(data_dir), embeddings="hash")
    resources.set_toolbox(ctx, box)
    goal = "Summarise last month's sales into a report, post it to the project group, and remind me every month."
    out = await run(ctx, goal)
    assert out["stop_reason"] is None
    assert [m.name for m in out["messages"] if isinstance(m, ToolMessage)] == [
        "generate_report",
        "post_message",
        "schedule_reminder",
    ]
    # 3 steps + the final answer: no call spent on a narration (6 with the forced call reverted)
    assert out["metrics"]["model_calls"] == 4


async def test_a_done_tasks_closing_sentence_with_a_figure_no_result_shows_becomes_the_steps_summaries(data_dir):
    """Demo regression: every step succeeded, the closing sentence said "at 9 AM" of a reminder
    at 21:00; sent back, the model answered "I could not establish the figure 9" and the run
    ended "could not establish an answer" — a done task reported as a failure. Now the steps'
    own summaries are the answer (grounded), the run finished, and no model call is spent."""
    from graph.context import Context
    from graph.model import register_model

    box = FakeToolbox()
    outputs = {
        "generate_report": {"path": "reports/sales-2025-06.md", "version": 1, "queries": []},
        "post_message": {"ok": True},
        "schedule_reminder": {"id": 1, "time": "21:00", "next_run": "2025-07-01T21:00"},
    }
    for spec in flagship_specs():
        box.add_spec(spec, lambda _o=outputs.get(spec.name, {"ok": True}), **kw: _o)
    script = [
        tool_call("generate_report", {"title": "Sales 2025-06", "queries": [{"label": "n", "sql": "SELECT 1"}]}),
        tool_call("post_message", {"channel": "project group", "text": "Report: reports/sales-2025-06.md"}),
        tool_call("schedule_reminder", {"text": "send the sales report"}),
        AIMessage("Report written and posted; a reminder is set for 9 AM every month."),
        AIMessage("I could not establish the figure 9."),
    ]
    model = GrammarChat(messages=Feed(script))
    model.seen, model.offers = [], []
    register_model("grammar-closer", lambda _ctx: model)
    ctx = Context(model="grammar-closer", data_dir=str(data_dir), embeddings="hash")
    resources.set_toolbox(ctx, box)
    goal = "Summarise last month's sales into a report, post it to the project group, and remind me every month."
    out = await run(ctx, goal)
    assert out["stop_reason"] is None
    final = out["messages"][-1]
    assert isinstance(final, AIMessage) and final.name == "hermes"
    assert final.content.startswith("Done: ") and "reports/sales-2025-06.md" in final.content
    assert "9 AM" not in final.content and "could not establish" not in final.content
    assert out["metrics"]["model_calls"] == 4  # 3 steps + the closing sentence, none sent back


# --- honest memory (issue 18 point 3) -----------------------------------------------------------


async def test_write_memory_never_stores_an_answer_its_results_do_not_support(data_dir, db):
    """The memory check does not rely on evaluate_progress: an unsupported answer that reached
    write_memory (a graph wired otherwise, a resumed old checkpoint) is no task memory."""
    import json

    from langgraph.graph import END, START, StateGraph

    from graph.context import Context
    from graph.state import State
    from nodes.write_memory import write_memory

    alone = StateGraph(State, context_schema=Context)
    alone.add_node(write_memory)
    alone.add_edge(START, "write_memory")
    alone.add_edge("write_memory", END)
    graph = alone.compile()
    ctx = Context(model="unused", data_dir=str(data_dir), embeddings="hash")
    resources.set_toolbox(ctx, data_box(db))
    sql = "SELECT name FROM customers ORDER BY name LIMIT 1"
    name = query_database(sql, database=str(db))["rows"][0][0]
    body = {"status": "ok", "summary": "query_database: 1 rows, columns name", "data": {"rows": [[name]]}}

    messages = [
        HumanMessage("Who is our first customer, and how much did they order?", id="h1"),
        tool_call("query_database", {"sql": sql}, "q1"),
        ToolMessage(json.dumps(body), tool_call_id="q1", name="query_database"),
    ]
    for answer, stored in ((f"{name} ordered 999,999.", False), (f"Our first customer is {name}.", True)):
        state = {"messages": [*messages, AIMessage(answer)], "goal": messages[0].content, "intent": "question"}
        await graph.ainvoke(state, {"configurable": {"thread_id": f"w-{stored}"}}, context=ctx)
        await resources.drain_background()
        assert bool(await task_memories(ctx)) is stored, answer


async def test_a_new_verified_answer_to_the_same_question_supersedes_the_old(scripted, db):
    question = "How many customers are there?"
    count = tool_call("query_database", {"sql": "SELECT COUNT(*) FROM customers"})
    first = scripted([count, AIMessage("There are 60 customers.")], data_box(db), embeddings="hash")
    await run(first, question, "a")
    (old,) = await task_memories(first)
    again = tool_call("query_database", {"sql": "SELECT COUNT(*) AS n FROM customers"})
    second = scripted([again, AIMessage("The database holds 60 customers.")], data_box(db), embeddings="hash")
    await run(second, question, "b")
    (new,) = await task_memories(second)  # the old one is no longer recalled
    assert new.id != old.id and "holds 60" in new.text
    assert new.metadata["supersedes"] == [{"ref": f"episodic:{old.id}", "text": old.text[:300]}]


# --- MCP tools: what a result holds comes from the server's annotations ---------------------------


def _mcp_specs(**override_tools: dict) -> dict[str, ToolSpec]:
    from types import SimpleNamespace

    from tools.mcp.config import server_settings
    from tools.mcp.tool_listing import MCPTool
    from tools.registry import ToolRegistry
    from tools.toolbox import Toolbox

    schema = {"type": "object", "properties": {}, "required": []}

    def tool(name: str, annotations: dict, meta: dict | None = None) -> MCPTool:
        return MCPTool(
            name, f"{name}: a tool of the notes test server, does one thing.", schema, None, annotations, meta or {}
        )

    tools = [
        tool("read_notes", {"readOnlyHint": True}),
        tool("list_note_fields", {"readOnlyHint": True}, {"hermes/reads": "schema"}),
        tool("post_note", {"readOnlyHint": False}, {"hermes/requested_by": [r"\bpost\b.{0,40}\bnote\b"]}),
        tool("mystery", {}),
    ]
    entry = {"command": "unused", "tools": override_tools}
    server = SimpleNamespace(name="notes", tools={t.name: t for t in tools}, settings=server_settings("notes", entry))
    tb = Toolbox(Path("."), ToolRegistry(), executor=None, mcp=None)  # type: ignore[arg-type]
    tb._register_server(server, 10.0)  # type: ignore[arg-type]
    return {s.name: s for s in tb.registry.specs()}


def test_an_mcp_read_only_tool_reads_data_unless_its_meta_says_schema():
    specs = _mcp_specs(mystery={"side_effect": False})
    assert specs["read_notes"].reads == "data"  # readOnlyHint: its results can ground an answer
    assert specs["list_note_fields"].reads == "schema"  # _meta "hermes/reads"
    assert specs["post_note"].reads is None
    assert specs["mystery"].reads == "data"  # the user's config says it only reads


async def test_an_answer_after_an_mcp_schema_read_is_sent_to_the_mcp_data_read(scripted):
    specs = _mcp_specs()
    box = FakeToolbox()
    box.add_spec(specs["list_note_fields"], lambda: {"fields": ["title", "body"], "note_count": 3})
    box.add_spec(specs["read_notes"], lambda: {"notes": []})
    ctx = scripted(
        [
            tool_call("list_note_fields", {}, "s1"),
            AIMessage("没有任何笔记。"),  # "there are no notes": from a schema read only
            tool_call("read_notes", {}, "r1"),
            AIMessage("没有任何笔记。"),  # now it rests on a read that found nothing
        ],
        box,
        embeddings="hash",
    )
    out = await run(ctx, "我有多少条笔记？")
    assert scripted.models[ctx.model].offers[2] == ["read_notes"]
    assert out["stop_reason"] is None and out["messages"][-1].content == "没有任何笔记。"


def test_memory_list_shows_why_a_task_memory_was_trusted(scripted, db, data_dir, monkeypatch):
    import asyncio

    from typer.testing import CliRunner

    from graph.cli import app

    monkeypatch.setenv("HERMES_EMBEDDINGS", "hash")
    sql = "SELECT COUNT(*) AS n FROM customers"
    ctx = scripted(
        [tool_call("query_database", {"sql": sql}, "q1"), AIMessage("There are 60 customers.")],
        data_box(db),
        embeddings="hash",
    )

    async def answer() -> None:
        await run(ctx, "How many customers are there?", "why")
        await resources.aclose_resources()

    asyncio.run(answer())
    out = CliRunner().invoke(
        app, ["memory", "list", "--kind", "task", "--data-dir", str(data_dir)], env={"COLUMNS": "400"}
    )
    assert out.exit_code == 0, out.output
    assert "why: 1 tool(s) succeeded" in out.output and "answer verified against this goal's results" in out.output
    assert "query_database#q1 (request why:" in out.output  # the call, its request id


def test_once_data_was_read_the_tools_descriptions_support_no_figure():
    """Measured (Chinook, 4 of 18 questions): COUNT(*) returned 0 and the answer "There are
    currently 1 customer in Japan." passed — on the "1" of a tool description's "1-8 queries"."""
    from graph.verification import verify

    zero = result({"columns": ["COUNT(*)"], "rows": [[0]], "row_count": 1})
    specs = flagship_specs()
    assert any("1" in s.description for s in specs)
    check = verify(
        "There are currently 1 customer in Japan.", "How many customers in Japan?", "question", [zero], specs
    )
    assert check.figures == ["1"] and not check.ok
    assert verify("There are no customers in Japan.", "How many customers in Japan?", "question", [zero], specs).ok


@pytest.mark.parametrize(
    "answer, bad",
    [
        ("The total revenue in December 2011 was $38,620.", ["38,620"]),  # measured: SUM = 38.62
        ("The total revenue in December 2011 was $38.62.", []),
        ("Der Umsatz im Dezember 2011 betrug 38,62 €.", []),  # a decimal comma where it is one
        ("Le chiffre d'affaires de décembre 2011 est de 38,620 €.", []),  # not English: both readings
    ],
)
def test_an_english_answer_reads_a_comma_as_thousands(answer, bad):
    total = result({"columns": ["SUM(Total)"], "rows": [[38.62]], "row_count": 1})
    assert unsupported_figures(answer, "What was our total revenue in December 2011?", [total]) == bad


def test_once_data_was_read_a_schema_row_count_supports_no_figure():
    """Measured (the sales database): two failed queries, two schema reads and a read of an empty
    payload, then "The average order value in November 2026 is $5.00." — the 5 a table's row
    count in the schema description."""
    schema = result({"tables": [{"name": "regions", "row_count": 5}]}, "describe_database", "schema")
    empty_read = result({"handle": "payloads/x.json", "data": None}, "read_result")
    answer = "The average order value in November 2026 is $5.00."
    assert unsupported_figures(answer, "Average order value in November 2026?", [schema, empty_read]) == ["5.00"]
    # with no data read, the schema's numbers answer a question about the schema
    assert unsupported_figures("The regions table has 5 rows.", "How many rows in regions?", [schema]) == []


def test_a_small_number_in_the_query_is_no_count_it_returned():
    """Measured (Chinook): ``… = strftime('%Y-%m', 'now() - interval 1 month')`` returned
    COUNT(*) = 0, and "We issued 1 invoice last month." passed on the query's "1"."""
    sql = "SELECT COUNT(*) FROM Invoice WHERE strftime('%Y-%m', InvoiceDate) = strftime('%Y-%m', 'now() - interval 1 month')"
    zero = Result(
        "query_database",
        "q1",
        "data",
        False,
        {"columns": ["COUNT(*)"], "rows": [[0]], "row_count": 1},
        "",
        None,
        "",
        {"sql": sql},
    )
    assert unsupported_figures("We issued 1 invoice last month.", "Invoices last month?", [zero]) == ["1"]
    # a threshold the query asked for still supports the answer that repeats it
    big = Result(
        "query_database",
        "q2",
        "data",
        False,
        {"columns": ["n"], "rows": [], "row_count": 0},
        "",
        None,
        "",
        {"sql": "SELECT id FROM orders WHERE total > 1000"},
    )
    assert unsupported_figures("No order was over 1,000.", "Any order over a thousand?", [big]) == []


def test_the_honest_answer_quotes_a_one_row_result_by_its_values():
    # a count of 0 quoted as "1 rows … {json}" read as one more "1" to the user (evals data suite)
    count = Result(
        "query_database",
        "q1",
        "data",
        False,
        {"columns": ["COUNT(*)"], "rows": [[0]], "row_count": 1, "note": "No data for this query."},
        "query_database: one row: COUNT(*) = 0",
        None,
        "{}",
    )
    shown = what_the_data_shows([count])
    assert shown == "query_database: one row: COUNT(*) = 0 (No data for this query.)"
    many = Result(
        "query_database",
        "q2",
        "data",
        False,
        {"columns": ["n"], "rows": [[1], [2]]},
        "query_database: 2 rows, columns n",
        None,
        "{}",
    )
    assert '"rows": [[1], [2]]' in what_the_data_shows([many])


@pytest.mark.parametrize(
    "answer, misread",
    [("The total revenue in December 2011 was $38,620.", "38,620"), ("Revenue: 3862 dollars.", "3862")],
)
def test_a_figure_with_a_results_digits_is_named_as_that_value(answer, misread):
    # measured: SUM(Total) = 38.62 answered "$38,620" three times; told only that 38,620 is in no
    # result, the model wrote it again
    import json as _json

    data = {"columns": ["SUM(Total)"], "rows": [[38.62]], "row_count": 1}
    text = _json.dumps({"status": "ok", "summary": "query_database: one row: SUM(Total) = 38.62", "data": data})
    read = Result("query_database", "q", "data", False, data, "", None, text)
    check = check_answer(answer, "What was our total revenue in December 2011?", [read], needs_data=True)
    assert check.misread == {misread: "38.62"}
    assert f"{misread} has the digits of 38.62, which a result states: write 38.62 as it is" in check.problems()
    assert "38.62" not in "; ".join(check.problems(quote=False))  # the user's stop reason stays short


async def test_a_question_answered_with_the_note_of_a_read_that_found_nothing_gets_none(scripted, db):
    # measured: COUNT(*) = 0 for "this month" on data ending earlier, its note repeated as the
    # answer, sent back, the same query three times, stopped — with the answer in hand
    sql = "SELECT COUNT(*) FROM orders WHERE strftime('%Y-%m', order_date) = strftime('%Y-%m', 'now')"
    note = query_database(sql, database=str(db))["note"]
    ctx = scripted([tool_call("query_database", {"sql": sql}, "q1"), AIMessage(note)], data_box(db), embeddings="hash")
    out = await run(ctx, "How many orders have come in this month?")
    told = out["messages"][-1].content
    assert out["stop_reason"] is None and told.startswith("There is none: no rows match what was asked"), told
    assert "has data from" in told and "never invent" not in told.lower()  # the facts, not the advice
    assert len(scripted.models[ctx.model].seen) == 2  # no send-back round


def test_the_note_of_a_read_with_a_filter_nobody_asked_for_is_no_answer_of_none(db):
    import json

    from graph.claimed_effects import none_found_answer
    from graph.goal_results import goal_results
    from graph.verification import verify

    sql = "SELECT COUNT(*) FROM orders o JOIN customers c ON c.customer_id = o.customer_id WHERE c.segment = 'Atlantis'"
    read = query_database(sql, database=str(db))
    work = [
        HumanMessage("How many orders have come in this month?"),
        tool_call("query_database", {"sql": sql}, "q1"),
        ToolMessage(
            json.dumps({"status": "ok", "summary": "one row", "data": read}), tool_call_id="q1", name="query_database"
        ),
    ]
    specs = [DESCRIBE_DATABASE, QUERY_DATABASE]
    results = goal_results(work, specs)
    assert (
        results[0].empty
        and not verify(none_found_answer(read["note"]), str(work[0].content), "", results, specs, work).ok
    )


async def test_an_answer_resting_on_a_read_run_with_another_column_says_which_was_counted(scripted, db):
    # the tool ran customers.name = 'smb' (no row) as customers.segment = 'smb' (issue 18; the
    # kind: tests/unit/test_value_repairs.py): right if the model picked the wrong column, wrong
    # if the user meant it — the answer the user gets says which was counted
    sql = "SELECT COUNT(*) FROM customers WHERE name = 'smb'"
    read = query_database(sql, database=str(db))
    count = read["rows"][0][0]
    assert read["assumed"] == ["name = 'smb' (no customers row holds it there) → segment = 'smb'"] and count > 0
    ctx = scripted(
        [tool_call("query_database", {"sql": sql}, "q1"), AIMessage(f"There are {count} SMB customers.")],
        data_box(db),
        embeddings="hash",
    )
    out = await run(ctx, "How many SMB customers do we have?")
    told = out["messages"][-1].content
    assert out["stop_reason"] is None
    assert told == f"There are {count} SMB customers. (Read as: {read['assumed'][0]}.)", told
    (memory,) = await task_memories(ctx)
    assert "Read as: name = 'smb'" in memory.text  # the memory carries the reading too


@pytest.mark.parametrize(
    "claim", ["There are no orders shipped with DHL.", "There were no invoices issued last month."]
)
def test_a_none_rests_only_on_an_empty_read_of_what_it_is_about(claim):
    # measured (data suite, Chinook and Northwind): both queries failed, list_reminders came
    # back empty, and the model answered "none" from it
    reminders = Result("list_reminders", "c2", "data", False, {"reminders": [], "count": 0}, "ok", None, "", {})
    assert not check_answer(claim, QUESTION, [reminders], needs_data=True).ok
    assert check_answer("You have no reminders.", "Do I have any reminders?", [reminders], needs_data=True).ok
    # a read given arguments read what it asked for
    queried = Result(
        "query_database", "c3", "data", False, {"columns": ["n"], "rows": [], "row_count": 0}, "ok", None, "",
        {"sql": "SELECT * FROM Invoice WHERE 0"},
    )  # fmt: skip
    assert check_answer(claim, QUESTION, [reminders, queried], needs_data=True).ok
