"""The MCP processes' own settings classes (pydantic-settings, no ``os.environ`` read in
tools/mcp/): the team-chat server's database, the conformance client's scenario, the peers' folder."""

from __future__ import annotations

from pathlib import Path

from tools.mcp import peers
from tools.mcp.conformance_client import ConformanceSettings
from tools.mcp.servers.team_chat import TeamChatSettings, _db


def test_team_chat_database_comes_from_its_setting(monkeypatch, tmp_path):
    monkeypatch.delenv("HERMES_TEAM_CHAT_DB", raising=False)
    assert TeamChatSettings().db == "team_chat.db"
    monkeypatch.setenv("HERMES_TEAM_CHAT_DB", str(tmp_path / "chat.db"))
    assert TeamChatSettings().db == str(tmp_path / "chat.db")
    con = _db(str(tmp_path / "explicit.db"))  # a parameter wins over the setting
    con.close()
    assert (tmp_path / "explicit.db").exists()


def test_conformance_scenario_and_context(monkeypatch):
    monkeypatch.delenv("MCP_CONFORMANCE_SCENARIO", raising=False)
    monkeypatch.delenv("MCP_CONFORMANCE_CONTEXT", raising=False)
    assert ConformanceSettings().scenario == "initialize"
    assert ConformanceSettings().context_json() == {}
    monkeypatch.setenv("MCP_CONFORMANCE_SCENARIO", "tools_call")
    monkeypatch.setenv("MCP_CONFORMANCE_CONTEXT", '{"client_id": "abc"}')
    assert ConformanceSettings().scenario == "tools_call"
    assert ConformanceSettings().context_json() == {"client_id": "abc"}
    monkeypatch.setenv("MCP_CONFORMANCE_CONTEXT", "not json")
    assert ConformanceSettings().context_json() == {}
    monkeypatch.setenv("MCP_CONFORMANCE_CONTEXT", "[1, 2]")
    assert ConformanceSettings().context_json() == {}


def test_peers_folder(monkeypatch, tmp_path):
    monkeypatch.delenv("HERMES_MCP_PEERS_DIR", raising=False)
    assert peers.home() == peers.ROOT / ".venv" / "mcp-peers"
    monkeypatch.setenv("HERMES_MCP_PEERS_DIR", str(tmp_path))
    assert peers.home() == tmp_path
    assert peers.node().is_relative_to(tmp_path)
    assert peers.home(tmp_path / "other") == Path(tmp_path / "other")
