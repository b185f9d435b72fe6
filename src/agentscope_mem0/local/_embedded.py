"""The embedded store of one data folder: its mem0 config, opening and closing it.

The embedded store is Qdrant Edge (``<folder>/edge/``, see :mod:`._edge`).
Release 0.1's qdrant-client local mode (``<folder>/qdrant/``) is no longer an
engine: such a folder is migrated to Qdrant Edge on its first open (see
:mod:`._migrate`), and asking for that engine with ``$AGENTSCOPE_MEM0_ENGINE``
is refused with what to do instead.
"""

from __future__ import annotations

import os
from typing import Any

from .._exceptions import ConfigurationError
from ._folder import COLLECTION, FolderLayout, data_dir, prepare_history_db

__all__ = [
    "RETIRED_ENGINE_ENV",
    "close_shared_clients",
    "embedded_store_config",
    "embedded_store_fields",
    "refuse_retired_engine",
]

RETIRED_ENGINE_ENV = "AGENTSCOPE_MEM0_ENGINE"
"""The variable that chose the embedded engine in releases 0.2 and 0.3."""

ENTITIES = f"{COLLECTION}_entities"
"""mem0 2.2 keeps entity links in a second collection, ``<name>_entities``."""


def refuse_retired_engine() -> None:
    """Fail when ``$AGENTSCOPE_MEM0_ENGINE`` still asks for release 0.1's engine.

    ``edge`` (or an empty value) names the only engine and passes.

    Raises:
        ConfigurationError: It names another engine, such as ``qdrant-local``.
    """
    chosen = os.environ.get(RETIRED_ENGINE_ENV, "").strip()
    if chosen.lower() in ("", "edge"):
        return
    raise ConfigurationError(
        f"{RETIRED_ENGINE_ENV}={chosen!r}: the embedded store runs on Qdrant Edge only; "
        "release 0.1's engine (qdrant-client local mode, 'qdrant-local') was retired. "
        f"Unset {RETIRED_ENGINE_ENV}: a folder holding release 0.1's qdrant/ store moves "
        "to Qdrant Edge on its first open, its old files left in place (see "
        "docs/migrating.md for a folder written by that engine after its migration)"
    )


def embedded_store_fields(
    *, dims: int, folder: str | os.PathLike[str] | None = None
) -> dict[str, Any]:
    """The ``MemoryConfig`` fields naming the embedded store in one data folder.

    Describes the store and opens nothing (not even the folder):
    :func:`embedded_store_config` opens it.

    Args:
        dims: The embedding model's vector size.
        folder: The data folder (see :func:`~agentscope_mem0.local.data_dir`).

    Returns:
        ``vector_store`` and ``history_db_path`` entries.
    """
    from ._edge_config import PROVIDER

    layout = FolderLayout.of(folder)
    store = {
        "collection_name": COLLECTION,
        "embedding_model_dims": dims,
        "path": os.fspath(layout.edge),
    }
    return {
        "vector_store": {"provider": PROVIDER, "config": store},
        "history_db_path": os.fspath(layout.history_db),
    }


def embedded_store_config(
    *, dims: int, folder: str | os.PathLike[str] | None = None
) -> dict[str, Any]:
    """The ``MemoryConfig`` fields for the embedded store in one data folder, opened.

    Opens (or reuses) the folder's store now, so that another process's lock
    or a vector-size mismatch surfaces here, migrates a release-0.1 folder
    first, and puts the history database in WAL mode. Pass the fields as
    ``mem0_config`` (``build_mem0_config`` and ``build_memory`` accept them).

    Args:
        dims: The embedding model's vector size.
        folder: The data folder (see :func:`~agentscope_mem0.local.data_dir`).

    Returns:
        ``vector_store`` and ``history_db_path`` entries.

    Raises:
        ConfigurationError: ``$AGENTSCOPE_MEM0_ENGINE`` asks for the retired engine.
        StoreLockedError: Another process holds the folder.
        DimensionMismatchError: The folder holds vectors of another size.
        MigrationError: A release-0.1 folder could not be migrated (it is left as it was).
    """
    from ._edge import shared_shard
    from ._migrate import migrate_if_needed

    refuse_retired_engine()
    layout = FolderLayout(data_dir(folder))
    migrate_if_needed(layout.root, dims=dims)
    for name in (COLLECTION, ENTITIES):
        shared_shard(layout.edge / name, dims)
    prepare_history_db(layout.history_db)
    return embedded_store_fields(dims=dims, folder=layout.root)


def close_shared_clients(folder: str | os.PathLike[str] | None = None) -> None:
    """Close the stores this process shares inside folder ``folder``, or every one.

    That is the embedded store's Qdrant Edge shards and the shared clients of
    on-disk Qdrant paths named in a ``mem0_config`` (see
    :func:`~._qdrant_path.share_local_qdrant`). mem0 clients built on a
    closed store fail on their next call; build new ones. Mostly for tests
    and for handing a folder to another process.
    """
    from ._edge import close_shards
    from ._qdrant_path import close_qdrant_clients

    root = None if folder is None else FolderLayout.of(folder).root
    close_shards(root)
    close_qdrant_clients(root)
