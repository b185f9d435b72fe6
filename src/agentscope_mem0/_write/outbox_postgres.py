"""The outbox in PostgreSQL: one queue of writes shared by every replica.

The second front of :class:`~.outbox.BaseOutbox` (the SQLite one is
:class:`~.outbox.Outbox`), for deployments whose replicas come and go with
their disks. Its rows live in one table (:data:`DEFAULT_TABLE`) of a
database every replica reaches, so a write acknowledged by one replica is
stored by some replica even when that one is gone. What PostgreSQL gives
that a file does not:

* **Ids from one sequence**: the order in which any replica acknowledged
  writes.
* **Liveness by connection**: each writer holds a session advisory lock on
  its owner id while its connection lives; a writer killed (SIGKILL, a lost
  node) loses it as soon as PostgreSQL sees the connection gone, and its
  rows are orphans then, not only after the lease.
* **One deliverer per scope**: :meth:`PostgresOutbox._oldest` returns a
  scope's rows only while this connection holds the scope's advisory lock,
  and then takes *all* of the scope's pending rows, whoever acknowledged
  them, so a scope's writes go to mem0 in the order they were acknowledged
  across replicas. The writer keeps the lock until it lets go
  (:meth:`PostgresOutbox.let_go`: nothing pending and its judgement done),
  or its connection ends. The replica that acknowledged a row another one
  stored sees it gone (:meth:`PostgresOutbox.settled`).
* Claims of orphans with ``FOR UPDATE SKIP LOCKED``; the schema's own
  append-only :data:`MIGRATIONS`, applied under ``pg_advisory_xact_lock``
  so replicas opening at once do not race.

Every call runs on the outbox's :class:`~.._sqlite.thread.ConnectionThread`,
as with SQLite. When PostgreSQL cannot be reached, calls raise
:class:`~agentscope_mem0.OutboxWriteError` quickly (a 5 s connect timeout,
TCP keepalives, then one second of failing at once before trying again) and
the write queue keeps writes in memory until it can move them in. psycopg 3
(the ``pgvector`` extra) is imported when an outbox opens.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import time
from collections.abc import Callable, Collection, Iterable, Sequence
from typing import TYPE_CHECKING, Any, NoReturn
from urllib.parse import urlencode, urlsplit

from .._exceptions import ConfigurationError, OutboxWriteError
from .._postgres.connection import mask_url, psycopg_for
from .._sqlite.thread import ConnectionThread
from .outbox import COLUMNS, FAILED, OUTBOX_THREAD, PENDING, BaseOutbox, OutboxRow, row_of

if TYPE_CHECKING:
    import psycopg

__all__ = [
    "DEFAULT_TABLE",
    "MIGRATIONS",
    "PostgresOutbox",
    "check_outbox_url",
    "is_postgres_url",
    "pgvector_outbox",
]

logger = logging.getLogger(__name__)

DEFAULT_TABLE = "agentscope_mem0_outbox"
"""The outbox's table; its schema version is kept in ``<table>_version``."""

CONNECT_TIMEOUT = 5
"""Seconds a connection attempt may take before the write is kept in memory."""
RETRY_AFTER = 1.0
"""Seconds after a failed connection attempt during which calls fail at once."""
TAKEN_LEASE = 30.0
"""The lease on rows taken with their scope (the writer's lease keeper renews it)."""

# Append-only: the version table holds how many entries were applied. ``{t}``
# is the table's name.
MIGRATIONS: tuple[str, ...] = (
    """
    CREATE TABLE IF NOT EXISTS {t} (
        id          BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        key         TEXT NOT NULL UNIQUE,
        user_id     TEXT NOT NULL,
        agent_id    TEXT,
        messages    TEXT NOT NULL,
        kind        TEXT NOT NULL DEFAULT 'exchange',
        said_at     TIMESTAMPTZ NOT NULL,
        status      TEXT NOT NULL DEFAULT 'pending',
        attempts    INTEGER NOT NULL DEFAULT 0,
        batch_key   TEXT,
        claimed_by  TEXT,
        lease_until DOUBLE PRECISION,
        error       TEXT,
        created_at  DOUBLE PRECISION NOT NULL,
        updated_at  DOUBLE PRECISION NOT NULL
    );
    CREATE INDEX IF NOT EXISTS {t}_by_scope ON {t} (user_id, agent_id, status, id);
    CREATE INDEX IF NOT EXISTS {t}_by_owner ON {t} (claimed_by, status);
    CREATE INDEX IF NOT EXISTS {t}_by_batch ON {t} (batch_key)
    """,
)

