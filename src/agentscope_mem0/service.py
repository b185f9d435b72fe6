"""Service mode: long-term memory for every agent of an ``agentscope.app`` deployment.

``agentscope.app.create_app(extra_agent_middlewares=...)`` calls its factory on
every agent assembly (each chat turn, each scheduled trigger) with the
authenticated user. :func:`mem0_middleware_factory` returns such a factory: each
call hands back a fresh :class:`~agentscope_mem0.Mem0Middleware` for that user,
and all of them share one mem0 client, built once, and one
:class:`~agentscope_mem0.ClientState`: the circuit breaker, the profile cache,
the counters and the write queue outlive the turn. A client per request would
open the embedded store again on every turn and block on its folder lock.

Usage::

    memory = mem0_middleware_factory(chat_model=..., embedding_model=...)
    app = create_app(..., extra_agent_middlewares=memory)
    memory.install(app)  # build the client at startup, flush writes at shutdown
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import gc
import logging
import os
import threading
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

from typing_extensions import Unpack

from ._client_state import ClientState
from ._exceptions import ConfigurationError, InvalidStateError
from ._mem0.clients import (
    build_local_memory,
    build_mem0_config,
    check_model_types,
    close_memory,
    resolve_client,
)
from ._middleware import Mem0Middleware
from ._parameters import (
    Mem0MiddlewareKeywords,
    Mem0MiddlewareParameters,
    check_keywords,
    with_outbox,
)
from ._scope import agent_id_from_name, check_user_id

if TYPE_CHECKING:
    from agentscope.embedding import EmbeddingModelBase
    from agentscope.middleware import MiddlewareBase
    from agentscope.model import ChatModelBase

__all__ = ["Mem0MiddlewareFactory", "check_user_id", "mem0_middleware_factory"]

logger = logging.getLogger(__name__)

# Refused user ids are logged once each, up to this many distinct ids.
_MAX_REFUSED_IDS_LOGGED = 1000


class Mem0MiddlewareFactory:
    """An ``extra_agent_middlewares`` factory backed by one shared mem0 client.

    Build it with :func:`mem0_middleware_factory` (the same class). Calling it
    as ``await factory(user_id, agent_id, session_id[, workspace])`` returns
    ``[Mem0Middleware(...)]`` for that user; the signature is the one
    ``agentscope.app`` probes for, in its three- and four-argument forms.
    """

    def __init__(
        self,
        *,
        chat_model: ChatModelBase | None = None,
        embedding_model: EmbeddingModelBase | None = None,
        mem0_config: Any | None = None,
        client: Any | None = None,
        folder: str | os.PathLike[str] | None = None,
        **keywords: Unpack[Mem0MiddlewareKeywords],
    ) -> None:
        """Check the configuration; the client itself is built on first use.

        Every call of the factory returns a fresh ``Mem0Middleware`` for the
        calling user; all of them share one mem0 client, built on first use (or
        at startup with :meth:`Mem0MiddlewareFactory.install`), and one
        :class:`~agentscope_mem0.ClientState` built with ``parameters``.

        Args:
            chat_model: The AgentScope model mem0 extracts memories with.
            embedding_model: The AgentScope model mem0 embeds memories with;
                optional for the embedded default (the offline embedder of
                ``agentscope-mem0[local]``), as for ``Mem0Middleware.local``.
            mem0_config: A mem0 ``MemoryConfig`` (or dict) for the store; without
                it, the embedded folder (one process only).
            client: A ready ``mem0.AsyncMemory`` or ``mem0.AsyncMemoryClient`` to
                share instead; the factory never closes it.
            folder: The embedded default's data folder (default
                ``$AGENTSCOPE_MEM0_DIR`` or ``~/.agentscope-mem0``), where the
                write outbox lives too unless ``Parameters(outbox=...)`` says
                otherwise; not with ``mem0_config``.
            **keywords: The other keywords of ``Mem0Middleware`` (``mode``,
                ``top_k``, ``parameters=Mem0Middleware.Parameters(...)``, ...; see
                :class:`~agentscope_mem0.Mem0MiddlewareKeywords`). ``agent_id``
                defaults to the app's agent id; pass ``None`` for the agent's name.

        Raises:
            ConfigurationError: An unknown mode, a bad value or no usable backend.
            TypeError: An unknown or reserved keyword, one of release 0.3 (naming
                its new spelling), or a synchronous client.
        """
        if "user_id" in keywords:
            raise TypeError(
                "mem0_middleware_factory() takes no user_id: each call of the "
                "factory gets the authenticated user from the app"
            )
        if "client_state" in keywords:
            raise TypeError("the factory's middlewares share the factory's client_state")
        # Checked now, so that a bad value fails at startup, not in a chat run.
        check_keywords("mem0_middleware_factory", keywords)
        self._keywords = keywords
        parameters = keywords.get("parameters")
        self._parameters = parameters if parameters is not None else Mem0MiddlewareParameters()
        """The options every middleware made here uses (and the shared state)."""
        self._lock = threading.Lock()
        self._refused_ids: set[str] = set()
        # One state for every middleware made here: the breaker and the profile
        # cache outlive a turn, writes of a scope stay in order across turns.
        self._state: ClientState | None = None
        self._closed = False

        if client is not None:
            # Checks the client is async; warns about the arguments it overrides.
            client = resolve_client(
                client=client,
                chat_model=chat_model,
                embedding_model=embedding_model,
                mem0_config=mem0_config,
            )
        else:
            # Fails at startup: agentscope.app only logs errors raised in a chat run.
            _check_backend_arguments(chat_model, embedding_model, mem0_config, folder)
        self._client = client
        self._built_here = False
        self._building: concurrent.futures.Future[Any] | None = None
        self._chat_model = chat_model
        self._embedding_model = embedding_model
        self._mem0_config = mem0_config
        self._folder = folder
        self._embedded = client is None and mem0_config is None
        """Whether the client is the embedded default, built here."""

    # -- the factory ----------------------------------------------------

    async def __call__(
        self,
        user_id: str,
        agent_id: str,
        session_id: str,
        workspace: Any | None = None,
    ) -> list[MiddlewareBase]:
        """Memory for one agent assembly.

        Args:
            user_id: The authenticated user; all reads and writes are scoped
                to it.
            agent_id: The app's agent id; mem0's ``agent_id`` unless the
                ``agent_id`` option was given.
            session_id: The chat session; memories outlive it, so unused.
            workspace: The session's workspace; unused.

        Returns:
            A one-element list holding a new ``Mem0Middleware``; an empty list
            when ``user_id`` cannot be a mem0 user id (see
            :func:`check_user_id`): the turn then runs without memory, and
            a warning is logged (once per id).

        Raises:
            InvalidStateError: The factory was closed.
        """
        if not self._usable_user_id(user_id):
            return []
        client = await self.get_client()
        state = self._client_state(client)
        keywords = self._keywords.copy()
        keywords.pop("judge_model", None)  # the shared state's judge has it
        keywords["parameters"] = self._parameters
        if "agent_id" not in keywords and isinstance(agent_id, str) and agent_id.strip():
            keywords["agent_id"] = agent_id_from_name(agent_id)
        return [Mem0Middleware(user_id=user_id, client=client, client_state=state, **keywords)]

    def _usable_user_id(self, user_id: Any) -> bool:
        """Whether ``user_id`` can be a mem0 user id; a refusal is logged once per id.

        agentscope.app only logs an exception raised here and the turn then
        produces no reply at all, so a bad ``X-User-ID`` costs the memory of
        that turn, not the reply.
        """
        try:
            check_user_id(user_id)
        except ConfigurationError as exc:
            key = repr(user_id)[:200]
            with self._lock:
                first = key not in self._refused_ids
                if first and len(self._refused_ids) < _MAX_REFUSED_IDS_LOGGED:
                    self._refused_ids.add(key)
            log = logger.warning if first else logger.debug
            log("this turn runs without memory: %s", exc)
            return False
        return True

    def _client_state(self, client: Any) -> ClientState:
        with self._lock:
            if self._state is None:
                if self._embedded:
                    # The embedded default keeps its outbox in its data folder.
                    from .local import data_dir

                    self._parameters = with_outbox(self._parameters, data_dir(self._folder))
                self._state = ClientState(
                    client,
                    parameters=self._parameters,
                    judge_model=self._keywords.get("judge_model"),
                    search_by_agent=self._keywords.get("scope_search_by_agent", True),
                )
            return self._state

    def stats(self) -> dict[str, Any]:
        """Totals of every middleware this factory made (see :meth:`ClientState.stats`);
        empty before the first call."""
        return {} if self._state is None else self._state.stats()

    # -- the shared client ----------------------------------------------

    @property
    def client(self) -> Any | None:
        """The shared mem0 client, or ``None`` until it is built."""
        return self._client

    async def get_client(self) -> Any:
        """The shared mem0 client, built on the first call.

        Building can take seconds (the embedded store opens its folder, the
        offline embedder loads) and the first calls may arrive together, on
        different event loops: it runs once, in a worker thread, and every
        caller awaits the same result. A failed build is retried by the next
        call.

        Raises:
            InvalidStateError: The factory was closed.
        """
        if self._closed:
            raise InvalidStateError("this mem0 middleware factory was closed")
        if self._client is not None:
            return self._client
        with self._lock:
            if self._client is not None:
                return self._client
            future = self._building
            start = future is None
            if future is None:
                future = self._building = concurrent.futures.Future()
                # A caller giving up must not cancel the build for the others.
                future.set_running_or_notify_cancel()
        if start:
            asyncio.get_running_loop().run_in_executor(None, self._build, future)
        return await asyncio.wrap_future(future)

    def _build(self, future: concurrent.futures.Future[Any]) -> None:
        try:
            if self._embedded:
                # The embedded default; the offline embedder unless one was given.
                # _check_backend_arguments made sure of the chat model.
                assert self._chat_model is not None
                client = build_local_memory(
                    self._chat_model, embedding_model=self._embedding_model, folder=self._folder
                )
            else:
                client = resolve_client(
                    client=None,
                    chat_model=self._chat_model,
                    embedding_model=self._embedding_model,
                    mem0_config=self._mem0_config,
                )
        except BaseException as exc:
            with self._lock:
                self._building = None
            logger.error("building the shared mem0 client failed: %s", exc)
            future.set_exception(exc)
            return
        with self._lock:
            self._client, self._built_here = client, True
            self._building = None
        logger.info("shared mem0 client ready (%s)", type(client).__name__)
        future.set_result(client)

    async def serve_writes(self, poll: float = 0.5) -> None:
        """Store the writes every replica records, until cancelled: the writer process.

        Replicas built with ``Parameters(deliver_writes=False)`` only record
        their writes in the outbox in PostgreSQL. A process running this on a
        factory built alike (the same store, models and options, writes
        delivered) stores them, each user's in the order said, with the time
        judgement and the profile after them; it looks for new ones every
        ``poll`` seconds. Run it beside the replicas at a lower priority
        (``nice``), or on a machine of its own (docs/deploying.md).

        Raises:
            ConfigurationError: This factory does not deliver writes, or its
                outbox is not in PostgreSQL.
            InvalidStateError: The factory was closed.
        """
        client = await self.get_client()
        await self._client_state(client).writer.serve(poll)

    # -- lifecycle ------------------------------------------------------

    async def flush(self, timeout: float | None = None) -> bool:
        """Wait until every write queued by this factory's middlewares is stored.

        Returns:
            True when everything drained within ``timeout``.
        """
        return True if self._state is None else await self._state.flush(timeout)

    async def aclose(self, timeout: float | None = None) -> bool:
        """Store pending writes, close the write queue, then the client if the
        factory built it.

        A client passed in stays open: whoever opens a client closes it.
        Idempotent; later calls of the factory raise ``InvalidStateError``.

        Returns:
            True when every write was stored within ``timeout``.
        """
        if self._closed:
            return True
        self._closed = True
        drained = True if self._state is None else await self._state.aclose(timeout)
        if not drained:
            logger.warning("closing with mem0 writes still pending after %s s", timeout)
        with self._lock:
            client, built_here = self._client, self._built_here
        if client is not None and built_here:
            await asyncio.to_thread(close_memory, client)
        return drained

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[Mem0MiddlewareFactory]:
        """Build the client on entry; flush and close on exit."""
        await self.get_client()
        try:
            yield self
        finally:
            await self.aclose()

    async def start(self, *, freeze_gc: bool = True) -> None:
        """What :meth:`install` runs at the app's startup: build the shared
        client, then, with ``freeze_gc``, collect and freeze what the process
        holds by then (``gc.freeze()``).

        Once its modules, models and clients are loaded a process with memory
        tracks some 260,000 objects, and a full garbage collection walks them
        all (0.24 s on two busy cores); when one falls in a burst of replies,
        every reply in flight waits for it. Frozen, they are left out of every
        later collection. What startup built mostly lives as long as the
        app; a reference cycle made before and dropped after is never freed.

        Raises:
            InvalidStateError: The factory was closed.
        """
        await self.get_client()
        if freeze_gc:
            gc.collect()
            gc.freeze()

    def install(
        self, app: Any, *, flush_timeout: float | None = 30.0, freeze_gc: bool = True
    ) -> Any:
        """Tie the factory to an ASGI app's lifespan.

        The client is built at startup (so a broken backend fails the boot,
        not the first chat) and pending writes are flushed at shutdown, after
        the app's own shutdown has stopped its chat runs.

        Args:
            app: A Starlette/FastAPI app, e.g. from ``agentscope.app.create_app``.
            flush_timeout: Seconds shutdown waits for pending writes.
            freeze_gc: Freeze what startup built out of the garbage
                collector's way (see :meth:`start`); ``False`` leaves the
                collector as it is.

        Returns:
            ``app``, for chaining.
        """
        inner = app.router.lifespan_context

        @contextlib.asynccontextmanager
        async def lifespan(target: Any) -> AsyncIterator[Any]:
            await self.start(freeze_gc=freeze_gc)
            try:
                async with inner(target) as state:
                    yield state
            finally:
                await self.aclose(flush_timeout)

        app.router.lifespan_context = lifespan
        return app

    def mount_inspector(
        self, app: Any, path: str = "/memory-inspector", *, token: str | None = None
    ) -> Any:
        """Serve the memory inspector of this factory's embedded store under ``path``
        of ``app``, on the factory's own client, with ``agentscope-mem0 ui``'s
        token, host and CSRF rules (``token`` defaults to ``$AGENTSCOPE_MEM0_UI_TOKEN``;
        without one only requests from this machine are answered -- a loopback
        client naming a loopback host -- and a warning says so: behind a
        reverse proxy it needs a token). See docs/inspector.md.

        Returns:
            ``app``, for chaining.

        Raises:
            ConfigurationError: The factory does not use the embedded store.
        """
        from .cli.ui._serve import mount_inspector

        return mount_inspector(
            self, app, path, token=token, folder=self._folder, embedded=self._embedded
        )


def _check_backend_arguments(
    chat_model: ChatModelBase | None,
    embedding_model: EmbeddingModelBase | None,
    mem0_config: Any | None,
    folder: str | os.PathLike[str] | None,
) -> None:
    """Fail now on arguments the lazy build would reject.

    A given ``mem0_config`` is fully validated; building a config opens
    nothing, so a locked folder or an unreachable server shows only when the
    client is built. The embedded default is not validated here.

    Raises:
        ConfigurationError: No usable backend, or ``folder`` with ``mem0_config``.
        TypeError: A model of the wrong type.
    """
    if mem0_config is None and chat_model is None:
        raise ConfigurationError(
            "mem0_middleware_factory needs a mem0 backend: `client` (an "
            "AsyncMemory or AsyncMemoryClient), or `chat_model` (the embedded "
            "default, optionally with `embedding_model` and `folder`), or "
            "`chat_model` and `embedding_model` with `mem0_config`, or a "
            "complete `mem0_config`"
        )
    if folder is not None and mem0_config is not None:
        raise ConfigurationError(
            "`folder` is the embedded default's data folder; with `mem0_config` the "
            "store is the one the config names (drop one of the two)"
        )
    check_model_types(chat_model, embedding_model)
    if mem0_config is not None:
        build_mem0_config(
            chat_model=chat_model, embedding_model=embedding_model, mem0_config=mem0_config
        )


mem0_middleware_factory = Mem0MiddlewareFactory
"""Builds a :class:`Mem0MiddlewareFactory`: the factory to pass as
``create_app(extra_agent_middlewares=...)`` (its arguments are the class's)."""
