"""Keeping a Qdrant collection's keyword vectors in step with the keyword encoder.

The server counterpart of :func:`agentscope_mem0.local._keyword.rewrite_keywords`. A
collection records which encoder wrote its keyword (sparse) vectors in its
metadata (Qdrant 1.16 or later). A collection written by mem0's own Qdrant
provider has no record: its points carry fastembed's vectors, or none when
fastembed was not installed. When the provider opens a collection whose
record is missing or names other settings, every point's keyword vector is
rewritten from its payload text, in batches; ids, payloads and dense vectors
are not touched. The record is written last, so an interrupted rewrite is
done again by the next client that opens the collection.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from ..local._keyword import KeywordEncoder, keyword_text

__all__ = ["METADATA_KEY", "collection_keyword_record", "rewrite_collection_keywords"]

logger = logging.getLogger(__name__)

METADATA_KEY = "agentscope_mem0_keywords"
"""The collection-metadata key holding the keyword encoder's settings."""

SPARSE = "bm25"
"""The keyword vector's name (mem0's Qdrant provider's, and the embedded store's)."""

_BATCH = 256


def collection_keyword_record(client: Any, collection: str) -> dict[str, Any] | None:
    """The encoder settings recorded in ``collection``'s metadata, or ``None``."""
    metadata = getattr(client.get_collection(collection).config, "metadata", None) or {}
    record = metadata.get(METADATA_KEY)
    return record if isinstance(record, dict) else None


def rewrite_collection_keywords(
    client: Any, collection: str, encoder: KeywordEncoder
) -> int | None:
    """Re-encode every point's keyword vector unless the collection's record matches.

    Args:
        client: A ``QdrantClient`` (a server, or local mode).
        collection: The collection, which has the ``bm25`` sparse slot.
        encoder: The encoder the provider searches with.

    Returns:
        How many points were rewritten, or ``None`` when the record was current.
    """
    from qdrant_client import models

    if collection_keyword_record(client, collection) == encoder.settings():
        return None
    started = time.monotonic()
    rewritten = 0
    offset: Any = None
    while True:
        records, offset = client.scroll(
            collection, limit=_BATCH, offset=offset, with_payload=True, with_vectors=False
        )
        updates, cleared = [], []
        for record in records:
            terms = encoder.document(keyword_text(dict(record.payload or {})))
            if len(terms.indices):
                sparse = models.SparseVector(
                    indices=terms.indices.tolist(), values=terms.values.tolist()
                )
                updates.append(models.PointVectors(id=record.id, vector={SPARSE: sparse}))
            else:
                cleared.append(record.id)
        if updates:
            client.update_vectors(collection, points=updates)
        if cleared:
            client.delete_vectors(collection, vectors=[SPARSE], points=cleared)
        rewritten += len(records)
        if offset is None:
            break
    client.update_collection(collection, metadata={METADATA_KEY: encoder.settings()})
    if rewritten:
        logger.warning(
            "rewrote the keyword vectors of %d memories in the Qdrant collection %r with "
            "the engine's BM25 (%.1f s; ids, texts and dense vectors unchanged)",
            rewritten,
            collection,
            time.monotonic() - started,
        )
    return rewritten
