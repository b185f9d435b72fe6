"""Keeping a Qdrant Edge store's keyword vectors in step with the keyword encoder.

A point's keyword (sparse) vector is derived data: the encoder's terms of the
point's text. Each shard folder records which encoder wrote its keyword
vectors (``keywords.json``: the encoder's settings). A folder written by
release 0.2, whose vectors come from the package's former encoder, has no
record. When a shard opens and its record is missing or names other
settings, every point's keyword vector is rewritten from its payload text,
in batches; ids, payloads and dense vectors are not touched, so nothing is
lost. The record is written last: an interrupted rewrite is done again on
the next open (it is idempotent).
"""

from __future__ import annotations

import json
import logging
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ._edge import SPARSE
from ._keyword import KeywordEncoder, keyword_text, sparse_vector

if TYPE_CHECKING:
    from ._edge import SharedShard

__all__ = ["KEYWORD_RECORD", "keyword_record", "rewrite_keywords", "write_keyword_record"]

logger = logging.getLogger(__name__)

KEYWORD_RECORD = "keywords.json"
"""The file in a shard folder naming the encoder of its keyword vectors."""

_BATCH = 512


def keyword_record(path: Path) -> dict[str, Any] | None:
    """The encoder settings recorded in shard folder ``path``, or ``None``."""
    try:
        record = json.loads((path / KEYWORD_RECORD).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return record if isinstance(record, dict) else None


def write_keyword_record(path: Path, encoder: KeywordEncoder) -> None:
    """Record that ``encoder`` wrote every keyword vector in shard folder ``path``."""
    temp = path / f"{KEYWORD_RECORD}.tmp"
    temp.write_text(json.dumps(encoder.settings(), indent=2), encoding="utf-8")
    temp.replace(path / KEYWORD_RECORD)


def rewrite_keywords(shard: SharedShard, encoder: KeywordEncoder) -> int | None:
    """Re-encode every point's keyword vector unless the shard's record matches ``encoder``.

    Args:
        shard: The open shard.
        encoder: The encoder the store searches with.

    Returns:
        How many points were rewritten, or ``None`` when the record was current.

    Raises:
        EdgeEngineError: The engine failed; the record is left as it was.
    """
    from qdrant_edge import PointVectors, ScrollRequest, UpdateOperation

    if keyword_record(shard.path) == encoder.settings():
        return None
    started = time.monotonic()
    rewritten = 0
    offset: Any = None
    while True:
        request = ScrollRequest(offset=offset, limit=_BATCH, with_payload=True)
        records, offset = shard.call("scroll", lambda s, r=request: s.scroll(r))
        updates, cleared = [], []
        for record in records:
            terms = encoder.document(keyword_text(dict(record.payload or {})))
            if len(terms.indices):
                updates.append(PointVectors(id=record.id, vector={SPARSE: sparse_vector(terms)}))
            else:
                cleared.append(record.id)
        if updates:
            shard.call(
                "rewrite keywords", lambda s, u=updates: s.update(UpdateOperation.update_vectors(u))
            )
        if cleared:
            shard.call(
                "rewrite keywords",
                lambda s, c=cleared: s.update(UpdateOperation.delete_vectors(c, [SPARSE])),
            )
        rewritten += len(records)
        if offset is None:
            break
    shard.call("flush", lambda s: s.flush())
    write_keyword_record(shard.path, encoder)
    if rewritten:
        logger.warning(
            "rewrote the keyword vectors of %d memories in %s with the engine's BM25 "
            "(%.1f s; ids, texts and dense vectors unchanged)",
            rewritten,
            shard.path,
            time.monotonic() - started,
        )
    return rewritten
