"""mem0's vector store on Qdrant Edge, with hybrid search done by the engine.

:class:`EdgeVectorStore` implements everything mem0 2.2's ``AsyncMemory`` calls
on a vector store (insert, search, keyword_search, get, list, update, delete,
col_info, list_cols, delete_col, reset; search_batch comes from mem0's base).
:func:`edge_vector_store_config` builds the ``VectorStoreConfig`` naming it;
mem0's own ``VectorStoreConfig`` keeps its whitelist, so a config naming
:data:`PROVIDER` without this module is still rejected.

Every point carries a dense vector and a sparse ``"bm25"`` vector of its
text's keyword terms (:class:`~agentscope_mem0.local.KeywordEncoder`, the
engine's BM25). With ``fusion="rrf"`` (the default) a search fuses the dense
and the keyword top hits under one filter, widening the keyword query with
the first hits' terms first when ``feedback_docs`` is set (payloads are read
only for the hits mem0 can keep, :mod:`._edge_hits`): the settings, as
shared with the Qdrant server provider, are in
:mod:`agentscope_mem0._vectors.fusion`. mem0 sees the fused score divided by
the best one possible. A rank is no similarity, so the search threshold is
applied here to each hit's cosine with the query (see
:mod:`agentscope_mem0._vectors.search_terms`), and ``keyword_search`` returns
``None`` so that mem0 does not add a keyword score again. ``fusion="none"``
and mem0's entity collection (``<name>_entities``) search by meaning only.
The provider's config and its registration with mem0 are in :mod:`._edge_config`.
"""

from __future__ import annotations

import builtins
import logging
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from mem0.vector_stores.base import VectorStoreBase

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
from .._vectors.keywords_only import is_keywords_only
from .._vectors.search_terms import cosine_floor, kept_of_search
from ._edge import DENSE, SPARSE, SharedShard, shard_exists, shared_shard
from ._edge_config import PROVIDER, EdgeStoreConfig, edge_config_class, edge_vector_store_config
from ._edge_filters import build_filter
from ._edge_hits import EdgeHit, hit_of, hits_with_payloads, point_id, retrieve
from ._keyword import KeywordEncoder, keyword_text, sparse_vector
from ._keyword_upgrade import rewrite_keywords

__all__ = [
    "PROVIDER",
    "EdgeHit",
    "EdgeStoreConfig",
    "EdgeVectorStore",
    "edge_config_class",
    "edge_vector_store_config",
]

logger = logging.getLogger(__name__)

_ENTITY_SUFFIX = "_entities"  # mem0 2.2's _entity_collection_name for every store but s3
_LIST_DEFAULT = 100


class EdgeVectorStore(VectorStoreBase):
    """mem0 vector store on this process's shared Qdrant Edge shard.

    Built by mem0's ``VectorStoreFactory`` from :class:`EdgeStoreConfig`'s fields.

    Raises:
        StoreLockedError: Another process holds the shard.
        DimensionMismatchError: The shard holds vectors of another size.
    """

    applies_cosine_floor = True
    """Searches drop hits below the caller's cosine floor (mem0 is given 0.0)."""

    searches_keywords_alone = True
    """A search given :data:`~agentscope_mem0._vectors.keywords_only.KEYWORDS_ONLY`
    as its vector ranks by keywords alone."""

    def __init__(
        self,
        *,
        path: str,
        collection_name: str = "agentscope_mem0",
        embedding_model_dims: int | None = None,
        fusion: Fusion = "rrf",
        rrf_k: int = DEFAULT_RRF_K,
        dense_weight: float = DEFAULT_DENSE_WEIGHT,
        feedback_docs: int = DEFAULT_FEEDBACK_DOCS,
        feedback_weight: float = DEFAULT_FEEDBACK_WEIGHT,
    ) -> None:
        if not embedding_model_dims:
            raise ValueError("the Qdrant Edge store needs embedding_model_dims")
        self.root = Path(path)
        self.collection_name = collection_name
        self.embedding_model_dims = int(embedding_model_dims)
        self.entities = collection_name.endswith(_ENTITY_SUFFIX)
        """mem0's entity collection: searched by meaning only."""
        self.fusion: Fusion = "none" if self.entities else fusion
        self.rrf_k = rrf_k
        self.dense_weight = dense_weight
        self.feedback_docs = feedback_docs
        self.feedback_weight = feedback_weight
        # The slot names install_keyword_encoder() and mem0's Qdrant store use.
        self._bm25_encoder: Any = KeywordEncoder()
        self._has_bm25_slot = True
        self.shard: SharedShard = shared_shard(
            self.root / collection_name, self.embedding_model_dims, user=self
        )
        # A folder written by release 0.2 (the former encoder) is brought up to date here.
        rewrite_keywords(self.shard, self._bm25_encoder)

    # --- helpers --------------------------------------------------------------

    def _get_bm25_encoder(self) -> Any:
        return self._bm25_encoder or None

    def _sparse(self, text: str, *, query: bool = False) -> Any | None:
        encoder = self._get_bm25_encoder()
        if encoder is None or not text:
            return None
        # fastembed's shape: query_embed for searches, embed for stored texts.
        terms = next(iter(encoder.query_embed(text) if query else encoder.embed([text])))
        return sparse_vector(terms) if len(terms.indices) else None

    def _dense(self, vector: Any) -> list[float]:
        values = [float(v) for v in vector]
        if len(values) != self.embedding_model_dims:
            raise ValueError(
                f"vector has {len(values)} dimensions; the store {self.collection_name!r} "
                f"holds {self.embedding_model_dims}-dimensional vectors"
            )
        return values

    def _point(self, given_id: Any, vector: Any, payload: dict[str, Any] | None) -> Any:
        from qdrant_edge import Point

        payload = dict(payload or {})
        vectors: dict[str, Any] = {DENSE: self._dense(vector)}
        sparse = self._sparse(keyword_text(payload))
        if sparse is not None:
            vectors[SPARSE] = sparse
        return Point(id=point_id(given_id), vector=vectors, payload=payload)

    def _update(self, what: str, operation: Any, *, removing: int | Callable[[], int] = 0) -> None:
        # ``removing``: the most points it deletes (the store's mark goes down first).
        self.shard.write(what, operation, removing=removing)

    # --- mem0's interface ----------------------------------------------------

    def create_col(self, name: Any = None, vector_size: Any = None, distance: Any = None) -> None:
        """Nothing to do: the shard is created when the store is built."""

    def insert(
        self, vectors: list[Any], payloads: list[dict[str, Any]] | None = None, ids: Any = None
    ) -> None:
        """Upsert points, each with its dense vector and its text's keyword vector."""
        from qdrant_edge import UpdateOperation

        if ids is not None and len(ids) != len(vectors):
            raise ValueError(f"{len(ids)} ids for {len(vectors)} vectors")
        points = [
            self._point(ids[i] if ids is not None else i, vector, payloads[i] if payloads else None)
            for i, vector in enumerate(vectors)
        ]
        if points:
            self._update("upsert", UpdateOperation.upsert_points(points))

    def search(
        self, query: Any, vectors: Any, top_k: int = 5, filters: dict[str, Any] | None = None
    ) -> list[EdgeHit]:
        """The ``top_k`` best points under ``filters``, fused with keyword hits when on.

        When the caller keeps only the first hits (:mod:`.._mem0.results_kept`),
        payloads are read for those alone and the others are left out.
        """
        from qdrant_edge import Query, QueryRequest, SparseVector

        kept = None if self.entities else kept_of_search()
        condition = build_filter(filters)
        if is_keywords_only(vectors):  # a reply's query left unembedded: keywords alone
            points = [] if self.entities else self._keyword_points(query, condition, top_k, kept)
            top = fused_top_score(self.fusion, self.rrf_k, self.dense_weight)
            # As the fusion scores a hit that the keywords alone found, at its keyword rank.
            scored = [(p, 1.0 / (self.rrf_k + rank) / top) for rank, p in enumerate(points)]
            return hits_with_payloads(self.shard, scored, kept)
        dense = self._dense(vectors)
        use_keywords = self.fusion != "none" and isinstance(query, str)
        sparse = self._sparse(query, query=True) if use_keywords else None
        if sparse is None:
            request = QueryRequest(
                limit=top_k,
                query=Query.Nearest(dense),
                filter=condition,
                with_payload=kept is None,
            )
            points = self.shard.call("search", lambda s: s.query(request))
            scored = [(p, float(p.score)) for p in self._above_floor(points, dense)]
            return hits_with_payloads(self.shard, scored, kept)
        if self.feedback_docs:
            first = self._fused(dense, sparse, condition, top_k, self.feedback_docs, feedback=True)
            indices, values = expand_terms(
                (sparse.indices, sparse.values), hit_terms(first, SPARSE), self.feedback_weight
            )
            sparse = SparseVector(indices=indices, values=values)
        points = self._fused(dense, sparse, condition, top_k, top_k, payload=kept is None)
        top = fused_top_score(self.fusion, self.rrf_k, self.dense_weight)
        scored = [(p, min(float(p.score) / top, 1.0)) for p in self._above_floor(points, dense)]
        return hits_with_payloads(self.shard, scored, kept)

    def _fused(
        self,
        dense: list[float],
        sparse: Any,
        condition: Any,
        depth: int,
        limit: int,
        *,
        feedback: bool = False,
        payload: bool = True,
    ) -> Any:
        """One engine query: each ranking's ``depth`` best, fused, the ``limit`` first.

        ``feedback``: the hits come with their keyword vectors instead of payloads;
        ``payload``: whether they come with their payloads.
        """
        from qdrant_edge import Fusion, Prefetch, Query, QueryRequest

        prefetches = [
            Prefetch(limit=depth, query=Query.Nearest(dense), filter=condition),
            Prefetch(limit=depth, query=Query.Nearest(sparse, using=SPARSE), filter=condition),
        ]
        fusion: Any = (
            Fusion.Dbsf()
            if self.fusion == "dbsf"
            else Fusion.Rrf(k=self.rrf_k, weights=rrf_weights(self.dense_weight))
        )
        request = QueryRequest(
            limit=limit,
            prefetches=prefetches,
            query=fusion,
            filter=condition,
            with_payload=payload and not feedback,
            with_vector=[SPARSE] if feedback else None,
        )
        return self.shard.call("hybrid search", lambda s: s.query(request))

    def _above_floor(
        self, points: builtins.list[Any], dense: builtins.list[float]
    ) -> builtins.list[Any]:
        """``points`` whose cosine similarity with the query reaches the caller's floor.

        The engine scores the found points by meaning alone, so the rule does
        not depend on how they were ranked. mem0's entity collection is left
        alone: mem0 applies its own cosine limits there.
        """
        floor = cosine_floor()
        if floor is None or self.entities or not points:
            return points
        from qdrant_edge import Filter, HasIdCondition, Query, QueryRequest

        request = QueryRequest(
            limit=len(points),
            query=Query.Nearest(dense),
            filter=Filter(must=[HasIdCondition({p.id for p in points})]),
            score_threshold=floor,
        )
        similar = {p.id for p in self.shard.call("search", lambda s: s.query(request))}
        return [p for p in points if p.id in similar]

    def keyword_search(
        self, query: str, top_k: int = 5, filters: dict[str, Any] | None = None
    ) -> list[EdgeHit] | None:
        """Keyword (BM25) hits; ``None`` when :meth:`search` already fuses them."""
        if self.fusion != "none":
            return None
        return self.keyword_hits(query, top_k=top_k, filters=filters)

    def keyword_hits(
        self, query: str, top_k: int = 5, filters: dict[str, Any] | None = None
    ) -> list[EdgeHit]:
        """The ``top_k`` best points by keyword score alone (BM25 with Qdrant's IDF)."""
        points = self._keyword_points(query, build_filter(filters), top_k, None)
        return [hit_of(p, float(p.score)) for p in points]

    def _keyword_points(
        self, query: Any, condition: Any, limit: int, kept: int | None
    ) -> builtins.list[Any]:
        """The engine's keyword ranking; with payloads unless ``kept`` says they come later."""
        from qdrant_edge import Query, QueryRequest

        sparse = self._sparse(query, query=True) if isinstance(query, str) else None
        if sparse is None:
            return []
        request = QueryRequest(
            limit=limit,
            query=Query.Nearest(sparse, using=SPARSE),
            filter=condition,
            with_payload=kept is None,
        )
        return self.shard.call("keyword search", lambda s: s.query(request))

    def sync(self) -> None:
        """Put every write so far on disk (a flush), for :mod:`agentscope_mem0._mem0.durable`."""
        self.shard.sync()

    def delete(self, vector_id: Any) -> None:
        """Delete one point (a missing id is not an error)."""
        from qdrant_edge import UpdateOperation

        self._update("delete", UpdateOperation.delete_points([point_id(vector_id)]), removing=1)

    def delete_where(self, filters: dict[str, Any]) -> None:
        """Delete every point matching a mem0 filter dict (an empty one is refused)."""
        from qdrant_edge import UpdateOperation

        condition = build_filter(filters)
        if condition is None:
            raise ValueError("delete_where needs a filter; use reset() to delete everything")
        self._update(
            "delete by filter",
            UpdateOperation.delete_points_by_filter(condition),
            removing=lambda: self.count(filters),
        )

    def update(
        self, vector_id: Any, vector: Any = None, payload: dict[str, Any] | None = None
    ) -> None:
        """Replace a point's vector and payload, or merge a payload / set a vector alone.

        A new payload text also refreshes the keyword vector (mem0's Qdrant
        store leaves it stale).
        """
        from qdrant_edge import PointVectors, UpdateOperation

        if vector is not None and payload is not None:
            self._update(
                "upsert", UpdateOperation.upsert_points([self._point(vector_id, vector, payload)])
            )
            return
        vectors: dict[str, Any] = {}
        if vector is not None:
            vectors[DENSE] = self._dense(vector)
        if payload is not None:
            self._update(
                "set payload", UpdateOperation.set_payload([point_id(vector_id)], dict(payload))
            )
            sparse = self._sparse(keyword_text(payload))
            if sparse is not None:
                vectors[SPARSE] = sparse
        if vectors:
            operation = UpdateOperation.update_vectors(
                [PointVectors(id=point_id(vector_id), vector=vectors)]
            )
            self._update("update vectors", operation)

    def get(self, vector_id: Any) -> EdgeHit | None:
        """One point by id, or ``None``."""
        records = retrieve(self.shard, [vector_id], payload=True)
        return hit_of(records[0]) if records else None

    def existing_ids(self, ids: builtins.list[str]) -> set[str]:
        """Which of ``ids`` the collection holds."""
        return {str(r.id) for r in retrieve(self.shard, ids)}

    def vectors(self, ids: list[str]) -> dict[str, list[float]]:
        """The dense vectors of ``ids`` (for export and migration checks)."""
        out: dict[str, list[float]] = {}
        for record in retrieve(self.shard, ids, vector=DENSE):
            vector = record.vector
            out[str(record.id)] = list(vector[DENSE] if isinstance(vector, dict) else vector)
        return out

    def list(
        self, filters: dict[str, Any] | None = None, top_k: int | None = None
    ) -> builtins.list[builtins.list[EdgeHit]]:
        """Up to ``top_k`` points under ``filters``, as ``[points]`` (mem0 unwraps one level)."""
        from qdrant_edge import ScrollRequest

        request = ScrollRequest(
            limit=int(top_k or _LIST_DEFAULT), filter=build_filter(filters), with_payload=True
        )
        records, _next = self.shard.call("scroll", lambda s: s.scroll(request))
        return [[hit_of(r) for r in records]]

    def count(self, filters: dict[str, Any] | None = None) -> int:
        """How many points match ``filters`` (all of them without)."""
        from qdrant_edge import CountRequest

        request = CountRequest(exact=True, filter=build_filter(filters))
        return int(self.shard.call("count", lambda s: s.count(request)))

    def list_cols(self) -> builtins.list[str]:
        """The collections (shard folders) next to this one."""
        if not self.root.is_dir():
            return []
        return sorted(p.name for p in self.root.iterdir() if shard_exists(p))

    def delete_col(self) -> None:
        """Delete every point of this collection (its shard stays open for the others)."""
        from qdrant_edge import Filter, UpdateOperation

        self._update(
            "delete all", UpdateOperation.delete_points_by_filter(Filter()), removing=self.count
        )

    def col_info(self) -> dict[str, Any]:
        """Name, points, index state and settings of this collection."""
        info = self.shard.call("info", lambda s: s.info())
        return {
            "engine": "qdrant-edge",
            "name": self.collection_name,
            "path": os.fspath(self.shard.path),
            "points": int(info.points_count),
            "indexed_vectors": int(info.indexed_vectors_count),
            "segments": int(info.segments_count),
            "payload_indexes": sorted(info.payload_schema),
            "dims": self.embedding_model_dims,
            "fusion": self.fusion,
        }

    def reset(self) -> None:
        """Delete every point; the shard and its payload indexes stay."""
        logger.warning("resetting the Qdrant Edge collection %s", self.collection_name)
        self.delete_col()
