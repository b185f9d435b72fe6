"""Whether a mem0 client's stores must be told to sync, and the call that does it.

A server store (Qdrant server, PostgreSQL) has made a write durable when it
answers. The embedded store has not: Qdrant Edge writes to its
write-ahead log, which survives the process but not a power loss, and puts
the write on disk only when it flushes. A vector store that can say "now
everything is on disk" has a ``sync()`` method (the embedded store's
:class:`~agentscope_mem0.local.EdgeVectorStore` does); the write queue keeps
a write in its outbox until such a sync has run after it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

__all__ = ["disk_sync_of"]


def disk_sync_of(client: Any) -> Callable[[], None] | None:
    """The call that puts everything ``client`` stored on disk, or ``None``
    when its answers are durable already.

    It syncs the memory collection and, once mem0 has made it, the entity
    collection (mem0 2.2 builds that one on first use).
    """
    if not callable(getattr(getattr(client, "vector_store", None), "sync", None)):
        return None

    def sync() -> None:
        # Looked up at every sync: mem0 may replace or add a store meanwhile.
        for store in (client.vector_store, getattr(client, "_entity_store", None)):
            method = getattr(store, "sync", None)
            if callable(method):
                method()

    return sync
