"""The mem0 client this package builds: mem0's ``AsyncMemory``, with a
``reset()`` that keeps working when the store is shared and a ``search()``
that tells the store how many hits it keeps (:mod:`.._vectors.search_terms`).

mem0 2.2's ``AsyncMemory.reset()`` deletes the collection, closes the vector
store's client, drops the history tables and builds a new store from the
config. On a store several clients share, that breaks all of them: the
shared client of an on-disk Qdrant path (see
:func:`agentscope_mem0.local.share_local_qdrant`) is closed for every client
on the path and handed, closed, to the new store; the embedded Qdrant Edge
shard and the history file are shared the same way. So a shared store is
emptied in place and stays open; any other store is reset by mem0 itself.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from mem0 import AsyncMemory

from .._postgres.history import PostgresHistory
from .._vectors.search_terms import results_kept

__all__ = ["SharedStoreMemory", "shares_store"]

logger = logging.getLogger(__name__)


class SharedStoreMemory(AsyncMemory):
    """mem0's ``AsyncMemory`` on a store it may share with other clients.

    Everything but :meth:`reset` and :meth:`search` is mem0's own, and
    :meth:`keep_history_in` puts mem0's history in PostgreSQL.
    """

    db: Any
    """mem0's ``SQLiteManager``, or a :class:`PostgresHistory` with the same methods."""

    def keep_history_in(self, history: PostgresHistory) -> None:
        """Use ``history`` in place of the SQLite database mem0 opened at
        ``history_db_path`` (which should be ``":memory:"``: nothing on disk)."""
        self.db.close()
        self.db = history

    async def search(
        self, query: str, *, top_k: int = 20, show_expired: bool = False, **kwargs: Any
    ) -> Any:
        """mem0's search; the vector store is told how many hits mem0 keeps."""
        with results_kept(top_k, show_expired=show_expired):
            return await super().search(query, top_k=top_k, show_expired=show_expired, **kwargs)

    async def reset(self) -> None:
        """Delete every memory, entity link and history entry; the client keeps working.

        A store shared with other clients (this package's embedded store, or a
        store client handed in through the config) is emptied in place and
        stays open for them; any other store is reset by mem0.
        """
        if not shares_store(self):
            encoder = getattr(self.vector_store, "_bm25_encoder", None)
            history = self.db if isinstance(self.db, PostgresHistory) else None
            await super().reset()
            _after_mem0_reset(self, encoder)
            if history is not None:  # mem0 2.2's reset put a new SQLite manager in its place
                self.db.close()
                self.db = history
            return
        logger.warning("resetting all memories of %s", _store_name(self))
        await asyncio.to_thread(_empty, self.vector_store)
        await asyncio.to_thread(_empty, self.entity_store)
        await asyncio.to_thread(_clear_history, self.db)


def shares_store(memory: Any) -> bool:
    """Whether ``memory``'s vector store may be shared with other clients.

    True for the embedded Qdrant Edge store (one shard per folder and process)
    and for a Qdrant store whose client came in through the config (this
    package's shared on-disk Qdrant client, or one the caller made).
    """
    from ..local import EDGE_PROVIDER

    store = memory.config.vector_store
    if store.provider == EDGE_PROVIDER:
        return True
    return store.provider == "qdrant" and getattr(store.config, "client", None) is not None


def _empty(store: Any) -> None:
    """Delete every point of ``store``, leaving its collection and client open."""
    qdrant = getattr(store, "client", None)
    if qdrant is None:
        # The Qdrant Edge store: its reset deletes the points and keeps the shard.
        store.reset()
        return
    from qdrant_client import models

    qdrant.delete(
        collection_name=store.collection_name,
        points_selector=models.FilterSelector(filter=models.Filter(must=[])),
    )


def _clear_history(db: Any) -> None:
    """Delete mem0's history rows, keeping the tables other connections write to.

    mem0 2.2's ``SQLiteManager.reset`` drops the tables and expects a new
    manager; another client's manager on the same file would then fail.
    """
    if isinstance(db, PostgresHistory):  # its reset deletes rows and keeps the tables
        db.reset()
        return
    with db._lock:
        connection = db.connection
        connection.execute("DELETE FROM history")
        connection.execute("DELETE FROM messages")
        connection.commit()


def _after_mem0_reset(memory: Any, encoder: Any) -> None:
    """What building the client set up that mem0's reset replaced."""
    from ..local import KeywordEncoder, install_keyword_encoder
    from ..local._folder import set_busy_timeout

    if isinstance(encoder, KeywordEncoder):
        install_keyword_encoder(memory, encoder)
    if memory.db is not None:
        set_busy_timeout(memory.db.connection)


def _store_name(memory: Any) -> str:
    config = memory.config.vector_store.config
    where = getattr(config, "path", None) or getattr(config, "url", None) or ""
    return f"{memory.config.vector_store.provider} {where}".strip()
