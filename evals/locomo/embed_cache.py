"""The eval's embedding cache (``HERMES_EMBED_CACHE=DIR``): a rerun of the LoCoMo eval skips the
embedding time of the passages and questions it embedded before."""

from __future__ import annotations

from pathlib import Path


class CachedEmbedder:
    """An embedder whose vectors are kept in ``cache_dir`` (``vectors.npz``), keyed by
    (embedder, passage|query, text): reruns of the suite skip the embedding time (the
    vectors are the same: the model is deterministic). Eval-only; ``HERMES_EMBED_CACHE=DIR``."""

    def __init__(self, inner, cache_dir: Path) -> None:
        import numpy as np

        self.inner, self.name, self.dim = inner, inner.name, inner.dim
        self.min_similarity = inner.min_similarity
        if hasattr(inner, "min_similarity_cjk"):
            self.min_similarity_cjk = inner.min_similarity_cjk
        self.path = Path(cache_dir) / f"vectors-{inner.name}.npz"
        self.cache: dict[str, list[float]] = {}
        if self.path.exists():
            z = np.load(self.path, allow_pickle=False)
            self.cache = {str(k): [float(x) for x in v] for k, v in zip(z["keys"], z["vectors"])}
        self._dirty = False

    async def _get(self, kind: str, texts, fn) -> list:
        keys = [f"{kind}\0{t}" for t in texts]
        missing = [t for t, k in zip(texts, keys) if k not in self.cache]
        if missing:
            for t, v in zip(missing, await fn(missing)):
                self.cache[f"{kind}\0{t}"] = list(v)
            self._dirty = True
        return [self.cache[k] for k in keys]

    async def embed_passages(self, texts):
        return await self._get("passage", list(texts), self.inner.embed_passages)

    async def embed_queries(self, texts):
        return await self._get("query", list(texts), self.inner.embed_queries)

    def save(self) -> None:
        import numpy as np

        if self._dirty:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            keys = list(self.cache)
            np.savez(self.path, keys=np.array(keys), vectors=np.array([self.cache[k] for k in keys], dtype=np.float32))
