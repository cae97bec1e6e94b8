"""A damaged episodic-memory folder and a non-UTF-8 MCP config end as one ``error:`` line that
names the path and the way back — through the CLI, the user's path — never a bare
``RustPanic`` / ``RuntimeError: lance error`` / ``UnicodeDecodeError``. The LanceDB folder is a
real one written by the store, then damaged the ways a disk, a copy or a half-restored backup
damages it; following the advice (move it aside) makes the command work again."""

from __future__ import annotations

import asyncio
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
from typer.testing import CliRunner

from graph.cli import app
from memory.embeddings import HashEmbedder
from memory.episodic.base import EpisodicEvent
from memory.episodic.lance import LANCE_DIRNAME, LanceEpisodicStore

pytestmark = pytest.mark.slow  # LanceDB writes and reads a real folder; the CLI opens toolboxes

runner = CliRunner()


def _errors(output: str) -> list[str]:
    return [line for line in output.splitlines() if line.startswith("error:")]


def write_memories(data: Path) -> Path:
    """A real episodic folder with two memories of the default user (``default``)."""

    async def go() -> None:
        store = LanceEpisodicStore.in_dir(data, HashEmbedder())
        await store.add_many(
            [
                EpisodicEvent(user_id="default", kind="task", text="ran the monthly sales report", confidence=0.9),
                EpisodicEvent(user_id="default", kind="task", text="posted the report to #sales-team", confidence=0.9),
            ]
        )
        await store.close()

    asyncio.run(go())
    return data / LANCE_DIRNAME


def _overwrite(pattern: str) -> Callable[[Path], None]:
    def damage(folder: Path) -> None:
        hits = [p for p in folder.rglob(pattern) if p.is_file()]
        assert hits, pattern
        for p in hits:
            p.write_bytes(b"\x13\x37garbage" * 3)

    return damage


def _remove(pattern: str) -> Callable[[Path], None]:
    def damage(folder: Path) -> None:
        hits = [p for p in folder.rglob(pattern) if p.is_file()]
        assert hits, pattern
        for p in hits:
            p.unlink()

    return damage


def _replace_with_a_file(folder: Path) -> None:
    shutil.rmtree(folder)
    folder.write_text("not a folder")


#: how the folder is damaged → the commands that must say so
DAMAGE = {
    "data files overwritten": _overwrite("data/*.lance"),
    "data files missing": _remove("data/*.lance"),
    "manifests overwritten": _overwrite("_versions/*.manifest"),
    "every file zeroed": lambda f: [p.write_bytes(b"\0" * 64) for p in f.rglob("*") if p.is_file()],
    "a file where the folder was": _replace_with_a_file,
}


@pytest.mark.parametrize("how", sorted(DAMAGE))
def test_a_damaged_lancedb_folder_is_one_line_naming_it_and_the_way_back(tmp_path, monkeypatch, how):
    monkeypatch.setenv("HERMES_EMBEDDINGS", "hash")
    monkeypatch.delenv("HERMES_DEBUG", raising=False)
    data = tmp_path / "data"
    folder = write_memories(data)
    ok = runner.invoke(app, ["memory", "list", "--data-dir", str(data)])
    assert ok.exit_code == 0 and ok.output.count("episodic:") == 2, ok.output

    DAMAGE[how](folder)
    for command in (["memory", "list"], ["memory", "search", "sales report"]):
        result = runner.invoke(app, [*command, "--data-dir", str(data)])
        assert result.exit_code == 1, (command, result.output)
        errors = _errors(result.output)
        assert len(errors) == 1, result.output
        line = errors[0]
        assert str(folder) in line and f"mv {folder} " in line, line  # the path and the way back
        assert "RustPanic" not in line and "Traceback" not in result.output
        assert ".rs:" not in line  # no Rust source locations

    # the way back works: moved aside, the commands run on a new, empty episodic memory
    folder.rename(folder.with_name(folder.name + ".damaged"))
    after = runner.invoke(app, ["memory", "list", "--data-dir", str(data)])
    assert after.exit_code == 0, after.output
    assert "episodic:" not in after.output


#: bytes that are not UTF-8 → where they sit
NOT_UTF8 = {
    "latin-1 letter": '{"mcpServers": {"files": {"command": "caf\xe9"}}}'.encode("latin-1"),
    "utf-16 with BOM": '{"mcpServers": {}}'.encode("utf-16"),
    "stray continuation byte": b'{"mcpServers": {}}\n\x80\n',
    "cp1252 quote on line 3": b'{\n "mcpServers": {\n  "x": {"command": "\x93echo\x94"}}}',
}


@pytest.mark.parametrize("case", sorted(NOT_UTF8))
def test_a_non_utf8_mcp_config_is_one_line_naming_the_file_and_the_setting(tmp_path, monkeypatch, case):
    monkeypatch.delenv("HERMES_DEBUG", raising=False)
    config = tmp_path / "mcp servers.json"
    config.write_bytes(NOT_UTF8[case])
    data = tmp_path / "data"
    # the option and the variable: both are the user's ways to name the file
    by_option = runner.invoke(app, ["tools", "list", "--mcp-config", str(config), "--data-dir", str(data)])
    monkeypatch.setenv("HERMES_MCP_CONFIG", str(config))
    by_env = runner.invoke(app, ["mcp", "list", "--data-dir", str(data)])
    for result in (by_option, by_env):
        assert result.exit_code == 1, result.output
        errors = _errors(result.output)
        assert len(errors) == 1, result.output
        line = errors[0]
        assert str(config) in line and "HERMES_MCP_CONFIG" in line and "not UTF-8" in line, line
        assert "UnicodeDecodeError" not in result.output and "Traceback" not in result.output


def test_a_utf8_config_with_a_bom_is_read(tmp_path):
    from tools.mcp.config import load_config

    config = tmp_path / "mcp.json"
    config.write_bytes(b'\xef\xbb\xbf{"mcpServers": {"t": {"command": "echo"}}}')
    assert load_config(config) == {"t": {"command": "echo"}}
