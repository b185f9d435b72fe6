"""Working-memory stores on the servers mem0 uses: PostgreSQL and Qdrant.

Both keep the records apart from mem0's own data (a table or a collection of
their own, named after mem0's), so mem0 never sees them and they never show
up in a search.
"""

from __future__ import annotations

import logging
import random
import threading
import time
import uuid
from typing import Any

from .._exceptions import BackendError, ConfigurationError
from .store import WorkingRecord, WriteBasedStore, now_iso

__all__ = ["PostgresWorkingStore", "QdrantWorkingStore", "pgvector_dsn"]

logger = logging.getLogger(__name__)


def pgvector_dsn(settings: Any) -> str:
    """The libpq connection string of mem0's pgvector config."""
    dsn = getattr(settings, "connection_string", None)
    if dsn:
        return str(dsn)
    from psycopg.conninfo import make_conninfo

    parts = {
        "dbname": getattr(settings, "dbname", None),
        "user": getattr(settings, "user", None),
        "password": getattr(settings, "password", None),
        "host": getattr(settings, "host", None),
        "port": getattr(settings, "port", None),
        "sslmode": getattr(settings, "sslmode", None),
    }
    return make_conninfo("", **{k: v for k, v in parts.items() if v is not None})


class PostgresWorkingStore(WriteBasedStore):
    """Working memory in one PostgreSQL table; a row lock serialises updates.

    Args:
        dsn: A libpq connection string.
        table: The table (created on first use).
        timeout: Seconds to wait for a connection and for a row lock.
    """

    def __init__(self, dsn: str, *, table: str = "agentscope_mem0_working", timeout: float = 10.0):
        if not table.replace("_", "a").isalnum() or table[0].isdigit():
            raise ConfigurationError(f"table {table!r} must be a plain SQL identifier")
        self.dsn = dsn
        self.table = table
        self.timeout = timeout
        self.location = f"PostgreSQL table {table!r}"
        self._conn: Any = None
        self._lock = threading.Lock()

    def _connection(self) -> Any:
        try:
            import psycopg
            from psycopg import sql
        except ImportError as exc:
            raise ConfigurationError(
                "pgvector needs psycopg 3: pip install 'psycopg[binary]' psycopg-pool "
                "(the [pgvector] extra)"
            ) from exc
        if self._conn is not None and not self._conn.closed:
            return self._conn
        conn = psycopg.connect(self.dsn, connect_timeout=max(1, int(self.timeout)))
        table = sql.Identifier(self.table)
        with conn.transaction():
            conn.execute(
                "SELECT set_config('lock_timeout', %s, false)", (f"{int(self.timeout * 1000)}ms",)
            )
            # CREATE ... IF NOT EXISTS races between processes; a lock orders them.
            conn.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", (f"asm0:{self.table}",))
            conn.execute(
                sql.SQL(
                    "CREATE TABLE IF NOT EXISTS {} (user_id text NOT NULL,"
                    " conversation text NOT NULL, content text NOT NULL, kind text NOT NULL,"
                    " version bigint NOT NULL, updated_at timestamptz NOT NULL DEFAULT now(),"
                    " PRIMARY KEY (user_id, conversation))"
                ).format(table)
            )
        self._conn = conn
        return conn

    def _run(self, work: Any) -> Any:
        import psycopg

        with self._lock:
            for attempt in (1, 2):
                conn = self._connection()
                try:
                    with conn.transaction():
                        return work(conn)
                except psycopg.OperationalError as exc:
                    # A dropped connection: reconnect once, then give up.
                    conn.close()
                    self._conn = None
                    if attempt == 2 or not conn.broken:
                        raise BackendError(f"working memory in {self.location}: {exc}") from exc
        raise AssertionError("unreachable")

    def _select(self, conn: Any, user_id: str, conversation: str, *, lock: bool) -> Any:
        from psycopg import sql

        query = sql.SQL(
            "SELECT user_id, conversation, content, kind, version,"
            " to_char(updated_at AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS\"+00:00\"')"
            " FROM {} WHERE user_id = %s AND conversation = %s" + (" FOR UPDATE" if lock else "")
        ).format(sql.Identifier(self.table))
        row = conn.execute(query, (user_id, conversation)).fetchone()
        if row is None or int(row[4]) == 0:
            return None
        return WorkingRecord(row[0], row[1], row[2], row[3], int(row[4]), row[5])

    def load(self, user_id: str, conversation: str = "") -> WorkingRecord | None:
        """The record, or ``None`` when there is none."""
        result: WorkingRecord | None = self._run(
            lambda conn: self._select(conn, user_id, conversation, lock=False)
        )
        return result

    def _write(self, user_id: str, conversation: str, change: Any) -> WorkingRecord | None:
        from psycopg import sql

        table = sql.Identifier(self.table)

        def work(conn: Any) -> WorkingRecord | None:
            # A placeholder row (version 0) gives the first writers a row to lock.
            conn.execute(
                sql.SQL(
                    "INSERT INTO {} (user_id, conversation, content, kind, version)"
                    " VALUES (%s, %s, '', 'text', 0) ON CONFLICT DO NOTHING"
                ).format(table),
                (user_id, conversation),
            )
            old = self._select(conn, user_id, conversation, lock=True)
            new = change(old)
            if new is None:
                return None
            content, kind = new
            version = (old.version if old else 0) + 1
            stamp = now_iso()
            conn.execute(
                sql.SQL(
                    "UPDATE {} SET content = %s, kind = %s, version = %s, updated_at = %s"
                    " WHERE user_id = %s AND conversation = %s"
                ).format(table),
                (content, kind, version, stamp, user_id, conversation),
            )
            return WorkingRecord(user_id, conversation, content, kind, version, stamp)

        result: WorkingRecord | None = self._run(work)
        return result

    def conversations(self, user_id: str) -> list[str]:
        """The user's conversations with a non-empty record, newest first."""
        from psycopg import sql

        rows = self._run(
            lambda conn: conn.execute(
                sql.SQL(
                    "SELECT conversation FROM {} WHERE user_id = %s AND conversation <> ''"
                    " AND content <> '' AND version > 0 ORDER BY updated_at DESC"
                ).format(sql.Identifier(self.table)),
                (user_id,),
            ).fetchall()
        )
        return [r[0] for r in rows]

    def close(self) -> None:
        """Close the connection; idempotent."""
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None


