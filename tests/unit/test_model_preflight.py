"""A turn whose model cannot be built writes nothing: no checkpoint, no mirror line, no memory
file (the runner builds the model before it opens anything); a fork without a message is
refused before anything runs."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from langchain_core.messages import AIMessage
from langchain_core.runnables import RunnableConfig
from typer.testing import CliRunner

from graph.cli import app
from graph.context import Context
from graph.embedded.errors import ModelUnavailableError
from graph.runner import execute_turn


@pytest.mark.parametrize("model", ["no-such-model", "openai:gpt-x", "embedded:no-such-entry"])
async def test_an_unusable_model_fails_before_anything_is_written(tmp_path: Path, model: str):
    data = tmp_path / "fresh"
    with pytest.raises(ModelUnavailableError):
        await execute_turn("hello", Context(model=model, data_dir=str(data)), "t1")
    assert not data.exists()


async def test_an_existing_thread_keeps_its_head_when_the_model_is_unusable(scripted, data_dir: Path):
    from graph.builder import make_graph
    from graph.checkpoints import checkpoints_file, open_checkpointer

    ctx = scripted([AIMessage("hi there")])
    await execute_turn("hello", ctx, "t1")
    config: RunnableConfig = {"configurable": {"thread_id": "t1"}}

    async def head_and_count() -> tuple[str, int]:
        async with open_checkpointer(checkpoints_file(data_dir)) as saver:
            agent = make_graph(saver)
            state = await agent.aget_state(config)
            return state.config["configurable"]["checkpoint_id"], len(
                [s async for s in agent.aget_state_history(config)]
            )

    before = await head_and_count()
    mirror = sorted((data_dir / "mirror").glob("*.jsonl"))
    mirror_before = [p.read_bytes() for p in mirror]
    with pytest.raises(ModelUnavailableError):
        await execute_turn("again", Context(model="no-such-model", data_dir=str(data_dir)), "t1")
    assert await head_and_count() == before
    assert [p.read_bytes() for p in mirror] == mirror_before


@pytest.mark.parametrize("message", ["", "   ", "\n"])
def test_a_fork_without_a_message_is_refused(tmp_path: Path, message: str):
    result = CliRunner().invoke(app, ["branch", "fork", "t1", "abc123", message, "--data-dir", str(tmp_path)])
    assert result.exit_code == 1
    assert "message is empty" in result.output
    assert not (tmp_path / "checkpoints.sqlite").exists()


def test_forking_a_thread_that_does_not_exist_says_so(scripted, data_dir: Path):
    asyncio.run(execute_turn("hello", scripted([AIMessage("hi there")]), "t1"))
    result = CliRunner().invoke(app, ["branch", "fork", "nosuch", "abc123", "again", "--data-dir", str(data_dir)])
    assert result.exit_code == 1
    assert "no thread 'nosuch'" in result.stderr and "hermes session list" in result.stderr
