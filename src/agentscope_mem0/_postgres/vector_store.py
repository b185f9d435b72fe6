"""mem0's pgvector store, able to answer a reply's search by keywords alone.

When many replies search at once, the offline embedder is the queue they
wait in; it may refuse a reply's query it would embed too late
(:mod:`agentscope_mem0._vectors.keywords_only`). The embedded store then
ranks by its own BM25 side. mem0's pgvector store has a keyword search too,
but it asks for *every* word of the query (``plainto_tsquery``), so "Where do
I live?" finds nothing in "User lives in Hangzhou". :class:`PgvectorStore`
is mem0's store with one more way to search: a query handed
:data:`~agentscope_mem0._vectors.keywords_only.KEYWORDS_ONLY` instead of a
vector is matched by PostgreSQL's English full-text search (stems, stop
words) on *any* of its words, ranked by ``ts_rank_cd``, among the rows the
filters allow (the user's, through the scope index of
:func:`~agentscope_mem0.prepare_pgvector`).

A keyword hit has no cosine similarity, so the store applies the search's
cosine floor (:func:`~agentscope_mem0._vectors.search_terms.cosine_floor`)
to the hits of a vector search itself, and mem0's own gate is opened, as on
the embedded store. A keyword hit's score is its rank normalised to 0..1
(``ts_rank_cd`` with normalisation 32: ``rank / (rank + 1)``).

:func:`use_pgvector_store` makes mem0's factory build this class for the
``pgvector`` provider; everything else is mem0's own.
"""

from __future__ import annotations

from typing import Any

from mem0.vector_stores.pgvector import OutputData, PGVector, _build_filter_conditions
from psycopg import sql

from .._vectors.keywords_only import is_keywords_only
from .._vectors.search_terms import cosine_floor

__all__ = ["PgvectorStore", "use_pgvector_store"]

# PostgreSQL's English configuration: stems ("lives" and "live" meet) and drops
# stop words ("where", "do", "I"). A word it does not know is kept as it is.
_CONFIG = "english"


class PgvectorStore(PGVector):
    """mem0's ``PGVector`` plus a search by keywords alone (see the module)."""

    searches_keywords_alone = True
    """Tells the package that a reply's query may be refused by the embedder."""

    applies_cosine_floor = True
    """The store drops hits below the search's cosine floor itself."""

    def search(
        self,
        query: str,
        vectors: list[float],
        top_k: int | None = 5,
        filters: dict[str, Any] | None = None,
    ) -> list[OutputData]:
        """mem0's search by meaning; by any of the query's words when ``vectors``
        is ``KEYWORDS_ONLY``."""
        if is_keywords_only(vectors):
            return self.search_keywords(query, top_k or 5, filters)
        hits = super().search(query, vectors, top_k, filters)
        floor = cosine_floor()
        if floor is None:
            return hits
        return [hit for hit in hits if (hit.score or 0.0) >= floor]

    def search_keywords(
        self, query: str, top_k: int, filters: dict[str, Any] | None = None
    ) -> list[OutputData]:
        """The ``top_k`` rows of ``filters`` that share the most words with ``query``."""
        self._ensure_collection()
        conditions, params = _build_filter_conditions(filters)
        where = sql.SQL("".join(f" AND {condition}" for condition in conditions))
        text = sql.SQL("to_tsvector({}, payload->>'data')").format(sql.Literal(_CONFIG))
        # The query's words, stemmed and without stop words, joined by OR.
        words = sql.SQL(
            "(SELECT CASE WHEN q::text = '' THEN q "
            "ELSE replace(q::text, ' & ', ' | ')::tsquery END "
            "FROM plainto_tsquery({}, %s) AS q)"
        ).format(sql.Literal(_CONFIG))
        statement = sql.SQL(
            "SELECT id, ts_rank_cd({text}, {words}, 32) AS score, payload FROM {table} "
            "WHERE {text} @@ {words}{where} ORDER BY score DESC, id LIMIT %s"
        ).format(text=text, words=words, table=self._col(), where=where)
        with self._get_cursor() as cur:
            cur.execute(statement, (query, query, *params, top_k))
            rows = cur.fetchall()
        return [OutputData(id=str(row[0]), score=float(row[1]), payload=row[2]) for row in rows]


def use_pgvector_store() -> None:
    """Have mem0's factory build :class:`PgvectorStore` for the ``pgvector`` provider.

    Idempotent. The class is mem0's own but for a query with no vector, which
    only this package hands it, so clients built elsewhere in the process
    behave as before.
    """
    from mem0.utils.factory import VectorStoreFactory

    VectorStoreFactory.provider_to_class["pgvector"] = f"{__name__}.PgvectorStore"
