"""The durable outbox: every queued write is a row until mem0 has it.

A row is recorded before ``submit`` returns and removed only after mem0
confirmed the write. Each row is *claimed* by one live writer (its ``owner``,
``host:pid:random``) under a lease; a writer that died (its process is gone,
or its lease ran out) leaves rows that the next writer claims in one
transaction, so two writers never take the same row. Before a row is sent to
mem0 its ``batch_key`` (the idempotency key stored in the memories' metadata)
and ``attempts`` are committed; a row found with a ``batch_key`` may already
be in mem0, and the writer removes what mem0 holds under that key before
sending it again. A row mem0 refuses for good is kept as failed, with its
reason, until it is requeued.

Two layers, as in langgraph's checkpointers:

* :class:`BaseOutbox`, the contract the write queue uses (a PostgreSQL outbox
  is a second front of it), with the rule that needs no SQL: which rows go to
  mem0 together;
* :class:`Outbox`, the SQLite front: its SQL, its append-only
  :data:`MIGRATIONS` and its file (WAL, checked at open, a damaged file moved
  aside and replaced with the rows still readable, a lost WAL detected). Its
  connection lives on one thread (:class:`~.._sqlite.thread.ConnectionThread`):
  every call runs there, in order, whichever thread made it. Without a path
  the same tables live in memory.

Where the file lives when nobody named a folder closes the module
(:func:`default_outbox_dir`).
"""

from __future__ import annotations

import abc
import contextlib
import hashlib
import json
import logging
import os
import socket
import sqlite3
import time
import uuid
from collections.abc import Callable, Collection, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from types import TracebackType
from typing import Any, NoReturn, Self
from urllib.parse import urlsplit

from .._exceptions import DamagedFileError, OutboxWriteError
from .._scope import is_hosted
from .._sqlite.salvage import HighWater, is_damage, quarantine, read_rows
from .._sqlite.thread import ConnectionThread
from .._sqlite.wal import enable_wal
from .._text.dates import iso, parse_time

__all__ = [
    "COLUMNS",
    "EXCHANGE",
    "FACTS",
    "LIVE_OWNERS",
    "MIGRATIONS",
    "OUTBOX_FILENAME",
    "OUTBOX_THREAD",
    "BaseOutbox",
    "Outbox",
    "OutboxRow",
    "default_outbox_dir",
    "hosted_outbox_dir",
    "new_owner_id",
    "outbox_dir_for_config",
    "owner_is_dead",
    "row_of",
]

logger = logging.getLogger(__name__)

OUTBOX_FILENAME = "outbox.sqlite3"
"""The outbox's file name inside the configured folder."""

OUTBOX_THREAD = "agentscope-mem0-outbox"
"""The name of the thread that owns an outbox's connections."""

PENDING = "pending"
FAILED = "failed"

EXCHANGE = "exchange"
"""The kind of a row holding a finished reply's exchange."""
FACTS = "facts"
"""The kind of an ``add_memory`` row: facts the agent asked to keep.

When mem0's extraction finds nothing in them, each fact is stored as written."""


@dataclass(frozen=True, slots=True)
class OutboxRow:
    """One queued write as the outbox holds it."""

    key: str
    """The write's idempotency key."""
    user_id: str
    agent_id: str | None
    messages: list[dict[str, str]]
    said_at: datetime
    """When the exchange was said (aware, UTC): the memories' date."""
    kind: str = EXCHANGE
    """:data:`EXCHANGE` (a finished reply) or :data:`FACTS` (from ``add_memory``)."""
    id: int = 0
    """The row's id in its outbox (0 until it is recorded)."""
    status: str = PENDING
    attempts: int = 0
    """How many times it was sent to mem0 (by any writer)."""
    batch_key: str | None = None
    """The key the last attempt stored in mem0's metadata."""
    claimed_by: str | None = None
    error: str | None = None
    created_at: float = field(default_factory=time.time)
    """When it was queued (seconds since the epoch)."""


# -- who holds a row ------------------------------------------------------------

_HOST = socket.gethostname()

LIVE_OWNERS: set[str] = set()
"""Owner ids of the write queues open in this process: their rows are not orphans."""


def new_owner_id() -> str:
    """A writer's identity: ``host:pid:random``."""
    return f"{_HOST}:{os.getpid()}:{uuid.uuid4().hex[:12]}"


def owner_is_dead(owner: str, live_here: Iterable[str] = ()) -> bool:
    """Whether the writer ``owner`` is known to be gone.

    Only owners on this host can be checked (by process id); for the others
    the lease decides.

    Args:
        owner: An id from :func:`new_owner_id`.
        live_here: The owner ids of the writers open in this process.
    """
    host, _, rest = owner.partition(":")
    pid_text, _, _ = rest.partition(":")
    if host != _HOST or not pid_text.isdigit():
        return False
    pid = int(pid_text)
    if pid == os.getpid():
        return owner not in set(live_here)
    return not _pid_alive(pid)


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # A killed child not yet reaped by its parent still answers signal 0.
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    return stat.rpartition(")")[2].split()[:1] != ["Z"]


