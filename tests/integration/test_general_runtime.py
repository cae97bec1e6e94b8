"""The runtime on the user's own data and tools (DESIGN §0): the
flagship task on a database whose schema is unlike the demo's, through the real runner (SQLite
checkpoints, subprocess executor, the team-chat MCP server over stdio, a user MCP server), with
a scripted model that can call only what the graph offers. Figures are checked against SQL
computed here, independently of Hermes."""

from __future__ import annotations

import json
import sqlite3
import sys
import textwrap
from pathlib import Path

import pytest
from langchain_core.messages import AIMessage, ToolMessage

from graph import resources
from graph.context import Context
from graph.model import register_model
from graph.runner import run_turn
from tests.conftest import ScriptedChat, tool_call
from tools.builtin.demo_db import generate_invoices_db

pytestmark = pytest.mark.slow

TASK = (
    "Summarise last month's invoicing into an analysis report, post it to the finance group, and remind me every month."
)
END = "2026-10"  # the last month with data; the database holds three years


def invoices_db(tmp_path: Path) -> Path:
    return generate_invoices_db(tmp_path / "user" / "billing.sqlite", years=3, end_month=END)


def expected(db: Path) -> tuple[int, int, list[tuple[str, int]]]:
    """Independent figures for END: net cents of non-void invoices, their count, and net by country."""
    with sqlite3.connect(db) as con:
        net, count = con.execute(
            "SELECT SUM(net_amount_cents), COUNT(*) FROM invoices WHERE status != 'void' "
            "AND strftime('%Y-%m', issued_on) = ?",
            (END,),
        ).fetchone()
        by_country = con.execute(
            "SELECT c.country_code, SUM(i.net_amount_cents) FROM invoices i JOIN clients c USING (client_ref) "
            "WHERE i.status != 'void' AND strftime('%Y-%m', i.issued_on) = ? GROUP BY 1 ORDER BY 2 DESC",
            (END,),
        ).fetchall()
    return net, count, by_country


QUERIES = [
    {
        "label": "Net invoiced and invoice count",
        "sql": "SELECT SUM(net_amount_cents) AS net_cents, COUNT(*) AS invoices FROM invoices "
        f"WHERE status != 'void' AND strftime('%Y-%m', issued_on) = '{END}'",
    },
    {
        "label": "Net by country",
        "sql": "SELECT c.country_code, SUM(i.net_amount_cents) AS net_cents FROM invoices i "
        "JOIN clients c ON c.client_ref = i.client_ref WHERE i.status != 'void' "
        f"AND strftime('%Y-%m', i.issued_on) = '{END}' GROUP BY c.country_code ORDER BY net_cents DESC",
    },
]


#: the post carries the result it shares: period, two figures, where the report is (issue 18)
POSTED = "Invoicing report {END}: net {net} cents over {count} invoices. Full report: invoicing-report-{END}.md"


def script(name: str, replies: list) -> ScriptedChat:
    model = ScriptedChat(messages=iter(replies))
    model.seen, model.offers = [], []
    register_model(name, lambda _c: model)
    return model


async def test_flagship_on_a_differently_shaped_database_matches_independent_sql(tmp_path: Path):
    db = invoices_db(tmp_path)
    net, count, by_country = expected(db)
    model = script(
        "general-invoices",
        [
            tool_call("describe_database", {}, "d1"),
            tool_call("generate_report", {"title": f"Invoicing report {END}", "period": END, "queries": QUERIES}, "r1"),
            tool_call(
                "post_message", {"channel": "finance", "text": POSTED.format(END=END, net=net, count=count)}, "p1"
            ),
            tool_call("schedule_reminder", {"text": "Send the monthly invoicing report", "day_of_month": 1}, "s1"),
            AIMessage(f"Report for {END} written, posted to #finance, monthly reminder set."),
        ],
    )
    data = tmp_path / "hermes"
    context = Context(model="general-invoices", data_dir=str(data), database=str(db))
    try:
        summary = await run_turn(TASK, context, "invoices-1", quiet=True)
    finally:
        await resources.aclose_resources()

    assert summary["stop_reason"] is None, summary
    # the schema the model saw is the user's, not the demo's
    schema = next(m for p in model.seen for m in p if isinstance(m, ToolMessage) and m.tool_call_id == "d1")
    assert "invoices" in schema.content and "order_items" not in schema.content
    report = Path(summary["artifacts"][0])
    text = report.read_text()
    assert f"| {net} | {count} |" in text  # integers render as they are
    for country, cents in by_country:
        assert f"| {country} | {cents} |" in text
    assert "Figures in this report rest on these queries" in text and "strftime('%Y-%m', issued_on)" in text
    with sqlite3.connect(data / "team_chat.db") as con:
        assert con.execute("SELECT channel, text FROM messages").fetchall() == [
            ("finance", POSTED.format(END=END, net=net, count=count))
        ]
    with sqlite3.connect(data / "reminders.db") as con:
        assert con.execute("SELECT COUNT(*) FROM reminders").fetchone()[0] == 1
    assert not (data / "sales.db").exists() and not list(data.rglob("*.db-demo*"))


