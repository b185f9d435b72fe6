"""mem0's vector store on a Qdrant server, with the embedded default's hybrid search.

:class:`HybridQdrant` is mem0 2.2's own Qdrant store (its filters, listing,
deletes, collection layout: an unnamed dense vector and a ``"bm25"`` sparse
vector with Qdrant's IDF modifier) with three changes that make a server
search like the embedded store:

* keyword vectors come from :class:`~agentscope_mem0.local.KeywordEncoder`
  (the engine's BM25), the same vectors the embedded store holds, so a
  folder copied to the server (``agentscope-mem0 migrate --to``) is searched
  the same way; collections written otherwise are rewritten on first open
  (:func:`rewrite_collection_keywords`);
* ``search`` is one Query API call: the dense and the keyword top hits under
  the same filter, fused by the engine with the same settings and the same
  score scale as the embedded store (see
  :mod:`agentscope_mem0._vectors.fusion`), and ``keyword_search`` returns
  ``None`` so that mem0 does not add a keyword score a second time;
* the search threshold is a cosine, as on mem0's own stores: a fused score
  is a rank, so the store drops a hit whose cosine with the query is below
  it (see :mod:`agentscope_mem0._vectors.search_terms`);
* ``user_id`` is indexed as the tenant key (``is_tenant``), so the server
  keeps each user's points together.

It speaks qdrant-client's Query API, which qdrant-client's local mode
(``path=...``) speaks too; the tests run it there.

Keeping a collection's keyword vectors in step with the encoder is the server
counterpart of :func:`agentscope_mem0.local._keyword.rewrite_keywords`. A collection
records which encoder wrote its keyword vectors in its metadata (Qdrant 1.16
or later). A collection written by mem0's own Qdrant provider has no record:
its points carry fastembed's vectors, or none when fastembed was not
installed. When the provider opens a collection whose record is missing or
names other settings, every point's keyword vector is rewritten from its
payload text, in batches; ids, payloads and dense vectors are not touched.
The record is written last, so an interrupted rewrite is done again by the
next client that opens the collection.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from mem0.vector_stores.qdrant import Qdrant

from .._vectors.fusion import (
    DEFAULT_DENSE_WEIGHT,
    DEFAULT_FEEDBACK_DOCS,
    DEFAULT_FEEDBACK_WEIGHT,
    DEFAULT_RRF_K,
    Fusion,
    expand_terms,
    fused_top_score,
    hit_terms,
    rrf_weights,
)
from .._vectors.search_terms import cosine_floor
from ..local._edge import SCOPE_FIELDS, TENANT_FIELD
from ..local._keyword import KeywordEncoder, keyword_text

__all__ = [
    "METADATA_KEY",
    "SPARSE",
    "HybridQdrant",
    "collection_keyword_record",
    "rewrite_collection_keywords",
]

logger = logging.getLogger(__name__)

METADATA_KEY = "agentscope_mem0_keywords"
"""The collection-metadata key holding the keyword encoder's settings."""

SPARSE = "bm25"
"""The keyword vector's name (mem0's Qdrant provider's, and the embedded store's)."""

_BATCH = 256

_ENTITY_SUFFIX = "_entities"  # mem0 2.2's entity collection, searched by meaning only


def _is_tenant(index: Any) -> bool:
    """Whether a server's payload index (``PayloadIndexInfo``) is a tenant key."""
    return getattr(getattr(index, "params", None), "is_tenant", None) is True


