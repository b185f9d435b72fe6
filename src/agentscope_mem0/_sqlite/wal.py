"""Switching one of the package's SQLite files to WAL, also when others open it too.

Changing the journal mode needs the database to itself, and SQLite answers
"database is locked" at once, without waiting out the busy timeout, when
another connection holds a lock at that moment. Several first opens of the
same file at once (threads or processes) are common here, so the switch is
retried until ``timeout`` runs out.
"""

from __future__ import annotations

import sqlite3
import time

from .salvage import sqlite_code

__all__ = ["enable_wal"]

_SQLITE_BUSY = 5
_RETRY_PAUSE = 0.02


def enable_wal(connection: sqlite3.Connection, timeout: float) -> str:
    """Ask for WAL on ``connection``'s file; returns the journal mode it now has.

    Raises:
        sqlite3.OperationalError: The file stayed locked for ``timeout`` seconds,
            or another error.
    """
    deadline = time.monotonic() + timeout
    while True:
        try:
            (mode,) = connection.execute("PRAGMA journal_mode=WAL").fetchone()
            return str(mode).lower()
        except sqlite3.OperationalError as exc:
            if sqlite_code(exc) != _SQLITE_BUSY or time.monotonic() >= deadline:
                raise
            time.sleep(_RETRY_PAUSE)