# -- the contract ---------------------------------------------------------------


class BaseOutbox(abc.ABC):
    """What the write queue needs of an outbox; :class:`Outbox` is its SQLite front.

    Every method blocks and runs on :attr:`thread`, the one thread that owns
    the outbox's connection; the queue awaits them there
    (``await outbox.thread.run(outbox.next_batch, ...)``). Rows are named by
    ``id`` within one outbox, and by ``key`` across outboxes (a write kept in
    memory keeps its key when it moves into the file).
    """

    thread: ConnectionThread
    """Where every call on the connection runs."""
    where: str
    """Where the rows are kept, for messages."""
    lost_at_open: int = 0
    """Committed rows found missing when the outbox was opened (a lost WAL)."""
    shared: bool = False
    """Whether other writers may deliver the rows this one recorded (the
    PostgreSQL front: a scope's rows go with whoever holds the scope); then
    :meth:`settled` tells the writer that recorded a row how it ended."""
    path: Path | None = None
    """The outbox's file, if it is one."""

    @property
    @abc.abstractmethod
    def durable(self) -> bool:
        """Whether rows survive the process."""

    @abc.abstractmethod
    def add(
        self, rows: Sequence[OutboxRow], owner: str | None = None, lease: float = 0.0
    ) -> list[int]:
        """Record ``rows`` in one transaction (one sync to disk), as they are
        (status, attempts, batch key), held by ``owner`` for ``lease`` seconds
        or by no one. A key already recorded is skipped (its id is 0).

        Returns:
            The rows' ids.
        """

    @abc.abstractmethod
    def start_attempt(self, ids: Sequence[int], *, owner: str, batch_key: str) -> bool:
        """Commit the batch key and one more attempt before the rows go to mem0.

        Returns:
            False when ``owner`` no longer holds all the rows (another writer
            took them after this one's lease ran out); then nothing changed.
        """

    @abc.abstractmethod
    def uncount_attempt(self, ids: Sequence[int]) -> None:
        """Take back one attempt of ``ids``: the store refused for want of space."""

    @abc.abstractmethod
    def complete(self, ids: Sequence[int]) -> None:
        """Remove rows mem0 has stored."""

    @abc.abstractmethod
    def fail(self, ids: Sequence[int], reason: str) -> None:
        """Keep rows as failed, with ``reason``, unclaimed and not retried."""

    @abc.abstractmethod
    def claim_orphans(
        self, *, owner: str, lease: float, live_here: Iterable[str] = ()
    ) -> list[OutboxRow]:
        """Renew ``owner``'s leases and take over the pending rows no live
        writer holds, in one transaction (two writers never take one row).

        A row is an orphan when it is unclaimed, its lease ran out, or its
        owner is known to be dead (:func:`owner_is_dead`). The other pending
        rows sent in one batch with an orphan (same ``batch_key``) are taken
        with it: redoing only some of them under that key would let redoing
        the others delete what they stored.

        Returns:
            The rows now held by ``owner``, oldest first.
        """

    @abc.abstractmethod
    def held(self, owner: str) -> list[OutboxRow]:
        """The pending rows ``owner`` holds, oldest first."""

    @abc.abstractmethod
    def release(self, *, owner: str, keep: Collection[str] = ()) -> int:
        """Give up ``owner``'s pending rows (but those whose key is in ``keep``)
        for others to claim; returns how many."""

    @abc.abstractmethod
    def failed(self) -> list[OutboxRow]:
        """Every row kept as failed, oldest first."""

    @abc.abstractmethod
    def requeue_failed(
        self, *, owner: str, lease: float, user_id: str | None = None
    ) -> list[OutboxRow]:
        """Make failed rows (of ``user_id``, or all) pending again, held by ``owner``.

        Their ``attempts`` start again from zero; their ``batch_key`` stays, so
        a write that did reach mem0 before failing is recognised rather than
        stored twice.
        """

    @abc.abstractmethod
    def counts(self) -> dict[str, int]:
        """``{"pending": n, "failed": m}`` over the whole outbox."""

    @abc.abstractmethod
    def close(self) -> None:
        """Close the connection. Idempotent."""

    @abc.abstractmethod
    def _oldest(
        self, owner: str, user_id: str, agent_id: str | None, limit: int
    ) -> list[OutboxRow]:
        """Up to ``limit`` pending rows of one scope that ``owner`` holds, oldest first."""

    @abc.abstractmethod
    def _sent_together(self, owner: str, batch_key: str) -> list[OutboxRow]:
        """The pending rows ``owner`` holds that were sent under ``batch_key``."""

    def repair(self) -> int:
        """Replace storage found damaged while in use; returns the rows kept."""
        return 0

    def let_go(self, user_id: str, agent_id: str | None) -> None:
        """Let other writers deliver this scope (a :attr:`shared` outbox holds
        it from the first batch taken until then); here nothing is held."""
        return None

    def settled(self, keys: Collection[str]) -> dict[str, bool]:
        """Which of ``keys`` another writer settled: True stored, False kept as failed.

        Only a :attr:`shared` outbox has rows another writer settles; this
        one says none.
        """
        return {}

    def insert(
        self,
        *,
        key: str,
        user_id: str,
        agent_id: str | None,
        messages: list[dict[str, str]],
        owner: str,
        lease: float,
        kind: str = EXCHANGE,
        said_at: datetime | None = None,
    ) -> int:
        """Record one new write, claimed by ``owner``; returns its row id.

        ``said_at`` (aware) is when it was said, default now.
        """
        row = OutboxRow(key, user_id, agent_id, messages, said_at or datetime.now(UTC), kind)
        return self.add([row], owner, lease)[0]

    def next_batch(
        self,
        *,
        owner: str,
        user_id: str,
        agent_id: str | None,
        limit: int,
        skip: Collection[str] = (),
    ) -> list[OutboxRow]:
        """The oldest pending rows of one scope that ``owner`` holds, to send together.

        Rows an earlier attempt sent under one ``batch_key`` come back as that
        same group; otherwise up to ``limit`` consecutive rows never sent,
        said on the same day (UTC) as the first: mem0 gives one call one
        observation date. Rows whose key is in ``skip`` (stored, waiting for
        the store's sync) are not sent again.
        """
        limit = max(limit, 1)
        found = self._oldest(owner, user_id, agent_id, limit + len(skip))
        rows = [row for row in found if row.key not in skip][:limit]
        if not rows:
            return []
        first = rows[0]
        if first.batch_key is not None:
            return [r for r in self._sent_together(owner, first.batch_key) if r.key not in skip]
        batch = [first]
        for row in rows[1:]:
            # Facts from add_memory go alone: their fallback is theirs only.
            if row.batch_key is not None or FACTS in (row.kind, first.kind):
                break
            if row.said_at.date() != first.said_at.date():
                break
            batch.append(row)
        return batch

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()