async def test_a_period_without_data_is_said_and_nothing_is_posted(tmp_path: Path):
    """ "Last month" on data that ends earlier: the report is refused with the latest period
    that has data, the user is asked whether to report that period instead (DESIGN §5.6: a
    side-effect task asks, no retry rounds), and the post — which would announce a report that
    does not exist — never runs."""
    db = invoices_db(tmp_path)
    empty = [
        {
            "label": "Net",
            "sql": "SELECT SUM(net_amount_cents) FROM invoices WHERE strftime('%Y-%m', issued_on) = '2026-11'",
        }
    ]
    model = script(
        "general-empty",
        [
            tool_call("generate_report", {"title": "Invoicing report 2026-11", "queries": empty}, "r1"),
            # not reached: the refusal's suggestion is asked of the user, at no model call
            AIMessage("There is no invoicing data for 2026-11; the latest month with data is 2026-10."),
        ],
    )
    data = tmp_path / "hermes"
    context = Context(model="general-empty", data_dir=str(data), database=str(db))
    try:
        summary = await run_turn(TASK, context, "empty-1", quiet=True)
    finally:
        await resources.aclose_resources()
    # the refusal goes to the user as a question, before the model sees it again
    assert len(model.seen) == 1
    assert not list(data.glob("reports/*")) and not list(data.glob("threads/*/reports/*"))
    if (data / "team_chat.db").exists():
        with sqlite3.connect(data / "team_chat.db") as con:
            assert con.execute("SELECT COUNT(*) FROM messages").fetchone()[0] == 0
    assert summary["artifacts"] == [] and summary["tools_called"] == {"generate_report": 1}
    assert summary["question"] and "2026-10" in summary["question"]


USER_SERVER = textwrap.dedent('''
    import sys
    from pathlib import Path
    from mcp.server.fastmcp import FastMCP

    mcp = FastMCP("ops")
    EFFECTS = Path(sys.argv[1])

    @mcp.tool()
    def restart_service(name: str = "web") -> str:
        """Restart a service (no annotations: a side effect by the MCP default)."""
        with EFFECTS.open("a") as f:
            f.write(f"restart {name}\\n")
        return "restarted"

    @mcp.tool()
    def delete_records(table: str = "t") -> str:
        """Delete records of a table (no annotations)."""
        with EFFECTS.open("a") as f:
            f.write(f"delete {table}\\n")
        return "deleted"

    mcp.run()
''')


async def test_a_read_only_question_runs_no_side_effect_on_every_builtin_and_mcp_tool(tmp_path: Path):
    """A model that ignores the offer and calls every side-effect tool (builtin, the bundled
    team-chat server, a user's MCP server without annotations) for "what time is it?": every
    call is refused at dispatch, nothing is written anywhere."""
    server = tmp_path / "ops_server.py"
    server.write_text(USER_SERVER)
    effects = tmp_path / "effects.log"
    config = tmp_path / "mcp.json"
    config.write_text(
        json.dumps({"mcpServers": {"ops": {"command": sys.executable, "args": [str(server), str(effects)]}}})
    )
    db = invoices_db(tmp_path)
    data = tmp_path / "hermes"
    probe = Context(model="unused", data_dir=str(data), database=str(db), mcp_config=str(config))
    toolbox = await resources.get_toolbox(probe)
    side_effects = [s.name for s in toolbox.registry.specs() if s.side_effect]
    assert {"generate_report", "post_message", "schedule_reminder", "restart_service", "delete_records"} <= set(
        side_effects
    )
    args = {
        "generate_report": {"title": "x", "queries": QUERIES[:1]},
        "post_message": {"channel": "c", "text": "t"},
        "schedule_reminder": {"text": "t"},
    }
    rogue = AIMessage(
        "",
        tool_calls=[
            {"name": n, "args": args.get(n, {}), "id": f"x{i}", "type": "tool_call"} for i, n in enumerate(side_effects)
        ],
    )
    model = ScriptedChat(messages=iter([rogue, AIMessage("I do not know the time.")]), ignore_offer=True)
    model.seen, model.offers = [], []
    register_model("general-rogue", lambda _c: model)
    context = probe.model_copy(update={"model": "general-rogue"})
    try:
        summary = await run_turn("What time is it in Tokyo?", context, "rogue-1", quiet=True)
    finally:
        await resources.aclose_resources()
    assert not set(side_effects) & set(model.offers[0] or [])
    assert summary["tools_called"] == {}  # nothing was dispatched
    refusals = [m for m in model.seen[1] if isinstance(m, ToolMessage)]
    assert len(refusals) == len(side_effects) and all("not offered" in m.content for m in refusals)
    assert not effects.exists()
    assert not list(data.glob("reports/*")) and not list(data.glob("threads/*/reports/*"))
    for name, table in (("team_chat.db", "messages"), ("reminders.db", "reminders")):
        if (data / name).exists():
            with sqlite3.connect(data / name) as con:
                assert con.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0] == 0
