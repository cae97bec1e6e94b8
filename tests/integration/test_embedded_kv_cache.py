"""The embedded model's KV cache outlives the process (issue 19; graph/embedded/server.py):
stopping the server saves slot 0's cache into ``<data_dir>/kv-cache/``; the next server for the
same model restores it, so the first call of a new process evaluates only what follows the
common prefix (llama.cpp's ``timings.prompt_n``), not the whole system turn again. A file that
cannot be restored is deleted and the call still works. Real llama.cpp (the smallest bundled
model), real HTTP."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from graph.embedded.assembly import locate_parts
from graph.embedded.catalog import CATALOG
from graph.embedded.errors import ModelUnavailableError
from graph.embedded.server import EmbeddedLlamaServer, kv_cache_name, serve_options

MODEL = CATALOG["smollm2-135m"]
pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]

SYSTEM = "You are Hermes, an agent that answers questions about a sales database. " + " ".join(
    f"Rule {i}: check table number {i} before you answer a question about its region." for i in range(40)
)


def installed() -> str | None:
    try:
        locate_parts(MODEL)
    except ModelUnavailableError as exc:
        return str(exc)
    return None


async def first_call(url: str) -> dict:
    body = {
        "messages": [{"role": "system", "content": SYSTEM}, {"role": "user", "content": "How many regions are there?"}],
        "max_tokens": 4,
        "temperature": 0,
    }
    async with httpx.AsyncClient(timeout=600) as client:
        response = await client.post(f"{url}/chat/completions", json=body)
    response.raise_for_status()
    return response.json()["timings"]


@pytest.mark.skipif(installed() is not None, reason=f"{MODEL.name} is not installed: {installed()}")
async def test_a_new_process_starts_from_the_saved_cache(tmp_path: Path):
    kv_dir = tmp_path / "kv-cache"
    saved = kv_dir / kv_cache_name(MODEL, serve_options(MODEL))

    cold_server = EmbeddedLlamaServer(kv_dir=kv_dir)
    try:
        cold = await first_call(await cold_server.start(MODEL))
    finally:
        await cold_server.astop()
    assert cold["prompt_n"] > 300  # the whole prompt evaluated
    assert saved.exists() and saved.stat().st_size > 0
    assert not list(kv_dir.glob("*.tmp"))

    warm_server = EmbeddedLlamaServer(kv_dir=kv_dir)
    try:
        warm = await first_call(await warm_server.start(MODEL))
    finally:
        await warm_server.astop()
    assert warm["prompt_n"] < 10, warm  # only what follows the restored prefix
    assert warm["cache_n"] >= cold["prompt_n"] - 10

    saved.write_bytes(b"not a llama.cpp slot file")  # damaged: deleted, the call still works
    damaged_server = EmbeddedLlamaServer(kv_dir=kv_dir)
    try:
        url = await damaged_server.start(MODEL)
        assert not saved.exists()
        assert (await first_call(url))["prompt_n"] > 300
    finally:
        await damaged_server.astop()
    assert saved.exists()  # saved again at stop


def test_the_cache_file_is_keyed_on_model_template_and_options():
    base = kv_cache_name(MODEL, serve_options(MODEL, {}))
    assert base == kv_cache_name(MODEL, serve_options(MODEL, {}))
    assert base != kv_cache_name(MODEL, serve_options(MODEL, {"HERMES_EMBEDDED_CTX": "4096"}))
    assert base != kv_cache_name(CATALOG["qwen2.5-coder-0.5b"], serve_options(MODEL, {}))