# -- the SQLite front: schema and SQL --------------------------------------------

Migration = str | Callable[[sqlite3.Connection], None]
"""One step of the schema: SQL statements separated by ``;``, or a function
that changes the rows too. Each runs in a transaction of its own."""

_OLD_SAID_AT = "said_at"
"""Where release 0.2 kept a write's said time: a key of each of its message dicts."""


def _said_at_column(conn: sqlite3.Connection) -> None:
    """Migration 3: the said time of each write becomes the ``said_at`` column.

    Release 0.2 stamped it into every message dict; the newest stamp of a
    row is what it sent to mem0, so that is the column's value, and the
    stamps leave the messages. A row without one (release 0.1's) is dated
    when it was queued.
    """
    conn.execute("ALTER TABLE writes ADD COLUMN said_at TEXT")
    found = conn.execute("SELECT id, messages, created_at FROM writes").fetchall()
    for row_id, text, created_at in found:
        try:
            messages = json.loads(text)
        except ValueError:
            messages = None
        stamps: list[datetime] = []
        if isinstance(messages, list):
            for message in messages:
                if isinstance(message, dict):
                    stamp = parse_time(message.pop(_OLD_SAID_AT, None))
                    if stamp is not None:
                        stamps.append(stamp)
            text = json.dumps(messages, ensure_ascii=False)
        said = max(stamps, default=datetime.fromtimestamp(created_at, UTC))
        conn.execute(
            "UPDATE writes SET said_at = ?, messages = ? WHERE id = ?", (iso(said), text, row_id)
        )


# Append-only: the schema version (PRAGMA user_version) is the number of entries applied.
MIGRATIONS: tuple[Migration, ...] = (
    """
    CREATE TABLE IF NOT EXISTS writes (
        id          INTEGER PRIMARY KEY AUTOINCREMENT,
        key         TEXT NOT NULL UNIQUE,
        user_id     TEXT NOT NULL,
        agent_id    TEXT,
        messages    TEXT NOT NULL,
        status      TEXT NOT NULL DEFAULT 'pending',
        attempts    INTEGER NOT NULL DEFAULT 0,
        batch_key   TEXT,
        claimed_by  TEXT,
        lease_until REAL,
        error       TEXT,
        created_at  REAL NOT NULL,
        updated_at  REAL NOT NULL
    );
    CREATE INDEX IF NOT EXISTS writes_by_owner ON writes (claimed_by, status, user_id);
    CREATE INDEX IF NOT EXISTS writes_by_batch ON writes (batch_key);
    """,
    "ALTER TABLE writes ADD COLUMN kind TEXT NOT NULL DEFAULT 'exchange'",
    _said_at_column,
)

