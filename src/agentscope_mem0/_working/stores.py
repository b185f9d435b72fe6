"""Where working memory is kept: one record per user (and per conversation).

A record is keyed by ``(user_id, conversation)``; the user-scoped memory has
the empty conversation ``""``. Every store changes a record by a
read-merge-write under the store's own concurrency control (a SQLite write
transaction, a PostgreSQL row lock, a Qdrant compare-and-set), so two agents
updating the same record at once both land. Clearing keeps the record with
empty content and a new version, so copies elsewhere (an agent's state) learn
of it.

Which store goes with a mem0 client (:func:`store_for_client`):

- the embedded default and other local setups: ``working_memory.sqlite3``
  beside mem0's history database (the data folder for the embedded default);
- pgvector: the table ``<collection>_working`` in mem0's database;
- a Qdrant server: the collection ``<collection>_working`` on mem0's server;
- hosted mem0: the SQLite file in the local data folder (this machine only).

The user's profile (see :mod:`agentscope_mem0._profile.record`) is one more
record per user, of kind ``"profile"``.

The server stores keep their records apart from mem0's own data (a table or
a collection of their own), so mem0 never sees them and they never show up
in a search.
"""

from __future__ import annotations

import asyncio
import logging
import os
import random
import sqlite3
import threading
import time
import uuid
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol, TypeVar, runtime_checkable

from .._exceptions import BackendError, ConfigurationError, InvalidStateError
from .._postgres.connection import PostgresTables, pgvector_dsn, psycopg_for
from .._sqlite.thread import ConnectionThread
from .._sqlite.wal import enable_wal

__all__ = [
    "WORKING_DB_NAME",
    "WORKING_THREAD",
    "Change",
    "PostgresWorkingStore",
    "QdrantWorkingStore",
    "SqliteWorkingStore",
    "WorkingRecord",
    "WorkingStore",
    "off_loop",
    "shared_store_for_client",
    "store_for_client",
    "working_table_name",
]

logger = logging.getLogger(__name__)

WORKING_DB_NAME = "working_memory.sqlite3"
WORKING_THREAD = "agentscope-mem0-working"
"""The name of the thread that owns a SQLite working store's connection."""
_BUSY_TIMEOUT = 30.0

T = TypeVar("T")


def working_table_name(collection: str) -> str:
    """The pgvector table or Qdrant collection holding working memory."""
    return f"{collection}_working"


@dataclass(frozen=True)
class WorkingRecord:
    """One stored working memory."""

    user_id: str
    conversation: str
    """The conversation id, ``""`` for the user-scoped memory."""
    content: str
    kind: str
    """``"text"``, ``"markdown"`` or ``"json"``."""
    version: int
    """Raised by one on every change (clearing included)."""
    updated_at: str


Change = Callable[[WorkingRecord | None], str]
"""Given the stored record (``None`` when there is none), the new content."""

_Write = Callable[[WorkingRecord | None], tuple[str, str] | None]
"""What a store's ``_write`` applies: the old record to the new ``(content,
kind)``, or ``None`` to write nothing."""


@runtime_checkable
class WorkingStore(Protocol):
    """Synchronous storage of working-memory records (called from threads)."""

    location: str
    """Where the records are, in words."""

    def load(self, user_id: str, conversation: str = "") -> WorkingRecord | None:
        """The record, or ``None`` when there is none."""
        ...

    def update(
        self, user_id: str, conversation: str, change: Change, *, kind: str
    ) -> WorkingRecord:
        """Apply ``change`` atomically and return the stored result.

        ``change`` may be called more than once (on a conflict) and may raise
        to abort without changing anything.
        """
        ...

    def clear(self, user_id: str, conversation: str = "") -> WorkingRecord | None:
        """Empty the record (keeping it, with a new version); ``None`` if absent."""
        ...

    def conversations(self, user_id: str) -> list[str]:
        """The user's conversations with a non-empty record, newest first (the
        user's profile, a record of kind ``"profile"``, is none of them)."""
        ...

    def close(self) -> None:
        """Release connections; idempotent."""
        ...


