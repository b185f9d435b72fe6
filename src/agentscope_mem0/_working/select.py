"""Which working-memory store goes with a mem0 client.

- the embedded default and other local setups: ``working_memory.sqlite3``
  beside mem0's history database (the data folder for the embedded default);
- pgvector: the table ``<collection>_working`` in mem0's database;
- a Qdrant server: the collection ``<collection>_working`` on mem0's server;
- hosted mem0: the SQLite file in the local data folder (this machine only).
"""

from __future__ import annotations

import os
import threading
import weakref
from pathlib import Path
from typing import Any

from .store import SqliteWorkingStore, WorkingStore, working_table_name

__all__ = ["shared_store_for_client", "store_for_client"]

# One store per mem0 client: service mode builds middlewares for every chat
# run, and each would otherwise open its own PostgreSQL connection.
_SHARED: weakref.WeakKeyDictionary[Any, WorkingStore] = weakref.WeakKeyDictionary()
_SHARED_LOCK = threading.Lock()


def _qdrant_is_remote(qdrant: Any) -> bool:
    """Whether a ``QdrantClient`` talks to a server (not qdrant-client's local mode)."""
    inner = getattr(qdrant, "_client", None)
    return inner is not None and type(inner).__name__ == "QdrantRemote"


def store_for_client(client: Any, *, folder: str | os.PathLike[str] | None = None) -> WorkingStore:
    """The working-memory store that belongs with a mem0 client (see the module doc).

    Args:
        client: A mem0 ``AsyncMemory`` or ``AsyncMemoryClient``.
        folder: Where the SQLite file goes for local and hosted setups; default
            beside mem0's history database, else the data folder.
    """
    config = getattr(client, "config", None)
    vector = getattr(config, "vector_store", None)
    provider = getattr(vector, "provider", None)
    settings = getattr(vector, "config", None)
    collection = str(getattr(settings, "collection_name", None) or "mem0")
    if provider == "pgvector":
        from .remote import PostgresWorkingStore, pgvector_dsn

        return PostgresWorkingStore(pgvector_dsn(settings), table=working_table_name(collection))
    if provider in ("qdrant", "agentscope_qdrant"):  # mem0's provider, or this package's
        qdrant = getattr(getattr(client, "vector_store", None), "client", None)
        if _qdrant_is_remote(qdrant):
            from .remote import QdrantWorkingStore

            return QdrantWorkingStore(qdrant, collection=working_table_name(collection))
    if folder is None:
        history = getattr(config, "history_db_path", None)
        if history:
            folder = Path(history).expanduser().parent
        else:
            from ..local import data_dir

            folder = data_dir()
    return SqliteWorkingStore(folder)


def shared_store_for_client(client: Any) -> WorkingStore:
    """:func:`store_for_client`, one per client for as long as the client lives."""
    try:
        weakref.ref(client)
    except TypeError:  # not weak-referenceable: not shared
        return store_for_client(client)
    with _SHARED_LOCK:
        store = _SHARED.get(client)
        if store is None:
            store = _SHARED[client] = store_for_client(client)
            # Closed with the client (or at exit): nothing else owns it.
            weakref.finalize(client, store.close)
        return store
