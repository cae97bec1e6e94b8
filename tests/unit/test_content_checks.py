"""Shared content carries the substance (issue 18 point 5, tools/content_checks.py): a side
effect's content that only narrates the act is refused with what to include; a message sharing
an earlier result must carry its period, two of its figures and its path; a reminder's text
states what to do. The report offers its ``share`` (title, period, figures, path), and
graph.progress.shares surfaces it. Keys on metadata (content_arg, share_field), never names."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from langchain_core.messages import ToolMessage

from graph.progress import shares
from tools.builtin.catalog import GENERATE_REPORT, SCHEDULE_REMINDER
from tools.builtin.demo_db import generate_sales_db
from tools.builtin.report import generate_report
from tools.content_checks import content_refusals, narration_only
from tools.spec import ToolSpec, lint

# a chat tool as an MCP server would declare it: content in "body", destination "room"
CHAT = ToolSpec(
    name="chat__say",
    description="Say something in a chat room that people read.",
    parameters={
        "type": "object",
        "properties": {"room": {"type": "string"}, "body": {"type": "string"}},
        "required": ["room", "body"],
    },
    side_effect=True,
    destination_args=("room",),
    content_arg="body",
    source="mcp:chat",
)
SPECS = {s.name: s for s in (CHAT, GENERATE_REPORT, SCHEDULE_REMINDER)}
SHARE = {
    "text": "Sales 2025-06\n- Revenue: 12,345.67\n- Orders: 321\nFull report: /data/reports/sales-2025-06.md",
    "must_include": ["2025-06", "/data/reports/sales-2025-06.md"],
    "figures": [12345.67, 321, 4410.5],
}


@pytest.fixture
def prior(tmp_path) -> list[tuple[str, Path]]:
    path = tmp_path / "payload.json"
    path.write_text(json.dumps({"path": "/data/reports/sales-2025-06.md", "share": SHARE}))
    return [("generate_report", path)]


def refused(name: str, args: dict, prior, request=("Summarise sales and post it to the room",)) -> dict:
    call = {"name": name, "args": args, "id": "c1"}
    return content_refusals([call], spec_of=SPECS.get, prior=prior, request=list(request))


@pytest.mark.parametrize(
    "text",
    [
        "I have posted the analysis report to the project group and s…",
        "I will send the report to the group now.",
        "I've shared the monthly sales report with the team.",
        "The analysis report has been posted to the project group.",
        "Here is the report.",
        "我已经把分析报告发布到项目群了。",
        "レポートを投稿しました。",
        "He enviado el informe al grupo.",
        "J'ai publié le rapport dans le groupe.",
        "Ich habe den Bericht in der Gruppe gepostet.",
    ],
)
def test_a_narration_only_post_is_refused_with_what_to_include(text, prior):
    assert narration_only(text)
    error = refused("chat__say", {"room": "project", "body": text}, prior)["c1"]
    assert "only narrates the action" in error
    assert "2025-06" in error and "sales-2025-06.md" in error and "figures" in error
    assert "Ready to send as body" in error and "12,345.67" in error


def test_a_post_carrying_the_period_two_figures_and_the_path_passes(prior):
    body = "Sales for 2025-06: revenue 12,345.67, 321 orders. Full report: reports/sales-2025-06.md"
    assert refused("chat__say", {"room": "project", "body": body}, prior) == {}
    # a rounding of a figure counts; the offered text itself passes
    rounded = "2025-06 sales: revenue 12,346 and 321 orders — /data/reports/sales-2025-06.md"
    assert refused("chat__say", {"room": "project", "body": rounded}, prior) == {}
    assert refused("chat__say", {"room": "project", "body": SHARE["text"]}, prior) == {}


@pytest.mark.parametrize(
    ("body", "lacks"),
    [
        ("Sales 2025-06: revenue 12,345.67, 321 orders.", "sales-2025-06.md"),
        ("Revenue 12,345.67 and 321 orders.", "2025-06;"),
        ("The 2025-06 sales report is ready: sales-2025-06.md", "at least 2 of its figures"),
        ("Last month's sales report is ready.", "at least 2 of its figures"),
    ],
)
def test_a_post_without_part_of_the_result_is_refused_naming_what_is_missing(body, lacks, prior):
    error = refused("chat__say", {"room": "project", "body": body}, prior)["c1"]
    assert "does not carry the result" in error and lacks in error + ";"


def test_the_users_own_words_are_never_refused(prior):
    text = "I will send the slides tomorrow"
    request = [f"post '{text}' to the project room"]
    assert refused("chat__say", {"room": "project", "body": text}, prior, request) == {}


def test_without_a_result_to_share_only_narration_is_refused():
    assert refused("chat__say", {"room": "x", "body": "Standup moved to 10:00."}, []) == {}
    assert "only narrates" in refused("chat__say", {"room": "x", "body": "I have posted the update."}, [])["c1"]


def test_a_reminder_text_states_what_to_do_not_what_was_done(prior):
    said = refused("schedule_reminder", {"text": "I have set a monthly reminder for the sales report."}, prior)
    assert "what to do" in said["c1"]
    # it goes back to the user, not to other people: an instruction passes without figures
    assert refused("schedule_reminder", {"text": "Send the monthly sales report to the project group"}, prior) == {}


def test_a_tool_without_content_arg_is_not_checked(prior):
    plain = CHAT.model_copy(update={"content_arg": None})
    call = {"name": "chat__say", "args": {"room": "p", "body": "I have posted it."}, "id": "c1"}
    assert content_refusals([call], spec_of={"chat__say": plain}.get, prior=prior, request=[]) == {}


def test_lint_names_a_content_arg_the_parameters_do_not_declare():
    bad = CHAT.model_copy(update={"content_arg": "message"})
    assert any("'message'" in p for p in lint(bad))


def test_the_report_offers_its_share_and_progress_surfaces_it(tmp_path):
    db = generate_sales_db(tmp_path / "sales.db", months=3, end_month="2025-06")
    month = "strftime('%Y-%m', o.order_date) = '2025-06'"
    queries = [
        {
            "label": "Revenue and orders",
            "sql": "SELECT ROUND(SUM(i.quantity * i.unit_price), 2) AS revenue, COUNT(DISTINCT o.order_id) AS orders "
            f"FROM orders o JOIN order_items i ON i.order_id = o.order_id WHERE {month}",
        }
    ]
    out = generate_report("Sales report", queries, period="2025-06", database=str(db), data_dir=tmp_path)
    share = out["share"]
    revenue, orders = out["queries"][0]["rows"][0]
    assert share["figures"] == [revenue, orders] and share["must_include"] == ["2025-06", out["path"]]
    assert "2025-06" in share["text"] and out["path"] in share["text"] and f"{orders:,}" in share["text"]
    assert list(out)[:2] == ["path", "share"]  # kept when a result is cut for the prompt
    envelope = json.dumps({"status": "ok", "summary": "generate_report: ok", "data": out})
    message = ToolMessage(envelope, tool_call_id="r1", name="generate_report")
    assert shares([message], SPECS.values()) == [share["text"]]
    assert shares([message], [GENERATE_REPORT.model_copy(update={"share_field": None})]) == []
