"""The embedded default: one data folder holding the vector store (Qdrant
Edge), mem0's history database and the middleware's own files."""

from __future__ import annotations

from ._edge_provider import PROVIDER as EDGE_PROVIDER
from ._edge_provider import EdgeVectorStore, edge_vector_store_config
from ._embedder import E5_DIMENSIONS, OfflineE5Embedding, default_embedding_model
from ._engine import (
    ENGINE_ENV,
    edge_dir,
    embedded_store_config,
    memory_config_from,
    store_engine,
)
from ._folder import DATA_DIR_ENV, data_dir, history_db_path
from ._keyword import KeywordEncoder, SparseTerms, install_keyword_encoder
from ._store import (
    LockedQdrantClient,
    close_shared_clients,
    qdrant_local_store_config,
    share_local_qdrant,
    shared_qdrant_client,
)

__all__ = [
    "DATA_DIR_ENV",
    "E5_DIMENSIONS",
    "EDGE_PROVIDER",
    "ENGINE_ENV",
    "EdgeVectorStore",
    "KeywordEncoder",
    "LockedQdrantClient",
    "OfflineE5Embedding",
    "SparseTerms",
    "close_shared_clients",
    "data_dir",
    "default_embedding_model",
    "edge_dir",
    "edge_vector_store_config",
    "embedded_store_config",
    "history_db_path",
    "install_keyword_encoder",
    "memory_config_from",
    "qdrant_local_store_config",
    "share_local_qdrant",
    "shared_qdrant_client",
    "store_engine",
]
