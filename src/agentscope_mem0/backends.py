"""Config helpers for shared vector stores: PostgreSQL/pgvector and a Qdrant server.

The embedded default (Qdrant Edge in a folder on disk) serves one process. When
several processes or machines share memories, point mem0 at a server instead::

    from agentscope_mem0 import Mem0Middleware
    from agentscope_mem0.backends import pgvector_config

    middleware = Mem0Middleware(
        user_id="alice",
        chat_model=chat_model,
        embedding_model=embedding_model,
        mem0_config=pgvector_config(
            "postgresql://mem0:secret@db:5432/mem0", dims=embedding_model.dimensions
        ),
    )

Each helper returns the ``MemoryConfig`` fields (a dict) to pass as
``mem0_config=``; ``llm`` and ``embedder`` are filled in from the AgentScope
models. Nothing here connects to a server. ``docs/backends.md`` has the
matching ``docker/`` compose files.
"""

from __future__ import annotations

import logging
import re
from typing import Any
from urllib.parse import urlsplit

from ._exceptions import ConfigurationError

__all__ = [
    "DEFAULT_COLLECTION",
    "pgvector_config",
    "prepare_pgvector",
    "qdrant_server_config",
]

logger = logging.getLogger(__name__)

DEFAULT_COLLECTION = "agentscope_mem0"
"""Table (pgvector) or collection (Qdrant) name used unless told otherwise."""

# mem0 2.2 names pgvector indexes "<collection>_entities_text_lemmatized_idx" at
# worst; PostgreSQL silently truncates identifiers to 63 bytes, which could make
# two index names collide, so the collection name must leave room for the suffix.
_PG_MAX_COLLECTION = 63 - len("_entities_text_lemmatized_idx")
_PG_COLLECTION = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def pgvector_config(
    dsn: str,
    *,
    dims: int,
    collection: str = DEFAULT_COLLECTION,
    hnsw: bool = True,
    ef_search: int | None = None,
    min_connections: int = 1,
    max_connections: int = 5,
    history_db_path: str | None = None,
) -> dict[str, Any]:
    """mem0 ``MemoryConfig`` fields for PostgreSQL with the pgvector extension.

    mem0 creates the extension, the table and its indexes on first use (see
    :func:`prepare_pgvector` to do it once, up front, when several processes
    start together).

    Args:
        dsn: A libpq connection string, as a URI
            (``postgresql://user:password@host:5432/db``) or as ``key=value``
            pairs; a Unix socket works as ``postgresql://user@/db?host=/run/pg``.
        dims: The embedding model's vector size; the table's ``vector(dims)``
            column is created with it and the middleware checks it against the
            embedding model at start.
        collection: The table name; a plain SQL identifier of at most 34
            characters. mem0 adds a ``<collection>_entities`` table next to it.
        hnsw: Create an HNSW index (cosine) so search cost grows slowly with
            the store; ``False`` scans the user's rows exactly.
        ef_search: HNSW candidate list size per search (pgvector's default is
            40). pgvector before 0.8 filters by user *after* the index scan, so
            when one user owns a small share of a large table a search may
            return fewer than ``top_k`` memories; raising this helps. Set
            through the connection's ``options``; needs ``psycopg``.
        min_connections: Connections each mem0 client keeps open.
        max_connections: Connections each mem0 client may open; size
            PostgreSQL's ``max_connections`` for all processes together.
        history_db_path: A SQLite file for mem0's history (one per machine).
            ``None`` leaves it out of the fields: the clients the middleware,
            the factory and the command line build then keep the history,
            and the token totals, in this database (tables
            ``agentscope_mem0_*``), one for every replica; a
            ``MemoryConfig`` you hand to ``mem0.AsyncMemory`` yourself
            falls back to mem0's ``~/.mem0/history.db``.

    Returns:
        ``vector_store`` (and ``history_db_path`` when given) for ``mem0_config=``.

    Raises:
        ConfigurationError: An empty DSN, a bad size or collection name.
    """
    if not isinstance(dsn, str) or not dsn.strip():
        raise ConfigurationError(
            "pgvector_config needs a PostgreSQL connection string, e.g. "
            "'postgresql://user:password@localhost:5432/dbname'"
        )
    _check_dims(dims)
    if not _PG_COLLECTION.fullmatch(collection) or len(collection) > _PG_MAX_COLLECTION:
        raise ConfigurationError(
            f"collection {collection!r} must be a plain SQL identifier (letters, digits, "
            f"underscores) of at most {_PG_MAX_COLLECTION} characters"
        )
    if not 1 <= min_connections <= max_connections:
        raise ConfigurationError(
            "need 1 <= min_connections <= max_connections, got "
            f"{min_connections} and {max_connections}"
        )
    if ef_search is not None:
        if not isinstance(ef_search, int) or not 1 <= ef_search <= 1000:
            raise ConfigurationError(f"ef_search must be an integer in 1..1000, got {ef_search!r}")
        dsn = _with_option(dsn, f"-c hnsw.ef_search={ef_search}")
    store = {
        "connection_string": dsn,
        "collection_name": collection,
        "embedding_model_dims": dims,
        "hnsw": hnsw,
        "diskann": False,
        "minconn": min_connections,
        "maxconn": max_connections,
    }
    return _fields("pgvector", store, history_db_path)


