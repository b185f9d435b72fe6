"""Opening the store the settings name, for one command.

:func:`open_store` builds the mem0 client (the embedded folder, pgvector, a
Qdrant server or the hosted platform), checks that the embedder fits the
store, and wraps it in :class:`~._store.MemoryStore` or
:class:`~._hosted.HostedStore`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .._exceptions import ConfigurationError, DimensionMismatchError, StoreLockedError
from .._mem0.errors import mapped_errors
from ._hosted import HostedStore
from ._lock import lock_holder
from ._models import ChatChoice, embedding_model_from_spec, inert_chat_model
from ._store import MemoryStore

if TYPE_CHECKING:
    from agentscope.embedding import EmbeddingModelBase

    from ._config import Settings

__all__ = ["locked_message", "open_store"]

_CONNECT_TIMEOUT = 5


def locked_message(settings: Settings) -> str:
    """Why a command cannot open the embedded folder, and what to do, in flags."""
    holder = lock_holder(settings.folder)
    who = holder.describe() if holder else "another process (which could not be identified)"
    return (
        f"the data folder {settings.folder} is in use by {who}: the embedded store "
        "serves one process at a time. Stop that process first, or use another "
        "--folder, or keep the memories where both can reach them (pgvector or a "
        "Qdrant server, named with --config)"
    )


def open_store(settings: Settings, *, chat: ChatChoice | None = None) -> MemoryStore | HostedStore:
    """Build the store the settings name.

    Args:
        settings: From :func:`~._config.load_settings`.
        chat: The extraction model; ``None`` for commands that do not extract.

    Raises:
        ConfigurationError: Bad settings, or an embedder that does not fit.
        StoreLockedError: Another process holds the embedded folder.
        TransientBackendError: A server backend could not be reached.
    """
    if settings.backend == "hosted":
        return _open_hosted(settings, chat)
    embedding = embedding_model_from_spec(settings.embedding_model)
    chat_model = chat.model if chat is not None else inert_chat_model()
    if settings.backend == "embedded":
        from .._mem0.clients import build_local_memory, close_memory
        from ..local import close_shared_clients

        # A command is a process of its own and hands the folder back when it is
        # done; run inside a process that already holds the folder, it gives
        # back only its own use of it (that process's clients stay open).
        holder = lock_holder(settings.folder)
        held_here = holder is not None and holder.is_self
        try:
            memory = build_local_memory(
                chat_model, embedding_model=embedding, folder=settings.folder
            )
        except StoreLockedError as exc:
            raise StoreLockedError(locked_message(settings)) from exc
        folder = settings.folder
        return MemoryStore(
            memory,
            settings=settings,
            embedding_model=embedding,
            chat=chat,
            on_close=(lambda: close_memory(memory))
            if held_here
            else (lambda: close_shared_clients(folder)),
        )
    return _open_server(settings, embedding, chat_model, chat)


def _open_server(
    settings: Settings, embedding: EmbeddingModelBase, chat_model: Any, chat: ChatChoice | None
) -> MemoryStore:
    from .._mem0.clients import build_memory, close_memory
    from ..backends import prepare_pgvector

    history = str(settings.history_db) if settings.history_db else None
    if settings.backend == "pgvector":
        assert settings.dsn is not None
        _check_postgres(settings.dsn)
    fields = settings.server_fields(dims=embedding.dimensions, history_db_path=history)
    if settings.backend == "pgvector":
        with mapped_errors("preparing the pgvector tables"):
            prepare_pgvector(fields)
    with mapped_errors(f"connecting to the {settings.backend} backend"):
        # The client the middleware builds: history (and so the outbox) in the same place.
        memory = build_memory(chat_model=chat_model, embedding_model=embedding, mem0_config=fields)
    store = MemoryStore(
        memory,
        settings=settings,
        embedding_model=embedding,
        chat=chat,
        on_close=lambda: close_memory(memory),
    )
    size = store.vector_size()
    if size is not None and size != embedding.dimensions:
        store.close()
        raise DimensionMismatchError(
            f"the embedding model makes {embedding.dimensions}-dimensional vectors but "
            f"{settings.backend} collection {settings.collection!r} holds {size}-dimensional "
            "ones; configure the embedder these memories were stored with "
            "(embedding_model in the config file, or $AGENTSCOPE_MEM0_EMBEDDER)"
        )
    return store


def _check_postgres(dsn: str) -> None:
    """Fail fast on an unreachable server: mem0's pool would wait 30 s per call."""
    try:
        import psycopg
    except ImportError as exc:
        raise ConfigurationError(
            "the pgvector backend needs psycopg 3: pip install 'psycopg[binary]' psycopg-pool "
            "(the [pgvector] extra)"
        ) from exc
    with mapped_errors("connecting to PostgreSQL"):
        psycopg.connect(dsn, connect_timeout=_CONNECT_TIMEOUT).close()


def _open_hosted(settings: Settings, chat: ChatChoice | None) -> HostedStore:
    key = settings.api_key
    if not key:
        raise ConfigurationError(
            f"backend 'hosted' needs an API key in ${settings.api_key_env}; "
            "get one at https://app.mem0.ai"
        )
    from mem0 import AsyncMemoryClient

    with mapped_errors("connecting to the hosted platform"):
        client = AsyncMemoryClient(api_key=key, host=settings.url)
    return HostedStore(client, settings=settings, chat=chat)
