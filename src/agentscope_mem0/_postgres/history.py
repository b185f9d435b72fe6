"""mem0's history in PostgreSQL: the change log and the messages kept for extraction.

mem0 2.2 keeps both in SQLite (``mem0.memory.storage.SQLiteManager``, one file
per machine). With a pgvector store they belong in the store's database, so
every replica, and the command line on a laptop, reads one history.
:class:`PostgresHistory` has the methods mem0's ``AsyncMemory`` calls on its
``db`` (``add_history``, ``batch_add_history``, ``get_history``,
``save_messages``, ``get_last_messages``, ``reset``, ``close``) and returns
what ``SQLiteManager`` returns; the client this package builds is handed one
in place of the SQLite manager (see ``_mem0.clients.build_memory``).

The rows live in ``agentscope_mem0_history`` and ``agentscope_mem0_messages``,
one pair of tables per database, keyed by the store's collection so that two
collections in one database keep their histories apart. Dates stay the text
mem0 gives, as in SQLite; ``seq`` keeps the order rows were written in.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from datetime import UTC, datetime
from typing import Any

from .connection import PostgresTables, pgvector_dsn

__all__ = ["HISTORY_TABLE", "MESSAGES_TABLE", "PostgresHistory", "history_dsn"]

HISTORY_TABLE = "agentscope_mem0_history"
"""mem0's change log of every memory."""
MESSAGES_TABLE = "agentscope_mem0_messages"
"""The last messages of each scope, which mem0's extraction reads."""

_KEPT_MESSAGES = 10  # as mem0 2.2's SQLiteManager.save_messages
_COLUMNS = (
    "id, memory_id, old_memory, new_memory, event, created_at, updated_at, "
    "is_deleted, actor_id, role"
)
_SCHEMA = (
    f"CREATE TABLE IF NOT EXISTS {HISTORY_TABLE} (seq bigserial PRIMARY KEY,"
    " collection text NOT NULL, id text NOT NULL, memory_id text, old_memory text,"
    " new_memory text, event text, created_at text, updated_at text,"
    " is_deleted integer NOT NULL DEFAULT 0, actor_id text, role text)",
    f"CREATE INDEX IF NOT EXISTS {HISTORY_TABLE}_memory ON {HISTORY_TABLE} (collection, memory_id)",
    f"CREATE TABLE IF NOT EXISTS {MESSAGES_TABLE} (seq bigserial PRIMARY KEY,"
    " collection text NOT NULL, id text NOT NULL, session_scope text NOT NULL, role text,"
    " content text, name text, created_at text)",
    f"CREATE INDEX IF NOT EXISTS {MESSAGES_TABLE}_scope"
    f" ON {MESSAGES_TABLE} (collection, session_scope, seq)",
)


def history_dsn(config: Any) -> str | None:
    """Where a mem0 config's history goes in PostgreSQL, or ``None`` (SQLite, as mem0 does).

    A pgvector store's own database holds it when the config names no
    ``history_db_path`` (and the store was not handed a connection pool:
    there is no string to connect with).

    Args:
        config: A mem0 ``MemoryConfig``.
    """
    if "history_db_path" in getattr(config, "model_fields_set", ()):
        return None
    store = getattr(config, "vector_store", None)
    if getattr(store, "provider", None) != "pgvector":
        return None
    return pgvector_dsn(getattr(store, "config", None))