class HybridQdrant(Qdrant):
    """mem0's Qdrant store with the embedded store's keyword vectors and fused search.

    Built by mem0's ``VectorStoreFactory`` from
    :class:`~.qdrant_config.HybridQdrantConfig`'s fields: mem0's Qdrant
    settings plus the fusion settings (``fusion``, ``rrf_k``, ``dense_weight``,
    ``feedback_docs``, ``feedback_weight``).
    """

    applies_cosine_floor = True
    """mem0 hands the search threshold to :meth:`search` (see ``_mem0.threshold``)."""

    def __init__(
        self,
        *,
        collection_name: str,
        fusion: Fusion = "rrf",
        rrf_k: int = DEFAULT_RRF_K,
        dense_weight: float = DEFAULT_DENSE_WEIGHT,
        feedback_docs: int = DEFAULT_FEEDBACK_DOCS,
        feedback_weight: float = DEFAULT_FEEDBACK_WEIGHT,
        **qdrant: Any,
    ) -> None:
        """``qdrant``: mem0's own Qdrant settings (``embedding_model_dims``,
        ``client`` or ``host``/``port``/``url``/``api_key``/``https``/``path``,
        ``on_disk``), passed on as they are."""
        self._entities = collection_name.endswith(_ENTITY_SUFFIX)
        self.fusion: Fusion = "none" if self._entities else fusion
        self.rrf_k = rrf_k
        self.dense_weight = dense_weight
        self.feedback_docs = feedback_docs
        self.feedback_weight = feedback_weight
        super().__init__(collection_name=collection_name, **qdrant)
        # mem0 2.2.1 would lazily load fastembed here; a preset encoder is used as is.
        self._bm25_encoder: Any = KeywordEncoder()
        if self._has_bm25_slot:
            rewrite_collection_keywords(self.client, self.collection_name, self._bm25_encoder)

    # --- collection ----------------------------------------------------------

    def _create_filter_indexes(self) -> None:
        """Keyword indexes on the scope fields, ``user_id`` as the tenant key (servers only)."""
        # qdrant-client's local mode has no payload indexes (it warns when asked).
        if self.is_local or type(getattr(self.client, "_client", None)).__name__ != "QdrantRemote":
            return
        from qdrant_client import models

        existing = self.client.get_collection(self.collection_name).payload_schema or {}
        for name in SCOPE_FIELDS:
            if name in existing and (name != TENANT_FIELD or _is_tenant(existing[name])):
                continue
            # A user_id index without is_tenant (mem0's own provider made it) is made again.
            schema: Any = (
                models.KeywordIndexParams(type=models.KeywordIndexType.KEYWORD, is_tenant=True)
                if name == TENANT_FIELD
                else models.PayloadSchemaType.KEYWORD
            )
            try:
                self.client.create_payload_index(
                    collection_name=self.collection_name, field_name=name, field_schema=schema
                )
            except Exception as exc:  # local mode and some servers refuse; search still works
                logger.debug("no payload index on %s in %s: %s", name, self.collection_name, exc)

    # --- search --------------------------------------------------------------

    def _query_terms(self, query: Any) -> Any | None:
        encoder = self._get_bm25_encoder()
        if encoder is None or not isinstance(query, str) or not self._has_bm25_slot:
            return None
        terms = next(iter(encoder.query_embed(query)))
        return _sparse(terms) if len(terms.indices) else None

    def search(
        self,
        query: str,
        vectors: list[float],
        top_k: int = 5,
        filters: dict[str, Any] | None = None,
    ) -> list[Any]:
        """The ``top_k`` best points under ``filters``, fused with keyword hits when on."""
        from qdrant_client import models

        sparse = self._query_terms(query) if self.fusion != "none" else None
        # mem0 applies its own cosine limits to its entity collection.
        floor = None if self._entities else cosine_floor()
        if sparse is None:
            points = super().search(query, vectors, top_k=top_k, filters=filters)
            return [p for p in points if floor is None or float(p.score) >= floor]
        condition = self._create_filter(filters) if filters else None
        dense = [float(v) for v in vectors]
        if self.feedback_docs:
            first = self._fused(dense, sparse, condition, top_k, self.feedback_docs, feedback=True)
            indices, values = expand_terms(
                (sparse.indices, sparse.values), hit_terms(first, SPARSE), self.feedback_weight
            )
            sparse = models.SparseVector(indices=indices, values=values)
        points = self._fused(dense, sparse, condition, top_k, top_k)
        if floor is not None and points:
            points = self._similar(points, dense, floor)
        top = fused_top_score(self.fusion, self.rrf_k, self.dense_weight)
        return [p.model_copy(update={"score": min(float(p.score) / top, 1.0)}) for p in points]

    def _similar(self, points: list[Any], dense: list[float], floor: float) -> list[Any]:
        """``points`` whose cosine similarity with the query reaches ``floor``."""
        from qdrant_client import models

        similar = self.client.query_points(
            collection_name=self.collection_name,
            query=dense,
            query_filter=models.Filter(must=[models.HasIdCondition(has_id=[p.id for p in points])]),
            score_threshold=floor,
            limit=len(points),
            with_payload=False,
        ).points
        kept = {p.id for p in similar}
        return [p for p in points if p.id in kept]

    def _fused(
        self,
        dense: list[float],
        sparse: Any,
        condition: Any,
        depth: int,
        limit: int,
        *,
        feedback: bool = False,
    ) -> list[Any]:
        """One Query API call: each ranking's ``depth`` best, fused, the ``limit`` first.

        ``feedback``: the hits come with their keyword vectors instead of payloads.
        """
        from qdrant_client import models

        prefetch = [
            models.Prefetch(query=dense, filter=condition, limit=depth),
            models.Prefetch(query=sparse, using=SPARSE, filter=condition, limit=depth),
        ]
        fusion: Any = (
            models.FusionQuery(fusion=models.Fusion.DBSF)
            if self.fusion == "dbsf"
            else models.RrfQuery(
                rrf=models.Rrf(k=self.rrf_k, weights=rrf_weights(self.dense_weight))
            )
        )
        return list(
            self.client.query_points(
                collection_name=self.collection_name,
                prefetch=prefetch,
                query=fusion,
                query_filter=condition,
                limit=limit,
                with_payload=not feedback,
                with_vectors=[SPARSE] if feedback else False,
            ).points
        )

    def keyword_search(
        self, query: str, top_k: int = 5, filters: dict[str, Any] | None = None
    ) -> list[Any] | None:
        """Keyword hits for mem0 to add; ``None`` when :meth:`search` already fuses them."""
        if self.fusion != "none":
            return None
        return super().keyword_search(query, top_k=top_k, filters=filters)

    # --- writes ----------------------------------------------------------------

    def update(
        self,
        vector_id: Any,
        vector: list[float] | None = None,
        payload: dict[str, Any] | None = None,
    ) -> None:
        """mem0's update; a payload-only update also refreshes the keyword vector.

        (mem0 2.2.1's own Qdrant store leaves it stale.)
        """
        super().update(vector_id, vector=vector, payload=payload)
        encoder = self._get_bm25_encoder()
        if vector is not None or not payload or not keyword_text(payload) or encoder is None:
            return
        if self._has_bm25_slot:
            _write_keywords(self.client, self.collection_name, encoder, [(vector_id, payload)])


