"""Damaged SQLite files: recognise them, move them aside, keep what can be read.

Two files matter: the write outbox (``outbox.sqlite3``, ours) and mem0's
history database (``history.db``). A file zeroed by a crash, overwritten with
garbage or with a corrupted page is moved aside under a ``.damaged-<time>``
name (with its ``-wal``/``-shm`` companions) and a new one is started; for the
outbox the rows still readable in the moved file are carried over.

A lost or garbage WAL cannot be seen in the database itself (SQLite ignores
WAL frames that fail their checksum), so the outbox keeps a high-water mark
of the row ids it committed in a small companion file (``-seen``); fewer ids
in the database than the mark means committed writes vanished.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sqlite3
import struct
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .._exceptions import DamagedFileError

__all__ = [
    "HighWater",
    "SalvagedRows",
    "check_history_db",
    "is_damage",
    "quarantine",
    "read_rows",
    "sqlite_code",
]

logger = logging.getLogger(__name__)

_SQLITE_HEADER = b"SQLite format 3\x00"
_CORRUPT_CODES = {11, 26}  # SQLITE_CORRUPT, SQLITE_NOTADB
_COMPANIONS = ("-wal", "-shm", "-seen")


def sqlite_code(exc: BaseException) -> int | None:
    """SQLite's primary result code of ``exc`` (``None`` when it carries none)."""
    code = getattr(exc, "sqlite_errorcode", None)
    return code & 0xFF if isinstance(code, int) else None


def is_damage(exc: BaseException) -> bool:
    """Whether ``exc`` says the database file itself is damaged."""
    if not isinstance(exc, sqlite3.DatabaseError):
        return False
    if sqlite_code(exc) in _CORRUPT_CODES:
        return True
    text = str(exc).lower()
    return "malformed" in text or "not a database" in text


def quarantine(path: Path) -> Path:
    """Move ``path`` and its companions aside; returns the moved main file.

    Raises:
        DamagedFileError: The file cannot be moved (it names the way out).
    """
    stamp = time.strftime("%Y%m%dT%H%M%S")
    target = path.with_name(f"{path.name}.damaged-{stamp}")
    n = 1
    while target.exists():
        n += 1
        target = path.with_name(f"{path.name}.damaged-{stamp}-{n}")
    try:
        os.replace(path, target)
    except OSError as exc:
        raise DamagedFileError(
            f"{path} is damaged and could not be moved aside ({exc}); move or delete "
            "it (and its -wal/-shm files) yourself, then start again",
            path=path,
        ) from exc
    for suffix in _COMPANIONS:
        companion = path.with_name(path.name + suffix)
        if companion.exists():
            with contextlib.suppress(OSError):
                os.replace(companion, target.with_name(target.name + suffix))
    return target


@dataclass(frozen=True)
class SalvagedRows:
    """What :func:`read_rows` could read of a damaged database's table."""

    version: int | None
    """The file's schema version (``PRAGMA user_version``); ``None`` when unreadable."""
    columns: tuple[str, ...]
    """The table's columns, in the table's order."""
    rows: list[Sequence[Any]]
    """The rows read, by ``id``."""
    partial: bool
    """Whether some rows could not be read."""


def read_rows(path: Path, table: str) -> SalvagedRows:
    """Whatever rows of ``table`` (every column it has) can still be read from a damaged file."""
    nothing = SalvagedRows(None, (), [], True)
    try:
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=1.0)
    except sqlite3.Error:
        return nothing
    try:
        try:
            (version,) = conn.execute("PRAGMA user_version").fetchone()
            columns = tuple(c[1] for c in conn.execute(f"PRAGMA table_info({table})"))
        except sqlite3.Error:
            return nothing
        if not columns:
            return SalvagedRows(version, (), [], True)
        names = ", ".join(columns)
        try:
            rows = conn.execute(f"SELECT {names} FROM {table} ORDER BY id").fetchall()
            return SalvagedRows(version, columns, rows, False)
        except sqlite3.Error:
            pass
        # One row at a time: a damaged page loses only the rows on it.
        rows = []
        try:
            (top,) = conn.execute(
                "SELECT seq FROM sqlite_sequence WHERE name = ?", (table,)
            ).fetchone()
        except (sqlite3.Error, TypeError):
            return SalvagedRows(version, columns, rows, True)
        for rowid in range(1, min(int(top or 0), 100_000) + 1):
            with contextlib.suppress(sqlite3.Error):
                found = conn.execute(
                    f"SELECT {names} FROM {table} WHERE id = ?", (rowid,)
                ).fetchone()
                if found is not None:
                    rows.append(found)
        return SalvagedRows(version, columns, rows, True)
    finally:
        conn.close()


def _looks_like_sqlite(path: Path) -> bool:
    try:
        with path.open("rb") as handle:
            head = handle.read(len(_SQLITE_HEADER))
    except OSError:
        return True  # unreadable for another reason: let SQLite report it
    return head in (b"", _SQLITE_HEADER)


def check_history_db(path: str | os.PathLike[str]) -> None:
    """Move a damaged mem0 history database aside before mem0 opens it.

    The history is mem0's audit log of memory changes; the memories themselves
    live in the vector store, so starting a new history keeps every memory.
    Only the file's header and schema are read (cheap at every start); a page
    damaged deeper inside shows up as failed writes, which stay retryable.

    Raises:
        DamagedFileError: The file is damaged and cannot be moved aside.
    """
    file = Path(path)
    if not file.is_file() or file.stat().st_size == 0:
        return
    cause = None if _looks_like_sqlite(file) else "it does not start with an SQLite header"
    if cause is None:
        try:
            conn = sqlite3.connect(file, timeout=5.0)
            try:
                conn.execute("PRAGMA schema_version").fetchone()
                conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
            finally:
                conn.close()
        except sqlite3.DatabaseError as exc:
            if not is_damage(exc):
                return
            cause = str(exc)
    if cause is None:
        return
    moved = quarantine(file)
    logger.warning(
        "mem0's history database %s is damaged (%s); moved it to %s and starting a new "
        "one. Memories are kept (they live in the vector store); the record of earlier "
        "memory changes is only in the moved file",
        file,
        cause,
        moved,
    )


class HighWater:
    """The highest outbox row id ever committed, kept beside the database.

    Written after each commit without fsync (a killed process keeps it, as
    it keeps the WAL); a mark above the database's own sequence means
    committed rows were lost with the WAL.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self._fd: int | None = None
        self._value = 0

    def read(self) -> int:
        """The mark left on disk (0 when there is none)."""
        try:
            data = self.path.read_bytes()
        except OSError:
            return 0
        return struct.unpack("<q", data[:8])[0] if len(data) >= 8 else 0

    def raise_to(self, value: int) -> None:
        """Record that rows up to ``value`` were committed. Never raises."""
        if value <= self._value:
            return
        self._value = value
        try:
            if self._fd is None:
                self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
            os.pwrite(self._fd, struct.pack("<q", value), 0)
        except OSError:
            logger.debug("could not update %s", self.path, exc_info=True)

    def reset(self, value: int) -> None:
        """Start the mark again at ``value`` (after a repair)."""
        self._value = 0
        with contextlib.suppress(OSError):
            self.path.unlink()
        self.raise_to(value)

    def close(self) -> None:
        """Close the file. Idempotent."""
        if self._fd is not None:
            with contextlib.suppress(OSError):
                os.close(self._fd)
            self._fd = None
