"""mem0's pgvector store, searching by meaning and by words, as the embedded store does.

mem0's pgvector store ranks by meaning alone, and its keyword search asks for
*every* word of the query (``plainto_tsquery``), so "Where do I live?" finds
nothing in "User lives in Hangzhou". :class:`PgvectorStore` is mem0's store
with two searches of its own, both PostgreSQL's English full-text search
(stems, stop words) on *any* word of the query, among the rows the filters
allow:

* **fused** (every search with a vector): the best rows by meaning and the
  best by words, fused by weighted reciprocal rank with the embedded store's
  settings (:mod:`agentscope_mem0._vectors.fusion`), in one statement. On the
  LoCoMo dev half recall@10 rises from 0.54 (meaning alone) to 0.64
  (``docs/benchmarks/pgvector-search.md``). The score mem0 sees is the fused
  one over the best possible, in (0, 1]; the store drops a hit whose cosine
  similarity is below the search's floor
  (:func:`~agentscope_mem0._vectors.search_terms.cosine_floor`) itself, and
  mem0's own gate is opened, as on the embedded store.
* **by words alone** (:data:`~agentscope_mem0._vectors.keywords_only.KEYWORDS_ONLY`
  instead of a vector): a reply's query the busy embedder refused
  (:mod:`agentscope_mem0._vectors.keywords_only`), ranked by ``ts_rank_cd``
  (normalised to 0..1).

The words of mem0's ``add`` lookup (a whole exchange) are the user's lines
(:func:`~agentscope_mem0._text.exchange.users_words`). Text the English
configuration does not split into words (Chinese: a run of characters is
one word) is matched by words only where the query repeats that run.
:func:`~agentscope_mem0.prepare_pgvector` indexes the words
(``<table>_words_idx``). :func:`use_pgvector_store` makes mem0's factory
build this class for the ``pgvector`` provider; everything else is mem0's.
"""

from __future__ import annotations

from typing import Any

from mem0.vector_stores.pgvector import OutputData, PGVector, _build_filter_conditions
from psycopg import sql

from .._text.exchange import users_words
from .._vectors.fusion import DEFAULT_DENSE_WEIGHT, DEFAULT_RRF_K, fused_top_score
from .._vectors.keywords_only import is_keywords_only
from .._vectors.search_terms import cosine_floor

__all__ = ["WORDS_OF_ROW", "PgvectorStore", "use_pgvector_store"]


class PgvectorStore(PGVector):
    """mem0's ``PGVector`` searching by meaning and words fused (see the module)."""

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
        """The ``top_k`` best rows by meaning and words fused; by words alone when
        ``vectors`` is ``KEYWORDS_ONLY``."""
        words = users_words(query) if isinstance(query, str) else ""
        if is_keywords_only(vectors):
            return self.search_keywords(words, top_k or 5, filters)
        hits = self.search_fused(
            words,
            vectors,
            top_k or 5,
            filters,
            rrf_k=DEFAULT_RRF_K,
            dense_weight=DEFAULT_DENSE_WEIGHT,
        )
        floor = cosine_floor()
        return [hit for hit, cosine in hits if floor is None or cosine >= floor]

    def search_keywords(
        self, query: str, top_k: int, filters: dict[str, Any] | None = None
    ) -> list[OutputData]:
        """The ``top_k`` rows of ``filters`` that share the most words with ``query``."""
        self._ensure_collection()
        conditions, params = _build_filter_conditions(filters)
        statement = sql.SQL(
            "WITH words AS ({words}) "
            "SELECT id, ts_rank_cd({text}, words.q, 32) AS score, payload FROM {table}, words "
            "WHERE {text} @@ words.q AND {where} ORDER BY score DESC, id LIMIT %s"
        ).format(words=_ANY_WORD, text=_TEXT, table=self._col(), where=_where(conditions))
        with self._get_cursor() as cur:
            cur.execute(statement, (query, *params, top_k))
            rows = cur.fetchall()
        return [OutputData(id=str(row[0]), score=float(row[1]), payload=row[2]) for row in rows]

    def search_fused(
        self,
        query: str,
        vector: list[float],
        top_k: int,
        filters: dict[str, Any] | None = None,
        *,
        rrf_k: int,
        dense_weight: float,
    ) -> list[tuple[OutputData, float]]:
        """The ``top_k`` best rows by meaning and by any word, fused by weighted
        reciprocal rank (:mod:`agentscope_mem0._vectors.fusion`), each with its
        cosine similarity; the score is the fused one over the best possible."""
        self._ensure_collection()
        conditions, params = _build_filter_conditions(filters)
        where = _where(conditions)
        statement = sql.SQL(
            "WITH words AS ({words}), "
            "dense AS (SELECT id, row_number() OVER (ORDER BY distance) AS r FROM ("
            "  SELECT id, vector <=> %s::vector AS distance FROM {table} WHERE {where}"
            "  ORDER BY distance LIMIT %s) AS d), "
            "keyword AS (SELECT id, row_number() OVER (ORDER BY score DESC, id) AS r FROM ("
            "  SELECT id, ts_rank_cd({text}, words.q, 32) AS score FROM {table}, words"
            "  WHERE {text} @@ words.q AND {where} ORDER BY score DESC, id LIMIT %s) AS k), "
            "fused AS (SELECT id, sum(s) AS s FROM ("
            "  SELECT id, 1.0 / (r / %s + %s - 1) AS s FROM dense"
            "  UNION ALL SELECT id, 1.0 / (r + %s - 1) AS s FROM keyword) AS parts GROUP BY id) "
            "SELECT t.id, fused.s, 1 - (t.vector <=> %s::vector), t.payload "
            "FROM fused JOIN {table} AS t ON t.id = fused.id ORDER BY fused.s DESC, t.id LIMIT %s"
        ).format(words=_ANY_WORD, text=_TEXT, table=self._col(), where=where)
        weight, k = float(dense_weight), float(rrf_k)
        args = (query, vector, *params, top_k, *params, top_k, weight, k, k, vector, top_k)
        with self._get_cursor() as cur:
            cur.execute(statement, args)
            rows = cur.fetchall()
        top = fused_top_score("rrf", rrf_k, dense_weight)
        return [
            (
                OutputData(id=str(row[0]), score=min(float(row[1]) / top, 1.0), payload=row[3]),
                float(row[2]),
            )
            for row in rows
        ]


# PostgreSQL's English configuration: stems ("lives" and "live" meet) and drops
# stop words ("where", "do", "I"). A word it does not know is kept as it is.
WORDS_OF_ROW = "to_tsvector('english', payload->>'data')"
"""The words of a memory row, as the searches read them and the index holds them."""
_TEXT = sql.SQL(WORDS_OF_ROW)

# The query's words, stemmed and without stop words, joined by OR (one row, ``q``).
_ANY_WORD = sql.SQL(
    "SELECT CASE WHEN q::text = '' THEN q ELSE replace(q::text, ' & ', ' | ')::tsquery END AS q "
    "FROM plainto_tsquery('english', %s) AS q"
)


def _where(conditions: list[str]) -> sql.Composable:
    """mem0's filter conditions as one SQL condition."""
    return sql.SQL(" AND ".join(conditions) if conditions else "TRUE")


def use_pgvector_store() -> None:
    """Have mem0's factory build :class:`PgvectorStore` for the ``pgvector`` provider.

    Idempotent; a client built after it, in this process, searches as the
    module says (the package builds every pgvector client through it).
    """
    from mem0.utils.factory import VectorStoreFactory

    VectorStoreFactory.provider_to_class["pgvector"] = f"{__name__}.PgvectorStore"
