"""mem0's vector store on Qdrant Edge, with hybrid search done by the engine.

:class:`EdgeVectorStore` implements everything mem0 2.2's ``AsyncMemory`` calls
on a vector store (insert, search, keyword_search, get, list, update, delete,
col_info, list_cols, delete_col, reset; search_batch comes from mem0's base),
and turns mem0's shapes into the engine's: ids (:func:`point_id`), filters
(:mod:`._edge_filters`) and the engine's points back into hits (:class:`EdgeHit`).
:func:`edge_vector_store_config` builds the ``VectorStoreConfig`` naming it;
mem0's own ``VectorStoreConfig`` keeps its whitelist, so a config naming
:data:`PROVIDER` without this module is still rejected, and the subclass
here accepts :data:`PROVIDER` and nothing else. Build a ``MemoryConfig``
holding it with ``agentscope_mem0.build_mem0_config(mem0_config=...)``.

Every point carries a dense vector and a sparse ``"bm25"`` vector of its
text's keyword terms (:class:`~agentscope_mem0.local.KeywordEncoder`, the
engine's BM25). With ``fusion="rrf"`` (the default) a search fuses the dense
and the keyword top hits under one filter, widening the keyword query with
the first hits' terms first when ``feedback_docs`` is set: the settings, as
shared with the Qdrant server provider, are in
:mod:`agentscope_mem0._vectors.fusion`. mem0 sees the fused score divided by
the best one possible. A rank is no similarity, so the search threshold is
applied here to each hit's cosine with the query (see
:mod:`agentscope_mem0._vectors.search_terms`), and ``keyword_search`` returns
``None`` so that mem0 does not add a keyword score again. ``fusion="none"``
and mem0's entity collection (``<name>_entities``) search by meaning only.

A search's candidates come from the engine with their ids and scores. When
the search keeps only the first ``kept`` unexpired hits
(:mod:`agentscope_mem0._vectors.search_terms`), payloads are read for those
first ones only, reading on past expired memories until ``kept`` live ones
are found or the candidates end (:func:`hits_with_payloads`).
"""

from __future__ import annotations

import builtins
import logging
import os
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any

from mem0.vector_stores.base import VectorStoreBase
from pydantic import ConfigDict, Field

from .._vectors.fusion import (
    Fusion,
    FusionSettings,
    expand_terms,
    fused_top_score,
    hit_terms,
    rrf_weights,
)
from .._vectors.keywords_only import is_keywords_only
from .._vectors.search_terms import cosine_floor, kept_of_search
from ._edge import DENSE, SPARSE, SharedShard, index_state, shard_exists, shared_shard
from ._edge_filters import build_filter
from ._folder import COLLECTION, ENTITY_SUFFIX
from ._keyword import KeywordEncoder, keyword_text, rewrite_keywords, sparse_vector

__all__ = [
    "PROVIDER",
    "EdgeHit",
    "EdgeStoreConfig",
    "EdgeVectorStore",
    "edge_config_class",
    "edge_vector_store_config",
]

logger = logging.getLogger(__name__)

PROVIDER = "agentscope_edge"
"""The vector-store provider name this package registers with mem0."""

_LIST_DEFAULT = 100


class EdgeStoreConfig(FusionSettings):
    """The ``vector_store.config`` of the Qdrant Edge provider."""

    model_config = ConfigDict(extra="forbid")

    collection_name: str = Field(COLLECTION, description="Collection (shard) name")
    embedding_model_dims: int | None = Field(None, description="Dense vector size")
    path: str = Field(description="Folder holding one shard folder per collection")


def edge_vector_store_config(
    *,
    path: str | os.PathLike[str],
    dims: int,
    collection_name: str = COLLECTION,
    fusion: Fusion = "rrf",
    **options: Any,
) -> Any:
    """A mem0 ``VectorStoreConfig`` for the Qdrant Edge store, registering the provider.

    Args:
        path: The folder holding the collections' shard folders.
        dims: The embedding model's vector size.
        collection_name: The collection.
        fusion: ``"rrf"``, ``"dbsf"`` or ``"none"`` (see the module docs).
        **options: Further :class:`EdgeStoreConfig` fields.

    Returns:
        A ``VectorStoreConfig`` (a subclass accepting only :data:`PROVIDER`).
    """
    store = EdgeStoreConfig(
        path=os.fspath(path),
        embedding_model_dims=dims,
        collection_name=collection_name,
        fusion=fusion,
        **options,
    )
    return edge_config_class()(provider=PROVIDER, config=store.model_dump())


