"""The outbox's SQLite file: its connection, transactions, checks and repair.

:class:`Database` owns the connection of one outbox file (or of an
in-memory database) and knows nothing about rows; :mod:`.outbox` holds the
queue's SQL. The connection lives on one thread
(:class:`~.._sqlite.thread.ConnectionThread`): every call runs there, in
order, whichever thread made it. It opens the file in WAL mode, checks it,
applies the schema's migrations, runs each write in one ``BEGIN IMMEDIATE``
transaction, and turns SQLite's errors into the package's (naming the file):

* :class:`~.._exceptions.DamagedFileError` for a damaged file: at open it is
  moved aside and replaced, keeping the rows still readable;
* :class:`~.._exceptions.OutboxWriteError` for a disk that refuses the write.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sqlite3
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, NoReturn

from .._exceptions import DamagedFileError, OutboxWriteError
from .._sqlite.salvage import HighWater, is_damage, quarantine, read_rows
from .._sqlite.thread import ConnectionThread
from .._sqlite.wal import enable_wal

__all__ = ["OUTBOX_THREAD", "Database", "Migration"]

logger = logging.getLogger(__name__)

OUTBOX_THREAD = "agentscope-mem0-outbox"
"""The name of the thread that owns an outbox's connections."""

_LAST_ROW_ID = "SELECT coalesce(max(seq), 0) FROM sqlite_sequence"

Migration = str | Callable[[sqlite3.Connection], None]
"""One step of a schema: SQL statements separated by ``;``, or a function
that changes the rows too. Each runs in a transaction of its own."""


class Database:
    """The connection of one outbox, on the thread that owns it.

    Args:
        path: The database file; ``None`` keeps it in memory (no durability).
        migrations: The schema, append-only; its version is the count applied.
        table: The table a repair copies (it must have an ``id`` column).
        busy_timeout: Seconds to wait for another process's write lock.
        thread: The thread that owns the connection (a write queue's file and
            its in-memory stand-in share one); by default one of its own,
            ended by :meth:`close`.
    """

    def __init__(
        self,
        path: Path | None,
        *,
        migrations: Sequence[Migration],
        table: str,
        busy_timeout: float = 10.0,
        thread: ConnectionThread | None = None,
    ) -> None:
        self.path = path
        self._migrations = tuple(migrations)
        self._table = table
        self._busy_timeout = busy_timeout
        self._where = os.fspath(path) if path is not None else ":memory:"
        self._own_thread = thread is None
        self.thread = thread or ConnectionThread(OUTBOX_THREAD, what=f"the outbox {self._where}")
        """Where every call on the connection runs."""
        self.lost_at_open = 0
        """Committed rows found missing when the file was opened (a lost WAL)."""
        self.recovered_at_open: int | None = None
        """Rows carried over from a damaged file replaced at open (``None``: none was)."""
        self._mark = HighWater(path.with_name(path.name + "-seen")) if path else None
        try:
            self.thread.call(self._start)
        except BaseException:
            self.close()
            raise

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

    # -- opening and repair ---------------------------------------------------

    def _open(self, *, version: int | None = None) -> None:
        """Connect, check the file and migrate it (up to ``version``: all)."""
        self._conn = sqlite3.connect(
            self._where,
            timeout=self._busy_timeout,
            isolation_level=None,  # explicit BEGIN / COMMIT
        )
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
        target = len(self._migrations) if upto is None else upto
        (version,) = self._conn.execute("PRAGMA user_version").fetchone()
        while version < target:
            # Read again under the write lock: another process opening the
            # same file may have migrated it since.
            self._conn.execute("BEGIN IMMEDIATE")
            try:
                (version,) = self._conn.execute("PRAGMA user_version").fetchone()
                if version < target:
                    step = self._migrations[version]
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
        found = read_rows(moved, self._table)
        # The rows go into the schema they were written in; the migrations
        # after it then apply to them as to any older file.
        self._open(version=found.version)
        rows, partial = found.rows, found.partial
        table = self._conn.execute(f"PRAGMA table_info({self._table})").fetchall()
        known = {column[1] for column in table}
        keep = [i for i, name in enumerate(found.columns) if name in known]
        if rows and keep:
            columns = ", ".join(found.columns[i] for i in keep)
            values = [[row[i] for i in keep] for row in rows]
            sql = f"INSERT INTO {self._table} ({columns}) VALUES ({','.join('?' * len(keep))})"
            self._run(lambda c: c.executemany(sql, values))
        self._migrate()
        logger.error(
            "the outbox %s was damaged (%s); moved it to %s and started a new one with "
            "the %d rows still readable%s",
            self.path,
            cause,
            moved,
            len(rows),
            "; some rows could not be read and are lost" if partial else "",
        )
        if self._mark is not None:
            at = found.columns.index("id") if rows else 0
            self._mark.reset(max((int(row[at]) for row in rows), default=0))
        return len(rows)

    def _check_high_water(self) -> None:
        if self._mark is None:
            return
        ((seq,),) = self._read(_LAST_ROW_ID, ())
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
        if mark > seq:
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
        else:
            self._mark.raise_to(int(seq))

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

    # -- use ----------------------------------------------------------------

    def write(self, work: Callable[[sqlite3.Connection], Any]) -> Any:
        """Run ``work`` in one immediate transaction; returns what it returns."""
        return self.thread.call(self._run, work)

    def read(self, sql: str, params: Sequence[Any] = ()) -> list[Any]:
        """Rows of one query."""
        return self.thread.call(self._read, sql, params)

    def mark(self, rowid: int) -> None:
        """Note that rows up to ``rowid`` are committed (see :class:`HighWater`)."""
        if self._mark is not None:
            self.thread.call(self._mark.raise_to, rowid)

    def close(self) -> None:
        """Close the connection (and the thread, if it is this database's own). Idempotent."""
        if self._own_thread:
            self.thread.close(self._shut)
        elif self.thread.on_thread() or not self.thread.closed:
            self.thread.call(self._shut)  # as its owner closes the thread, too

    def _shut(self) -> None:
        self._close_connection()
        if self._mark is not None:
            self._mark.close()

    def _read(self, sql: str, params: Sequence[Any]) -> list[Any]:
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
        where = self._where
        if is_damage(exc):
            raise DamagedFileError(
                f"the outbox {where} is damaged ({exc}); could not {doing}. It is moved "
                "aside and replaced at the next start (or move it away yourself)",
                path=where,
            ) from exc
        if isinstance(exc, sqlite3.Error | OSError):
            raise OutboxWriteError(
                f"the outbox {where} failed: could not {doing} ({exc}). Is the disk "
                "full or read-only? Writes are kept in memory until it works again",
                path=where,
            ) from exc
        raise exc

    def _close_connection(self) -> None:
        conn = getattr(self, "_conn", None)
        if conn is not None:
            with contextlib.suppress(sqlite3.Error):
                conn.close()


def _rollback(conn: sqlite3.Connection) -> None:
    if conn.in_transaction:
        with contextlib.suppress(sqlite3.Error):
            conn.execute("ROLLBACK")