def qdrant_server_config(
    url: str,
    *,
    dims: int,
    api_key: str | None = None,
    collection: str = DEFAULT_COLLECTION,
    on_disk: bool = True,
    history_db_path: str | None = None,
    hybrid: bool = True,
) -> dict[str, Any]:
    """mem0 ``MemoryConfig`` fields for a Qdrant server or cluster.

    mem0 talks to Qdrant over REST (port 6333 by default). By default the
    store is this package's provider (``agentscope_qdrant``, see
    :mod:`agentscope_mem0._server.qdrant_store`): the same keyword vectors and
    the same fused dense + keyword query as the embedded store, in one Query
    API call, with ``user_id`` indexed as the tenant key. It needs Qdrant 1.17
    or later (weighted RRF, collection metadata). A collection written before
    by mem0's own provider gets its keyword vectors rewritten on first open.

    Args:
        url: The server's URL, e.g. ``http://localhost:6333`` or
            ``https://xyz.cloud.qdrant.io:6333``.
        dims: The embedding model's vector size; the collection is created
            with it.
        api_key: Qdrant's API key, if the server requires one.
        collection: The collection name.
        on_disk: Keep the vectors on the server's disk rather than in its RAM.
        history_db_path: mem0's history database (SQLite in mem0 2.2);
            ``None``: in the data folder, as for :func:`pgvector_config`.
        hybrid: ``False`` selects mem0's own Qdrant provider instead (dense
            search, plus mem0's keyword rescoring when fastembed is installed).

    Returns:
        ``vector_store`` (and ``history_db_path`` when given) for ``mem0_config=``.

    Raises:
        ConfigurationError: A URL without a host, or a bad size.
    """
    _check_dims(dims)
    parts = urlsplit(url if isinstance(url, str) else "")
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ConfigurationError(
            f"url must be an http(s) URL of the Qdrant server, e.g. 'http://localhost:6333'; "
            f"got {url!r}"
        )
    if not collection or not isinstance(collection, str):
        raise ConfigurationError("collection must be a non-empty string")
    store: dict[str, Any] = {
        "collection_name": collection,
        "embedding_model_dims": dims,
        "on_disk": on_disk,
    }
    if api_key:
        store.update(url=url, api_key=api_key)
    else:
        # mem0 2.2's QdrantConfig accepts `url` only together with `api_key`;
        # without a key the server is addressed by host and port.
        port = parts.port or (443 if parts.scheme == "https" else 6333)
        store.update(host=parts.hostname, port=port, https=parts.scheme == "https")
    if not hybrid:
        return _fields("qdrant", store, history_db_path)
    from ._server.qdrant_config import PROVIDER

    return _fields(PROVIDER, store, history_db_path)