_config_class: type | None = None


def edge_config_class() -> type:
    """``VectorStoreConfig`` subclass that accepts :data:`PROVIDER` and nothing else."""
    global _config_class
    if _config_class is not None:
        return _config_class
    from mem0.utils.factory import VectorStoreFactory
    from mem0.vector_stores.configs import VectorStoreConfig
    from pydantic import model_validator

    class EdgeVectorStoreConfig(VectorStoreConfig):
        @model_validator(mode="after")
        def validate_and_create_config(self) -> EdgeVectorStoreConfig:
            if self.provider != PROVIDER:
                raise ValueError(f"Unsupported vector store provider: {self.provider}")
            given: Any = getattr(self, "config", None)
            if not isinstance(given, EdgeStoreConfig):
                if not isinstance(given, dict) or "path" not in given:
                    raise ValueError(
                        f"the {PROVIDER} vector store needs a config with a 'path' "
                        "(the folder its collections live in)"
                    )
                setattr(self, "config", EdgeStoreConfig(**given))  # noqa: B010
            return self

    VectorStoreFactory.provider_to_class[PROVIDER] = f"{__name__}.EdgeVectorStore"
    _config_class = EdgeVectorStoreConfig
    return _config_class


@dataclass(slots=True)
class EdgeHit:
    """One point as mem0 reads it: ``id``, ``score`` and ``payload``."""

    id: str
    score: float | None
    payload: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def of(cls, point: Any, score: float | None = None) -> EdgeHit:
        """``point`` (an engine record or scored point) with ``score``."""
        return cls(id=str(point.id), score=score, payload=dict(point.payload or {}))


def point_id(value: Any) -> int | str:
    """An id the engine accepts: an unsigned integer, or a UUID string (mem0 uses uuid4)."""
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return value
    text = str(value)
    try:
        return str(uuid.UUID(text))
    except ValueError:
        raise ValueError(
            f"point id {text!r} is neither an unsigned integer nor a UUID (all Qdrant accepts)"
        ) from None


def _retrieve(shard: SharedShard, ids: Iterable[Any], *, payload: bool = False) -> list[Any]:
    """The engine records of those of ``ids`` the shard holds, with their payloads or not."""
    wanted = [point_id(i) for i in ids]
    return shard.call(
        "retrieve", lambda s: s.retrieve(wanted, with_payload=payload, with_vector=False)
    )


def is_expired(payload: dict[str, Any]) -> bool:
    """Whether the memory's ``expiration_date`` (an ISO date) is before today (UTC).

    mem0 2.2's rule: no date, or one that does not parse, never expires.
    """
    value = payload.get("expiration_date")
    if not value:
        return False
    try:
        return date.fromisoformat(str(value)) < datetime.now(UTC).date()
    except ValueError:
        return False


def hits_with_payloads(
    shard: SharedShard, scored: Sequence[tuple[Any, float]], kept: int | None
) -> list[EdgeHit]:
    """``scored`` (engine point, score) in order, as hits with their payloads.

    Args:
        shard: The shard the points are in.
        scored: The candidates, best first; a point may carry its payload already.
        kept: Read payloads only until this many unexpired hits are found and
            return only those read; ``None`` reads and returns every candidate.
    """
    if kept is None:
        return [EdgeHit.of(point, score) for point, score in scored]
    hits: list[EdgeHit] = []
    live = 0
    start = 0
    while live < kept and start < len(scored):
        batch = scored[start : start + kept - live]
        start += len(batch)
        records = _retrieve(shard, [point.id for point, _score in batch], payload=True)
        payloads = {str(r.id): dict(r.payload or {}) for r in records}
        for point, score in batch:
            hit = EdgeHit(id=str(point.id), score=score, payload=payloads.get(str(point.id), {}))
            if hit.payload:  # deleted since the search: gone from mem0's answer too
                hits.append(hit)
                live += not is_expired(hit.payload)
    return hits


