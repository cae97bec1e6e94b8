"""The `hermes` CLI where it needs the network or processes: an unreachable endpoint (a real
connection attempt) exits 2 with a JSON error; `tools lint` over the shipped tools (starts the
bundled MCP servers). The rest of the CLI: tests/unit/test_cli.py."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from graph.cli import app

pytestmark = pytest.mark.slow  # a real connection attempt; the bundled MCP servers' processes

runner = CliRunner()


def test_an_unreachable_endpoint_exits_2_with_json_error(tmp_path):
    out = runner.invoke(
        app, ["run", "hi", "--model", "m", "--base-url", "http://127.0.0.1:9/v1", "--data-dir", str(tmp_path), "--json"]
    )
    assert out.exit_code == 2
    error = json.loads(out.output.strip().splitlines()[-1])
    assert error["exit_code"] == 2 and "http://127.0.0.1:9/v1" in error["error"]


def test_tools_lint_passes_for_the_shipped_tools(tmp_path):
    out = runner.invoke(app, ["tools", "lint", "--data-dir", str(tmp_path)])
    assert out.exit_code == 0, out.output
    assert "all tool definitions pass lint" in out.output
