"""``hermes mcp list|tools|call|test`` against the bundled team-chat server (a real process)."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from graph.cli import app

pytestmark = [pytest.mark.slow, pytest.mark.timeout(180)]


def test_mcp_cli_test_call_list_tools(tmp_path):
    runner = CliRunner()
    data = ["--data-dir", str(tmp_path / "data")]
    test = runner.invoke(app, ["mcp", "test", "--json", *data])
    assert test.exit_code == 0, test.output
    [row] = json.loads(test.stdout[test.stdout.index("[") :])
    assert row["server"] == "team_chat" and row["ok"] and row["tools"] == 2 and row["protocol"]
    assert "tools" in row["capabilities"] and row["handshake_ms"] > 0
    call = runner.invoke(app, ["mcp", "call", "team_chat", "post_message", '{"channel": "c", "text": "hi"}', *data])
    assert call.exit_code == 0, call.output
    assert '"text": "hi"' in call.stdout
    listed = runner.invoke(app, ["mcp", "list", "--json", *data])
    status = json.loads(listed.stdout[listed.stdout.index("[") :])
    assert status[0]["name"] == "team_chat" and status[0]["breaker"]["state"] == "closed"
    assert status[0]["pool"]["min"] == 1 and "score" in status[0]
    tools = runner.invoke(app, ["mcp", "tools", "team_chat", *data])
    assert tools.exit_code == 0 and "post_me" in tools.stdout  # (rich truncates to the terminal width)
    bad = runner.invoke(app, ["mcp", "call", "nope", "x", "{}", *data])
    assert bad.exit_code == 1
