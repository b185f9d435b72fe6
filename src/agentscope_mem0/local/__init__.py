"""The embedded default: one data folder holding the vector store, mem0's
history database and the middleware's own files."""

from __future__ import annotations

from ._embedder import E5_DIMENSIONS, OfflineE5Embedding, default_embedding_model
from ._folder import DATA_DIR_ENV, data_dir, history_db_path
from ._keyword import KeywordEncoder, SparseTerms, install_keyword_encoder
from ._store import (
    LockedQdrantClient,
    close_shared_clients,
    embedded_store_config,
    share_local_qdrant,
    shared_qdrant_client,
)

__all__ = [
    "DATA_DIR_ENV",
    "E5_DIMENSIONS",
    "KeywordEncoder",
    "LockedQdrantClient",
    "OfflineE5Embedding",
    "SparseTerms",
    "close_shared_clients",
    "data_dir",
    "default_embedding_model",
    "embedded_store_config",
    "history_db_path",
    "install_keyword_encoder",
    "share_local_qdrant",
    "shared_qdrant_client",
]
