"""What a search's ``threshold`` means, on every backend: the least cosine
similarity between the query's embedding and a memory's.

mem0 2.2 drops a hit whose vector store score is below the threshold (0.1
when none is given) before it ranks. On mem0's Qdrant and pgvector stores
that score is the cosine similarity. The embedded Qdrant Edge store ranks by
meaning and keywords fused, so the score it gives mem0 is a rank, not a
similarity: it drops a hit itself when the hit's cosine is below the
threshold handed to it here for the call (:mod:`.search_terms`), and mem0's
own gate is opened (0.0). Whatever the fusion, the rule stays the same. The hosted platform
applies the threshold to its own score.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

from .search_terms import search_terms, searching_with

__all__ = ["MEM0_DEFAULT_THRESHOLD", "cosine_floor", "gates_itself", "mem0_threshold"]

MEM0_DEFAULT_THRESHOLD = 0.1
"""mem0 2.2's ``search`` threshold when none is given."""


def gates_itself(client: Any) -> bool:
    """Whether ``client``'s vector store applies the cosine floor itself."""
    store = getattr(client, "vector_store", None)
    return bool(getattr(store, "applies_cosine_floor", False))


@contextlib.contextmanager
def mem0_threshold(client: Any, threshold: float | None) -> Iterator[float | None]:
    """The threshold to give mem0's ``search`` of ``client`` within the block.

    For a store that gates by cosine itself, the threshold (mem0's default
    when ``None``) is handed to it as the search's ``cosine_floor``, and mem0
    is given 0.0; otherwise mem0 gets ``threshold``.
    """
    if not gates_itself(client):
        yield threshold
        return
    with searching_with(cosine_floor=MEM0_DEFAULT_THRESHOLD if threshold is None else threshold):
        yield 0.0


def cosine_floor() -> float | None:
    """The least cosine a hit of the current search must have, if a caller set one."""
    return search_terms().cosine_floor