class EdgeVectorStore(VectorStoreBase):
    """mem0 vector store on this process's shared Qdrant Edge shard.

    Built by mem0's ``VectorStoreFactory`` from :class:`EdgeStoreConfig`'s fields.

    Raises:
        pydantic.ValidationError: A field is unknown or out of range.
        StoreLockedError: Another process holds the shard.
        DimensionMismatchError: The shard holds vectors of another size.
    """

    applies_cosine_floor = True
    """Searches drop hits below the caller's cosine floor (mem0 is given 0.0)."""

    searches_keywords_alone = True
    """A search given :data:`~agentscope_mem0._vectors.keywords_only.KEYWORDS_ONLY`
    as its vector ranks by keywords alone."""

    def __init__(self, **config: Any) -> None:
        settings = EdgeStoreConfig(**config)
        if not settings.embedding_model_dims:
            raise ValueError("the Qdrant Edge store needs embedding_model_dims")
        self.root = Path(settings.path)
        self.collection_name = settings.collection_name
        self.embedding_model_dims = settings.embedding_model_dims
        self.entities = self.collection_name.endswith(ENTITY_SUFFIX)
        """mem0's entity collection: searched by meaning only."""
        self.fusion: Fusion = "none" if self.entities else settings.fusion
        self.rrf_k = settings.rrf_k
        self.dense_weight = settings.dense_weight
        self.feedback_docs = settings.feedback_docs
        self.feedback_weight = settings.feedback_weight
        # The slot names install_keyword_encoder() and mem0's Qdrant store use.
        self._bm25_encoder: Any = KeywordEncoder()
        self._has_bm25_slot = True
        self.shard: SharedShard = shared_shard(
            self.root / self.collection_name, self.embedding_model_dims, user=self
        )
        # A folder written by release 0.2 (the former encoder) is brought up to date here.
        rewrite_keywords(self.shard, self._bm25_encoder)

    # --- mem0's shapes as the engine's -----------------------------------------

    def _get_bm25_encoder(self) -> Any:
        return self._bm25_encoder or None

    def _sparse(self, text: str, *, query: bool = False) -> Any | None:
        encoder = self._get_bm25_encoder()
        if encoder is None or not text:
            return None
        # fastembed's shape: query_embed for searches, embed for stored texts.
        terms = encoder.query_embed(text) if query else encoder.embed([text])
        return sparse_vector(next(iter(terms)))

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

    def _query(self, what: str, **request: Any) -> Any:
        from qdrant_edge import QueryRequest

        query = QueryRequest(**request)
        return self.shard.call(what, lambda s: s.query(query))

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
            self.shard.write("upsert", UpdateOperation.upsert_points(points))

    def search(
        self, query: Any, vectors: Any, top_k: int = 5, filters: dict[str, Any] | None = None
    ) -> list[EdgeHit]:
        """The ``top_k`` best points under ``filters``, fused with keyword hits when on.

        When the caller keeps only the first hits (see the module docs),
        payloads are read for those alone and the others are left out.
        """
        from qdrant_edge import Query, SparseVector

        kept = None if self.entities else kept_of_search()
        condition = build_filter(filters)
        top = fused_top_score(self.fusion, self.rrf_k, self.dense_weight)
        if is_keywords_only(vectors):  # a reply's query left unembedded: keywords alone
            points = [] if self.entities else self._keyword_points(query, condition, top_k, kept)
            # As the fusion scores a hit that the keywords alone found, at its keyword rank.
            scored = [(p, 1.0 / (self.rrf_k + rank) / top) for rank, p in enumerate(points)]
            return hits_with_payloads(self.shard, scored, kept)
        dense = self._dense(vectors)
        use_keywords = self.fusion != "none" and isinstance(query, str)
        sparse = self._sparse(query, query=True) if use_keywords else None
        if sparse is None:
            points = self._query(
                "search",
                limit=top_k,
                query=Query.Nearest(dense),
                filter=condition,
                with_payload=kept is None,
            )
            scored = [(p, float(p.score)) for p in self._above_floor(points, dense)]
            return hits_with_payloads(self.shard, scored, kept)
        if self.feedback_docs:
            first = self._fused(dense, sparse, condition, top_k, self.feedback_docs, feedback=True)
            indices, values = expand_terms(
                (sparse.indices, sparse.values), hit_terms(first, SPARSE), self.feedback_weight
            )
            sparse = SparseVector(indices=indices, values=values)
        points = self._fused(dense, sparse, condition, top_k, top_k, payload=kept is None)
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
        from qdrant_edge import Fusion, Prefetch, Query

        prefetches = [
            Prefetch(limit=depth, query=Query.Nearest(dense), filter=condition),
            Prefetch(limit=depth, query=Query.Nearest(sparse, using=SPARSE), filter=condition),
        ]
        fusion: Any = (
            Fusion.Dbsf()
            if self.fusion == "dbsf"
            else Fusion.Rrf(k=self.rrf_k, weights=rrf_weights(self.dense_weight))
        )
        return self._query(
            "hybrid search",
            limit=limit,
            prefetches=prefetches,
            query=fusion,
            filter=condition,
            with_payload=payload and not feedback,
            with_vector=[SPARSE] if feedback else None,
        )

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
        from qdrant_edge import Filter, HasIdCondition, Query

        similar = self._query(
            "search",
            limit=len(points),
            query=Query.Nearest(dense),
            filter=Filter(must=[HasIdCondition({p.id for p in points})]),
            score_threshold=floor,
        )
        ids = {p.id for p in similar}
        return [p for p in points if p.id in ids]

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
        return [EdgeHit.of(p, float(p.score)) for p in points]

    def _keyword_points(
        self, query: Any, condition: Any, limit: int, kept: int | None
    ) -> builtins.list[Any]:
        """The engine's keyword ranking; with payloads unless ``kept`` says they come later."""
        from qdrant_edge import Query

        sparse = self._sparse(query, query=True) if isinstance(query, str) else None
        if sparse is None:
            return []
        return self._query(
            "keyword search",
            limit=limit,
            query=Query.Nearest(sparse, using=SPARSE),
            filter=condition,
            with_payload=kept is None,
        )

    def sync(self) -> None:
        """Put every write so far on disk (a flush), for :mod:`.._write.store_sync`."""
        self.shard.sync()

    def delete(self, vector_id: Any) -> None:
        """Delete one point (a missing id is not an error)."""
        from qdrant_edge import UpdateOperation

        self.shard.write("delete", UpdateOperation.delete_points([point_id(vector_id)]), removing=1)

    def delete_where(self, filters: dict[str, Any]) -> None:
        """Delete every point matching a mem0 filter dict (an empty one is refused)."""
        from qdrant_edge import UpdateOperation

        condition = build_filter(filters)
        if condition is None:
            raise ValueError("delete_where needs a filter; use reset() to delete everything")
        self.shard.write(
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
            point = self._point(vector_id, vector, payload)
            self.shard.write("upsert", UpdateOperation.upsert_points([point]))
            return
        vectors: dict[str, Any] = {}
        if vector is not None:
            vectors[DENSE] = self._dense(vector)
        if payload is not None:
            operation = UpdateOperation.set_payload([point_id(vector_id)], dict(payload))
            self.shard.write("set payload", operation)
            sparse = self._sparse(keyword_text(payload))
            if sparse is not None:
                vectors[SPARSE] = sparse
        if vectors:
            changed = [PointVectors(id=point_id(vector_id), vector=vectors)]
            self.shard.write("update vectors", UpdateOperation.update_vectors(changed))

    def get(self, vector_id: Any) -> EdgeHit | None:
        """One point by id, or ``None``."""
        records = _retrieve(self.shard, [vector_id], payload=True)
        return EdgeHit.of(records[0]) if records else None

    def existing_ids(self, ids: builtins.list[str]) -> set[str]:
        """Which of ``ids`` the collection holds."""
        return {str(r.id) for r in _retrieve(self.shard, ids)}

    def list(
        self, filters: dict[str, Any] | None = None, top_k: int | None = None
    ) -> builtins.list[builtins.list[EdgeHit]]:
        """Up to ``top_k`` points under ``filters``, as ``[points]`` (mem0 unwraps one level)."""
        from qdrant_edge import ScrollRequest

        request = ScrollRequest(
            limit=int(top_k or _LIST_DEFAULT), filter=build_filter(filters), with_payload=True
        )
        records, _next = self.shard.call("scroll", lambda s: s.scroll(request))
        return [[EdgeHit.of(r) for r in records]]

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

        operation = UpdateOperation.delete_points_by_filter(Filter())
        self.shard.write("delete all", operation, removing=self.count)

    def col_info(self) -> dict[str, Any]:
        """Name, points, index state and settings of this collection."""
        return {
            "engine": "qdrant-edge",
            "name": self.collection_name,
            "path": os.fspath(self.shard.path),
            **index_state(self.shard),
            "dims": self.embedding_model_dims,
            "fusion": self.fusion,
        }

    def reset(self) -> None:
        """Delete every point; the shard and its payload indexes stay."""
        logger.warning("resetting the Qdrant Edge collection %s", self.collection_name)
        self.delete_col()
