"""How many hits of a vector store search mem0 can keep, told to the store.

mem0 2.2's ``search(top_k=k)`` asks its vector store for ``max(4k, 60)``
candidates, reads every candidate's payload, adds its keyword and entity
scores, and keeps the ``k`` best. On this package's embedded store the
keyword score is already fused into the store's ranking, so when mem0 can add
no entity score either (spaCy is not installed: mem0 finds no entities) and
expired memories are dropped, mem0 keeps the store's first ``k`` unexpired
candidates in the store's order. Reading the payloads of the others costs a
search most of its time on a large store (about 0.1 ms each from a cold
payload file; a search reads 60), so the store reads payloads only for as
many candidates as mem0 can keep, and mem0's answer stays the same.

:func:`results_kept` is set around the search by the package's ``AsyncMemory``
(:class:`~agentscope_mem0._mem0.async_memory.SharedStoreMemory`), as the
search's ``results_kept`` (:mod:`.search_terms`); a store reads it with
:func:`kept_of_search`.
"""

from __future__ import annotations

import contextlib
import functools
import importlib.util
from collections.abc import Iterator

from .search_terms import search_terms, searching_with

__all__ = ["entity_scores_possible", "kept_of_search", "results_kept"]


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
