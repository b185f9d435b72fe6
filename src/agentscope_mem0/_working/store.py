"""Where working memory is kept: one record per user (and per conversation).

A record is keyed by ``(user_id, conversation)``; the user-scoped memory has
the empty conversation ``""``. Every store changes a record by a
read-merge-write under the store's own concurrency control (a SQLite write
transaction, a PostgreSQL row lock, a Qdrant compare-and-set), so two agents
updating the same record at once both land. Clearing keeps the record with
empty content and a new version, so copies elsewhere (an agent's state) learn
of it.

Which store goes with which mem0 backend: :mod:`.select`.
"""

from __future__ import annotations

import logging
import os
import sqlite3
import threading
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol, TypeVar, runtime_checkable

from .._exceptions import InvalidStateError
from .._sqlite.thread import ConnectionThread
from .._sqlite.wal import enable_wal

__all__ = [
    "WORKING_DB_NAME",
    "WORKING_THREAD",
    "Change",
    "NewContent",
    "SqliteWorkingStore",
    "WorkingRecord",
    "WorkingStore",
    "WriteBasedStore",
    "now_iso",
    "working_table_name",
]

logger = logging.getLogger(__name__)

WORKING_DB_NAME = "working_memory.sqlite3"
WORKING_THREAD = "agentscope-mem0-working"
"""The name of the thread that owns a SQLite working store's connection."""
_BUSY_TIMEOUT = 30.0

T = TypeVar("T")


def now_iso() -> str:
    """The current UTC time as ISO 8601."""
    return datetime.now(UTC).isoformat(timespec="seconds")


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
        """The user's conversations with a non-empty record."""
        ...

    def close(self) -> None:
        """Release connections; idempotent."""
        ...


NewContent = tuple[str, str]
"""What a low-level write stores: ``(content, kind)``."""


class WriteBasedStore:
    """``update`` and ``clear`` on top of one atomic read-change-write,
    ``_write(user_id, conversation, change)``, which each store implements
    with its own concurrency control; a change returning ``None`` writes
    nothing."""

    def _write(
        self,
        user_id: str,
        conversation: str,
        change: Callable[[WorkingRecord | None], NewContent | None],
    ) -> WorkingRecord | None:
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


class SqliteWorkingStore(WriteBasedStore):
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

    def load(self, user_id: str, conversation: str = "") -> WorkingRecord | None:
        """The record, or ``None`` when there is none."""
        return self._owner().call(self._load, user_id, conversation)

    def conversations(self, user_id: str) -> list[str]:
        """The user's conversations with a non-empty record, newest first."""
        return self._owner().call(self._conversations, user_id)

    def close(self) -> None:
        """Close the connection and end its thread. Idempotent."""
        with self._starting:
            self._closed = True
            thread = self._thread
        if thread is not None:
            thread.close(self._close_connection)

    def _write(
        self,
        user_id: str,
        conversation: str,
        change: Callable[[WorkingRecord | None], NewContent | None],
    ) -> WorkingRecord | None:
        return self._owner().call(self._write_now, user_id, conversation, change)

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

    @staticmethod
    def _row(row: tuple[Any, ...] | None) -> WorkingRecord | None:
        if row is None:
            return None
        return WorkingRecord(row[0], row[1], row[2], row[3], int(row[4]), row[5])

    def _select(self, conn: sqlite3.Connection, user_id: str, conversation: str) -> Any:
        return conn.execute(
            "SELECT user_id, conversation, content, kind, version, updated_at "
            "FROM working_memory WHERE user_id = ? AND conversation = ?",
            (user_id, conversation),
        ).fetchone()

    def _load(self, user_id: str, conversation: str) -> WorkingRecord | None:
        return self._row(self._select(self._connection(), user_id, conversation))

    def _conversations(self, user_id: str) -> list[str]:
        rows = (
            self._connection()
            .execute(
                "SELECT conversation FROM working_memory WHERE user_id = ? AND conversation != ''"
                " AND content != '' ORDER BY updated_at DESC",
                (user_id,),
            )
            .fetchall()
        )
        return [r[0] for r in rows]

    def _write_now(
        self,
        user_id: str,
        conversation: str,
        change: Callable[[WorkingRecord | None], NewContent | None],
    ) -> WorkingRecord | None:
        conn = self._connection()
        # IMMEDIATE takes the write lock before reading: no lost update.
        conn.execute("BEGIN IMMEDIATE")
        try:
            old = self._row(self._select(conn, user_id, conversation))
            new = change(old)
            if new is None:
                conn.execute("ROLLBACK")
                return None
            content, kind = new
            record = WorkingRecord(
                user_id, conversation, content, kind, (old.version if old else 0) + 1, now_iso()
            )
            conn.execute(
                "INSERT INTO working_memory VALUES (?, ?, ?, ?, ?, ?) "
                "ON CONFLICT (user_id, conversation) DO UPDATE SET content = excluded.content,"
                " kind = excluded.kind, version = excluded.version,"
                " updated_at = excluded.updated_at",
                (user_id, conversation, content, kind, record.version, record.updated_at),
            )
            conn.execute("COMMIT")
            return record
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise
