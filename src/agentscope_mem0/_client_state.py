"""State that lives as long as a mem0 client, shared by every middleware on it.

``agentscope.app`` builds a new middleware for every chat run, so whatever a
middleware keeps itself lasts one turn. What must outlive a turn lives here:
the backend, the circuit breaker (with the search latencies), the profile
cache (its entries are per user and agent), the write queue, the time judge,
the profile's refresher and the query-embedding cache. A lone
:class:`~agentscope_mem0.Mem0Middleware` makes its own;
:func:`~agentscope_mem0.service.mem0_middleware_factory` makes one per client
and hands it to every middleware it builds.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Any

from ._exceptions import ConfigurationError
from ._mem0.backend import Mem0Backend
from ._mem0.breaker import CircuitBreaker
from ._mem0.clients import close_memory, resolve_client
from ._mem0.query_cache import install_query_cache
from ._observe.usage import TokenMeter
from ._parameters import Mem0MiddlewareParameters
from ._profile.refresher import ProfileRefresher
from ._recall.profile import ProfileCache
from ._text.grounding import DROP_REASONS
from ._vectors.keywords_only import allow_keywords_only, keyword_only_queries
from ._working.stores import shared_store_for_client
from ._write.judge import FollowUp, build_time_judge, judge_model_of
from ._write.outbox import OUTBOX_FILENAME, default_outbox_dir
from ._write.queue import WriteQueue

if TYPE_CHECKING:
    from pathlib import Path

    from agentscope.embedding import EmbeddingModelBase
    from agentscope.model import ChatModelBase

    from ._working.stores import WorkingStore


__all__ = ["ClientState", "state_for"]

logger = logging.getLogger(__name__)


class ClientState:
    """The per-client state the middlewares on one mem0 client share.

    Args:
        client: The async mem0 client.
        parameters: The options the state is built with: ``breaker_threshold``
            and ``breaker_cooldown`` (the breaker), ``profile_ttl``,
            ``outbox``, ``extraction``, ``judge`` and ``profile``; the timeouts and the
            rest stay each middleware's own. ``None``: the defaults.
        judge_model: The time judgement's chat model; default: the model
            mem0 extracts with.
        write_queue: A queue to use instead of building one; it must write to
            ``client``. :meth:`aclose` then only flushes it.
        closes_client: :meth:`aclose` closes ``client`` too (see
            :attr:`closes_client`).
        search_by_agent: The judge and consolidation look for older memories
            of the writing agent only (``scope_search_by_agent``), or of the
            whole user.

    Raises:
        ConfigurationError: ``write_queue`` writes to another client or
            extracts otherwise; ``extraction`` does not fit the client; a
            ``judge_model`` with ``judge`` off.
    """

    def __init__(
        self,
        client: Any,
        *,
        parameters: Mem0MiddlewareParameters | None = None,
        judge_model: ChatModelBase | None = None,
        write_queue: WriteQueue | None = None,
        closes_client: bool = False,
        search_by_agent: bool = True,
    ) -> None:
        parameters = parameters if parameters is not None else Mem0MiddlewareParameters()
        extraction = parameters.extraction
        if judge_model is not None and not parameters.judge:
            raise ConfigurationError(
                "judge_model= was given with Parameters(judge=False); drop one of them"
            )
        if write_queue is not None and write_queue.backend.client is not client:
            raise ConfigurationError(
                "write_queue writes to another mem0 client than this middleware; "
                "build the queue on the same client"
            )
        if write_queue is not None and write_queue.backend.extraction != extraction:
            raise ConfigurationError(
                f"write_queue extracts with {write_queue.backend.extraction!r}, not "
                f"{extraction!r}; build its Mem0Backend with extraction={extraction!r}"
            )
        self.backend: Mem0Backend = (
            write_queue.backend
            if write_queue is not None
            else Mem0Backend(client, extraction=extraction)
        )
        """The one door to the client."""
        if write_queue is None:
            self.backend.grounded = parameters.grounded
            self.backend.remember, self.backend.ignore = parameters.remember, parameters.ignore
        self.breaker = CircuitBreaker(
            threshold=parameters.breaker_threshold, cooldown=parameters.breaker_cooldown
        )
        """Skips reads and tool calls while mem0 keeps failing."""
        self.profile_recall = ProfileCache(ttl=parameters.profile_ttl)
        """Recall mode "profile": each scope's recent memories, cached (not the
        distilled profile of ``profile``), refreshed after a write."""
        self.judge = build_time_judge(
            self.backend,
            judge_model if judge_model is not None else parameters.judge,
            search_by_agent=search_by_agent,
        )
        """Marks what new memories repeat and, with a model (its ``model`` is
        ``None`` when the judgement is off), what they supersede or extend."""
        self.profile: ProfileRefresher | None = (
            ProfileRefresher(
                self.backend,
                None if self.backend.hosted else judge_model_of(client),
                lambda: shared_store_for_client(client),
            )
            if parameters.profile
            else None
        )
        """Refreshes each user's profile in the background (``Parameters(profile=True)``),
        with the chat model mem0 extracts with; ``None`` with the profile off."""
        if self.profile is not None and self.profile.model is None:
            logger.info(
                "the mem0 client does not extract with an AgentScope model: profiles are "
                "shown when set (agentscope-mem0 profile USER --edit) but never refreshed"
            )
        self.follow_up = FollowUp(self.profile_recall, self.judge, self.profile)
        """What follows each stored write: the profile cache refreshed, then the
        judgement in the background (and the profile's refresher told)."""
        self.query_cache = install_query_cache(client)
        """Search embeddings of recent queries; ``None`` for hosted mem0."""
        allow_keywords_only(client)
        self._owns_writer = write_queue is None
        self.writer: WriteQueue = (
            write_queue
            if write_queue is not None
            else WriteQueue(
                self.backend,
                outbox_dir=parameters.outbox,
                after_store=self.follow_up,
                deliver=parameters.deliver_writes,
            )
        )
        """The write queue, ordered per scope."""
        self.closes_client = closes_client
        """:meth:`aclose` closes the client after the queue: whoever built a
        client closes it. It releases what building it opened (the data
        folder's embedded store once no other client of the process uses it);
        a client someone passed in stays theirs."""
        self._owns_meter = self.backend.meter is None
        self.meter = self.backend.meter or TokenMeter.for_client(client, self._usage_beside(client))
        """The model tokens spent on extraction and judgement (kept beside the
        outbox, or in PostgreSQL with mem0's history)."""
        self.backend.meter = self.meter
        self.judge.meter = self.meter
        if self.profile is not None:
            self.profile.meter = self.meter
        self._closed = False

    def _usage_beside(self, client: Any) -> Path | None:
        """The file the token totals are kept beside: the outbox file, or for an
        outbox in PostgreSQL the one the store's SQLite outbox would be."""
        outbox = self.writer.outbox
        if outbox.path is not None or not outbox.shared:
            return outbox.path
        folder = default_outbox_dir(client)
        return folder / OUTBOX_FILENAME if folder is not None else None

    @property
    def profile_store(self) -> WorkingStore:
        """Where the users' profiles are kept: the client's working-memory store."""
        if self.profile is not None:
            return self.profile.store
        return shared_store_for_client(self.client)

    @property
    def client(self) -> Any:
        """The mem0 client."""
        return self.backend.client

    def stats(self) -> dict[str, Any]:
        """Totals of every middleware on this client: searches, breaker, writes, judgements.

        Searches: ``searches``, ``search_hits``, ``search_failures``,
        ``search_timeouts``, ``searches_skipped`` (breaker open),
        ``breaker_opened``, ``breaker_state``, ``search_latency_p50/p95``.
        Writes: ``writes_queued/stored/retried/failed/pending`` and more, see
        ``WriteQueue.stats``. Model tokens: ``tokens_in/out_per_write`` and
        the totals, see ``TokenMeter.stats``. What the extraction proposed and
        the check of it dropped: ``memories_dropped_assistant`` (the reply's
        words), ``_question`` (a question or request restated), ``_ungrounded``
        (nobody said it), ``_language`` (not the user's language), ``_ignored``
        (under the user's ``ignore`` rules), with
        ``memories_kept_grounded`` and ``grounding_model_checks`` (proposals the
        words could not decide). Latencies are in seconds.
        """
        extraction = dict.fromkeys(
            [f"memories_dropped_{reason}" for reason in DROP_REASONS]
            + ["memories_kept_grounded", "grounding_model_checks"],
            0,
        )
        extraction.update(self.backend.extraction_counts)
        cache = self.query_cache.stats() if self.query_cache else {}
        cache["searches_by_keywords_alone"] = keyword_only_queries(self.client)
        tokens = self.meter.stats()
        return {
            **self.breaker.stats(),
            **self.writer.stats(),
            **self.follow_up.stats(),
            **(self.profile.stats() if self.profile is not None else {}),
            **extraction,
            **cache,
            **tokens,
        }

    async def flush(self, timeout: float | None = None) -> bool:
        """Wait until every queued write, then its time judgement (or, without
        a judge, its consolidation), is done.

        Returns:
            True when all drained within ``timeout``.
        """
        flushed = await self.writer.flush(timeout)
        flushed = await self.follow_up.flush(timeout) and flushed
        return flushed

    async def aclose(self, timeout: float | None = None) -> bool:
        """Flush, then close the write queue if this state built it, then the
        client if :attr:`closes_client`. Idempotent.

        Returns:
            True when every queued write was stored.
        """
        if self._closed:
            return True
        self._closed = True
        flushed = await self.flush(timeout)
        self.follow_up.stop()
        if self.profile is not None:
            self.profile.stop()  # a profile is rebuilt by the next refresh; no write is lost
        if self._owns_writer:
            flushed = await self.writer.aclose(timeout) and flushed
        if self._owns_meter:
            self.meter.close()
        if self.closes_client:
            await asyncio.to_thread(close_memory, self.client)
        return flushed


def state_for(
    parameters: Mem0MiddlewareParameters,
    *,
    client: Any | None,
    chat_model: ChatModelBase | None = None,
    embedding_model: EmbeddingModelBase | None = None,
    mem0_config: Any | None = None,
    judge_model: ChatModelBase | None = None,
    search_by_agent: bool = True,
) -> ClientState:
    """The state a middleware configured with ``parameters`` builds for itself.

    On ``client``, or on a client built from the models and ``mem0_config``
    (see :func:`~._mem0.clients.resolve_client`), which the state then closes.
    """
    built = resolve_client(
        client=client,
        chat_model=chat_model,
        embedding_model=embedding_model,
        mem0_config=mem0_config,
    )
    try:
        return ClientState(
            built,
            parameters=parameters,
            judge_model=judge_model,
            closes_client=client is None,
            search_by_agent=search_by_agent,
        )
    except BaseException:
        if client is None:
            close_memory(built)
        raise