_INSERT = (
    "INSERT OR IGNORE INTO writes (key, user_id, agent_id, messages, status, attempts,"
    " batch_key, error, created_at, updated_at, kind, said_at, claimed_by, lease_until)"
    " VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?)"
)
COLUMNS = (  # the order row_of reads
    "id, key, user_id, agent_id, messages, status, attempts, batch_key, "
    "claimed_by, error, created_at, kind, said_at"
)
_SELECT = f"SELECT {COLUMNS} FROM writes"
_LAST_ROW_ID = "SELECT coalesce(max(seq), 0) FROM sqlite_sequence"


def row_of(values: Sequence[Any]) -> OutboxRow:
    """A row as :data:`COLUMNS` selects it, from either front (``said_at`` is ISO
    text in SQLite, a timestamp in PostgreSQL)."""
    said_at = values[12]
    if isinstance(said_at, datetime):
        said = said_at.astimezone(UTC)
    elif said_at:
        said = datetime.fromisoformat(said_at)
    else:  # added by an older release after the migration: said when it was queued
        said = datetime.fromtimestamp(values[10], UTC)
    return OutboxRow(
        id=values[0],
        key=values[1],
        user_id=values[2],
        agent_id=values[3],
        messages=json.loads(values[4]),
        status=values[5],
        attempts=values[6],
        batch_key=values[7],
        claimed_by=values[8],
        error=values[9],
        created_at=values[10],
        kind=values[11],
        said_at=said,
    )


def _marks(values: Sequence[Any]) -> str:
    return ",".join("?" * len(values))


def _rows_by_id(conn: sqlite3.Connection, ids: Sequence[int]) -> list[OutboxRow]:
    sql = f"{_SELECT} WHERE id IN ({_marks(ids)}) ORDER BY id"
    return [row_of(v) for v in conn.execute(sql, ids)]


# -- the SQLite front: the file and the operations ----------------------------------


