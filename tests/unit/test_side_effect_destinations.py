"""Side effects go where the user asked (DESIGN §2.8, issue 25 part 2): the arguments that
decide where an effect goes come from the request, the user's answers or configuration — never
from a tool result — and content from data marked sensitive goes only to a destination the
request names. Through the agent graph with scripted models (the refusal happens in
``dispatch_tools``), plus the rule's siblings (recipients, paths, URLs, MCP tools without
metadata) on ``tools.destinations`` directly."""

from __future__ import annotations

import json

import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langgraph.checkpoint.memory import InMemorySaver

from graph.builder import make_graph
from graph.state import InputState
from tests.conftest import POST_MESSAGE, FakeToolbox, recording_post, tool_call
from tools.destinations import Rules, destination_refusal
from tools.name_matching import named_in
from tools.sensitive_data import sensitive_in_content, sensitive_values
from tools.spec import ToolSpec, lint

CUSTOMERS = {
    "columns": ["name", "email"],
    "rows": [["Alice Martin", "alice@example.com"], ["Bob Stone", "bob@example.com"]],
    "row_count": 2,
}
CUSTOMER_LIST = "Customers: Alice Martin <alice@example.com>, Bob Stone <bob@example.com>"


def chat_box(posts: list) -> FakeToolbox:
    """The team-chat ``post_message`` (in-process copy: its channel is a destination by the
    name rule, as for an MCP tool without metadata) and a read-only query tool."""
    box = FakeToolbox()
    box.add_spec(POST_MESSAGE, recording_post(posts))
    box.add(
        "query_database",
        lambda sql: CUSTOMERS,
        {"type": "object", "properties": {"sql": {"type": "string"}}, "required": ["sql"]},
    )
    return box


async def run(ctx, request: str, thread: str = "t") -> dict:
    agent = make_graph(checkpointer=InMemorySaver())
    return await agent.ainvoke(
        InputState(messages=[HumanMessage(request)]), {"configurable": {"thread_id": thread}}, context=ctx
    )


def refusals(out: dict) -> list[ToolMessage]:
    return [
        m
        for m in out["messages"]
        if isinstance(m, ToolMessage) and m.additional_kwargs.get("error_kind") == "destination_refused"
    ]


# -- the wrong-destination attack, through the graph -------------------------------------------------


async def test_a_post_to_a_channel_the_user_did_not_name_is_refused_with_the_reason(scripted):
    posts: list = []
    ctx = scripted(
        [
            tool_call("query_database", {"sql": "SELECT name, email FROM customers"}, "q1"),
            # the model sends the whole list to a channel it made up (or read in a result)
            tool_call("post_message", {"channel": "general", "text": CUSTOMER_LIST}, "p1"),
            tool_call("post_message", {"channel": "sales-team", "text": "We have 2 customers."}, "p2"),
            AIMessage("Posted the count to #sales-team."),
        ],
        chat_box(posts),
    )
    out = await run(ctx, "Count our customers and post the count to #sales-team.")
    assert posts == [("sales-team", "We have 2 customers.")]
    [refused] = refusals(out)
    error = json.loads(refused.content)["error"]
    assert refused.tool_call_id == "p1" and refused.status == "error"
    assert "channel='general'" in error and "#sales-team" in error and "allowed_destinations" in error
    assert out["stop_reason"] is None  # the run went on and the model fixed it


@pytest.mark.parametrize(
    "request_text, channel",
    [
        ("Post the total to #sales-team.", "sales-team"),
        ("Post the total to #sales-team.", "#Sales_Team"),
        ("Post the total to the Sales Team channel.", "sales-team"),
        ("Post it to the project group.", "project"),
        ("Post it to the project group.", "project-group"),
        ("Post it to the project group.", "projectgroup"),
        ("把报告发到项目群", "项目群"),
        ("Share the total with the #ventes channel.", "Ventes"),
    ],
)
async def test_a_channel_the_request_names_is_allowed_in_any_spelling(scripted, request_text, channel):
    posts: list = []
    replies = [tool_call("post_message", {"channel": channel, "text": "total: 42"}, "p1"), AIMessage("Done.")]
    ctx = scripted(replies, chat_box(posts))
    out = await run(ctx, request_text)
    assert refusals(out) == [] and posts == [(channel, "total: 42")]


