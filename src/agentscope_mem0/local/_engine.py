"""Which engine the embedded store runs on, and the mem0 config for it.

The embedded default is Qdrant Edge (``<folder>/edge/``, see :mod:`._edge`).
qdrant-client's on-disk local mode (``<folder>/qdrant/``, release 0.1's
store) stays selectable for one release with ``AGENTSCOPE_MEM0_ENGINE=qdrant-local``
or ``engine="qdrant-local"``; a folder written by release 0.1 is migrated to
Qdrant Edge on its first open (see :mod:`._migrate`).
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from .._exceptions import ConfigurationError
from ._folder import COLLECTION, FolderLayout, data_dir, history_db_path, prepare_history_db

if TYPE_CHECKING:
    from mem0.configs.base import MemoryConfig

__all__ = [
    "ENGINE_ENV",
    "Engine",
    "edge_dir",
    "embedded_store_config",
    "embedded_store_fields",
    "memory_config_from",
    "store_engine",
]

logger = logging.getLogger(__name__)

ENGINE_ENV = "AGENTSCOPE_MEM0_ENGINE"
"""Environment variable choosing the embedded engine: ``edge`` (default) or ``qdrant-local``."""

Engine = Literal["edge", "qdrant-local"]
_ENGINES: tuple[str, ...] = ("edge", "qdrant-local")
ENTITIES = f"{COLLECTION}_entities"
"""mem0 2.2 keeps entity links in a second collection, ``<name>_entities``."""


def store_engine(engine: str | None = None) -> Engine:
    """The engine to use: ``engine``, else ``$AGENTSCOPE_MEM0_ENGINE``, else ``"edge"``.

    Raises:
        ConfigurationError: The name is not one of ``edge`` / ``qdrant-local``.
    """
    chosen = (engine or os.environ.get(ENGINE_ENV) or "edge").strip().lower()
    if chosen not in _ENGINES:
        source = "engine=" if engine else f"${ENGINE_ENV}"
        raise ConfigurationError(
            f"unknown embedded store engine {chosen!r} (from {source}); "
            f"use one of {', '.join(_ENGINES)}"
        )
    return chosen  # type: ignore[return-value]


def edge_dir(folder: str | os.PathLike[str] | None = None) -> Path:
    """The Qdrant Edge collections inside the data folder (one shard folder each)."""
    return FolderLayout(data_dir(folder)).edge


def embedded_store_fields(
    *,
    dims: int,
    folder: str | os.PathLike[str] | None = None,
    engine: str | None = None,
) -> dict[str, Any]:
    """The ``MemoryConfig`` fields naming the embedded store in one data folder.

    Describes the store and opens nothing (not even the folder):
    :func:`embedded_store_config` opens it.

    Args:
        dims: The embedding model's vector size.
        folder: The data folder (see :func:`~agentscope_mem0.local.data_dir`).
        engine: ``"edge"`` or ``"qdrant-local"``; see :func:`store_engine`.

    Returns:
        ``vector_store`` and ``history_db_path`` entries.
    """
    layout = FolderLayout.of(folder)
    if store_engine(engine) == "qdrant-local":
        store: dict[str, Any] = {
            "provider": "qdrant",
            "config": {
                "collection_name": COLLECTION,
                "embedding_model_dims": dims,
                "path": os.fspath(layout.qdrant),
                "on_disk": True,
            },
        }
    else:
        from ._edge_config import PROVIDER

        store = {
            "provider": PROVIDER,
            "config": {
                "collection_name": COLLECTION,
                "embedding_model_dims": dims,
                "path": os.fspath(layout.edge),
            },
        }
    return {"vector_store": store, "history_db_path": os.fspath(layout.history_db)}


def embedded_store_config(
    *,
    dims: int,
    folder: str | os.PathLike[str] | None = None,
    engine: str | None = None,
) -> dict[str, Any]:
    """The ``MemoryConfig`` fields for the embedded store in one data folder, opened.

    Opens (or reuses) the folder's store now, so that another process's lock
    or a vector-size mismatch surfaces here, migrates a release-0.1 folder
    first, and puts the history database in WAL mode. Build the
    ``MemoryConfig`` with :func:`memory_config_from`.

    Args:
        dims: The embedding model's vector size.
        folder: The data folder (see :func:`~agentscope_mem0.local.data_dir`).
        engine: ``"edge"`` or ``"qdrant-local"``; see :func:`store_engine`.

    Returns:
        ``vector_store`` and ``history_db_path`` entries.

    Raises:
        StoreLockedError: Another process holds the folder.
        DimensionMismatchError: The folder holds vectors of another size.
        MigrationError: A release-0.1 folder could not be migrated (it is left as it was).
    """
    if store_engine(engine) == "qdrant-local":
        from ._store import qdrant_local_store_config

        return qdrant_local_store_config(dims=dims, folder=folder)
    from ._edge import shared_shard
    from ._migrate import migrate_if_needed

    root = data_dir(folder)
    migrate_if_needed(root, dims=dims)
    edge = edge_dir(root)
    for name in (COLLECTION, ENTITIES):
        shared_shard(edge / name, dims)
    history = history_db_path(root)
    prepare_history_db(history)
    return embedded_store_fields(dims=dims, folder=root)


def memory_config_from(fields: dict[str, Any]) -> MemoryConfig:
    """``MemoryConfig(**fields)``, also when the vector store is one of this package's providers.

    mem0's ``VectorStoreConfig`` rejects providers outside its whitelist, so a
    vector store naming the Qdrant Edge provider (:data:`~._edge_config.PROVIDER`)
    or the Qdrant server one (:data:`agentscope_mem0._server.qdrant_config.PROVIDER`)
    is built with that provider's own config class and set after the rest is
    validated.
    """
    from mem0.configs.base import MemoryConfig

    from .._server.qdrant_config import PROVIDER as QDRANT_PROVIDER
    from .._server.qdrant_config import qdrant_config_class
    from ._edge_config import PROVIDER as EDGE_PROVIDER
    from ._edge_config import edge_config_class

    store = fields.get("vector_store")
    classes = {EDGE_PROVIDER: edge_config_class, QDRANT_PROVIDER: qdrant_config_class}
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
