"""A reply's search by keywords alone when its query would wait too long to be embedded.

When many replies search at the same moment, the offline embedder is the
queue they wait in (about 24 ms of both cores per short query with e5: 50
queries asked at once need 1.2 s before the last is embedded). A store that
ranks by keywords itself (the embedded store) can answer without the query's
vector. So the embedder may refuse a reply's query that it estimates would
wait longer than its budget (:class:`~agentscope_mem0.EmbedderBusyError`);
mem0's embedder adapter then hands mem0 :data:`KEYWORDS_ONLY` instead of a
vector, mem0 hands that to the store, and the store searches by keywords
alone (on LoCoMo the keyword ranking alone has recall@10 0.635 against 0.676
fused; see ``docs/benchmarks/embedded-recall.md``). Nothing else changes:
the memories are still the user's, filtered the same way.

Only what a reply waits for may be refused (see
:attr:`~agentscope_mem0._mem0.call_context.Mem0Call.serves_a_reply`): its query, on mem0's
read lane, and the memory texts its note is deduplicated by (the words then
decide alone). A write's embeddings and a background judgement's searches
always wait their turn.
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "KEYWORDS_ONLY",
    "KeywordsOnly",
    "allow_keywords_only",
    "is_keywords_only",
    "keyword_only_queries",
]


class KeywordsOnly(list[float]):
    """The stand-in for a query vector: search by the query's keywords alone.

    A list (mem0 passes vectors on untouched) that is always empty.
    """

    def __repr__(self) -> str:
        return "KEYWORDS_ONLY"


KEYWORDS_ONLY = KeywordsOnly()


def is_keywords_only(vector: Any) -> bool:
    """Whether ``vector`` is the stand-in rather than a query's embedding."""
    return isinstance(vector, KeywordsOnly)


def _adapter(client: Any) -> Any:
    """``client``'s embedder adapter, under the query cache if there is one."""
    embedder = getattr(client, "embedding_model", None)
    return getattr(embedder, "inner", embedder)


def allow_keywords_only(client: Any) -> bool:
    """Let ``client``'s embedder refuse a reply's query when its store can do without.

    Returns:
        Whether the store searches by keywords alone (its
        ``searches_keywords_alone``) and the embedder adapter can be told.
    """
    store = getattr(client, "vector_store", None)
    adapter = _adapter(client)
    if not getattr(store, "searches_keywords_alone", False) or not hasattr(
        adapter, "keywords_when_busy"
    ):
        return False
    adapter.keywords_when_busy = True
    return True


def keyword_only_queries(client: Any) -> int:
    """How many of ``client``'s reply queries were searched by keywords alone."""
    return int(getattr(_adapter(client), "keyword_only_queries", 0))