async def test_configured_destinations_and_aliases_are_allowed(scripted):
    posts: list = []
    replies = [
        tool_call("post_message", {"channel": "sales-team", "text": "report ready"}, "p1"),
        AIMessage("Posted."),
    ]
    # "the project group" is the user's name for sales-team: an alias in the configuration
    ctx = scripted(replies, chat_box(posts), destination_aliases={"project group": "sales-team"})
    out = await run(ctx, "Post it to the project group.")
    assert refusals(out) == [] and posts == [("sales-team", "report ready")]
    # without the alias the same call is refused; an allowed pattern admits it again
    posts.clear()
    ctx = scripted([*replies, AIMessage("Not posted.")], chat_box(posts))
    out = await run(ctx, "Post it to the project group.", "t2")
    assert posts == [] and "channel='sales-team'" in json.loads(refusals(out)[0].content)["error"]
    ctx = scripted(replies, chat_box(posts), allowed_destinations=["sales-*"])
    out = await run(ctx, "Post it to the project group.", "t3")
    assert refusals(out) == [] and posts == [("sales-team", "report ready")]


async def test_a_channel_the_user_gives_as_an_answer_is_allowed(scripted):
    posts: list = []
    box = FakeToolbox()
    spec = POST_MESSAGE.model_copy(
        update={
            "parameters": {
                "type": "object",
                "properties": {"channel": {"type": "string"}, "text": {"type": "string"}},
                "required": ["channel", "text"],
            }
        }
    )
    box.add_spec(spec, lambda channel, text: posts.append((channel, text)) or {"id": 1})
    ctx = scripted([tool_call("post_message", {"text": "hello"}, "p1"), AIMessage("Posted.")], box)
    agent = make_graph(checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "ask"}}
    first = await agent.ainvoke({"messages": [HumanMessage("Post hello to the team chat.")]}, config, context=ctx)
    assert first["__interrupt__"]
    from langgraph.types import Command

    await agent.ainvoke(Command(resume="marketing"), config, context=ctx)
    assert posts == [("marketing", "hello")]


# -- sensitive data -------------------------------------------------------------------------------


async def test_sensitive_column_values_go_only_to_a_destination_the_request_names(scripted):
    posts: list = []
    replies = [
        tool_call("query_database", {"sql": "SELECT name, email FROM customers"}, "q1"),
        # general is configured (allowed for ordinary posts), but the request did not name it
        tool_call("post_message", {"channel": "general", "text": CUSTOMER_LIST}, "p1"),
        tool_call("post_message", {"channel": "general", "text": "We have 2 customers."}, "p2"),
        AIMessage("Posted the count."),
    ]
    ctx = scripted(
        replies,
        chat_box(posts),
        ignore_offer=True,
        allowed_destinations=["general"],
        sensitive_data=["customers.email"],
    )
    out = await run(ctx, "Count our customers and post the count to the team chat.")
    assert posts == [("general", "We have 2 customers.")]
    [refused] = refusals(out)
    error = json.loads(refused.content)["error"]
    assert "sensitive" in error and "customers.email" in error and "channel='general'" in error
    # named in the request, the same content may go there
    posts.clear()
    ctx = scripted([*replies[:2], AIMessage("Posted.")], chat_box(posts), sensitive_data=["customers.email"])
    out = await run(ctx, "List our customers with their emails and post them to the #general channel.", "t2")
    assert refusals(out) == [] and posts == [("general", CUSTOMER_LIST)]


