"""The working-memory store of the configured backend, for the commands that read it.

``working`` and ``profile`` read and write its records without mem0 or a
model; forgetting a user clears the user's profile there.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .._working.stores import WorkingStore
    from ._config import Settings

__all__ = ["open_working_store"]


def open_working_store(settings: Settings) -> WorkingStore:
    """The store the middleware uses for the configured backend."""
    from .._working.stores import SqliteWorkingStore, working_table_name

    if settings.backend == "pgvector":
        from .._working.stores import PostgresWorkingStore

        return PostgresWorkingStore(
            settings.dsn or "", table=working_table_name(settings.collection)
        )
    if settings.backend == "qdrant":
        from qdrant_client import QdrantClient

        from .._working.stores import QdrantWorkingStore

        client = QdrantClient(url=settings.url, api_key=settings.api_key, check_compatibility=False)
        return QdrantWorkingStore(client, collection=working_table_name(settings.collection))
    # Embedded: beside mem0's history database in the data folder; hosted mem0
    # has nowhere on the platform for it, so it stays in the local data folder.
    return SqliteWorkingStore(settings.folder)
