"""The process-wide caches are keyed on what they depend on and closed. The embedded server
(graph/embedded/server.py): the data dir of the latest caller decides where its KV cache is
saved and restored (a data dir's prompt is never saved into another's), and the model and the
serving options restart it; no process is started, the running server is a stand-in. The shared
mirrors (graph/mirror.py): closed with the resources."""

from __future__ import annotations

from pathlib import Path

import pytest

from graph.embedded import server as server_module
from graph.embedded.catalog import CATALOG
from graph.embedded.server import EmbeddedLlamaServer, embedded_server, serve_options

ENTRY = next(iter(CATALOG.values()))


class _Running:
    returncode = None


def _serving(tmp_path: Path, monkeypatch) -> tuple[EmbeddedLlamaServer, list[tuple[str, Path | None]]]:
    """A server that looks started for ``tmp_path / "a"``; its KV saves and restores recorded."""
    server = EmbeddedLlamaServer(log_path=tmp_path / "a" / "embedded-llm.log", kv_dir=tmp_path / "a" / "kv-cache")
    server.kv_dir = (tmp_path / "a" / "kv-cache").absolute()
    server.base_url, server.process, server.model = "http://127.0.0.1:9/v1", _Running(), ENTRY  # type: ignore[assignment]
    server.options, server.kv_name = serve_options(ENTRY), "cache.bin"
    calls: list[tuple[str, Path | None]] = []

    async def restore(url: str) -> None:
        calls.append(("restore", server.kv_dir))

    monkeypatch.setattr(server, "_save_kv", lambda: calls.append(("save", server.kv_dir)))
    monkeypatch.setattr(server, "_restore_kv", restore)
    return server, calls


async def test_another_data_dir_gets_its_own_kv_cache_and_log(tmp_path: Path, monkeypatch):
    server, calls = _serving(tmp_path, monkeypatch)
    assert await server.start(ENTRY) == "http://127.0.0.1:9/v1"
    assert calls == []  # same data dir, same model, same options: nothing to do

    server.use_data_dir(tmp_path / "b")
    assert await server.start(ENTRY) == "http://127.0.0.1:9/v1"  # the same process keeps serving
    a, b = (tmp_path / "a" / "kv-cache").absolute(), (tmp_path / "b" / "kv-cache").absolute()
    assert calls == [("save", a), ("restore", b)]  # a's prompt saved into a, never into b
    assert server.kv_dir == b and b.is_dir()
    assert server.log_path == tmp_path / "b" / "embedded-llm.log"  # for the next process


async def test_other_serving_options_restart_the_server(tmp_path: Path, monkeypatch):
    server, _ = _serving(tmp_path, monkeypatch)
    stopped = []

    async def astop(grace_s: float = 3.0) -> None:
        stopped.append(True)
        raise RuntimeError("stopped")  # the test ends here: no process is started

    monkeypatch.setattr(server, "astop", astop)
    monkeypatch.setenv("HERMES_EMBEDDED_CTX", "1024")
    with pytest.raises(RuntimeError, match="stopped"):
        await server.start(ENTRY)
    assert stopped == [True]


def test_the_process_wide_server_follows_the_latest_data_dir(tmp_path: Path, monkeypatch):
    monkeypatch.setattr(server_module, "_EMBEDDED", None)
    first = embedded_server(tmp_path / "a")
    second = embedded_server(tmp_path / "b")
    assert second is first  # one llama.cpp process per agent process
    assert first.log_path == tmp_path / "b" / "embedded-llm.log"


async def test_the_shared_mirrors_are_closed_with_the_resources(tmp_path: Path):
    """graph/mirror.py's shared mirrors (one per data dir) are forgotten by aclose_resources."""
    from langchain_core.messages import HumanMessage

    from graph import mirror, resources

    await mirror.append_turn(tmp_path, "t1", [HumanMessage("hi", id="m1")])
    assert str(tmp_path) in mirror._shared
    shared = mirror._shared[str(tmp_path)]
    assert shared._views
    await resources.aclose_resources()
    assert mirror._shared == {} and not shared._views
