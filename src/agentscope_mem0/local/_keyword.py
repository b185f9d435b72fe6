"""The keyword (BM25) side of hybrid search: the engine's own BM25 encoder.

Every stored memory carries a sparse ``"bm25"`` vector beside its dense one;
Qdrant applies the IDF part of BM25 itself (the slot is created with the IDF
modifier), the encoder supplies the term-frequency part. :class:`KeywordEncoder`
is qdrant-edge's ``Bm25`` (Snowball stemmer, the language's stop words, token
ids hashed the way Qdrant server's BM25 hashes them), so a sparse vector means
the same thing in the embedded store and in a Qdrant server collection.

Two additions: the engine's word tokenizer keeps a run of Chinese or Japanese
characters whole (a sentence would be one term), so such runs are first split
into overlapping character pairs; and its time grows with the square of a
word's length (a 1 MB word took seconds, 10 MB minutes; 10 MB of words
takes under a second), so a run of more than :data:`MAX_TERM_CHARS`
characters without a space is left out: it is no keyword anyone types. Other
text is encoded exactly as
``Bm25(Bm25Config(k=..., b=..., avg_len=..., language=...))`` encodes it.

Documents get BM25's saturated term frequency; a query gets weight 1 for each
distinct term, as Qdrant server's BM25 does, so that the score of a memory is
the sum of IDF x term weight over the query's terms.

:func:`install_keyword_encoder` hands the encoder to mem0's own Qdrant store
(named in a ``mem0_config``), which otherwise loads fastembed and downloads.

A point's keyword vector is derived data, so :func:`rewrite_keywords` keeps a
Qdrant Edge shard's vectors in step with the encoder. Each shard folder
records which encoder wrote them (``keywords.json``: the encoder's settings);
a folder written by release 0.2, whose vectors come from the package's
former encoder, has no record. When a shard opens and its record is missing
or names other settings, every point's keyword vector is rewritten from its
payload text, in batches; ids, payloads and dense vectors are not touched,
so nothing is lost. The record is written last: an interrupted rewrite is
done again on the next open (it is idempotent).
"""

from __future__ import annotations

import json
import logging
import math
import re
import threading
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from ._edge import SPARSE

if TYPE_CHECKING:
    from ._edge import SharedShard

__all__ = [
    "ENCODER_NAME",
    "KEYWORD_RECORD",
    "KeywordEncoder",
    "SparseTerms",
    "install_keyword_encoder",
    "keyword_record",
    "keyword_text",
    "rewrite_keywords",
    "sparse_vector",
    "write_keyword_record",
]

logger = logging.getLogger(__name__)

ENCODER_NAME = "qdrant-bm25"
"""Names the encoder in a store's keyword record (:data:`KEYWORD_RECORD`)."""

KEYWORD_RECORD = "keywords.json"
"""The file in a shard folder naming the encoder of its keyword vectors."""

_REWRITE_BATCH = 512

_CJK_RUN = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]{2,}")

MAX_TERM_CHARS = 512
"""A longer run of characters without a space is left out of the keyword side."""

# Anchored at a run's start, so the scan stays linear in the text's length.
_LONG_RUN = re.compile(rf"(?<!\S)\S{{{MAX_TERM_CHARS + 1},}}")


@dataclass(frozen=True, slots=True)
class SparseTerms:
    """One text's sparse vector, in the shape mem0 reads from fastembed."""

    indices: np.ndarray
    """Term indices, ``uint32``, unique and ascending."""

    values: np.ndarray
    """Term weights, ``float32``, aligned with ``indices``."""


def split_cjk(text: str) -> str:
    """``text`` with each run of CJK characters written as its overlapping pairs."""

    def pairs(match: re.Match[str]) -> str:
        run = match.group(0)
        return " " + " ".join(run[i : i + 2] for i in range(len(run) - 1)) + " "

    return _CJK_RUN.sub(pairs, text)


def engine_text(text: str) -> str:
    """What of ``text`` the engine encodes: CJK runs split into pairs, runs
    longer than :data:`MAX_TERM_CHARS` without a space left out (the engine's
    tokenizer is quadratic in a word's length)."""
    return _LONG_RUN.sub(" ", split_cjk(text))