def prepare_pgvector(
    config: dict[str, Any], *, scope_index: bool = True, timeout: float = 30.0
) -> None:
    """Create the pgvector extension, tables and indexes once, race-free.

    mem0 creates them lazily on first use; processes starting at the same time
    on a fresh database may race on ``CREATE ... IF NOT EXISTS`` (PostgreSQL
    does not serialise those). This runs mem0's own schema creation for the
    memory table and its ``_entities`` table under a PostgreSQL advisory lock,
    so any number of processes may call it at start-up. It also indexes the
    memories' words for the package's searches by meaning and words
    (``<collection>_words_idx``; building it on a large existing table blocks
    writes while it runs). Idempotent.

    Args:
        config: What :func:`pgvector_config` returned.
        scope_index: Also index ``payload->>'user_id'`` and ``payload->>'agent_id'``
            (mem0 2.2 creates no index for them). Every search, ``get_all`` and
            ``delete_all`` filters on them; with the index a user's rows are
            found without scanning the table, and a search over a user's own
            rows is exact. Building it on a large existing table blocks writes
            while it runs.
        timeout: Seconds to wait for the database and the lock.

    Raises:
        ConfigurationError: ``config`` is not a pgvector config, or ``psycopg``
            is missing.
    """
    store = (config.get("vector_store") or {}) if isinstance(config, dict) else {}
    settings = store.get("config") or {}
    if store.get("provider") != "pgvector" or not settings.get("connection_string"):
        raise ConfigurationError("prepare_pgvector needs the dict pgvector_config() returned")
    try:
        import psycopg
        from mem0.vector_stores.pgvector import PGVector
        from psycopg import sql

        from ._postgres.vector_store import WORDS_OF_ROW
    except ImportError as exc:
        raise ConfigurationError(
            "pgvector needs psycopg 3: pip install 'psycopg[binary]' psycopg-pool "
            "(the [pgvector] extra)"
        ) from exc

    dsn = settings["connection_string"]
    base = settings["collection_name"]
    with psycopg.connect(dsn, connect_timeout=max(1, int(timeout)), autocommit=True) as conn:
        conn.execute("SELECT set_config('lock_timeout', %s, false)", (f"{int(timeout * 1000)}ms",))
        # One lock per collection: other collections in the database proceed.
        conn.execute("SELECT pg_advisory_lock(hashtext(%s))", (f"agentscope_mem0:{base}",))
        try:
            for name in (base, f"{base}_entities"):
                table = PGVector(
                    dbname=None,
                    collection_name=name,
                    embedding_model_dims=settings["embedding_model_dims"],
                    user=None,
                    password=None,
                    host=None,
                    port=None,
                    diskann=False,
                    hnsw=settings.get("hnsw", True),
                    minconn=1,
                    maxconn=1,
                    connection_string=dsn,
                )
                try:
                    table.create_col()
                finally:
                    table.connection_pool.close()
                if scope_index:
                    conn.execute(
                        sql.SQL(
                            "CREATE INDEX IF NOT EXISTS {} ON {} "
                            "((payload->>'user_id'), (payload->>'agent_id'))"
                        ).format(sql.Identifier(f"{name}_scope_idx"), sql.Identifier(name))
                    )
            # The memories' words, as the package's searches read them.
            conn.execute(
                sql.SQL("CREATE INDEX IF NOT EXISTS {} ON {} USING gin ({})").format(
                    sql.Identifier(f"{base}_words_idx"), sql.Identifier(base), sql.SQL(WORDS_OF_ROW)
                )
            )
        finally:
            conn.execute("SELECT pg_advisory_unlock(hashtext(%s))", (f"agentscope_mem0:{base}",))
    logger.info("pgvector schema for %r is ready", base)


def _fields(provider: str, store: dict[str, Any], history_db_path: str | None) -> dict[str, Any]:
    """The ``MemoryConfig`` fields naming ``provider`` with ``store``'s settings."""
    fields: dict[str, Any] = {"vector_store": {"provider": provider, "config": store}}
    if history_db_path is not None:
        fields["history_db_path"] = history_db_path
    return fields


def _check_dims(dims: int) -> None:
    if isinstance(dims, bool) or not isinstance(dims, int) or dims < 1:
        raise ConfigurationError(
            f"dims must be the embedding model's vector size (a positive integer), got {dims!r}"
        )


def _with_option(dsn: str, option: str) -> str:
    """Add a server option (``-c name=value``) to a libpq connection string."""
    try:
        from psycopg.conninfo import conninfo_to_dict, make_conninfo
    except ImportError as exc:
        raise ConfigurationError(
            "ef_search needs psycopg 3: pip install 'psycopg[binary]' psycopg-pool "
            "(the [pgvector] extra)"
        ) from exc
    existing = str(conninfo_to_dict(dsn).get("options") or "").strip()
    return make_conninfo(dsn, options=f"{existing} {option}".strip())
