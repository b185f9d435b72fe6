"""Reading the vector size a store already holds, the one place for it.

The embedded store, the migration, ``status`` and the command line's store
all compare it with the embedding model's ``dimensions`` before they touch
the memories (mem0 2.2 would otherwise write vectors of the wrong size).
"""

from __future__ import annotations

from typing import Any

__all__ = ["PG_CONNECT_TIMEOUT", "pg_vector_size", "qdrant_vector_size"]

PG_CONNECT_TIMEOUT = 5
"""Seconds to wait for PostgreSQL before the size counts as unknown."""


def qdrant_vector_size(client: Any, collection: str) -> int | None:
    """The dense vector size of a Qdrant ``collection``.

    Args:
        client: A ``qdrant_client.QdrantClient`` (local or server).
        collection: The collection's name.

    Returns:
        The size, or ``None`` when the collection does not exist or holds
        named vectors (mem0 creates one unnamed dense vector).
    """
    from qdrant_client.models import VectorParams

    if not client.collection_exists(collection):
        return None
    vectors = client.get_collection(collection).config.params.vectors
    return vectors.size if isinstance(vectors, VectorParams) else None


def pg_vector_size(dsn: str, table: str) -> int | None:
    """The size of the ``vector`` column of a pgvector ``table``; ``None`` if there is none."""
    import psycopg

    with psycopg.connect(dsn, connect_timeout=PG_CONNECT_TIMEOUT) as conn:
        row = conn.execute(
            "SELECT atttypmod FROM pg_attribute WHERE attrelid = to_regclass(%s)"
            " AND attname = 'vector'",
            (table,),
        ).fetchone()
    return int(row[0]) if row and row[0] and row[0] > 0 else None