class Outbox(BaseOutbox):
    """The outbox in an SQLite file (or in memory); callable from any thread.

    Its connection lives on a thread of its own; close it when done
    (``with Outbox(path) as box:`` does).

    Args:
        path: The database file; ``None`` keeps it in memory (no durability).
        busy_timeout: Seconds to wait for another process's write lock.
    """

    def __init__(self, path: str | os.PathLike[str] | None, *, busy_timeout: float = 10.0) -> None:
        self._start_on(None, path, busy_timeout)

    @classmethod
    def _on_thread(cls, thread: ConnectionThread, path: str | os.PathLike[str] | None) -> Outbox:
        """An outbox whose connection lives on ``thread``, which the caller owns
        and closes (a write queue's file and its in-memory stand-in share one)."""
        outbox = cls.__new__(cls)
        outbox._start_on(thread, path, 10.0)
        return outbox

    def _start_on(
        self,
        thread: ConnectionThread | None,
        path: str | os.PathLike[str] | None,
        busy_timeout: float,
    ) -> None:
        self.path = Path(path) if path is not None else None
        self.where = os.fspath(self.path) if self.path is not None else ":memory:"
        self._own_thread = thread is None
        self.thread = thread or ConnectionThread(OUTBOX_THREAD, what=f"the outbox {self.where}")
        self._busy_timeout = busy_timeout
        self.recovered_at_open: int | None = None
        """Rows carried over from a damaged file replaced at open (``None``: none was)."""
        # The highest row id committed, beside the file: a lost WAL shows as less.
        self._mark = HighWater(self.path.with_name(self.path.name + "-seen")) if self.path else None
        try:
            self.thread.call(self._start)
        except BaseException:
            self.close()
            raise

    @classmethod
    def in_folder(cls, folder: str | os.PathLike[str], **kwargs: Any) -> Outbox:
        """The outbox file :data:`OUTBOX_FILENAME` in ``folder`` (created if needed)."""
        return cls(Path(folder).expanduser() / OUTBOX_FILENAME, **kwargs)

    @property
    def durable(self) -> bool:
        """Whether rows survive the process."""
        return self.path is not None

    # -- the queue's operations -------------------------------------------------

    def add(
        self, rows: Sequence[OutboxRow], owner: str | None = None, lease: float = 0.0
    ) -> list[int]:
        now = time.time()
        until = now + lease if owner is not None else None
        values = [
            (
                *(row.key, row.user_id, row.agent_id, json.dumps(row.messages, ensure_ascii=False)),
                *(row.status, row.attempts, row.batch_key, row.error, row.created_at, now),
                *(row.kind, iso(row.said_at), owner, until),
            )
            for row in rows
        ]

        def work(conn: sqlite3.Connection) -> list[int]:
            cursors = [conn.execute(_INSERT, value) for value in values]
            return [(c.lastrowid or 0) if c.rowcount == 1 else 0 for c in cursors]

        ids: list[int] = self._write(work)
        if ids and self._mark is not None:
            self.thread.call(self._mark.raise_to, max(ids))  # after the commit
        return ids

    def _oldest(
        self, owner: str, user_id: str, agent_id: str | None, limit: int
    ) -> list[OutboxRow]:
        where = "claimed_by = ? AND status = ? AND user_id = ? AND agent_id IS ?"
        sql = f"{_SELECT} WHERE {where} ORDER BY id LIMIT ?"
        return [row_of(v) for v in self._read(sql, (owner, PENDING, user_id, agent_id, limit))]

    def _sent_together(self, owner: str, batch_key: str) -> list[OutboxRow]:
        sql = f"{_SELECT} WHERE claimed_by = ? AND status = ? AND batch_key = ? ORDER BY id"
        return [row_of(v) for v in self._read(sql, (owner, PENDING, batch_key))]

    def start_attempt(self, ids: Sequence[int], *, owner: str, batch_key: str) -> bool:

        def work(conn: sqlite3.Connection) -> bool:
            (held,) = conn.execute(
                f"SELECT count(*) FROM writes WHERE id IN ({_marks(ids)}) AND claimed_by = ?"
                " AND status = ?",
                (*ids, owner, PENDING),
            ).fetchone()
            if held != len(ids):
                return False
            conn.execute(
                "UPDATE writes SET batch_key = ?, attempts = attempts + 1, updated_at = ?"
                f" WHERE id IN ({_marks(ids)})",
                (batch_key, time.time(), *ids),
            )
            return True

        return bool(self._write(work))

    def uncount_attempt(self, ids: Sequence[int]) -> None:
        sql = f"UPDATE writes SET attempts = max(attempts - 1, 0) WHERE id IN ({_marks(ids)})"
        self._write(lambda c: c.execute(sql, ids))

    def complete(self, ids: Sequence[int]) -> None:
        if ids:
            self._write(lambda c: c.execute(f"DELETE FROM writes WHERE id IN ({_marks(ids)})", ids))

    def fail(self, ids: Sequence[int], reason: str) -> None:
        sql = (
            "UPDATE writes SET status = ?, error = ?, claimed_by = NULL, lease_until = NULL,"
            f" updated_at = ? WHERE id IN ({_marks(ids)})"
        )
        if ids:
            self._write(lambda c: c.execute(sql, (FAILED, reason, time.time(), *ids)))

    def claim_orphans(
        self, *, owner: str, lease: float, live_here: Iterable[str] = ()
    ) -> list[OutboxRow]:
        live = set(live_here)

        def work(conn: sqlite3.Connection) -> list[OutboxRow]:
            now = time.time()
            conn.execute(
                "UPDATE writes SET lease_until = ? WHERE claimed_by = ? AND status = ?",
                (now + lease, owner, PENDING),
            )
            owners = conn.execute(
                "SELECT DISTINCT claimed_by FROM writes WHERE status = ?"
                " AND claimed_by IS NOT NULL AND claimed_by != ?",
                (PENDING, owner),
            )
            dead = [o for (o,) in owners if owner_is_dead(o, live)]
            dead_clause = f" OR claimed_by IN ({_marks(dead)})" if dead else ""
            where = (
                "status = ? AND (claimed_by IS NULL OR"
                f" (claimed_by != ? AND (lease_until < ?{dead_clause})))"
            )
            params = (PENDING, owner, now, *dead)
            orphaned = f"SELECT id FROM writes WHERE {where}"
            batches = f"SELECT batch_key FROM writes WHERE id IN ({orphaned})"
            ids = [
                i
                for (i,) in conn.execute(
                    "SELECT id FROM writes WHERE status = ? AND claimed_by IS NOT ? AND"
                    f" (id IN ({orphaned}) OR batch_key IN ({batches})) ORDER BY id",
                    (PENDING, owner, *params, *params),
                )
            ]
            if not ids:
                return []
            conn.execute(
                f"UPDATE writes SET claimed_by = ?, lease_until = ? WHERE id IN ({_marks(ids)})",
                (owner, now + lease, *ids),
            )
            return _rows_by_id(conn, ids)

        return list(self._write(work))

    def held(self, owner: str) -> list[OutboxRow]:
        sql = f"{_SELECT} WHERE claimed_by = ? AND status = ? ORDER BY id"
        return [row_of(v) for v in self._read(sql, (owner, PENDING))]

    def release(self, *, owner: str, keep: Collection[str] = ()) -> int:
        kept = list(keep)
        sql = (
            "UPDATE writes SET claimed_by = NULL, lease_until = NULL WHERE claimed_by = ?"
            " AND status = ?" + (f" AND key NOT IN ({_marks(kept)})" if kept else "")
        )
        return int(self._write(lambda c: c.execute(sql, (owner, PENDING, *kept)).rowcount))

    def failed(self) -> list[OutboxRow]:
        return [row_of(v) for v in self._read(f"{_SELECT} WHERE status = ? ORDER BY id", (FAILED,))]

    def requeue_failed(
        self, *, owner: str, lease: float, user_id: str | None = None
    ) -> list[OutboxRow]:

        def work(conn: sqlite3.Connection) -> list[OutboxRow]:
            where = "status = ?" + (" AND user_id = ?" if user_id is not None else "")
            params: tuple[Any, ...] = (FAILED,) + ((user_id,) if user_id is not None else ())
            ids = [i for (i,) in conn.execute(f"SELECT id FROM writes WHERE {where}", params)]
            if not ids:
                return []
            conn.execute(
                "UPDATE writes SET status = ?, error = NULL, attempts = 0, claimed_by = ?,"
                f" lease_until = ?, updated_at = ? WHERE id IN ({_marks(ids)})",
                (PENDING, owner, time.time() + lease, time.time(), *ids),
            )
            return _rows_by_id(conn, ids)

        return list(self._write(work))

    def counts(self) -> dict[str, int]:
        found = dict(self._read("SELECT status, count(*) FROM writes GROUP BY status"))
        return {"pending": found.get(PENDING, 0), "failed": found.get(FAILED, 0)}

    def read(self, sql: str, params: Sequence[Any] = ()) -> list[Any]:
        """The rows of one query (for inspection and tests)."""
        return self._read(sql, params)

    def close(self) -> None:
        """Close the file (and the thread, if it is this outbox's own). Idempotent."""
        if self._own_thread:
            self.thread.close(self._shut)
        elif self.thread.on_thread() or not self.thread.closed:
            self.thread.call(self._shut)  # as its owner closes the thread, too

    # -- opening, checks and repair (on the thread) ---------------------------------

    def _start(self) -> None:
        if self.path is not None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        try:
            self._open()
        except sqlite3.DatabaseError as exc:
            self._close_connection()
            if self.path is None or not is_damage(exc):
                self._raise(exc, "open it")
            self.recovered_at_open = self._replace_damaged(str(exc))
        self._check_high_water()

    def _open(self, *, version: int | None = None) -> None:
        """Connect, check the file and migrate it (up to ``version``: all)."""
        self._conn = sqlite3.connect(self.where, timeout=self._busy_timeout, isolation_level=None)
        self._conn.execute(f"PRAGMA busy_timeout = {int(self._busy_timeout * 1000)}")
        if self.path is not None:
            enable_wal(self._conn, self._busy_timeout)
            # FULL: a commit is on disk when it returns, so a write the reply
            # acknowledged survives a power cut too (NORMAL only a killed
            # process); the commits run on the outbox's own thread.
            self._conn.execute("PRAGMA synchronous = FULL")
            (verdict,) = self._conn.execute("PRAGMA quick_check").fetchone()
            if verdict != "ok":
                raise sqlite3.DatabaseError(f"database disk image is malformed: {verdict}")
        self._migrate(version)

    def _migrate(self, upto: int | None = None) -> None:
        target = len(MIGRATIONS) if upto is None else upto
        (version,) = self._conn.execute("PRAGMA user_version").fetchone()
        while version < target:
            # Read again under the write lock: another process opening the
            # same file may have migrated it since.
            self._conn.execute("BEGIN IMMEDIATE")
            try:
                (version,) = self._conn.execute("PRAGMA user_version").fetchone()
                if version < target:
                    step = MIGRATIONS[version]
                    if callable(step):
                        step(self._conn)
                    else:
                        for statement in filter(str.strip, step.split(";")):
                            self._conn.execute(statement)
                    self._conn.execute(f"PRAGMA user_version = {version + 1}")
                self._conn.execute("COMMIT")
            except BaseException:
                _rollback(self._conn)
                raise
            version += 1

    def _replace_damaged(self, cause: str) -> int:
        """Move the damaged file aside, start anew, carry over the readable rows."""
        assert self.path is not None
        moved = quarantine(self.path)
        found = read_rows(moved, "writes")
        # The rows go into the schema they were written in; the migrations
        # after it then apply to them as to any older file.
        self._open(version=found.version)
        known = {column[1] for column in self._conn.execute("PRAGMA table_info(writes)")}
        keep = [i for i, name in enumerate(found.columns) if name in known]
        if found.rows and keep:
            columns = ", ".join(found.columns[i] for i in keep)
            values = [[row[i] for i in keep] for row in found.rows]
            sql = f"INSERT INTO writes ({columns}) VALUES ({_marks(keep)})"
            self._run(lambda c: c.executemany(sql, values))
        self._migrate()
        logger.error(
            "the outbox %s was damaged (%s); moved it to %s and started a new one with "
            "the %d rows still readable%s",
            self.path,
            cause,
            moved,
            len(found.rows),
            "; some rows could not be read and are lost" if found.partial else "",
        )
        if self._mark is not None:
            at = found.columns.index("id") if found.rows else 0
            self._mark.reset(max((int(row[at]) for row in found.rows), default=0))
        return len(found.rows)

    def _check_high_water(self) -> None:
        if self._mark is None:
            return
        ((seq,),) = self._query(_LAST_ROW_ID, ())
        if self._mark.read() <= seq:
            self._mark.raise_to(int(seq))
            return
        # Another process commits, then raises the mark: between our two
        # reads it may have done both. Compare again under the write lock
        # before calling rows lost (without it on a file that refuses writes).
        try:
            self._run(self._compare_high_water)
        except OutboxWriteError:
            self._compare_high_water(self._conn)

    def _compare_high_water(self, conn: sqlite3.Connection) -> None:
        assert self._mark is not None
        (seq,) = conn.execute(_LAST_ROW_ID).fetchone()
        mark = self._mark.read()
        if mark <= seq:
            self._mark.raise_to(int(seq))
            return
        self.lost_at_open = mark - int(seq)
        logger.error(
            "%d memory writes recorded in the outbox %s are missing: its WAL file "
            "(%s-wal) was deleted or damaged while no process had it open. They cannot "
            "be recovered; the exchanges they held did not reach mem0",
            self.lost_at_open,
            self.path,
            self.path,
        )
        self._mark.reset(int(seq))

    def repair(self) -> int:
        """Replace a file found damaged while in use; returns the rows kept.

        Raises:
            DamagedFileError: It cannot be moved aside.
        """
        if self.path is None:
            return 0
        return int(self.thread.call(self._repair))

    def _repair(self) -> int:
        self._close_connection()
        return self._replace_damaged("found while in use")

    # -- transactions and errors ---------------------------------------------------

    def _write(self, work: Callable[[sqlite3.Connection], Any]) -> Any:
        """Run ``work`` in one immediate transaction; returns what it returns."""
        return self.thread.call(self._run, work)

    def _read(self, sql: str, params: Sequence[Any] = ()) -> list[Any]:
        return self.thread.call(self._query, sql, params)

    def _query(self, sql: str, params: Sequence[Any]) -> list[Any]:
        try:
            return self._conn.execute(sql, params).fetchall()
        except sqlite3.Error as exc:
            self._raise(exc, "read it")

    def _run(self, work: Callable[[sqlite3.Connection], Any]) -> Any:
        conn = self._conn
        try:
            conn.execute("BEGIN IMMEDIATE")
            result = work(conn)
            conn.execute("COMMIT")
        except BaseException as exc:
            # SQLite may have rolled back already (a full disk does): an error
            # from ROLLBACK must not hide the real one.
            _rollback(conn)
            self._raise(exc, "write to it")
        return result

    def _raise(self, exc: BaseException, doing: str) -> NoReturn:
        """Raise ``exc`` as this package's error naming the file, if it is SQLite's."""
        if is_damage(exc):
            raise DamagedFileError(
                f"the outbox {self.where} is damaged ({exc}); could not {doing}. It is moved "
                "aside and replaced at the next start (or move it away yourself)",
                path=self.where,
            ) from exc
        if isinstance(exc, sqlite3.Error | OSError):
            raise OutboxWriteError(
                f"the outbox {self.where} failed: could not {doing} ({exc}). Is the disk "
                "full or read-only? Writes are kept in memory until it works again",
                path=self.where,
            ) from exc
        raise exc

    def _shut(self) -> None:
        self._close_connection()
        if self._mark is not None:
            self._mark.close()

    def _close_connection(self) -> None:
        conn = getattr(self, "_conn", None)
        if conn is not None:
            with contextlib.suppress(sqlite3.Error):
                conn.close()


