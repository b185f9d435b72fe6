"""The search settings the LoCoMo recall benchmark compares, and how a store is set to them.

A *variant* is a name and its settings; its ``family`` says which question it
answers (fusion settings alone, pseudo-relevance feedback, MMR, a recency
formula, per-user IDF). The provider's own settings are set on the store;
the experiments the providers do not ship (MMR, recency, per-user IDF) patch
the Edge store's final engine query for the time of a ranking.
"""

from __future__ import annotations

import contextlib
import types
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any


def variant_grid(quick: bool) -> dict[str, dict[str, Any]]:
    """Name -> settings. ``family`` says which question a variant answers."""
    grid: dict[str, dict[str, Any]] = {}
    ks = (3, 5, 10) if quick else (2, 3, 5, 10, 20, 60)
    weights = (0.7, 1.0, 1.5) if quick else (0.5, 0.7, 1.0, 1.5, 2.0)
    for k in ks:
        for w in weights:
            grid[f"rrf-k{k}-w{w}"] = {"family": "fusion", "rrf_k": k, "dense_weight": w}
    grid["dbsf"] = {"family": "fusion", "fusion": "dbsf"}
    docs = (2, 3) if quick else (2, 3, 5)
    gammas = (1.0,) if quick else (0.5, 1.0, 2.0)
    fb_ks = (5,) if quick else (3, 5, 10)
    fb_weights = (1.0,) if quick else (0.7, 1.0, 1.5)
    for m in docs:
        for g in gammas:
            for k in fb_ks:
                for w in fb_weights:
                    grid[f"feedback-m{m}-g{g}-k{k}-w{w}"] = {
                        "family": "feedback",
                        "rrf_k": k,
                        "dense_weight": w,
                        "feedback_docs": m,
                        "feedback_weight": g,
                    }
    for lam in (0.5, 0.7, 0.9):
        grid[f"mmr-{lam}"] = {"family": "mmr", "rrf_k": 5, "mmr": lam}
    for w in (0.1, 0.3, 1.0):
        grid[f"recency-{w}"] = {"family": "recency", "rrf_k": 5, "recency": w}
    for k in (3, 5, 10):
        grid[f"idf-user-k{k}"] = {"family": "idf-user", "rrf_k": k, "idf_user": True}
    return grid


PROVIDER_FIELDS = ("fusion", "rrf_k", "dense_weight", "feedback_docs", "feedback_weight")
BASE = {
    "fusion": "rrf",
    "rrf_k": 5,
    "dense_weight": 1.0,
    "feedback_docs": 0,
    "feedback_weight": 1.0,
}
RELEASE_02_DEFAULT = {"fusion": "rrf", "rrf_k": 5, "dense_weight": 1.0}


@contextlib.contextmanager
def configured(store: Any, settings: dict[str, Any], latest: dict[str, str]) -> Iterator[None]:
    """The Edge store searching with ``settings``; experiments patch its engine query."""
    saved = {name: getattr(store, name) for name in PROVIDER_FIELDS}
    for name in PROVIDER_FIELDS:
        setattr(store, name, {**BASE, **settings}.get(name, BASE[name]))
    patches = {k: settings[k] for k in ("mmr", "recency", "idf_user") if k in settings}
    if patches:
        store.search = types.MethodType(_experimental_search(patches, latest), store)
    try:
        yield
    finally:
        for name, value in saved.items():
            setattr(store, name, value)
        store.__dict__.pop("search", None)


def _experimental_search(patches: dict[str, Any], latest: dict[str, str]) -> Any:
    """A search whose final engine query adds MMR, a recency formula or per-user IDF."""
    from qdrant_edge import (
        DecayKind,
        Expression,
        Formula,
        Fusion,
        IdfParams,
        Mmr,
        Prefetch,
        Query,
        QueryRequest,
        SearchParams,
    )

    from agentscope_mem0._vectors.fusion import rrf_weights
    from agentscope_mem0.local._edge import SPARSE

    def fused(self: Any, dense: Any, sparse: Any, condition: Any, depth: int, limit: int, **_: Any):
        params = SearchParams(idf=IdfParams(corpus=condition)) if patches.get("idf_user") else None
        inner = [
            Prefetch(limit=depth, query=Query.Nearest(dense), filter=condition),
            Prefetch(
                limit=depth,
                query=Query.Nearest(sparse, using=SPARSE),
                filter=condition,
                params=params,
            ),
        ]
        rrf = Fusion.Rrf(k=self.rrf_k, weights=rrf_weights(self.dense_weight))
        if "mmr" in patches:
            outer = [Prefetch(limit=depth, prefetches=inner, query=rrf, filter=condition)]
            query: Any = Mmr(dense, patches["mmr"], depth)
        elif "recency" in patches:
            outer = [Prefetch(limit=depth, prefetches=inner, query=rrf, filter=condition)]
            # score x (1 + w * exp-decay of the time since it was said, half-life 30 days)
            decay = Expression.Decay(
                DecayKind.Exp,
                Expression.DatetimeKey("said_at"),
                target=Expression.Datetime(self._now),
                midpoint=0.5,
                scale=30 * 86400.0,
            )
            boost = Expression.Sum(
                [
                    Expression.Constant(1.0),
                    Expression.Mult([Expression.Constant(patches["recency"]), decay]),
                ]
            )
            query = Formula(Expression.Mult([Expression.Variable("$score"), boost]))
        else:
            outer, query = inner, rrf
        request = QueryRequest(
            limit=limit, prefetches=outer, query=query, filter=condition, with_payload=True
        )
        return self.shard.call("experiment", lambda s: s.query(request))

    def search(
        self: Any, query: Any, vectors: Any, top_k: int = 5, filters: Any = None, **kwargs: Any
    ) -> Any:
        if not callable(getattr(type(self), "_fused", None)):
            # Patching a method the store no longer calls would measure the default.
            raise AttributeError(f"{type(self).__name__} has no _fused() to run experiments in")
        self._now = latest.get((filters or {}).get("user_id"), datetime.now(UTC).isoformat())
        self._fused = types.MethodType(fused, self)
        try:
            return type(self).search(self, query, vectors, top_k, filters, **kwargs)
        finally:
            del self._fused

    return search


def package_defaults() -> dict[str, Any]:
    """The search settings the providers ship with (to compare with the chosen ones)."""
    from agentscope_mem0._vectors.fusion import FusionSettings

    return FusionSettings().model_dump()


@contextlib.contextmanager
def configured_server(store: Any, settings: dict[str, Any]) -> Iterator[None]:
    saved = {name: getattr(store, name) for name in PROVIDER_FIELDS}
    for name in PROVIDER_FIELDS:
        setattr(store, name, {**BASE, **settings}.get(name, BASE[name]))
    try:
        yield
    finally:
        for name, value in saved.items():
            setattr(store, name, value)