_NOW = "extract(epoch FROM clock_timestamp())"
_SAME_AGENT = "agent_id IS NOT DISTINCT FROM %s"

# Advisory lock keys are one bigint each; the kind of lock is in the hash's input.
_OWNER = "owner"
_SCOPE = "scope"
_MIGRATING = "migrate"


def is_postgres_url(value: object) -> bool:
    """Whether ``value`` names a PostgreSQL database (``postgresql://`` or ``postgres://``)."""
    return isinstance(value, str) and value.split("://", 1)[0] in ("postgresql", "postgres")


def pgvector_outbox(config: Any) -> tuple[str, str] | None:
    """The URL and table of the outbox beside a pgvector store, or ``None``.

    With a pgvector store and no ``outbox`` named, writes wait in the same
    database, in ``<collection>_outbox`` (beside mem0's ``<collection>``
    and ``<collection>_entities``): two stores in one database never replay
    each other's writes.

    Args:
        config: A mem0 ``MemoryConfig`` (or anything with its ``vector_store``).
    """
    store = getattr(config, "vector_store", None)
    if getattr(store, "provider", None) != "pgvector":
        return None
    fields: Any = getattr(store, "config", None)
    fields = fields.model_dump() if hasattr(fields, "model_dump") else dict(fields or {})
    collection = str(fields.get("collection_name") or "mem0")
    table = f"{collection}_outbox"
    if not _plain_table(table):  # a name mem0 quotes (capitals, length): one of ours
        table = f"{DEFAULT_TABLE}_{hashlib.sha256(collection.encode()).hexdigest()[:10]}"
    dsn = fields.get("connection_string")
    if isinstance(dsn, str) and dsn:
        if is_postgres_url(dsn):
            return dsn, table
        try:  # key=value pairs: the same parameters as a URI's query string
            from psycopg.conninfo import conninfo_to_dict
        except ImportError:
            return None
        parts = {k: str(v) for k, v in conninfo_to_dict(dsn).items() if v is not None}
        return f"postgresql://?{urlencode(parts)}", table
    parts = {
        k: str(fields[k])
        for k in ("host", "port", "dbname", "user", "password", "sslmode")
        if fields.get(k) not in (None, "")
    }
    return (f"postgresql://?{urlencode(parts)}", table) if parts else None


def _plain_table(name: str) -> bool:
    """Whether ``name`` is a lower-case identifier short enough for ``<name>_version``."""
    return name.isascii() and name.isidentifier() and name.lower() == name and len(name) <= 50


def _lock_key(kind: str, *parts: str | None) -> int:
    """A signed 64-bit advisory lock key for ``kind`` and ``parts``."""
    text = json.dumps([kind, *parts])
    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "big", signed=True)


def check_outbox_url(url: str) -> None:
    """Refuse an outbox URL that is not PostgreSQL's, is malformed, or lacks psycopg.

    Raises:
        ConfigurationError: Naming what was wrong and the way out.
    """
    if not is_postgres_url(url):
        raise ConfigurationError(
            f"outbox {mask_url(url)!r} is not a PostgreSQL URL: the outbox is a folder, "
            "':memory:' or postgresql://user:password@host:5432/database"
        )
    psycopg = psycopg_for("an outbox in PostgreSQL")
    try:
        urlsplit(url).port  # noqa: B018  # raises for a port that is not a number
        psycopg.conninfo.conninfo_to_dict(url)
    except (ValueError, psycopg.ProgrammingError) as exc:
        raise ConfigurationError(
            f"the outbox URL {mask_url(url)!r} is malformed ({str(exc).strip()}); write it as "
            "postgresql://user:password@host:5432/database"
        ) from exc


def _one(conn: psycopg.Connection[Any], sql: str, params: Sequence[Any]) -> Any:
    """The first value of the first row of ``sql`` (``None`` for no row)."""
    found = conn.execute(sql, params).fetchone()
    return found[0] if found else None


