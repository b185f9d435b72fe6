"""The embedded default: one data folder holding the vector store (Qdrant
Edge), mem0's history database and the middleware's own files.

The data folder's names are light and imported at once; the others on first
use: reading ``DATA_DIR_ENV`` (the command line does, to find the folder) must
not import mem0 and the engine.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from ._folder import DATA_DIR_ENV, data_dir, history_db_path

if TYPE_CHECKING:
    from ._e5 import E5_DIMENSIONS
    from ._edge_provider import PROVIDER as EDGE_PROVIDER
    from ._edge_provider import EdgeVectorStore, edge_vector_store_config
    from ._embedded import close_shared_clients, embedded_store_config, embedded_store_fields
    from ._embedder import OfflineE5Embedding, default_embedding_model
    from ._keyword import KeywordEncoder, SparseTerms, install_keyword_encoder
    from ._qdrant_path import LockedQdrantClient, share_local_qdrant

# Public name -> (module, name there).
_LAZY: dict[str, tuple[str, str]] = {
    "E5_DIMENSIONS": ("._e5", "E5_DIMENSIONS"),
    "EDGE_PROVIDER": ("._edge_provider", "PROVIDER"),
    "EdgeVectorStore": ("._edge_provider", "EdgeVectorStore"),
    "KeywordEncoder": ("._keyword", "KeywordEncoder"),
    "LockedQdrantClient": ("._qdrant_path", "LockedQdrantClient"),
    "OfflineE5Embedding": ("._embedder", "OfflineE5Embedding"),
    "SparseTerms": ("._keyword", "SparseTerms"),
    "close_shared_clients": ("._embedded", "close_shared_clients"),
    "default_embedding_model": ("._embedder", "default_embedding_model"),
    "edge_vector_store_config": ("._edge_provider", "edge_vector_store_config"),
    "embedded_store_config": ("._embedded", "embedded_store_config"),
    "embedded_store_fields": ("._embedded", "embedded_store_fields"),
    "install_keyword_encoder": ("._keyword", "install_keyword_encoder"),
    "share_local_qdrant": ("._qdrant_path", "share_local_qdrant"),
}

__all__ = [
    "DATA_DIR_ENV",
    "E5_DIMENSIONS",
    "EDGE_PROVIDER",
    "EdgeVectorStore",
    "KeywordEncoder",
    "LockedQdrantClient",
    "OfflineE5Embedding",
    "SparseTerms",
    "close_shared_clients",
    "data_dir",
    "default_embedding_model",
    "edge_vector_store_config",
    "embedded_store_config",
    "embedded_store_fields",
    "history_db_path",
    "install_keyword_encoder",
    "share_local_qdrant",
]


def __getattr__(name: str) -> Any:
    """Import a public name's module on first use and cache the name here."""
    where = _LAZY.get(name)
    if where is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(where[0], __name__), where[1])
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