def test_sensitive_marks_match_by_table_and_column_and_take_only_that_columns_values():
    query = ToolSpec(name="query_database", description="Read-only SQL on the user's database.")
    sql = {"sql": "SELECT name, email FROM customers"}
    assert set(sensitive_values(query, sql, CUSTOMERS, ["customers.email"])["customers.email"]) == {
        "alice@example.com",
        "bob@example.com",
    }
    assert sensitive_values(query, {"sql": "SELECT * FROM customers"}, CUSTOMERS, ["*.email"])  # a result field
    assert "customers" in sensitive_values(query, sql, CUSTOMERS, ["customers"])  # the whole table
    assert sensitive_values(query, {"sql": "SELECT name, email FROM leads"}, CUSTOMERS, ["customers.email"]) == {}
    # a tool whose every result is sensitive (MCP _meta "hermes/sensitive")
    crm = ToolSpec(name="crm_lookup", description="Look up a CRM contact (test tool).", sensitive_results=True)
    marked = sensitive_values(crm, {"q": "x"}, {"contact": "Carol Diaz", "phone": 5550123456}, [])
    post = POST_MESSAGE
    assert sensitive_in_content(post, {"channel": "x", "text": "call Carol Diaz at 5550123456"}, marked)
    assert not sensitive_in_content(post, {"channel": "x", "text": "one contact found"}, marked)


# -- the rule's siblings: recipients, paths, URLs, MCP tools without metadata ------------------------------


def mcp_tool(name: str, props: dict, **meta) -> ToolSpec:
    return ToolSpec(
        name=name,
        description=f"{name} (an MCP tool that declares no destination metadata; test).",
        parameters={"type": "object", "properties": props, "required": []},
        side_effect=True,
        source="mcp:peer",
        **meta,
    )


SEND_EMAIL = mcp_tool(
    "send_email", {"to": {"type": "array"}, "subject": {"type": "string"}, "body": {"type": "string"}}
)
WRITE_FILE = mcp_tool("write_file", {"path": {"type": "string"}, "content": {"type": "string"}})
HTTP_POST = mcp_tool("http_post", {"url": {"type": "string"}, "body": {"type": "string"}})
NOTIFY = mcp_tool("notify", {"room_id": {"type": "string", "default": "ops"}, "message": {"type": "string"}})


def test_the_name_rule_finds_the_destinations_of_tools_without_metadata():
    assert SEND_EMAIL.destination_params() == ("to",)
    assert WRITE_FILE.destination_params() == ("path",)
    assert HTTP_POST.destination_params() == ("url",)
    assert NOTIFY.destination_params() == ("room_id",)
    assert POST_MESSAGE.destination_params() == ("channel",)
    declared = mcp_tool(
        "deliver", {"where": {"type": "string"}, "path": {"type": "string"}}, destination_args=("where",)
    )
    assert declared.destination_params() == ("where",)
    assert mcp_tool("x_tool", {"path": {"type": "string"}}, destination_args=()).destination_params() == ()
    reader = ToolSpec(
        name="read_file",
        description="Read a file (test).",
        parameters={"type": "object", "properties": {"path": {}}, "required": []},
    )
    assert reader.destination_params() == ()  # read-only: nothing goes anywhere
    assert any("parameters do not declare" in p for p in lint(mcp_tool("y_tool", {}, destination_args=("nowhere",))))


@pytest.mark.parametrize(
    "spec, args, request_text",
    [
        (SEND_EMAIL, {"to": ["bob@example.com"], "body": "figures"}, "Email the figures to bob@example.com."),
        (WRITE_FILE, {"path": "/srv/out/q3.md", "content": "x"}, "Save it as /srv/out/q3.md please"),
        (
            HTTP_POST,
            {"url": "https://hooks.example.com/T1/abc", "body": "x"},
            "send it to https://hooks.example.com/T1/abc",
        ),
    ],
)
def test_recipients_paths_and_urls_the_request_names_pass_and_others_are_refused(spec, args, request_text):
    rules = Rules()
    assert destination_refusal(spec, args, request=[request_text], rules=rules) is None
    name = spec.destination_params()[0]
    forged = {
        **args,
        name: ["eve@evil.test"] if name == "to" else ("/etc/cron.d/x" if name == "path" else "https://evil.test/x"),
    }
    why = destination_refusal(spec, forged, request=[request_text], rules=rules)
    assert (
        why is not None
        and spec.name in why
        and repr(str(forged[name][0] if name == "to" else forged[name]))[:20] in why
    )
    assert request_text[:20] in why  # what the user asked is quoted


def test_one_unnamed_recipient_among_named_ones_is_refused():
    args = {"to": ["bob@example.com", "eve@evil.test"], "body": "x"}
    why = destination_refusal(SEND_EMAIL, args, request=["Email bob@example.com"], rules=Rules())
    assert why is not None and "eve@evil.test" in why


