"""``hermes mcp auth SERVER`` refuses what it cannot authorise, before any connection (Typer's
runner, in process; the OAuth flow itself is covered by the conformance auth scenarios)."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from graph.cli import app

runner = CliRunner()


def test_auth_needs_an_http_server_with_an_auth_entry(tmp_path):
    cfg = tmp_path / "mcp.json"
    cfg.write_text(
        json.dumps(
            {
                "mcpServers": {
                    "plain": {"url": "http://127.0.0.1:1/mcp"},
                    "local": {"command": "true", "auth": {"type": "oauth"}},
                }
            }
        )
    )
    base = ["mcp", "auth", "--data-dir", str(tmp_path / "data"), "--mcp-config", str(cfg)]
    for server in ("plain", "local", "missing"):
        out = runner.invoke(app, [*base[:2], server, *base[2:]])
        assert out.exit_code == 1, out.output
        assert f"no HTTP MCP server '{server}' with an 'auth' entry" in " ".join(out.output.split())