def _rollback(conn: sqlite3.Connection) -> None:
    if conn.in_transaction:
        with contextlib.suppress(sqlite3.Error):
            conn.execute("ROLLBACK")


# -- where the file lives when nobody named a folder ---------------------------------
#
# Writes must survive the process on every path, also when a user passes only
# models and a mem0_config (the built-in middleware's usage). The outbox then
# goes next to the store's own files, so that the next middleware on the same
# store finds and replays what was left:
#
# * the vector store lies inside the folder of mem0's history_db_path (the
#   embedded default, and any config that keeps both together): that folder,
#   as Mem0Middleware.local does;
# * otherwise (a server store, or the history elsewhere):
#   <history folder>/agentscope-mem0-outbox/<provider>-<hash> (the data folder
#   in place of a history kept in memory), where the hash names where the
#   vector store keeps its data (provider, host, port, database, user, path,
#   collection; tunables and secrets left out, a DSN read for its parts), so
#   two stores never replay each other's writes;
# * the hosted platform (no local files): <data folder>/outbox-hosted-<hash> of
#   the host and the API key's hash;
# * a client of another kind (a test double): None, writes stay in memory.
#
# The CLI's status, retry-failed and ui reach the same folder through
# outbox_dir_for_config and hosted_outbox_dir.