class KeywordEncoder:
    """Turns text into BM25 sparse vectors with qdrant-edge's ``Bm25``, offline.

    A document term's weight is ``tf * (k + 1) / (tf + k * (1 - b + b * len / avg_len))``;
    a query term's is 1. The defaults are Qdrant's (``k=1.2``, ``b=0.75``,
    ``avg_len=256``, English). Thread-safe.

    Args:
        k: Term-frequency saturation.
        b: Length normalisation strength, in ``[0, 1]``.
        avg_len: The document length (in terms) normalisation is relative to.
        language: The stemmer's and stop words' language (``"english"``, ...).

    Raises:
        ValueError: A parameter is out of range or the language is unknown.
    """

    def __init__(
        self,
        *,
        k: float = 1.2,
        b: float = 0.75,
        avg_len: float = 256.0,
        language: str = "english",
    ) -> None:
        from qdrant_edge import Bm25, Bm25Config

        if k < 0 or not 0 <= b <= 1 or avg_len <= 0:
            raise ValueError(
                f"need k >= 0, 0 <= b <= 1 and avg_len > 0; got k={k}, b={b}, avg_len={avg_len}"
            )
        self.k = float(k)
        self.b = float(b)
        self.avg_len = float(avg_len)
        self.language = language
        self._model = Bm25(Bm25Config(k=self.k, b=self.b, avg_len=self.avg_len, language=language))
        # One call at a time: the binding's thread-safety is not documented.
        self._lock = threading.Lock()

    def settings(self) -> dict[str, Any]:
        """What decides the vectors: stored with a store's keyword record."""
        return {
            "encoder": ENCODER_NAME,
            "k": self.k,
            "b": self.b,
            "avg_len": self.avg_len,
            "language": self.language,
        }

    def document(self, text: str) -> SparseTerms:
        """The sparse vector of a stored text (empty when it has no terms)."""
        with self._lock:
            return _terms(self._model.embed_document(engine_text(text)))

    def query(self, text: str) -> SparseTerms:
        """The sparse vector of a search query: weight 1 per distinct term."""
        with self._lock:
            return _terms(self._model.embed_query(engine_text(text)))

    def embed(self, documents: str | Iterable[str], **kwargs: Any) -> Iterator[SparseTerms]:
        """Encode each document (one text or many), as fastembed's
        ``SparseTextEmbedding.embed`` does; mem0 2.2's own Qdrant store calls it
        for stored texts and queries alike. ``kwargs`` are fastembed's, ignored."""
        if isinstance(documents, str):
            documents = [documents]
        return (self.document(str(d)) for d in documents)

    def query_embed(self, query: str | Iterable[str], **kwargs: Any) -> Iterator[SparseTerms]:
        """Encode each query (fastembed's ``query_embed``)."""
        if isinstance(query, str):
            query = [query]
        return (self.query(str(q)) for q in query)


def _terms(vector: Any) -> SparseTerms:
    indices = np.asarray(vector.indices, dtype=np.uint32)
    values = np.asarray(vector.values, dtype=np.float32)
    order = np.argsort(indices, kind="stable")
    return SparseTerms(indices[order], values[order])


def keyword_text(payload: dict[str, Any]) -> str:
    """The text of a stored point whose terms its keyword vector holds."""
    return str(payload.get("text_lemmatized") or payload.get("data") or "")


def sparse_vector(terms: SparseTerms | Any) -> Any | None:
    """A validated qdrant-edge ``SparseVector``, or ``None`` when ``terms`` is empty
    (a mismatched one panics inside the engine).

    Raises:
        ValueError: Indices and values differ in length, an index is not a
            32-bit unsigned integer or repeats, or a value is not finite.
    """
    from qdrant_edge import SparseVector

    indices = [int(i) for i in terms.indices]
    values = [float(v) for v in terms.values]
    if not indices and not values:
        return None
    if len(indices) != len(values):
        raise ValueError(
            f"sparse vector has {len(indices)} indices but {len(values)} values; "
            "they must pair up one to one"
        )
    if any(i < 0 or i > 0xFFFFFFFF for i in indices) or len(set(indices)) != len(indices):
        raise ValueError("sparse vector indices must be unique integers in [0, 2**32)")
    if not all(math.isfinite(v) for v in values):
        raise ValueError("sparse vector values must be finite numbers")
    return SparseVector(indices=indices, values=values)


def install_keyword_encoder(target: Any, encoder: KeywordEncoder | None = None) -> bool:
    """Make mem0's Qdrant store use the offline keyword encoder, enabling hybrid search.

    Install it before the first memory is stored: memories stored without it
    have no keyword vector. ``AsyncMemory.reset()`` builds a new store object,
    so install again after a reset.

    Args:
        target: A mem0 ``Qdrant`` vector store, or a ``Memory``/``AsyncMemory``
            (its ``vector_store`` is used).
        encoder: The encoder; a default :class:`KeywordEncoder` otherwise.

    Returns:
        Whether keyword scoring is now active: ``False`` when the store is not
        mem0's Qdrant store (other stores do keyword search their own way), or
        when its collection predates mem0's ``"bm25"`` sparse slot.
    """
    store = getattr(target, "vector_store", target)
    if not hasattr(store, "_bm25_encoder") or not hasattr(store, "_get_bm25_encoder"):
        logger.debug(
            "%s has no BM25 encoder slot; keyword encoder not installed", type(store).__name__
        )
        return False
    # mem0 2.2.1 lazily loads fastembed into Qdrant._bm25_encoder; a preset value is used as is.
    store._bm25_encoder = encoder if encoder is not None else KeywordEncoder()
    if not getattr(store, "_has_bm25_slot", False):
        logger.warning(
            "collection %r has no 'bm25' sparse slot (created by mem0 before 2.x hybrid "
            "search); keyword scoring stays off until the collection is recreated",
            getattr(store, "collection_name", "?"),
        )
        return False
    return True


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
        request = ScrollRequest(offset=offset, limit=_REWRITE_BATCH, with_payload=True)
        records, offset = shard.call("scroll", lambda s, r=request: s.scroll(r))
        updates, cleared = [], []
        for record in records:
            vector = sparse_vector(encoder.document(keyword_text(dict(record.payload or {}))))
            if vector is not None:
                updates.append(PointVectors(id=record.id, vector={SPARSE: vector}))
            else:
                cleared.append(record.id)
        if updates:
            operation = UpdateOperation.update_vectors(updates)
            shard.call("rewrite keywords", lambda s, o=operation: s.update(o))
        if cleared:
            operation = UpdateOperation.delete_vectors(cleared, [SPARSE])
            shard.call("rewrite keywords", lambda s, o=operation: s.update(o))
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
