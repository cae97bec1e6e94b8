"""A narration posted where the result was to be shared is refused with the result's ready text
as a structured suggestion, and the model is made to call again with it (DESIGN §2.9, §5.6;
``tools/content_checks.py: content_suggestions``).

Measured (Qwen2.5-Coder-1.5B, the tickets flagship): "Attached is the support tickets report for
last month. Please review …" refused three times with "Ready to send as text: …" in the error
alone; the run stopped on the repeat limit with nothing posted.
"""

from __future__ import annotations

from pathlib import Path

from langchain_core.messages import AIMessage, HumanMessage
from langgraph.checkpoint.memory import InMemorySaver

from graph.builder import make_graph
from graph.state import InputState
from tests.conftest import POST_MESSAGE, FakeToolbox, flagship_specs, recording_post, tool_call
from tools.builtin.demo_db import generate_sales_db
from tools.builtin.report import generate_report

TASK = "Summarise June 2025 sales into a report and post it to the project group."
QUERIES = [
    {
        "label": "Revenue and orders",
        "sql": "SELECT ROUND(SUM(i.quantity * i.unit_price), 2) AS revenue, COUNT(DISTINCT o.order_id) AS orders "
        "FROM orders o JOIN order_items i ON i.order_id = o.order_id WHERE strftime('%Y-%m', o.order_date) = '2025-06'",
    }
]
NARRATION = "I have posted the sales report to the project group."


async def test_a_refused_narration_is_retried_with_the_reports_ready_text(scripted, tmp_path: Path, generated_db):
    db = generated_db(generate_sales_db, tmp_path / "user" / "sales.db", months=3, end_month="2025-06")
    out, posts = tmp_path / "out", list[tuple[str, str]]()
    box = FakeToolbox()
    spec = next(s for s in flagship_specs() if s.name == "generate_report")
    box.add_spec(spec, lambda **kw: generate_report(**kw, database=str(db), data_dir=out))
    # content_arg as the bundled team-chat server declares it (tools/mcp/servers/team_chat.py)
    chat = POST_MESSAGE.model_copy(update={"content_arg": "text"})
    box.add_spec(chat, recording_post(posts))
    ready = generate_report("Sales report", QUERIES, period="2025-06", database=str(db), data_dir=tmp_path / "probe")
    text = ready["share"]["text"].replace(str(tmp_path / "probe"), str(out))
    ctx = scripted(
        [
            tool_call("generate_report", {"title": "Sales report", "queries": QUERIES, "period": "2025-06"}, "r1"),
            tool_call("post_message", {"channel": "project", "text": NARRATION}, "p1"),  # refused
            tool_call("post_message", {"channel": "project", "text": text}, "p2"),
            AIMessage("Done."),
        ],
        box,
        embeddings="hash",
    )
    result = await make_graph(InMemorySaver()).ainvoke(
        InputState(messages=[HumanMessage(TASK)]), {"configurable": {"thread_id": "ready"}}, context=ctx
    )
    model = scripted.models[ctx.model]
    refused = next(m for m in result["messages"] if getattr(m, "tool_call_id", None) == "p1")
    assert refused.status == "error" and refused.additional_kwargs["suggestion"]["args"]["text"] == text
    # the next call: only the refused tool, a call required, the ready text in the note
    assert model.offers[2] == ["post_message"] and text[:40] in str(model.seen[2][-1].content)
    assert posts == [("project", text)] and not result.get("stop_reason")