_MEMORY = ("", ":memory:")
# The same collection on the same server, whichever provider serves it (this
# package's Qdrant provider replaced mem0's in 0.3): one outbox, so a write
# queued before an upgrade is replayed after it.
_SAME_STORE = {"agentscope_qdrant": "qdrant"}
_HOSTED_DEFAULT = "https://api.mem0.ai"

# The settings that say where a store's data is (server, database, table or
# folder); tunables such as the vector size, pool sizes or index kinds do not
# name another store, and secrets are left out so that rotating one keeps the
# outbox.
_WHERE_KEYS = (
    "url",
    "host",
    "port",
    "path",
    "dbname",
    "database",
    "user",
    "username",
    "collection_name",
    "index_name",
    "namespace",
)


def _digest(value: Any) -> str:
    text = json.dumps(value, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def _dsn_parts(dsn: str) -> dict[str, str]:
    """Host, port, database and user of a libpq connection string (URI or key=value)."""
    try:
        from psycopg.conninfo import conninfo_to_dict

        parts = {k: str(v) for k, v in conninfo_to_dict(dsn).items() if v is not None}
    except ImportError:
        split = urlsplit(dsn)
        parts = {
            "host": split.hostname or "",
            "port": str(split.port or ""),
            "dbname": split.path.lstrip("/"),
            "user": split.username or "",
        }
    except Exception:  # not a DSN psycopg reads: mem0 will say so; name it as given
        return {"dsn": _digest(dsn)}
    if not parts.get("port"):
        parts["port"] = "5432"
    return {k: parts.get(k, "") for k in ("host", "port", "dbname", "user")}


def _store_identity(vector_store: Any) -> tuple[str, dict[str, Any], str | None]:
    """The vector store's provider, the settings naming its data and its local path."""
    provider = str(getattr(vector_store, "provider", "") or "store")
    provider = _SAME_STORE.get(provider, provider)
    config: Any = getattr(vector_store, "config", None)
    if hasattr(config, "model_dump"):
        fields = config.model_dump()
    elif isinstance(config, dict):
        fields = dict(config)
    else:
        fields = {}
    kept = {
        k: str(fields[k])  # a port as 5432 or "5432" names one server
        for k in _WHERE_KEYS
        if isinstance(fields.get(k), str | int | float | bool) and fields.get(k) != ""
    }
    dsn = fields.get("connection_string")
    if isinstance(dsn, str) and dsn:
        # mem0 connects by the string alone; the separate fields are ignored then.
        for key in ("host", "port", "dbname", "user"):
            kept.pop(key, None)
        kept.update(_dsn_parts(dsn))
    path = fields.get("path")
    return provider, kept, str(path) if isinstance(path, str) and path else None


def _inside(path: Path, folder: Path) -> bool:
    try:
        path.resolve().relative_to(folder.resolve())
    except ValueError:
        return False
    return True


def hosted_outbox_dir(host: str | None, key_hash: str) -> Path:
    """The outbox folder for the hosted platform at ``host`` and an API key's MD5.

    ``key_hash`` is what mem0's client keeps as ``user_id`` (the key's MD5), so
    the CLI, which knows the key, and the middleware, which has the client,
    reach the same folder.
    """
    from ..local import data_dir

    who = {"host": host or _HOSTED_DEFAULT, "key": key_hash}
    return data_dir() / f"outbox-hosted-{_digest(who)}"


def outbox_dir_for_config(config: Any) -> Path | None:
    """The outbox folder for a mem0 ``MemoryConfig`` (see the rules above).

    Args:
        config: The config the client runs with: its ``vector_store`` and
            ``history_db_path`` decide the place.

    Returns:
        The folder, or ``None`` when the config names no vector store.
    """
    vector_store = getattr(config, "vector_store", None)
    if config is None or vector_store is None:
        return None
    provider, identity, store_path = _store_identity(vector_store)
    history = str(getattr(config, "history_db_path", "") or "")
    if history in _MEMORY:
        from ..local import data_dir

        root = data_dir()
    else:
        root = Path(history).expanduser().resolve().parent
        if store_path is not None and _inside(Path(store_path).expanduser(), root):
            return root
    return root / "agentscope-mem0-outbox" / f"{provider}-{_digest(identity)}"


def default_outbox_dir(client: Any) -> Path | None:
    """The outbox folder for ``client`` (see the rules above), or ``None``."""
    if is_hosted(client):
        return hosted_outbox_dir(getattr(client, "host", None), getattr(client, "user_id", ""))
    return outbox_dir_for_config(getattr(client, "config", None))
