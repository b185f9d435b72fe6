"""A cache of query embeddings, so a repeated query is not embedded again.

mem0 embeds the query of every search (``embed(query, "search")``, and its
entity boost embeds the query's entities with ``embed_batch(..., "search")``).
A turn that is sent again (a retry, a regenerated answer, a process that
restarts mid-conversation) searches with the same text and would pay for the
same embedding call. :func:`install_query_cache` wraps the mem0 client's
embedder once: search embeddings are kept in an LRU with a time to live; other
embeddings (memories being added or updated) pass through untouched, and so
do the "search" embeddings mem0's ``add`` makes of an exchange on the
write lane (texts that are never searched again).

The cache belongs to the embedder: middlewares on the same client share it.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import Any

from .._vectors.keywords_only import is_keywords_only
from .call_context import current

__all__ = [
    "DEFAULT_QUERY_CACHE_SIZE",
    "DEFAULT_QUERY_CACHE_TTL",
    "CachingEmbedder",
    "QueryEmbeddingCache",
    "install_query_cache",
]

logger = logging.getLogger(__name__)

DEFAULT_QUERY_CACHE_SIZE = 1024
DEFAULT_QUERY_CACHE_TTL = 3600.0
_SEARCH = "search"


class QueryEmbeddingCache:
    """A thread-safe LRU of text -> vector whose entries expire after ``ttl``.

    Args:
        maxsize: Entries kept; the least recently used go first. 0 disables.
        ttl: Seconds an entry stays valid.
        clock: Monotonic time source (tests pass their own).
    """

    def __init__(
        self,
        maxsize: int = DEFAULT_QUERY_CACHE_SIZE,
        ttl: float = DEFAULT_QUERY_CACHE_TTL,
        *,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if maxsize < 0 or ttl <= 0:
            raise ValueError(f"need maxsize >= 0 and ttl > 0, got {maxsize!r} and {ttl!r}")
        self.maxsize = maxsize
        self.ttl = ttl
        self.enabled = True
        """Set to ``False`` to bypass the cache (it keeps its entries)."""
        self._clock = clock
        self._entries: OrderedDict[str, tuple[float, list[float], float]] = OrderedDict()
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0
        self.seconds_saved = 0.0
        """Sum, over hits, of what embedding that text took when it was a miss."""

    def get(self, text: str) -> list[float] | None:
        """The cached vector of ``text`` (a copy), or ``None``; counts the lookup."""
        now = self._clock()
        with self._lock:
            entry = self._entries.get(text)
            if entry is not None and entry[0] > now:
                self._entries.move_to_end(text)
                self.hits += 1
                self.seconds_saved += entry[2]
                return list(entry[1])
            if entry is not None:
                del self._entries[text]
            self.misses += 1
            return None

    def put(self, text: str, vector: Sequence[float], cost: float) -> None:
        """Keep ``vector`` for ``text``; ``cost`` is the seconds it took to embed."""
        if self.maxsize == 0:
            return
        with self._lock:
            self._entries[text] = (self._clock() + self.ttl, list(vector), cost)
            self._entries.move_to_end(text)
            while len(self._entries) > self.maxsize:
                self._entries.popitem(last=False)

    def __len__(self) -> int:
        return len(self._entries)

    def stats(self) -> dict[str, Any]:
        """``query_cache_hits/misses/hit_rate/seconds_saved/size``."""
        with self._lock:
            lookups = self.hits + self.misses
            return {
                "query_cache_hits": self.hits,
                "query_cache_misses": self.misses,
                "query_cache_hit_rate": self.hits / lookups if lookups else None,
                "query_cache_seconds_saved": self.seconds_saved,
                "query_cache_size": len(self._entries),
            }


class CachingEmbedder:
    """A mem0 embedder whose search embeddings go through a cache.

    Everything but ``embed``/``embed_batch`` with ``memory_action="search"``
    is the wrapped embedder's own (its config, its other methods).
    """

    def __init__(self, inner: Any, cache: QueryEmbeddingCache) -> None:
        self.inner = inner
        self.cache = cache

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def _cached(self, memory_action: str | None) -> bool:
        return memory_action == _SEARCH and self.cache.enabled and current().lane != "write"

    def embed(self, text: Any, memory_action: str | None = None) -> Any:
        """The wrapped ``embed``; a search's text is looked up first."""
        if not isinstance(text, str) or not self._cached(memory_action):
            return self.inner.embed(text, memory_action)
        cached = self.cache.get(text)
        if cached is not None:
            return cached
        started = time.perf_counter()
        vector = self.inner.embed(text, memory_action)
        if not is_keywords_only(vector):  # a refused query is embedded next time
            self.cache.put(text, vector, time.perf_counter() - started)
        return vector

    def embed_batch(self, texts: list[str], memory_action: str = "add") -> Any:
        """The wrapped ``embed_batch``; for a search, only unseen texts are embedded."""
        if not self._cached(memory_action):
            return self.inner.embed_batch(texts, memory_action)
        found = [self.cache.get(t) if isinstance(t, str) else None for t in texts]
        missing = [i for i, v in enumerate(found) if v is None]
        if missing:
            started = time.perf_counter()
            fresh = self.inner.embed_batch([texts[i] for i in missing], memory_action)
            if len(fresh) != len(missing):
                return fresh  # let mem0 handle the mismatch as it would without us
            each = (time.perf_counter() - started) / len(missing)
            for i, vector in zip(missing, fresh, strict=True):
                found[i] = vector if is_keywords_only(vector) else list(vector)
                if isinstance(texts[i], str) and not is_keywords_only(vector):
                    self.cache.put(texts[i], vector, each)
        return found


def install_query_cache(
    client: Any,
    *,
    maxsize: int = DEFAULT_QUERY_CACHE_SIZE,
    ttl: float = DEFAULT_QUERY_CACHE_TTL,
) -> QueryEmbeddingCache | None:
    """Wrap ``client``'s embedder with a query cache, once; return the cache.

    A client already wrapped keeps its cache (and returns it). Hosted mem0
    embeds on the platform: ``None``.
    """
    embedder = getattr(client, "embedding_model", None)
    if embedder is None:
        return None
    if isinstance(embedder, CachingEmbedder):
        return embedder.cache
    cache = QueryEmbeddingCache(maxsize, ttl)
    client.embedding_model = CachingEmbedder(embedder, cache)
    logger.debug(
        "query embedding cache on %s (%d entries, %.0f s)", type(embedder).__name__, maxsize, ttl
    )
    return cache