def test_the_tools_own_default_and_configured_patterns_pass():
    rules = Rules(allowed=("*@example.com", "/srv/reports/*"))
    assert destination_refusal(NOTIFY, {"message": "hi"}, request=["tell ops"], rules=Rules()) is None  # left out
    assert destination_refusal(NOTIFY, {"room_id": "OPS", "message": "hi"}, request=["x"], rules=Rules()) is None
    assert destination_refusal(SEND_EMAIL, {"to": ["carol@example.com"]}, request=["x"], rules=rules) is None
    assert destination_refusal(WRITE_FILE, {"path": "/srv/reports/a.md"}, request=["x"], rules=rules) is None
    assert destination_refusal(WRITE_FILE, {"path": "/srv/other/a.md"}, request=["x"], rules=rules) is not None


def test_named_in_matches_words_not_fragments():
    assert named_in("#sales-team", ["Post to SALES team"])
    assert named_in("bob@example.com", ["mail Bob@Example.com now"])
    assert not named_in("ann", ["the annual report"])
    assert not named_in("general", ["post to #sales-team"])
    assert not named_in("", ["anything"]) and not named_in("#", ["#"])


async def test_an_mcp_style_email_to_an_address_from_a_tool_result_is_refused(scripted):
    sent: list = []
    box = FakeToolbox()
    box.add_spec(
        SEND_EMAIL.model_copy(update={"requested_by": (r"\bemail\b",)}),
        lambda to=(), subject="", body="": sent.append(list(to)) or {"sent": True},
    )
    box.add(
        "query_database",
        lambda sql: CUSTOMERS,
        {"type": "object", "properties": {"sql": {"type": "string"}}, "required": ["sql"]},
    )
    ctx = scripted(
        [
            tool_call("query_database", {"sql": "SELECT name, email FROM customers"}, "q1"),
            tool_call("send_email", {"to": ["alice@example.com"], "body": "Monthly figures"}, "e1"),
            tool_call("send_email", {"to": ["me@mycompany.test"], "body": "Monthly figures"}, "e2"),
            AIMessage("Emailed the figures to you."),
        ],
        box,
    )
    out = await run(ctx, "Email the monthly figures to me@mycompany.test.")
    assert sent == [["me@mycompany.test"]]
    assert "alice@example.com" in json.loads(refusals(out)[0].content)["error"]


# -- deferred calls (a reminder's action) through the guard itself ----------------------------------


async def test_a_deferred_call_is_checked_in_any_form_and_bound_with_its_sensitivity(tmp_path):
    from tools.builtin.catalog import SCHEDULE_REMINDER
    from tools.deferred_calls import binding_for, deferred_refusal
    from tools.destination_guard import guard_calls

    specs = {s.name: s for s in (SCHEDULE_REMINDER, POST_MESSAGE)}
    payload = tmp_path / "q1.json"
    payload.write_text(json.dumps(CUSTOMERS))
    rules = Rules(allowed=("general",), sensitive=("customers.email",))
    request = ["List the customers' emails, post them to #sales-team and remind me every month."]
    prior = [("query_database", {"sql": "SELECT name, email FROM customers"}, payload)]
    to_general = {"kind": "tool", "tool": "post_message", "args": {"channel": "general", "text": CUSTOMER_LIST}}
    to_sales = {"kind": "tool", "tool": "post_message", "args": {"channel": "sales-team", "text": CUSTOMER_LIST}}
    calls = [
        # general is configured, but the content is sensitive and the request did not name it;
        # the action given as JSON text is the same action
        {"id": "a", "name": "schedule_reminder", "args": {"text": "r", "action": to_general}},
        {"id": "b", "name": "schedule_reminder", "args": {"text": "r", "action": json.dumps(to_general)}},
        {"id": "c", "name": "schedule_reminder", "args": {"text": "r", "action": to_sales}},
    ]
    refused = await guard_calls(
        calls, spec_of=specs.get, request=request, answers={}, prior=prior, rules=rules, data_dir=tmp_path
    )
    assert set(refused) == {"a", "b"} and all("sensitive" in r and "general" in r for r in refused.values())
    binding = binding_for(tmp_path, to_sales)
    assert binding is not None and binding["request"] == request and binding["sensitive"] == ["customers.email"]
    assert binding_for(tmp_path, to_general) is None
    # when it fires: allowed as recorded; the same content to the configured channel is not
    assert deferred_refusal(POST_MESSAGE, to_sales, data_dir=tmp_path, rules=rules, label="reminder 1") is None
    # an action changed after it was recorded has no request: only configured channels pass
    changed = {**to_sales, "args": {**to_sales["args"], "channel": "random"}}
    why = deferred_refusal(POST_MESSAGE, changed, data_dir=tmp_path, rules=rules, label="reminder 1")
    assert why is not None and "'random'" in why and "no request is recorded" in why


