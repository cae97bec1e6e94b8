"""CLI error lines print user-given values literally: brackets in a path or a server name are
not read as rich markup (which raised MarkupError or ate part of the path), and the line goes
to stderr."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from graph.cli import app


@pytest.mark.parametrize("odd", ["x[/red]y", "x[bold]y", "x[/]y", "[link=http://e]x"])
def test_a_data_dir_with_brackets_is_printed_as_given(tmp_path: Path, odd: str):
    data = tmp_path / odd
    result = CliRunner().invoke(app, ["branch", "list", "t1", "--data-dir", str(data)])
    assert result.exit_code == 1
    assert "MarkupError" not in result.output
    assert f"no checkpoints at {data / 'checkpoints.sqlite'}" in result.stderr
    assert result.stdout == ""


def test_an_mcp_server_name_with_brackets_is_printed_as_given(tmp_path: Path):
    config = tmp_path / "mcp.json"
    config.write_text('{"mcpServers": {}}')
    result = CliRunner().invoke(
        app, ["mcp", "auth", "x[/]y", "--data-dir", str(tmp_path / "d"), "--mcp-config", str(config)]
    )
    assert result.exit_code == 1
    assert "no HTTP MCP server 'x[/]y'" in result.stderr


@pytest.mark.parametrize("content", ['{"mcpServers": {', "[]", '{"servers": {}}'])
def test_a_bad_mcp_config_is_one_line_naming_the_setting(tmp_path: Path, content: str):
    config = tmp_path / "mcp.json"
    config.write_text(content)
    result = CliRunner().invoke(app, ["mcp", "list", "--data-dir", str(tmp_path / "d"), "--mcp-config", str(config)])
    assert result.exit_code == 1
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "HERMES_MCP_CONFIG" in lines[0] and "HERMES_DEBUG" not in lines[0]
