"""The Hermes keys of an ``mcpServers`` entry (``timeoutSeconds`` / ``timeout_s``, ``tools``
overrides) and how the toolbox turns MCP annotations, ``_meta`` and those overrides into a
ToolSpec (side_effect, idempotent, requested_by, artifact_field, timeout_s). No processes: the
server objects here are stand-ins with the attributes ``Toolbox._register_server`` reads."""

from __future__ import annotations

import re
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from tools.errors import ToolTransportError
from tools.mcp.client import MCPClient, MCPServer
from tools.mcp.config import MCPConfigError, ServerSettings, ToolOverride, server_settings
from tools.mcp.tool_listing import MCPTool
from tools.registry import ToolRegistry
from tools.toolbox import Toolbox

STDIO = {"command": sys.executable, "args": ["-m", "some.server"]}
SCHEMA = {"type": "object", "properties": {"x": {"type": "string"}}, "required": []}


# -- config parsing -----------------------------------------------------------------------------


def test_no_hermes_keys_means_defaults():
    assert server_settings("srv", STDIO) == ServerSettings(timeout_s=None, tools={})


@pytest.mark.parametrize("key", ["timeoutSeconds", "timeout_s"])
def test_server_timeout_both_spellings(key):
    assert server_settings("srv", {**STDIO, key: 25}).timeout_s == 25.0


def test_tool_overrides_are_read():
    entry = {
        **STDIO,
        "timeoutSeconds": 12.5,
        "tools": {
            "send_mail": {
                "side_effect": True,
                "idempotent": False,
                "requested_by": [r"\bmail\b"],
                "artifact_field": "message_id",
                "timeout_s": 60,
            },
            "lookup": {"side_effect": False, "timeoutSeconds": 3},
            "bare": {},
        },
    }
    got = server_settings("mail", entry)
    assert got.timeout_s == 12.5
    assert got.tools["send_mail"] == ToolOverride(
        side_effect=True, idempotent=False, requested_by=(r"\bmail\b",), artifact_field="message_id", timeout_s=60.0
    )
    assert got.tools["lookup"] == ToolOverride(side_effect=False, timeout_s=3.0)
    assert got.tools["bare"] == ToolOverride()


@pytest.mark.parametrize(
    "entry, field",
    [
        ({"timeoutSeconds": 0}, "timeoutSeconds"),
        ({"timeoutSeconds": -1}, "timeoutSeconds"),
        ({"timeout_s": "10"}, "timeout_s"),
        ({"timeout_s": True}, "timeout_s"),
        ({"timeout_s": float("inf")}, "timeout_s"),
        ({"timeoutSeconds": 5, "timeout_s": 6}, "timeoutSeconds"),
        ({"tools": []}, "tools"),
        ({"tools": {"t": True}}, "tools.t"),
        ({"tools": {"t": {"side_efect": True}}}, "tools.t"),
        ({"tools": {"t": {"side_effect": "no"}}}, "tools.t.side_effect"),
        ({"tools": {"t": {"idempotent": 1}}}, "tools.t.idempotent"),
        ({"tools": {"t": {"requested_by": "post"}}}, "tools.t.requested_by"),
        ({"tools": {"t": {"requested_by": [r"(unclosed"]}}}, "tools.t.requested_by"),
        ({"tools": {"t": {"requested_by": [3]}}}, "tools.t.requested_by"),
        ({"tools": {"t": {"artifact_field": ""}}}, "tools.t.artifact_field"),
        ({"tools": {"t": {"timeout_s": 0}}}, "tools.t.timeout_s"),
        ({"tools": {"t": {"timeoutSeconds": "slow"}}}, "tools.t.timeoutSeconds"),
    ],
)
def test_bad_values_name_server_and_field(entry, field):
    with pytest.raises(MCPConfigError) as err:
        server_settings("chat-srv", {**STDIO, **entry})
    message = str(err.value)
    assert "MCP server 'chat-srv'" in message
    assert f"'{field}" in message, message


def test_bad_entry_keeps_the_server_out_and_others_in():
    """A server whose Hermes keys are wrong is not started; the error names it and the field;
    the other servers are unaffected (as for any unusable entry)."""
    client = MCPClient({"good": STDIO, "bad": {**STDIO, "tools": {"t": {"idempotent": "yes"}}}})
    assert set(client.servers) == {"good"}
    assert "MCP server 'bad'" in client.failed["bad"] and "tools.t.idempotent" in client.failed["bad"]
    with pytest.raises(MCPConfigError, match=re.escape("MCP server 'x': 'timeoutSeconds'")):
        MCPServer("x", {**STDIO, "timeoutSeconds": "soon"})


async def test_call_to_a_server_that_never_started_is_not_sent():
    server = MCPServer("never", STDIO)  # not started: nothing can have reached it
    with pytest.raises(ToolTransportError) as err:
        await server.call_tool("anything", {}, timeout_s=1.0)
    assert err.value.sent is False and err.value.server == "never"
    assert ToolTransportError("s", "lost mid-call").sent is True  # the default: may have run