def _next_record(
    old: WorkingRecord | None, user_id: str, conversation: str, write: _Write
) -> WorkingRecord | None:
    """The record ``write`` makes of ``old``: one version up, stamped now."""
    new = write(old)
    if new is None:
        return None
    version = (old.version if old else 0) + 1
    return WorkingRecord(user_id, conversation, new[0], new[1], version, _now())


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def _row_record(row: Any) -> WorkingRecord:
    return WorkingRecord(row[0], row[1], row[2], row[3], int(row[4]), row[5])


class _ReadChangeWrite:
    """``update`` and ``clear`` on top of one atomic read-change-write,
    ``_write(user_id, conversation, write)``, which each store implements
    with its own concurrency control."""

    def _write(self, user_id: str, conversation: str, write: _Write) -> WorkingRecord | None:
        raise NotImplementedError

    def update(
        self, user_id: str, conversation: str, change: Change, *, kind: str
    ) -> WorkingRecord:
        """Apply ``change`` atomically and return the stored result."""
        record = self._write(user_id, conversation, lambda old: (change(old), kind))
        assert record is not None
        return record

    def clear(self, user_id: str, conversation: str = "") -> WorkingRecord | None:
        """Empty the record, keeping it with a new version; ``None`` if absent."""
        return self._write(
            user_id, conversation, lambda old: None if old is None else ("", old.kind)
        )


# -- SQL: SQLite and PostgreSQL ----------------------------------------------------


class _SqlStore(_ReadChangeWrite):
    """The SQL the SQLite and PostgreSQL stores share (``?`` placeholders, the
    table as ``{table}``); each brings its connection and runs the work in a
    transaction (:meth:`_run`)."""

    location: str
    _table = "working_memory"
    _updated_at = "updated_at"
    """The ``updated_at`` column read as ISO 8601 text."""
    _for_update = ""
    """What makes a read lock the row it reads (nothing where the transaction
    already holds the lock)."""

    def load(self, user_id: str, conversation: str = "") -> WorkingRecord | None:
        """The record, or ``None`` when there is none."""
        result: WorkingRecord | None = self._run(
            lambda conn: self._select(conn, user_id, conversation), write=False
        )
        return result

    def conversations(self, user_id: str) -> list[str]:
        """The user's conversations with a non-empty record, newest first."""
        query = (
            "SELECT conversation FROM {table} WHERE user_id = ? AND conversation <> ''"
            " AND content <> '' AND version > 0 AND kind <> 'profile' ORDER BY updated_at DESC"
        )
        rows = self._run(lambda conn: self._execute(conn, query, (user_id,)).fetchall())
        return [r[0] for r in rows]

    def _run(self, work: Callable[[Any], T], *, write: bool = False) -> T:
        """``work(connection)`` in one transaction; a write whose work returns
        ``None`` changes nothing."""
        raise NotImplementedError

    def _sql(self, query: str) -> str:
        return query.replace("{table}", self._table)

    def _execute(self, conn: Any, query: str, params: tuple[Any, ...]) -> Any:
        return conn.execute(self._sql(query), params)

    def _select(
        self, conn: Any, user_id: str, conversation: str, *, lock: bool = False
    ) -> WorkingRecord | None:
        query = (
            f"SELECT user_id, conversation, content, kind, version, {self._updated_at}"
            " FROM {table} WHERE user_id = ? AND conversation = ?"
        )
        row = self._execute(
            conn, query + (self._for_update if lock else ""), (user_id, conversation)
        ).fetchone()
        # Version 0 is the placeholder row a first writer locks (see _write).
        return None if row is None or int(row[4]) == 0 else _row_record(row)

    def _write(self, user_id: str, conversation: str, write: _Write) -> WorkingRecord | None:
        def work(conn: Any) -> WorkingRecord | None:
            # A placeholder row (version 0) gives the first writers a row to lock.
            self._execute(
                conn,
                "INSERT INTO {table} (user_id, conversation, content, kind, version, updated_at)"
                " VALUES (?, ?, '', 'text', 0, ?) ON CONFLICT DO NOTHING",
                (user_id, conversation, _now()),
            )
            old = self._select(conn, user_id, conversation, lock=True)
            record = _next_record(old, user_id, conversation, write)
            if record is not None:
                values = (record.content, record.kind, record.version, record.updated_at)
                self._execute(
                    conn,
                    "UPDATE {table} SET content = ?, kind = ?, version = ?, updated_at = ?"
                    " WHERE user_id = ? AND conversation = ?",
                    (*values, user_id, conversation),
                )
            return record

        return self._run(work, write=True)


