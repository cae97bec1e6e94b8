"""The episodic contract suite (``tests/unit/test_memory_contract.py``) against a real Weaviate
server. No server can run on the build machines (embedded Weaviate downloads a binary; there
is no container engine), so this runs only when ``WEAVIATE_URL`` is set, e.g.::

    docker compose -f deploy/weaviate/docker-compose.yml up -d
    WEAVIATE_URL=http://localhost:8080 .venv/bin/python -m pytest -q tests/integration/test_memory_weaviate_contract.py

(``WEAVIATE_GRPC_PORT``, default 50051; ``WEAVIATE_API_KEY`` if the server wants one). Each test
uses a collection of its own and drops it afterwards.
"""

from __future__ import annotations

import hashlib
import os

import pytest

from memory.episodic.weaviate import WeaviateEpisodicStore
from tests.unit.test_memory_contract import EpisodicContract

URL = os.environ.get("WEAVIATE_URL", "")
pytestmark = [
    pytest.mark.skipif(
        not URL,
        reason="WEAVIATE_URL is not set: no Weaviate server to run the contract against "
        "(start one with deploy/weaviate/docker-compose.yml)",
    ),
    pytest.mark.timeout(120),
]


class DroppingStore(WeaviateEpisodicStore):
    async def close(self) -> None:
        try:
            if self.client.is_connected() and getattr(self, "drop", False):
                await self.client.collections.delete(self.collection_name)
        finally:
            await super().close()


class TestWeaviateContract(EpisodicContract):
    async def make_store(self, tmp_path, embedder):
        name = "HermesContract" + hashlib.sha1(str(tmp_path).encode()).hexdigest()[:12]
        store = DroppingStore.from_url(
            URL,
            grpc_port=int(os.environ.get("WEAVIATE_GRPC_PORT", "50051")),
            api_key=os.environ.get("WEAVIATE_API_KEY") or None,
            embedder=embedder,
            collection=name,
        )
        store.drop = False  # a second store on the same collection must not drop it under the first
        return store

    @pytest.fixture
    async def store(self, tmp_path, embedder):
        store = await self.make_store(tmp_path, embedder)
        store.drop = True
        yield store
        await store.close()