class PostgresHistory:
    """mem0's history database, in PostgreSQL. Thread-safe; mem0 calls it from worker threads.

    Args:
        dsn: A libpq connection string.
        collection: The vector store's collection; the rows of this history carry it.

    Raises:
        ConfigurationError: psycopg is not installed.
        psycopg.Error: The database cannot be reached or written.
    """

    def __init__(self, dsn: str, *, collection: str) -> None:
        self.dsn = dsn
        self.collection = collection
        self.tables = PostgresTables(dsn, _SCHEMA)
        self.tables.run(lambda conn: None)  # the tables now: the client's build fails, not a write

    def add_history(
        self,
        memory_id: str,
        old_memory: str | None,
        new_memory: str | None,
        event: str,
        *,
        created_at: str | None = None,
        updated_at: str | None = None,
        is_deleted: int = 0,
        actor_id: str | None = None,
        role: str | None = None,
    ) -> None:
        """Log one change of ``memory_id`` (mem0's ``SQLiteManager.add_history``)."""
        self.batch_add_history(
            [
                {
                    "memory_id": memory_id,
                    "old_memory": old_memory,
                    "new_memory": new_memory,
                    "event": event,
                    "created_at": created_at,
                    "updated_at": updated_at,
                    "is_deleted": is_deleted,
                    "actor_id": actor_id,
                    "role": role,
                }
            ]
        )

    def batch_add_history(self, records: list[dict[str, Any]]) -> None:
        """Log several changes in one transaction (mem0's ``batch_add_history``)."""
        rows = [
            (
                self.collection,
                str(uuid.uuid4()),
                r.get("memory_id"),
                r.get("old_memory"),
                r.get("new_memory"),
                r.get("event"),
                r.get("created_at"),
                r.get("updated_at"),
                int(r.get("is_deleted") or 0),
                r.get("actor_id"),
                r.get("role"),
            )
            for r in records
        ]
        if not rows:
            return

        def insert(conn: Any) -> None:
            with conn.cursor() as cursor:
                cursor.executemany(
                    f"INSERT INTO {HISTORY_TABLE} (collection, {_COLUMNS}) "
                    "VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)",
                    rows,
                )

        self.tables.run(insert)

    def get_history(self, memory_id: str) -> list[dict[str, Any]]:
        """The changes of ``memory_id``, oldest first, as mem0's ``get_history`` gives them."""
        rows = self.tables.run(
            lambda conn: conn.execute(
                f"SELECT {_COLUMNS} FROM {HISTORY_TABLE} WHERE collection = %s AND memory_id = %s"
                " ORDER BY created_at ASC NULLS FIRST, updated_at ASC NULLS FIRST, seq",
                (self.collection, memory_id),
            ).fetchall()
        )
        names = [name.strip() for name in _COLUMNS.split(",")]
        out = [dict(zip(names, row, strict=True)) for row in rows]
        for entry in out:
            entry["is_deleted"] = bool(entry["is_deleted"])
        return out

    def save_messages(self, messages: list[dict[str, Any]], session_scope: str) -> None:
        """Keep ``messages`` as the scope's latest, evicting all but the last ten."""
        if not messages:
            return
        now = datetime.now(UTC).isoformat()
        rows = [
            (
                self.collection,
                str(uuid.uuid4()),
                session_scope,
                m.get("role"),
                m.get("content"),
                m.get("name"),
                now,
            )
            for m in messages
        ]

        def save(conn: Any) -> None:
            with conn.cursor() as cursor:
                cursor.executemany(
                    f"INSERT INTO {MESSAGES_TABLE} (collection, id, session_scope, role,"
                    " content, name, created_at) VALUES (%s, %s, %s, %s, %s, %s, %s)",
                    rows,
                )
            conn.execute(
                f"DELETE FROM {MESSAGES_TABLE} WHERE collection = %s AND session_scope = %s"
                f" AND seq NOT IN (SELECT seq FROM {MESSAGES_TABLE} WHERE collection = %s"
                " AND session_scope = %s ORDER BY seq DESC LIMIT %s)",
                (self.collection, session_scope, self.collection, session_scope, _KEPT_MESSAGES),
            )

        self.tables.run(save)

    def get_last_messages(self, session_scope: str, limit: int = 10) -> list[dict[str, Any]]:
        """The scope's last ``limit`` messages, oldest first."""
        rows = self.tables.run(
            lambda conn: conn.execute(
                f"SELECT role, content, name, created_at FROM {MESSAGES_TABLE}"
                " WHERE collection = %s AND session_scope = %s ORDER BY seq DESC LIMIT %s",
                (self.collection, session_scope, limit),
            ).fetchall()
        )
        return [
            {"role": r[0], "content": r[1], "name": r[2], "created_at": r[3]}
            for r in reversed(rows)
        ]

    def reset(self) -> None:
        """Delete this collection's rows; the tables stay for the other collections and replicas."""

        def delete(conn: Any) -> None:
            for table in (HISTORY_TABLE, MESSAGES_TABLE):
                conn.execute(f"DELETE FROM {table} WHERE collection = %s", (self.collection,))

        self.tables.run(delete)

    def close(self) -> None:
        """Close the connection. Idempotent."""
        self.tables.close()

    # -- what the command line's forget and import need (mem0 has no API for it)

    def memory_ids_with_history(self, ids: Iterable[str]) -> set[str]:
        """Those of ``ids`` that have at least one history entry."""
        wanted = list(ids)
        rows = self.tables.run(
            lambda conn: conn.execute(
                f"SELECT DISTINCT memory_id FROM {HISTORY_TABLE}"
                " WHERE collection = %s AND memory_id = ANY(%s)",
                (self.collection, wanted),
            ).fetchall()
        )
        return {row[0] for row in rows}

    def delete_history(self, ids: Iterable[str]) -> int:
        """Delete the history entries of ``ids``; returns how many."""
        wanted = list(ids)
        return self.tables.run(
            lambda conn: (
                conn.execute(
                    f"DELETE FROM {HISTORY_TABLE} WHERE collection = %s AND memory_id = ANY(%s)",
                    (self.collection, wanted),
                ).rowcount
            )
        )

    def session_scopes(self) -> list[str]:
        """Every scope with kept messages."""
        rows = self.tables.run(
            lambda conn: conn.execute(
                f"SELECT DISTINCT session_scope FROM {MESSAGES_TABLE} WHERE collection = %s",
                (self.collection,),
            ).fetchall()
        )
        return [row[0] for row in rows]

    def delete_messages(self, session_scope: str) -> int:
        """Delete the kept messages of one scope; returns how many."""
        return self.tables.run(
            lambda conn: (
                conn.execute(
                    f"DELETE FROM {MESSAGES_TABLE} WHERE collection = %s AND session_scope = %s",
                    (self.collection, session_scope),
                ).rowcount
            )
        )

    def __repr__(self) -> str:
        return f"PostgresHistory(collection={self.collection!r})"