class SqliteWorkingStore(_SqlStore):
    """Working memory in one SQLite file (WAL), safe across threads and processes.

    Its connection lives on a thread of its own (see
    :class:`~.._sqlite.thread.ConnectionThread`), opened by the first call;
    the methods can be called from any thread, and :meth:`run` awaits them
    from an event loop. Close it when done: a store dropped unclosed warns
    with ``ResourceWarning``.

    Args:
        path: The database file, or a folder to hold ``working_memory.sqlite3``.
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        target = Path(path)
        if target.is_dir() or not target.suffix:
            target = target / WORKING_DB_NAME
        self.path = target
        self.location = f"SQLite file {target}"
        self._conn: sqlite3.Connection | None = None
        self._thread: ConnectionThread | None = None
        self._starting = threading.Lock()
        self._closed = False

    async def run(self, method: Callable[..., T], /, *args: Any) -> T:
        """``method(*args)`` (one of this store's) on its connection's thread, awaited."""
        return await self._owner().run(method, *args)

    def close(self) -> None:
        """Close the connection and end its thread. Idempotent."""
        with self._starting:
            self._closed = True
            thread = self._thread
        if thread is not None:
            thread.close(self._close_connection)

    def _run(self, work: Callable[[Any], T], *, write: bool = False) -> T:
        return self._owner().call(self._run_here, work, write)

    # -- on the connection's thread -------------------------------------------

    def _owner(self) -> ConnectionThread:
        with self._starting:
            if self._thread is None:
                if self._closed:
                    raise InvalidStateError(f"{self.location} is closed")
                self._thread = ConnectionThread(WORKING_THREAD, what=self.location)
            return self._thread

    def _connection(self) -> sqlite3.Connection:
        if self._conn is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            conn = sqlite3.connect(self.path, timeout=_BUSY_TIMEOUT, isolation_level=None)
            try:
                enable_wal(conn, _BUSY_TIMEOUT)
                conn.execute(
                    "CREATE TABLE IF NOT EXISTS working_memory ("
                    " user_id TEXT NOT NULL, conversation TEXT NOT NULL,"
                    " content TEXT NOT NULL, kind TEXT NOT NULL,"
                    " version INTEGER NOT NULL, updated_at TEXT NOT NULL,"
                    " PRIMARY KEY (user_id, conversation))"
                )
            except BaseException:
                conn.close()
                raise
            self._conn = conn
        return self._conn

    def _close_connection(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def _run_here(self, work: Callable[[Any], T], write: bool) -> T:
        conn = self._connection()
        if not write:
            return work(conn)
        # IMMEDIATE takes the write lock before reading: no lost update.
        conn.execute("BEGIN IMMEDIATE")
        try:
            result = work(conn)
            conn.execute("COMMIT" if result is not None else "ROLLBACK")
            return result
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise


class PostgresWorkingStore(_SqlStore):
    """Working memory in one PostgreSQL table; a row lock serialises updates.

    Args:
        dsn: A libpq connection string.
        table: The table (created on first use).
        timeout: Seconds to wait for a connection and for a row lock.
    """

    _updated_at = "to_char(updated_at AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS\"+00:00\"')"
    _for_update = " FOR UPDATE"

    def __init__(self, dsn: str, *, table: str = "agentscope_mem0_working", timeout: float = 10.0):
        if not table.replace("_", "a").isalnum() or table[0].isdigit():
            raise ConfigurationError(f"table {table!r} must be a plain SQL identifier")
        self.dsn = dsn
        self.table = table
        # A plain identifier (checked above), quoted: safe to put in the SQL.
        self._table = f'"{table}"'
        self.timeout = timeout
        self.location = f"PostgreSQL table {table!r}"
        schema = self._sql(
            "CREATE TABLE IF NOT EXISTS {table} (user_id text NOT NULL,"
            " conversation text NOT NULL, content text NOT NULL, kind text NOT NULL,"
            " version bigint NOT NULL, updated_at timestamptz NOT NULL DEFAULT now(),"
            " PRIMARY KEY (user_id, conversation))"
        )
        self._tables = PostgresTables(dsn, [schema], timeout=timeout)

    def close(self) -> None:
        """Close the connection; idempotent."""
        self._tables.close()

    def _sql(self, query: str) -> str:
        return super()._sql(query).replace("?", "%s")

    def _run(self, work: Callable[[Any], T], *, write: bool = False) -> T:
        psycopg = psycopg_for("working memory in PostgreSQL")
        try:
            # A write that changes nothing keeps its placeholder row: it is never read.
            return self._tables.run(work)
        except psycopg.OperationalError as exc:
            raise BackendError(f"working memory in {self.location}: {exc}") from exc


# -- Qdrant ---------------------------------------------------------------------

_NAMESPACE = uuid.UUID("5b0f8f3e-8c61-4f7e-9a51-3d9a3f0c2e17")
_RECENT_WRITERS = 64
_MAX_ATTEMPTS = 64


class QdrantWorkingStore(_ReadChangeWrite):
    """Working memory as points of a Qdrant collection of its own.

    Qdrant has no transactions, so an update is a compare-and-set: read the
    point, merge, then write it only if its version is still the one read
    (``update_filter``); the point keeps the ids of its last 64 writers, which
    tell a writer whether its own write landed. A lost race is retried.

    Args:
        client: A ``qdrant_client.QdrantClient`` (mem0's, for a server).
        collection: The collection (created on first use, one-dimensional
            placeholder vectors).
    """

    def __init__(self, client: Any, *, collection: str = "agentscope_mem0_working") -> None:
        self.client = client
        self.collection = collection
        self.location = f"Qdrant collection {collection!r}"
        self._ready = False

    def load(self, user_id: str, conversation: str = "") -> WorkingRecord | None:
        """The record, or ``None`` when there is none."""
        return self._record(self._get(user_id, conversation))

    def conversations(self, user_id: str) -> list[str]:
        """The user's conversations with a non-empty record, newest first."""
        from qdrant_client import models

        self._prepare()
        points, _ = self.client.scroll(
            self.collection,
            scroll_filter=models.Filter(must=[_match("user_id", user_id)]),
            limit=1000,
            with_payload=True,
        )
        rows = [
            p.payload
            for p in points
            if p.payload
            and p.payload.get("conversation")
            and p.payload.get("content")
            and p.payload.get("kind") != "profile"
        ]
        rows.sort(key=lambda p: str(p.get("updated_at")), reverse=True)
        return [str(p["conversation"]) for p in rows]

    def close(self) -> None:
        """The client belongs to whoever gave it."""

    def _prepare(self) -> None:
        if self._ready:
            return
        from qdrant_client import models

        if not self.client.collection_exists(self.collection):
            try:
                self.client.create_collection(
                    self.collection,
                    vectors_config=models.VectorParams(size=1, distance=models.Distance.DOT),
                )
            except Exception:
                # Another process created it first.
                if not self.client.collection_exists(self.collection):
                    raise
            try:
                self.client.create_payload_index(
                    self.collection, "user_id", models.PayloadSchemaType.KEYWORD
                )
            except Exception as exc:  # an index only speeds up listing
                logger.debug("no user_id index on %s: %s", self.collection, exc)
        self._ready = True

    @staticmethod
    def point_id(user_id: str, conversation: str) -> str:
        """The point holding one record."""
        return str(uuid.uuid5(_NAMESPACE, f"{user_id}\x1f{conversation}"))

    def _get(self, user_id: str, conversation: str) -> dict[str, Any] | None:
        self._prepare()
        points = self.client.retrieve(
            self.collection, [self.point_id(user_id, conversation)], with_payload=True
        )
        return dict(points[0].payload or {}) if points else None

    @staticmethod
    def _record(payload: dict[str, Any] | None) -> WorkingRecord | None:
        if not payload:
            return None
        names = ("user_id", "conversation", "content", "kind", "version", "updated_at")
        return _row_record([str(payload[name]) for name in names])

    def _write(self, user_id: str, conversation: str, write: _Write) -> WorkingRecord | None:
        from qdrant_client import models

        for attempt in range(_MAX_ATTEMPTS):
            payload = self._get(user_id, conversation)
            old = self._record(payload)
            record = _next_record(old, user_id, conversation, write)
            if record is None:
                return None
            token = uuid.uuid4().hex
            writers = [*(payload or {}).get("writers", [])][-(_RECENT_WRITERS - 1) :]
            point = models.PointStruct(
                id=self.point_id(user_id, conversation),
                vector=[1.0],
                payload={**record.__dict__, "writers": [*writers, token]},
            )
            if old is None:
                self.client.upsert(
                    self.collection, [point], update_mode=models.UpdateMode.INSERT_ONLY
                )
            else:
                self.client.upsert(
                    self.collection,
                    [point],
                    update_filter=models.Filter(must=[_match("version", old.version)]),
                    update_mode=models.UpdateMode.UPDATE_ONLY,
                )
            landed = self._get(user_id, conversation) or {}
            if token in landed.get("writers", []):
                return record
            # Another writer got there first: merge again on top of its result.
            time.sleep(random.uniform(0, 0.002 * (attempt + 1)))
        raise BackendError(
            f"working memory in {self.location}: {_MAX_ATTEMPTS} writers raced for "
            f"user {user_id!r}; try again"
        )


def _match(key: str, value: Any) -> Any:
    from qdrant_client import models

    return models.FieldCondition(key=key, match=models.MatchValue(value=value))


# -- which store goes with a client ---------------------------------------------------

# One store per mem0 client: service mode builds middlewares for every chat
# run, and each would otherwise open its own PostgreSQL connection.
_SHARED: weakref.WeakKeyDictionary[Any, WorkingStore] = weakref.WeakKeyDictionary()
_SHARED_LOCK = threading.Lock()


def store_for_client(client: Any, *, folder: str | os.PathLike[str] | None = None) -> WorkingStore:
    """The working-memory store that belongs with a mem0 client (see the module doc).

    Args:
        client: A mem0 ``AsyncMemory`` or ``AsyncMemoryClient``.
        folder: Where the SQLite file goes for local and hosted setups; default
            beside mem0's history database, else the data folder.
    """
    config = getattr(client, "config", None)
    vector = getattr(config, "vector_store", None)
    provider = getattr(vector, "provider", None)
    settings = getattr(vector, "config", None)
    collection = str(getattr(settings, "collection_name", None) or "mem0")
    if provider == "pgvector":
        dsn = pgvector_dsn(settings)
        if dsn is None:
            raise ConfigurationError(
                "working memory beside a pgvector store needs its connection string, and "
                "this config connects through a connection_pool: pass "
                "working_store=PostgresWorkingStore(<dsn>) to the middleware"
            )
        return PostgresWorkingStore(dsn, table=working_table_name(collection))
    if provider in ("qdrant", "agentscope_qdrant"):  # mem0's provider, or this package's
        qdrant = getattr(getattr(client, "vector_store", None), "client", None)
        # A server, not qdrant-client's local mode.
        if type(getattr(qdrant, "_client", None)).__name__ == "QdrantRemote":
            return QdrantWorkingStore(qdrant, collection=working_table_name(collection))
    if folder is None:
        history = getattr(config, "history_db_path", None)
        if history:
            folder = Path(history).expanduser().parent
        else:
            from ..local import data_dir

            folder = data_dir()
    return SqliteWorkingStore(folder)


async def off_loop(store: WorkingStore, func: Callable[..., T], /, *args: Any) -> T:
    """``func(*args)`` off the event loop: a SQLite store's calls on the thread
    that owns its connection, any other store's on a worker thread."""
    if isinstance(store, SqliteWorkingStore):
        return await store.run(func, *args)
    return await asyncio.to_thread(func, *args)


def shared_store_for_client(client: Any) -> WorkingStore:
    """:func:`store_for_client`, one per client for as long as the client lives."""
    try:
        weakref.ref(client)
    except TypeError:  # not weak-referenceable: not shared
        return store_for_client(client)
    with _SHARED_LOCK:
        store = _SHARED.get(client)
        if store is None:
            store = _SHARED[client] = store_for_client(client)
            # Closed with the client (or at exit): nothing else owns it.
            weakref.finalize(client, store.close)
        return store