class PostgresOutbox(BaseOutbox):
    """The outbox in a PostgreSQL table; callable from any thread.

    Its connection lives on a thread of its own; close it when done
    (``with PostgresOutbox(url) as box:`` does).

    Args:
        url: A ``postgresql://`` URL (libpq's URI form).
        table: The table's name (a plain identifier); its schema version is
            kept in ``<table>_version``.

    Raises:
        ConfigurationError: psycopg is missing, or ``url`` or ``table`` is malformed.
        OutboxWriteError: PostgreSQL cannot be reached or refused the schema.
    """

    shared = True
    path = None

    def __init__(self, url: str, *, table: str = DEFAULT_TABLE) -> None:
        self._start_on(None, url, table)

    @classmethod
    def _on_thread(
        cls, thread: ConnectionThread, url: str, *, table: str = DEFAULT_TABLE
    ) -> PostgresOutbox:
        """An outbox whose connection lives on ``thread``, which the caller owns and closes."""
        outbox = cls.__new__(cls)
        outbox._start_on(thread, url, table)
        return outbox

    def _start_on(self, thread: ConnectionThread | None, url: str, table: str) -> None:
        check_outbox_url(url)
        self._psycopg = psycopg_for("an outbox in PostgreSQL")
        if not _plain_table(table):
            raise ConfigurationError(
                f"outbox table {table!r} must be a lower-case identifier of at most 50 characters"
            )
        self.url = url
        self.table = table
        self.where = f"{mask_url(url)} (table {table})"
        self._own_thread = thread is None
        self.thread = thread or ConnectionThread(OUTBOX_THREAD, what=f"the outbox {self.where}")
        self._conn: psycopg.Connection[Any] | None = None
        self._retry_at = 0.0
        self._owners: set[str] = set()  # owner ids whose lock this connection holds
        self._scopes: set[int] = set()  # scope lock keys this connection holds
        try:
            self.thread.call(self._connection)
        except BaseException:
            self.close()
            raise

    @property
    def durable(self) -> bool:
        """Rows survive the process (they are in the database)."""
        return True

    # -- the queue's operations (on the thread) --------------------------------------

    def add(
        self, rows: Sequence[OutboxRow], owner: str | None = None, lease: float = 0.0
    ) -> list[int]:
        if not rows:
            return []
        now = time.time()
        one = f"(%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,{_NOW} + %s)"
        sql = (
            f"INSERT INTO {self.table} (key, user_id, agent_id, messages, status, attempts,"
            " batch_key, error, created_at, updated_at, kind, said_at, claimed_by, lease_until)"
            f" VALUES {','.join([one] * len(rows))}"
            " ON CONFLICT (key) DO NOTHING RETURNING key, id"
        )
        params = [
            value
            for row in rows
            for value in (
                *(row.key, row.user_id, row.agent_id),
                json.dumps(row.messages, ensure_ascii=False),
                *(row.status, row.attempts, row.batch_key, row.error, row.created_at),
                *(now, row.kind, row.said_at, owner, lease if owner else None),
            )
        ]

        def work(conn: psycopg.Connection[Any]) -> list[int]:
            if owner is not None:
                self._hold_owner(conn, owner)
            # One statement, atomic on its own: a reply waits for this, and each
            # round trip (BEGIN, COMMIT) waits for the thread's turn on a busy process.
            ids = dict(conn.execute(sql, params).fetchall())
            return [int(ids.get(row.key, 0)) for row in rows]

        return list(self.thread.call(self._run, work, transaction=False))

    def _oldest(
        self, owner: str, user_id: str, agent_id: str | None, limit: int
    ) -> list[OutboxRow]:
        scope = _lock_key(_SCOPE, user_id, agent_id)

        def work(conn: psycopg.Connection[Any]) -> list[OutboxRow]:
            if scope not in self._scopes:
                if not _one(conn, "SELECT pg_try_advisory_lock(%s)", (scope,)):
                    return []  # another writer delivers this scope now
                self._scopes.add(scope)
            self._hold_owner(conn, owner)
            # Holding the scope, this writer sends all of its rows, in id order.
            conn.execute(
                f"UPDATE {self.table} SET claimed_by = %s, lease_until = {_NOW} + %s"
                f" WHERE status = %s AND user_id = %s AND {_SAME_AGENT}"
                " AND claimed_by IS DISTINCT FROM %s",
                (owner, TAKEN_LEASE, PENDING, user_id, agent_id, owner),
            )
            rows = conn.execute(
                f"SELECT {COLUMNS} FROM {self.table} WHERE claimed_by = %s AND status = %s"
                f" AND user_id = %s AND {_SAME_AGENT} ORDER BY id LIMIT %s",
                (owner, PENDING, user_id, agent_id, limit),
            ).fetchall()
            return [row_of(v) for v in rows]

        return list(self._write(work))

    def let_go(self, user_id: str, agent_id: str | None) -> None:
        """Let other writers deliver this scope (its lock, taken by :meth:`_oldest`)."""
        scope = _lock_key(_SCOPE, user_id, agent_id)
        if scope in self._scopes:
            self._write(lambda conn: self._let_go(conn, scope))

    def _sent_together(self, owner: str, batch_key: str) -> list[OutboxRow]:
        return self._select(
            "WHERE claimed_by = %s AND status = %s AND batch_key = %s ORDER BY id",
            (owner, PENDING, batch_key),
        )

    def start_attempt(self, ids: Sequence[int], *, owner: str, batch_key: str) -> bool:
        def work(conn: psycopg.Connection[Any]) -> bool:
            held = conn.execute(
                f"SELECT id FROM {self.table} WHERE id = ANY(%s) AND claimed_by = %s"
                " AND status = %s FOR UPDATE",
                (list(ids), owner, PENDING),
            ).fetchall()
            if len(held) != len(ids):
                return False
            conn.execute(
                f"UPDATE {self.table} SET batch_key = %s, attempts = attempts + 1,"
                " updated_at = %s WHERE id = ANY(%s)",
                (batch_key, time.time(), list(ids)),
            )
            return True

        return bool(self._write(work))

    def uncount_attempt(self, ids: Sequence[int]) -> None:
        self._execute(
            f"UPDATE {self.table} SET attempts = greatest(attempts - 1, 0) WHERE id = ANY(%s)",
            (list(ids),),
        )

    def complete(self, ids: Sequence[int]) -> None:
        if ids:
            self._execute(f"DELETE FROM {self.table} WHERE id = ANY(%s)", (list(ids),))

    def fail(self, ids: Sequence[int], reason: str) -> None:
        if ids:
            self._execute(
                f"UPDATE {self.table} SET status = %s, error = %s, claimed_by = NULL,"
                " lease_until = NULL, updated_at = %s WHERE id = ANY(%s)",
                (FAILED, reason, time.time(), list(ids)),
            )

    def claim_orphans(
        self, *, owner: str, lease: float, live_here: Iterable[str] = ()
    ) -> list[OutboxRow]:
        # live_here is for owners known by process id; here a live writer is
        # one whose connection holds its owner lock.
        def work(conn: psycopg.Connection[Any]) -> list[OutboxRow]:
            self._hold_owner(conn, owner)
            conn.execute(
                f"UPDATE {self.table} SET lease_until = {_NOW} + %s"
                " WHERE claimed_by = %s AND status = %s",
                (lease, owner, PENDING),
            )
            owners = [
                o
                for (o,) in conn.execute(
                    f"SELECT DISTINCT claimed_by FROM {self.table} WHERE status = %s"
                    " AND claimed_by IS NOT NULL AND claimed_by != %s",
                    (PENDING, owner),
                )
            ]
            dead = [o for o in owners if not self._owner_alive(conn, o)]
            orphaned = [
                i
                for (i,) in conn.execute(
                    f"SELECT id FROM {self.table} WHERE status = %s AND (claimed_by IS NULL"
                    f" OR (claimed_by != %s AND (lease_until < {_NOW} OR claimed_by = ANY(%s))))"
                    " FOR UPDATE SKIP LOCKED",
                    (PENDING, owner, dead),
                )
            ]
            if not orphaned:
                return []
            # The rest of a batch sent with an orphan goes with it (see BaseOutbox).
            ids = [
                i
                for (i,) in conn.execute(
                    f"SELECT id FROM {self.table} WHERE status = %s"
                    " AND claimed_by IS DISTINCT FROM %s AND (id = ANY(%s) OR batch_key IN"
                    f" (SELECT batch_key FROM {self.table} WHERE id = ANY(%s)))"
                    " ORDER BY id FOR UPDATE",
                    (PENDING, owner, orphaned, orphaned),
                )
            ]
            rows = conn.execute(
                f"UPDATE {self.table} SET claimed_by = %s, lease_until = {_NOW} + %s"
                f" WHERE id = ANY(%s) RETURNING {COLUMNS}",
                (owner, lease, ids),
            ).fetchall()
            return sorted((row_of(v) for v in rows), key=lambda r: r.id)

        return list(self._write(work))

    def held(self, owner: str) -> list[OutboxRow]:
        return self._select("WHERE claimed_by = %s AND status = %s ORDER BY id", (owner, PENDING))

    def release(self, *, owner: str, keep: Collection[str] = ()) -> int:
        def work(conn: psycopg.Connection[Any]) -> int:
            count = conn.execute(
                f"UPDATE {self.table} SET claimed_by = NULL, lease_until = NULL"
                " WHERE claimed_by = %s AND status = %s AND NOT (key = ANY(%s))",
                (owner, PENDING, list(keep)),
            ).rowcount
            if not keep and owner in self._owners:
                # Nothing of it is in flight: other writers may take what is left.
                conn.execute("SELECT pg_advisory_unlock(%s)", (_lock_key(_OWNER, owner),))
                self._owners.discard(owner)
            for scope in list(self._scopes):
                self._let_go(conn, scope)
            return int(count)

        return int(self._write(work))

    def failed(self) -> list[OutboxRow]:
        return self._select("WHERE status = %s ORDER BY id", (FAILED,))

    def requeue_failed(
        self, *, owner: str, lease: float, user_id: str | None = None
    ) -> list[OutboxRow]:
        def work(conn: psycopg.Connection[Any]) -> list[OutboxRow]:
            self._hold_owner(conn, owner)
            rows = conn.execute(
                f"UPDATE {self.table} SET status = %s, error = NULL, attempts = 0,"
                f" claimed_by = %s, lease_until = {_NOW} + %s, updated_at = %s"
                " WHERE status = %s AND (%s::text IS NULL OR user_id = %s)"
                f" RETURNING {COLUMNS}",
                (PENDING, owner, lease, time.time(), FAILED, user_id, user_id),
            ).fetchall()
            return sorted((row_of(v) for v in rows), key=lambda r: r.id)

        return list(self._write(work))

    def settled(self, keys: Collection[str]) -> dict[str, bool]:
        """Which of ``keys`` are no longer pending: True when stored (the row is
        gone), False when kept as failed. Keys still pending are left out."""

        def work(conn: psycopg.Connection[Any]) -> dict[str, bool]:
            found = dict(
                conn.execute(
                    f"SELECT key, status FROM {self.table} WHERE key = ANY(%s)", (list(keys),)
                ).fetchall()
            )
            return {k: k not in found for k in keys if found.get(k) != PENDING}

        return dict(self._write(work))

    def newest_id(self) -> int:
        """The id of the newest row in the table (0 when it is empty)."""
        sql = f"SELECT coalesce(max(id), 0) FROM {self.table}"
        return int(self._write(lambda conn: _one(conn, sql, ())))

    def pending_through(self, newest: int) -> int:
        """How many rows up to id ``newest`` wait to be stored."""
        sql = f"SELECT count(*) FROM {self.table} WHERE status = %s AND id <= %s"
        return int(self._write(lambda conn: _one(conn, sql, (PENDING, newest))))

    def counts(self) -> dict[str, int]:
        found = dict(
            self._write(
                lambda c: c.execute(
                    f"SELECT status, count(*) FROM {self.table} GROUP BY status"
                ).fetchall()
            )
        )
        return {"pending": found.get(PENDING, 0), "failed": found.get(FAILED, 0)}

    def read(self, sql: str, params: Sequence[Any] = ()) -> list[Any]:
        """The rows of one query (for inspection and tests); ``{t}`` is the table."""
        return list(self._write(lambda c: c.execute(sql.format(t=self.table), params).fetchall()))

    def close(self) -> None:
        """Close the connection (and the thread, if it is this outbox's own). Idempotent."""
        if self._own_thread:
            self.thread.close(self._disconnect)
        elif self.thread.on_thread() or not self.thread.closed:
            self.thread.call(self._disconnect)

    # -- locks ------------------------------------------------------------------------

    def _hold_owner(self, conn: psycopg.Connection[Any], owner: str) -> None:
        """Hold ``owner``'s lock on this connection: while it lives, so does the owner."""
        if owner not in self._owners:
            conn.execute("SELECT pg_advisory_lock(%s)", (_lock_key(_OWNER, owner),))
            self._owners.add(owner)

    def _owner_alive(self, conn: psycopg.Connection[Any], owner: str) -> bool:
        """Whether some connection holds ``owner``'s lock."""
        key = _lock_key(_OWNER, owner)
        # pg_locks shows a bigint key as its high and low 32 bits (as oids).
        high, low = (key >> 32) & 0xFFFFFFFF, key & 0xFFFFFFFF
        alive = _one(
            conn,
            "SELECT EXISTS (SELECT 1 FROM pg_locks WHERE locktype = 'advisory'"
            " AND classid = %s::bigint::oid AND objid = %s::bigint::oid AND objsubid = 1"
            " AND granted)",
            (high, low),
        )
        return bool(alive)

    def _let_go(self, conn: psycopg.Connection[Any], scope: int) -> None:
        conn.execute("SELECT pg_advisory_unlock(%s)", (scope,))
        self._scopes.discard(scope)

    # -- the connection (on the thread) ------------------------------------------------

    def _connection(self) -> psycopg.Connection[Any]:
        """The open connection, connecting (and migrating) when there is none."""
        conn = self._conn
        if conn is not None and not conn.closed and not conn.broken:
            return conn
        self._forget_connection()
        if time.monotonic() < self._retry_at:
            raise OutboxWriteError(
                f"the outbox {self.where} is unreachable (the last attempt failed less than "
                f"{RETRY_AFTER:.0f} s ago); writes are kept in memory until it works again",
                path=self.where,
            )
        try:
            conn = self._psycopg.connect(
                self.url,
                autocommit=True,
                connect_timeout=CONNECT_TIMEOUT,
                application_name="agentscope-mem0-outbox",
                keepalives=1,
                keepalives_idle=5,
                keepalives_interval=2,
                keepalives_count=3,
            )
            self._migrate(conn)
        except self._psycopg.Error as exc:
            self._retry_at = time.monotonic() + RETRY_AFTER
            self._raise(exc, "connect to it")
        self._conn = conn
        return conn

    def _migrate(self, conn: psycopg.Connection[Any]) -> None:
        version_table = f"{self.table}_version"
        with conn.transaction():
            # One replica at a time creates and migrates the schema.
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (_lock_key(_MIGRATING, self.table),))
            conn.execute(f"CREATE TABLE IF NOT EXISTS {version_table} (version INTEGER NOT NULL)")
            found = conn.execute(f"SELECT version FROM {version_table}").fetchone()
            version = int(found[0]) if found else 0
            if found is None:
                conn.execute(f"INSERT INTO {version_table} (version) VALUES (0)")
            for step in MIGRATIONS[version:]:
                for statement in filter(str.strip, step.format(t=self.table).split(";")):
                    conn.execute(statement)
            conn.execute(f"UPDATE {version_table} SET version = %s", (len(MIGRATIONS),))

    def _write(self, work: Callable[[psycopg.Connection[Any]], Any]) -> Any:
        """Run ``work`` in one transaction on the thread; returns what it returns."""
        return self.thread.call(self._run, work)

    def _execute(self, sql: str, params: Sequence[Any]) -> None:
        self._write(lambda c: c.execute(sql, params))

    def _select(self, where: str, params: Sequence[Any]) -> list[OutboxRow]:
        sql = f"SELECT {COLUMNS} FROM {self.table} {where}"
        return self._write(lambda c: [row_of(v) for v in c.execute(sql, params).fetchall()])

    def _run(
        self, work: Callable[[psycopg.Connection[Any]], Any], *, transaction: bool = True
    ) -> Any:
        """``work`` on the connection, in one transaction (``transaction=False``:
        autocommit, for work that is one statement)."""
        conn = self._connection()
        try:
            if not transaction:
                return work(conn)
            with conn.transaction():
                return work(conn)
        except self._psycopg.Error as exc:
            if conn.broken or conn.closed:
                # Its locks went with it: the next call connects and takes them again.
                self._retry_at = time.monotonic() + RETRY_AFTER
                self._forget_connection()
            self._raise(exc, "write to it")

    def _raise(self, exc: BaseException, doing: str) -> NoReturn:
        raise OutboxWriteError(
            f"the outbox {self.where} failed: could not {doing} ({exc}). Is PostgreSQL "
            "reachable? Writes are kept in memory until it works again",
            path=self.where,
        ) from exc

    def _forget_connection(self) -> None:
        conn, self._conn = self._conn, None
        self._owners.clear()
        self._scopes.clear()
        if conn is not None:
            with contextlib.suppress(Exception):
                conn.close()

    def _disconnect(self) -> None:
        self._forget_connection()
