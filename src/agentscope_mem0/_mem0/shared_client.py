"""One mem0 client for a whole service, built lazily and at most once at a time.

A service factory hands the same client to every middleware it makes. Building
it can take seconds (the embedded store opens its folder, the offline embedder
loads) and the first calls may arrive together, on different event loops, so
the build runs once in a worker thread and every caller awaits the same result.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import os
import threading
from typing import TYPE_CHECKING, Any

from .._exceptions import ConfigurationError, InvalidStateError
from .clients import (
    build_local_memory,
    build_mem0_config,
    check_model_types,
    close_memory,
    resolve_client,
)

if TYPE_CHECKING:
    from agentscope.embedding import EmbeddingModelBase
    from agentscope.model import ChatModelBase

logger = logging.getLogger(__name__)


def check_backend_arguments(
    chat_model: ChatModelBase | None,
    embedding_model: EmbeddingModelBase | None,
    mem0_config: Any | None,
    folder: str | os.PathLike[str] | None = None,
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


class SharedClient:
    """A mem0 client given ready, or built from models and a config on first use.

    Args:
        client: A ready client (stays the caller's: :meth:`close` leaves it open).
        chat_model: The extraction model, for a client built here.
        embedding_model: The embedding model, for a client built here.
        mem0_config: The store's config; ``None`` builds the embedded default
            in ``folder``.
        folder: The embedded default's data folder.
    """

    def __init__(
        self,
        *,
        client: Any | None = None,
        chat_model: ChatModelBase | None = None,
        embedding_model: EmbeddingModelBase | None = None,
        mem0_config: Any | None = None,
        folder: str | os.PathLike[str] | None = None,
    ) -> None:
        self._lock = threading.Lock()
        self._client = client
        self._built_here = False
        self._building: concurrent.futures.Future[Any] | None = None
        self._closed = False
        self._chat_model = chat_model
        self._embedding_model = embedding_model
        self._mem0_config = mem0_config
        self.folder = folder
        #: Whether the client is the embedded default built here.
        self.embedded = client is None and mem0_config is None

    @property
    def ready(self) -> Any | None:
        """The client, or ``None`` until it is built."""
        return self._client

    async def get(self) -> Any:
        """The client, built on the first call; a failed build is retried by the next.

        Raises:
            InvalidStateError: The client was closed.
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
            if self.embedded:
                # The embedded default; the offline embedder unless one was given.
                # check_backend_arguments made sure of the chat model.
                assert self._chat_model is not None
                client = build_local_memory(
                    self._chat_model, embedding_model=self._embedding_model, folder=self.folder
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

    async def close(self) -> None:
        """Refuse later :meth:`get` calls and close the client if it was built here."""
        self._closed = True
        with self._lock:
            client, built_here = self._client, self._built_here
        if client is not None and built_here:
            await asyncio.to_thread(close_memory, client)
