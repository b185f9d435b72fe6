"""The embedded default: one data folder holding the vector store, mem0's
history database and the middleware's own files."""

from __future__ import annotations

from ._folder import DATA_DIR_ENV, data_dir, history_db_path
from ._store import (
    LockedQdrantClient,
    build_local_memory,
    close_shared_clients,
    embedded_store_config,
    share_local_qdrant,
    shared_qdrant_client,
)

__all__ = [
    "DATA_DIR_ENV",
    "LockedQdrantClient",
    "build_local_memory",
    "close_shared_clients",
    "data_dir",
    "embedded_store_config",
    "history_db_path",
    "share_local_qdrant",
    "shared_qdrant_client",
]
