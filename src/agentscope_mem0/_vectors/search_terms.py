"""What the vector store is told about the search in progress, beside mem0's arguments.

mem0 2.2 hands its vector store the query vector, a candidate count and the
filters, nothing more. Two things this package knows about a search are for
the store too. They travel in one context variable holding a
:class:`SearchTerms`, set around mem0's ``search`` and read by the store in
mem0's worker thread (``asyncio.to_thread`` copies the context):

* the least cosine similarity of a hit (:func:`mem0_threshold`,
  :func:`cosine_floor`): whatever the backend, a search's ``threshold`` is
  the least cosine similarity between the query's embedding and a memory's.
  mem0 2.2 drops a hit whose vector store score is below the threshold (0.1
  when none is given) before it ranks. On mem0's Qdrant and pgvector stores
  that score is the cosine similarity. The embedded Qdrant Edge store ranks
  by meaning and keywords fused, so the score it gives mem0 is a rank, not a
  similarity: it drops a hit itself when the hit's cosine is below the
  threshold handed to it here, and mem0's own gate is opened (0.0). The
  hosted platform applies the threshold to its own score.
* how many hits mem0 keeps (:func:`results_kept`, :func:`kept_of_search`):
  mem0 2.2's ``search(top_k=k)`` asks its vector store for ``max(4k, 60)``
  candidates, reads every candidate's payload, adds its keyword and entity
  scores, and keeps the ``k`` best. On this package's embedded store the
  keyword score is already fused into the store's ranking, so when mem0 can
  add no entity score either (spaCy is not installed: mem0 finds no
  entities) and expired memories are dropped, mem0 keeps the store's first
  ``k`` unexpired candidates in the store's order. Reading the payloads of
  the others costs a search most of its time on a large store (about 0.1 ms
  each from a cold payload file; a search reads 60), so the store reads
  payloads only for as many candidates as mem0 can keep, and mem0's answer
  stays the same. The package's ``AsyncMemory``
  (:class:`~agentscope_mem0._mem0.async_memory.SharedStoreMemory`) sets it
  around each search.
"""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses
import functools
import importlib.util
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

__all__ = [
    "MEM0_DEFAULT_THRESHOLD",
    "SearchTerms",
    "cosine_floor",
    "entity_scores_possible",
    "gates_itself",
    "kept_of_search",
    "mem0_threshold",
    "results_kept",
    "search_terms",
    "searching_with",
]

MEM0_DEFAULT_THRESHOLD = 0.1
"""mem0 2.2's ``search`` threshold when none is given."""


@dataclass(frozen=True, slots=True)
class SearchTerms:
    """The terms of one search that mem0 does not pass to its store."""

    cosine_floor: float | None = None
    """The least cosine a hit must have; ``None``: mem0's own gate applies."""
    results_kept: int | None = None
    """How many unexpired hits mem0 keeps in store order; ``None``: unknown."""


_NO_TERMS = SearchTerms()  # frozen: one default serves every context
_TERMS: contextvars.ContextVar[SearchTerms] = contextvars.ContextVar(
    "agentscope_mem0_search_terms", default=_NO_TERMS
)


def search_terms() -> SearchTerms:
    """The terms of the search the calling code serves."""
    return _TERMS.get()


@contextlib.contextmanager
def searching_with(**changes: Any) -> Iterator[SearchTerms]:
    """Within the block, the current terms with ``changes`` (:class:`SearchTerms` fields)."""
    terms = dataclasses.replace(_TERMS.get(), **changes)
    token = _TERMS.set(terms)
    try:
        yield terms
    finally:
        # A coroutine never finished is closed by the garbage collector in
        # another context, where its token cannot be reset (nor needs to be).
        with contextlib.suppress(ValueError):
            _TERMS.reset(token)


# -- the cosine floor -----------------------------------------------------------------


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


# -- the hits mem0 keeps ----------------------------------------------------------------


@functools.cache
def entity_scores_possible() -> bool:
    """Whether mem0 can add entity scores: it finds entities only with spaCy."""
    return importlib.util.find_spec("spacy") is not None


@contextlib.contextmanager
def results_kept(top_k: int, *, show_expired: bool = False) -> Iterator[int | None]:
    """Within the block, a search keeps at most ``top_k`` unexpired hits in store order.

    Yields what the store is told: ``top_k``, or ``None`` (read every
    candidate) when mem0 may reorder the candidates (entity scores) or keeps
    expired ones too.
    """
    kept = None if show_expired or entity_scores_possible() else max(int(top_k), 1)
    with searching_with(results_kept=kept):
        yield kept


def kept_of_search() -> int | None:
    """How many unexpired hits the current search keeps, or ``None`` when unknown."""
    return search_terms().results_kept
