"""The list commands print every name whole at 80 columns (issue 19: ``hermes tools list``,
``mcp list``, ``memory list`` cut names and headers to "…": ``serv…``, ``tran…``,
``describe_datab…``), as a table when it fits and one block per row when it does not, and give
machine-readable ``--json`` — every list command has it."""

from __future__ import annotations

import asyncio
import json
import re

import pytest
import typer.main
from typer.testing import CliRunner

import graph.resources
from graph import resources
from graph.cli import app
from graph.context import Context
from tests.conftest import FakeToolbox

runner = CliRunner()

#: Long names of the kind that were cut (builtin tools, a namespaced MCP tool).
TOOL_NAMES = (
    "describe_database",
    "query_database",
    "schedule_reminder",
    "generate_report",
    "post_message",
    "filesystem__read_multiple_files",
)
SERVERS = [
    {
        "name": "team_chat",
        "state": "ready",
        "transport": "stdio",
        "pool": {"live": 1, "min": 1, "max": 4},
        "score": 0.987,
        "latency_ema_s": 0.0123,
        "success": 1.0,
        "calls": 12,
        "breaker": {"state": "closed", "trips": 0},
        "tools": 3,
    },
    {
        "name": "filesystem_everything",
        "state": "degraded",
        "transport": "streamable_http",
        "pool": {"live": 2, "min": 2, "max": 10},
        "score": 0.5,
        "latency_ema_s": 1.5,
        "success": 0.75,
        "calls": 40,
        "breaker": {"state": "half_open", "trips": 2, "next_probe_in_s": 3.0},
        "tools": 14,
    },
]


class _Toolbox(FakeToolbox):
    """What ``tools list`` and ``mcp list`` read of a toolbox, in process (no MCP server)."""

    def __init__(self) -> None:
        super().__init__()
        self.problems: dict[str, str] = {}
        for name in TOOL_NAMES:
            self.add(name, lambda: None, side_effect=name in ("post_message", "schedule_reminder"))

    def mcp_status(self) -> list[dict]:
        return SERVERS


@pytest.fixture
def toolbox(monkeypatch):
    async def open_toolbox(_context):
        return _Toolbox()

    monkeypatch.setattr(graph.resources, "open_toolbox", open_toolbox)


def run(*args: str, columns: int = 80):
    result = runner.invoke(app, list(args), env={"COLUMNS": str(columns)})
    assert result.exit_code == 0, result.output
    return result.output


def assert_nothing_cut(output: str, names) -> None:
    """Each of ``names`` printed whole, and no part of one cut with "…" (a description may end
    with "…": the table shows its first characters, ``--json`` all of it)."""
    for name in names:
        assert re.search(rf"(?<![\w]){re.escape(name)}(?![\w])", output), (name, output)
        for k in range(1, len(name)):
            assert name[:k] + "…" not in output, (name, output)


def test_tools_list_at_80_columns_names_every_tool_whole(toolbox, tmp_path):
    out = run("tools", "list", "--data-dir", str(tmp_path))
    assert_nothing_cut(out, [*TOOL_NAMES, "side", "effect", "timeout", "description", "builtin"])
    assert max(len(line) for line in out.splitlines()) <= 80


def test_tools_list_json(toolbox, tmp_path):
    listed = json.loads(run("tools", "list", "--json", "--data-dir", str(tmp_path)))
    assert sorted(t["name"] for t in listed["tools"]) == sorted(TOOL_NAMES)
    post = next(t for t in listed["tools"] if t["name"] == "post_message")
    assert post["side_effect"] is True and post["parameters"]["type"] == "object"
    assert listed["left_out"] == {}


def test_mcp_list_at_80_columns_keeps_servers_and_headers_whole(toolbox, tmp_path):
    out = run("mcp", "list", "--data-dir", str(tmp_path))
    assert_nothing_cut(
        out, ["team_chat", "filesystem_everything", "streamable_http", "transport", "breaker", "half_open", "latency"]
    )
    assert max(len(line) for line in out.splitlines()) <= 80
    # wide enough, it is one table: the header on one line
    wide = run("mcp", "list", "--data-dir", str(tmp_path), columns=200)
    assert any("server" in line and "transport" in line and "breaker" in line for line in wide.splitlines())
    assert json.loads(run("mcp", "list", "--json", "--data-dir", str(tmp_path)))[1]["name"] == "filesystem_everything"


@pytest.fixture
def memories(tmp_path, monkeypatch):
    monkeypatch.setenv("HERMES_EMBEDDINGS", "hash")
    d = str(tmp_path / "data")

    async def seed() -> None:
        mem = resources.get_memory(Context(data_dir=d, user_id="alice"))
        goal = "I prefer PDF reports. I report to Carol. From now on send the quarterly_revenue_breakdown first."
        await mem.write_plan(mem.plan_turn("alice", "t1", goal, "ok", [], None, []))
        await resources.aclose_resources()

    asyncio.run(seed())
    return d


@pytest.mark.slow  # writes memories through LanceDB
def test_memory_list_at_80_columns_keeps_refs_whole(memories):
    listed = json.loads(run("memory", "list", "--user", "alice", "--json", "--data-dir", memories))
    refs = [r["ref"].split(":")[0] + ":" + r["ref"].split(":")[1][:8] for r in listed["episodic"] + listed["semantic"]]
    assert refs
    out = run("memory", "list", "--user", "alice", "--data-dir", memories)
    assert_nothing_cut(out, [*refs, "kind", "status", "source", "date", "conf", "preference"])
    assert max(len(line) for line in out.splitlines()) <= 80


def _commands(group, path=()):
    for name, command in group.commands.items():
        if hasattr(command, "commands"):
            yield from _commands(command, (*path, name))
        else:
            yield (*path, name), command


def test_every_list_command_has_json_documented_in_its_help():
    listing = {
        path: command
        for path, command in _commands(typer.main.get_group(app))
        if path[-1] in ("list", "history", "due", "tools", "test")
    }
    assert {("tools", "list"), ("mcp", "list"), ("mcp", "tools"), ("memory", "list")} <= set(listing)
    for path, command in listing.items():
        json_opt = next((p for p in command.params if "--json" in getattr(p, "opts", [])), None)
        assert json_opt is not None, path
        assert "JSON" in (json_opt.help or ""), path  # what --help says of it