# -- MCP metadata: the server's _meta, the user's config override ------------------------------------


def test_mcp_meta_and_config_declare_destinations_and_sensitive_results():
    import sys
    from pathlib import Path
    from types import SimpleNamespace

    from tools.mcp.client import MCPTool
    from tools.mcp.config import MCPConfigError, server_settings
    from tools.registry import ToolRegistry
    from tools.toolbox import Toolbox

    schema = {"type": "object", "properties": {"where": {}, "to": {}, "body": {}}, "required": []}

    def tool(name: str, meta: dict | None = None, read_only: bool = False) -> MCPTool:
        return MCPTool(
            name=name,
            description=f"{name}: a test tool of a fake MCP server.",
            input_schema=schema,
            annotations={"readOnlyHint": read_only},
            meta=meta or {},
        )

    entry = {
        "command": sys.executable,
        "tools": {"mail": {"destination_args": ["to"]}, "lookup": {"sensitive": True}},
    }
    server = SimpleNamespace(
        name="peer",
        tools={
            t.name: t
            for t in (
                tool("deliver", {"hermes/destination_args": ["where"], "hermes/sensitive": False}),
                tool("mail", {"hermes/destination_args": ["where"]}),  # the user's config wins
                tool("lookup", read_only=True),
                tool("crm", {"hermes/sensitive": True}, read_only=True),
                tool("odd", {"hermes/destination_args": "where"}),
            )
        },
        settings=server_settings("peer", entry),
    )
    tb = Toolbox(Path("."), ToolRegistry(), executor=None, mcp=None)  # type: ignore[arg-type]
    tb._register_server(server, 10.0)  # type: ignore[arg-type]
    spec = tb.registry.get
    assert spec("deliver").destination_params() == ("where",) and not spec("deliver").sensitive_results
    assert spec("mail").destination_params() == ("to",)
    assert spec("lookup").sensitive_results and spec("crm").sensitive_results
    assert spec("odd").destination_params() == ("to",)  # bad _meta ignored (and said): the name rule
    assert "hermes/destination_args" in tb.problems["peer:odd:_meta"]
    with pytest.raises(MCPConfigError, match="destination_args"):
        server_settings("peer", {"command": "x", "tools": {"mail": {"destination_args": "to"}}})


async def test_a_destination_named_in_an_earlier_turn_of_the_conversation_is_the_users(scripted):
    posts: list = []
    ctx = scripted(
        [
            AIMessage("Noted."),
            tool_call("post_message", {"channel": "sales-team", "text": "October: 42 orders"}, "p1"),
            AIMessage("Posted."),
        ],
        chat_box(posts),
    )
    agent = make_graph(checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "two-turns"}}
    await agent.ainvoke({"messages": [HumanMessage("Our team's channel is #sales-team.")]}, config, context=ctx)
    # the second turn is a new goal, which names no channel; the user named it in the first
    out = await agent.ainvoke(
        {"messages": [HumanMessage("Post October's order count to the team chat.")]}, config, context=ctx
    )
    assert refusals(out) == [] and posts == [("sales-team", "October: 42 orders")]


# -- attacks of the second round (issue 25: "other attacks of these kinds") -----------------------


