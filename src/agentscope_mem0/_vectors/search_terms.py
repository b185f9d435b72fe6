"""What the vector store is told about the search in progress, beside mem0's arguments.

mem0 2.2 hands its vector store the query vector, a candidate count and the
filters, nothing more. Two things this package knows about a search are for
the store too: the least cosine similarity of a hit (:mod:`.threshold`) and
how many hits mem0 keeps (:mod:`.results_kept`). They travel in one context
variable holding a :class:`SearchTerms`, set around mem0's ``search`` and
read by the store in mem0's worker thread (``asyncio.to_thread`` copies the
context).
"""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

__all__ = ["SearchTerms", "search_terms", "searching_with"]


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
        _TERMS.reset(token)