# -- annotations / _meta / overrides → ToolSpec ---------------------------------------------------


def _tool(name: str, annotations: dict | None = None, meta: dict | None = None) -> MCPTool:
    return MCPTool(
        name=name,
        description=f"{name}: a test tool of the fake MCP server, does one thing.",
        input_schema=SCHEMA,
        annotations=annotations or {},
        meta=meta or {},
    )


def _register(tools: list[MCPTool], entry: dict | None = None, timeout_s: float = 10.0) -> Toolbox:
    server = SimpleNamespace(
        name="peer", tools={t.name: t for t in tools}, settings=server_settings("peer", {**STDIO, **(entry or {})})
    )
    tb = Toolbox(Path("."), ToolRegistry(), executor=None, mcp=None)  # type: ignore[arg-type]
    tb._register_server(server, timeout_s)  # type: ignore[arg-type]
    return tb


def test_annotations_and_meta_become_spec_metadata():
    tb = _register(
        [
            _tool(
                "post_note",
                {"readOnlyHint": False, "idempotentHint": False, "destructiveHint": False},
                {"hermes/requested_by": [r"\bpost\b.{0,40}\bnote\b"], "hermes/artifact_field": "note_id"},
            ),
            _tool("set_flag", {"readOnlyHint": False, "idempotentHint": True}),
            _tool("read_notes", {"readOnlyHint": True}),
            _tool("mystery"),  # no annotations: MCP defaults (not read-only, not idempotent)
        ]
    )
    assert tb.problems == {}
    post, flag, read, mystery = (tb.registry.get(n) for n in ("post_note", "set_flag", "read_notes", "mystery"))
    assert (post.side_effect, post.idempotent, post.retry_safe) == (True, False, False)
    assert post.requested_by == (r"\bpost\b.{0,40}\bnote\b",) and post.artifact_field == "note_id"
    assert any(p.search("please post the meeting note") for p in post.request_patterns())
    assert (flag.side_effect, flag.idempotent, flag.retry_safe) == (True, True, True)
    assert (read.side_effect, read.retry_safe) == (False, True)
    assert (mystery.side_effect, mystery.idempotent, mystery.requested_by) == (True, False, ())
    # the answer timeout is the toolbox's 10 s; the registry's (hard) limit is max(10 s, 30 s)
    assert {r.timeout_s for n in ("post_note", "set_flag", "read_notes", "mystery") for r in tb.mcp_replicas[n]} == {
        10.0
    }
    assert {s.timeout_s for s in (post, flag, read, mystery)} == {30.0}
    assert {s.source for s in (post, flag, read, mystery)} == {"mcp:peer"}


def test_config_overrides_win_over_the_server():
    tb = _register(
        [
            _tool("post_note", {"readOnlyHint": False}, {"hermes/requested_by": [r"\bpost\b"]}),
            _tool("read_notes", {"readOnlyHint": True}),
            _tool("getStatus"),
        ],
        entry={
            "timeoutSeconds": 20,
            "tools": {
                "post_note": {
                    "idempotent": True,
                    "requested_by": [r"\bpublish\b"],
                    "timeout_s": 45,
                    "artifact_field": "url",
                },
                "read_notes": {"side_effect": True},
                "get_status": {"side_effect": False},  # the registered (snake_case) name works too
            },
        },
    )
    assert tb.problems == {}
    post, read, status = (tb.registry.get(n) for n in ("post_note", "read_notes", "get_status"))
    assert (post.side_effect, post.idempotent, post.requested_by, post.timeout_s, post.artifact_field) == (
        True,
        True,
        (r"\bpublish\b",),
        45.0,
        "url",
    )
    assert (read.side_effect, read.idempotent, read.timeout_s) == (True, False, 30.0)
    assert (status.side_effect, status.timeout_s) == (False, 30.0)
    answer = {n: tb.mcp_replicas[n][0].timeout_s for n in ("post_note", "read_notes", "get_status")}
    assert answer == {"post_note": 45.0, "read_notes": 20.0, "get_status": 20.0}


def test_override_for_an_unlisted_tool_and_bad_meta_are_reported():
    tb = _register(
        [
            _tool("post_note", {"readOnlyHint": False}, {"hermes/requested_by": "post", "hermes/artifact_field": 7}),
            _tool("odd_regex", {}, {"hermes/requested_by": [r"(broken"]}),
        ],
        entry={"tools": {"post_notes": {"side_effect": False}}},
    )
    assert "tools.post_notes" in tb.problems["peer:tools.post_notes"]
    assert "post_note" in tb.problems["peer:tools.post_notes"]  # lists what the server has
    # Unusable server metadata is ignored (and said so); the tools stay usable.
    assert "hermes/artifact_field" in tb.problems["peer:post_note:_meta"]
    assert "hermes/requested_by" in tb.problems["peer:odd_regex:_meta"]
    post, odd = tb.registry.get("post_note"), tb.registry.get("odd_regex")
    assert post.requested_by == () and post.artifact_field is None and post.side_effect is True
    assert odd.requested_by == ()
