"""The fused query's settings, shared by the embedded store and the server provider."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from agentscope_mem0._vectors.fusion import (
    FusionSettings,
    expand_terms,
    fused_top_score,
    rrf_weights,
)
from agentscope_mem0.local._edge_provider import EdgeVectorStore


def test_the_top_score_is_qdrants_weighted_rrf_at_rank_zero() -> None:
    # Qdrant scores rank r (from 0) of a ranking with weight w as 1 / ((r + 1) / w + k - 1).
    assert fused_top_score("rrf", 5, 1.0) == pytest.approx(2 / 5)
    assert fused_top_score("rrf", 5, 2.0) == pytest.approx(1 / (0.5 + 4) + 1 / 5)
    assert fused_top_score("dbsf", 5, 1.0) == 2.0
    assert rrf_weights(0.7) == [0.7, 1.0]


def test_feedback_terms_are_added_at_their_share_of_the_weight() -> None:
    indices, values = expand_terms(
        ([10, 20], [1.0, 1.0]), [([20, 30], [3.0, 1.0]), ([40], [2.0])], weight=1.0
    )
    got = dict(zip(indices, values, strict=True))
    # Each document brings weight / documents, spread by its own term weights.
    assert got == pytest.approx({10: 1.0, 20: 1.0 + 0.375, 30: 0.125, 40: 0.5})
    assert indices == sorted(indices)
    assert expand_terms(([1], [1.0]), [], weight=2.0) == ([1], [1.0])
    assert expand_terms(([1], [1.0]), [([], [])], weight=2.0) == ([1], [1.0])


def test_settings_are_checked() -> None:
    assert FusionSettings().fusion == "rrf"
    for bad in ({"rrf_k": 0}, {"dense_weight": 0}, {"feedback_docs": -1}, {"fusion": "max"}):
        with pytest.raises(ValueError):
            FusionSettings(**bad)


def test_feedback_pulls_in_what_the_first_hit_shares(tmp_path: Path) -> None:
    store = EdgeVectorStore(path=str(tmp_path), embedding_model_dims=8)
    texts = [
        "The user's bike is a red Brompton",
        "The red folding bike lives under the office desk",
        "The user drinks green tea in the morning",
        "The user plays chess on Sundays",
    ]
    rng = np.random.default_rng(1)
    store.insert(
        [rng.normal(size=8).tolist() for _ in texts],
        [{"data": t, "user_id": "u"} for t in texts],
        [f"00000000-0000-0000-0000-00000000000{i}" for i in range(len(texts))],
    )
    query_vector = rng.normal(size=8).tolist()

    def score_of_the_other_bike() -> float:
        hits = store.search("Brompton", query_vector, top_k=4, filters={"user_id": "u"})
        return next(h.score for h in hits if "folding" in str(h.payload["data"]))

    store.feedback_docs = 0
    without = score_of_the_other_bike()
    store.feedback_docs = 1
    with_feedback = score_of_the_other_bike()
    assert with_feedback > without