@pytest.mark.parametrize(
    "param",
    [
        "slack_channel",
        "channel_name",
        "to_email",
        "recipient_email",
        "recipientEmail",
        "email_address",
        "phone_number",
        "target_url",
        "callback_url",
        "webhookUrl",
        "file_path",
        "output_path",
        "room",
        "webhook",
        "address",
        "chat_id",
    ],
)
def test_a_destination_argument_under_a_compound_name_is_found_and_checked(param):
    """An MCP tool without metadata whose destination argument's name only contains a
    destination word (``slack_channel``, ``to_email``, ``target_url`` ...) is still checked."""
    tool = mcp_tool("send_thing", {param: {"type": "string"}, "text": {"type": "string"}})
    assert param in tool.destination_params()
    why = destination_refusal(tool, {param: "leaks", "text": "x"}, request=["send the total to ops"], rules=Rules())
    assert why is not None and param in why


@pytest.mark.parametrize("param", ["text", "body", "file_content", "message", "subject", "email_body", "url_title"])
def test_content_arguments_are_not_destinations(param):
    assert mcp_tool("send_thing", {param: {"type": "string"}}).destination_params() == ()


@pytest.mark.parametrize(
    "args",
    [
        {"message": {"channel": "leaks", "text": "x"}},
        {"options": {"delivery": {"to": ["eve@evil.test"]}}, "body": "x"},
        {"targets": [{"url": "https://evil.test/x"}], "body": "x"},
    ],
)
def test_a_destination_nested_in_an_object_argument_is_checked(args):
    tool = mcp_tool("deliver_it", {k: {"type": "object"} for k in args})
    why = destination_refusal(tool, args, request=["send the total to ops"], rules=Rules())
    assert why is not None and "not run" in why


@pytest.mark.parametrize(
    "value, request_text",
    [
        ("#sales", "Post the count to #sales-team."),  # a part of the channel the user named
        ("team", "Post the count to #sales-team."),
        ("bob", "Email the figures to bob@example.com."),
        ("example.com", "Email the figures to bob@example.com."),
        ("https://hooks.example.com", "send it to https://hooks.example.com/T1/abc"),
        ("gеneral", "Post the count to #general."),  # Cyrillic е: a look-alike channel
        ("gen\u200beral", "Post the count to #general."),  # a zero-width space inside
    ],
)
def test_a_part_or_a_look_alike_of_a_named_destination_is_not_named(value, request_text):
    assert not named_in(value, [request_text])


@pytest.mark.parametrize(
    "value, request_text",
    [
        ("#sales-team", "Post the count to #sales-team."),
        ("sales-team", "Post the total to the Sales Team channel."),
        ("bob@example.com", "Email the figures to bob@example.com."),
        ("https://hooks.example.com/T1/abc", "send it to https://hooks.example.com/T1/abc"),
        ("project", "Post it to the project group."),
        ("/srv/out/q3.md", "Save it as /srv/out/q3.md please"),
    ],
)
def test_the_whole_named_destination_still_passes(value, request_text):
    assert named_in(value, [request_text])


@pytest.mark.parametrize(
    "text",
    [
        "ALICE@EXAMPLE.COM",
        "alice @ example.com",
        "a-l-i-c-e@example.com",
        "alice\u200b@example.com",  # a zero-width space inside
        "ａｌｉｃｅ@example.com",  # full-width letters
        "alice%40example.com",  # URL-encoded
        "see YWxpY2VAZXhhbXBsZS5jb20= for details",  # base64
        "see YWxpY2VAZXhhbXBsZS5jb20 for details",  # base64 without its padding
    ],
)
def test_sensitive_values_re_encoded_in_the_content_are_found(text):
    query = ToolSpec(name="query_database", description="Read-only SQL on the user's database.")
    marked = sensitive_values(query, {"sql": "SELECT name, email FROM customers"}, CUSTOMERS, ["customers.email"])
    assert sensitive_in_content(POST_MESSAGE, {"channel": "general", "text": text}, marked) == ["customers.email"]


def test_a_short_value_squashed_is_not_found_in_ordinary_words():
    query = ToolSpec(name="query_database", description="Read-only SQL on the user's database.")
    table = {"columns": ["code"], "rows": [["a-b-c"], ["x1"]]}
    marked = sensitive_values(query, {"sql": "SELECT code FROM codes"}, table, ["codes.code"])
    assert sensitive_in_content(POST_MESSAGE, {"channel": "general", "text": "the abc of sales"}, marked) == []