_NAMESPACE = uuid.UUID("5b0f8f3e-8c61-4f7e-9a51-3d9a3f0c2e17")
_RECENT_WRITERS = 64
_MAX_ATTEMPTS = 64


class QdrantWorkingStore(WriteBasedStore):
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
        return WorkingRecord(
            str(payload["user_id"]),
            str(payload["conversation"]),
            str(payload["content"]),
            str(payload["kind"]),
            int(payload["version"]),
            str(payload["updated_at"]),
        )

    def load(self, user_id: str, conversation: str = "") -> WorkingRecord | None:
        """The record, or ``None`` when there is none."""
        return self._record(self._get(user_id, conversation))

    def _write(self, user_id: str, conversation: str, change: Any) -> WorkingRecord | None:
        from qdrant_client import models

        for attempt in range(_MAX_ATTEMPTS):
            payload = self._get(user_id, conversation)
            old = self._record(payload)
            new = change(old)
            if new is None:
                return None
            token = uuid.uuid4().hex
            writers = [*(payload or {}).get("writers", [])][-(_RECENT_WRITERS - 1) :]
            record = WorkingRecord(
                user_id, conversation, new[0], new[1], (old.version if old else 0) + 1, now_iso()
            )
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
                    update_filter=models.Filter(
                        must=[
                            models.FieldCondition(
                                key="version", match=models.MatchValue(value=old.version)
                            )
                        ]
                    ),
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

    def conversations(self, user_id: str) -> list[str]:
        """The user's conversations with a non-empty record, newest first."""
        from qdrant_client import models

        self._prepare()
        points, _ = self.client.scroll(
            self.collection,
            scroll_filter=models.Filter(
                must=[models.FieldCondition(key="user_id", match=models.MatchValue(value=user_id))]
            ),
            limit=1000,
            with_payload=True,
        )
        rows = [
            p.payload
            for p in points
            if p.payload and p.payload.get("conversation") and p.payload.get("content")
        ]
        rows.sort(key=lambda p: str(p.get("updated_at")), reverse=True)
        return [str(p["conversation"]) for p in rows]

    def close(self) -> None:
        """The client belongs to whoever gave it."""