# --- keyword vectors in step with the encoder ----------------------------------


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
    if collection_keyword_record(client, collection) == encoder.settings():
        return None
    started = time.monotonic()
    rewritten = 0
    offset: Any = None
    while True:
        records, offset = client.scroll(
            collection, limit=_BATCH, offset=offset, with_payload=True, with_vectors=False
        )
        points = [(record.id, dict(record.payload or {})) for record in records]
        _write_keywords(client, collection, encoder, points)
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


def _write_keywords(
    client: Any, collection: str, encoder: KeywordEncoder, points: list[tuple[Any, dict[str, Any]]]
) -> None:
    """Set each ``(id, payload)`` point's keyword vector from its payload text;
    a point whose text has no terms is left without one."""
    from qdrant_client import models

    updates, cleared = [], []
    for point_id, payload in points:
        terms = encoder.document(keyword_text(payload))
        if len(terms.indices):
            updates.append(models.PointVectors(id=point_id, vector={SPARSE: _sparse(terms)}))
        else:
            cleared.append(point_id)
    if updates:
        client.update_vectors(collection, points=updates)
    if cleared:
        client.delete_vectors(collection, vectors=[SPARSE], points=cleared)


def _sparse(terms: Any) -> Any:
    """A keyword encoder's terms as qdrant-client's ``SparseVector``."""
    from qdrant_client import models

    return models.SparseVector(indices=terms.indices.tolist(), values=terms.values.tolist())
