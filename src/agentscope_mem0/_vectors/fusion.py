"""How a hybrid search fuses its dense and keyword rankings; shared by both providers.

The embedded store (:mod:`agentscope_mem0.local._edge_provider`) and a Qdrant server
(:mod:`agentscope_mem0._server.qdrant_store`) run the same query: the dense
and the keyword top hits under the same filter, fused by reciprocal rank.
Qdrant (server, Edge and qdrant-client's local mode alike) scores a point at
0-based ``rank`` of a ranking with weight ``w`` as ``1 / ((rank + 1) / w + k - 1)``
and sums over the rankings. mem0 sees that score divided by the best one
possible (first in every ranking), so it lies in (0, 1].
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, Literal

from pydantic import BaseModel, Field

__all__ = [
    "DEFAULT_DENSE_WEIGHT",
    "DEFAULT_FEEDBACK_DOCS",
    "DEFAULT_FEEDBACK_WEIGHT",
    "DEFAULT_RRF_K",
    "Fusion",
    "FusionSettings",
    "expand_terms",
    "fused_top_score",
    "hit_terms",
    "rrf_weights",
]

Fusion = Literal["rrf", "dbsf", "none"]
"""``rrf``: reciprocal-rank fusion; ``dbsf``: distribution-based score fusion;
``none``: dense search only (mem0 adds its own keyword score where it can)."""

# The defaults were chosen by cross-validation on the LoCoMo development half
# (docs/benchmarks/embedded-recall.md): fit on three conversations, held out two.

DEFAULT_RRF_K = 10
"""RRF's rank constant."""

DEFAULT_DENSE_WEIGHT = 0.7
"""The dense ranking's RRF weight; the keyword ranking's is 1."""

DEFAULT_FEEDBACK_DOCS = 3
"""How many first hits widen the keyword query (:func:`expand_terms`); 0: none."""

DEFAULT_FEEDBACK_WEIGHT = 1.0
"""The weight of those hits' terms together, against one query term."""


class FusionSettings(BaseModel):
    """The search settings of both providers' configs (see the module docs)."""

    fusion: Fusion = Field("rrf", description="How dense and keyword hits are fused")
    rrf_k: int = Field(DEFAULT_RRF_K, ge=1, description="Reciprocal-rank constant")
    dense_weight: float = Field(
        DEFAULT_DENSE_WEIGHT, gt=0, description="RRF weight of the dense ranking"
    )
    feedback_docs: int = Field(
        DEFAULT_FEEDBACK_DOCS, ge=0, le=20, description="First hits that widen the keyword query"
    )
    feedback_weight: float = Field(
        DEFAULT_FEEDBACK_WEIGHT, ge=0, description="Weight of the feedback terms"
    )


def rrf_weights(dense_weight: float) -> list[float]:
    """The RRF weights of the two rankings, dense first."""
    return [float(dense_weight), 1.0]


def fused_top_score(fusion: Fusion, rrf_k: int, dense_weight: float) -> float:
    """The largest fused score a point can get: first in every ranking.

    DBSF normalises each ranking's scores to [0, 1] and sums them: 2.
    """
    if fusion == "dbsf":
        return 2.0
    return sum(1.0 / (1.0 / w + rrf_k - 1.0) for w in rrf_weights(dense_weight))


def hit_terms(points: Iterable[Any], name: str) -> list[tuple[Sequence[int], Sequence[float]]]:
    """The sparse vectors called ``name`` of points fetched with their vectors
    (Qdrant Edge's and qdrant-client's points alike), as (indices, values)."""
    vectors = (p.vector.get(name) for p in points if isinstance(p.vector, dict))
    return [(v.indices, v.values) for v in vectors if v is not None]


def expand_terms(
    query: tuple[Sequence[int], Sequence[float]],
    feedback: Sequence[tuple[Sequence[int], Sequence[float]]],
    weight: float,
) -> tuple[list[int], list[float]]:
    """A keyword query widened with the terms of its first hits (pseudo-relevance feedback).

    Each feedback document adds its terms with its own term weights scaled to
    sum to ``weight / len(feedback)``; the query's terms keep their weight.
    The engine applies IDF at search time, so rare words of the first hits
    count and common ones barely do.

    Args:
        query: The query's sparse vector (indices, values).
        feedback: The first hits' sparse vectors.
        weight: How much all feedback terms together weigh against one query term.
    """
    terms = dict(zip((int(i) for i in query[0]), (float(v) for v in query[1]), strict=True))
    documents = [(i, v) for i, v in feedback if len(i) and sum(v) > 0]
    for indices, values in documents:
        scale = weight / sum(values) / len(documents)
        for index, value in zip(indices, values, strict=True):
            terms[int(index)] = terms.get(int(index), 0.0) + float(value) * scale
    ordered = sorted(terms)
    return ordered, [terms[i] for i in ordered]
