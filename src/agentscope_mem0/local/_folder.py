"""Where the embedded default keeps its files, and mem0's history database there.

One data folder holds everything::

    <folder>/
      edge/                   the Qdrant Edge store (one shard folder per collection)
      qdrant/                 release 0.1's store, migrated to edge/ on the first open
      history.db              mem0's SQLite history, in WAL mode
      outbox.sqlite3          the durable write outbox (see agentscope_mem0._write.outbox)
      working_memory.sqlite3  working memory kept per user (agentscope_mem0._working.stores)

:class:`FolderLayout` names these places, and nothing else spells them out.
"""

from __future__ import annotations

import logging
import os
import sqlite3
from dataclasses import dataclass
from pathlib import Path

from .._sqlite.salvage import check_history_db
from .._sqlite.wal import enable_wal

__all__ = [
    "COLLECTION",
    "DATA_DIR_ENV",
    "ENTITIES",
    "ENTITY_SUFFIX",
    "HISTORY_BUSY_TIMEOUT",
    "FolderLayout",
    "data_dir",
    "history_db_path",
    "prepare_history_db",
    "set_busy_timeout",
]

logger = logging.getLogger(__name__)

DATA_DIR_ENV = "AGENTSCOPE_MEM0_DIR"
"""Environment variable naming the data folder."""

COLLECTION = "agentscope_mem0"
"""The Qdrant collection the embedded default stores memories in."""

ENTITY_SUFFIX = "_entities"
"""mem0 2.2 keeps entity links in a second collection, ``<name>_entities``
(its ``_entity_collection_name`` for every store but s3)."""

ENTITIES = f"{COLLECTION}{ENTITY_SUFFIX}"
"""The embedded default's entity collection."""

HISTORY_BUSY_TIMEOUT = 30.0
"""Seconds a history-database connection waits for another writer's lock."""


@dataclass(frozen=True)
class FolderLayout:
    """The places inside one data folder; naming them creates nothing.

    Args:
        root: The data folder.
    """

    root: Path

    @classmethod
    def of(cls, folder: str | os.PathLike[str] | None = None) -> FolderLayout:
        """The layout of ``folder``, else ``$AGENTSCOPE_MEM0_DIR``, else
        ``~/.agentscope-mem0`` (absolute, symlinks resolved, not created)."""
        chosen = folder or os.environ.get(DATA_DIR_ENV) or Path.home() / ".agentscope-mem0"
        return cls(Path(chosen).expanduser().resolve())

    @property
    def edge(self) -> Path:
        """The Qdrant Edge store."""
        return self.root / "edge"

    @property
    def qdrant(self) -> Path:
        """Release 0.1's store (qdrant-client local mode), read only to migrate it."""
        return self.root / "qdrant"

    @property
    def history_db(self) -> Path:
        """mem0's history database."""
        return self.root / "history.db"


def data_dir(folder: str | os.PathLike[str] | None = None) -> Path:
    """Resolve (and create) the data folder.

    Args:
        folder: An explicit folder; otherwise ``$AGENTSCOPE_MEM0_DIR``, otherwise
            ``~/.agentscope-mem0``.

    Returns:
        The absolute folder path, symlinks resolved.
    """
    path = FolderLayout.of(folder).root
    path.mkdir(parents=True, exist_ok=True)
    return path


def history_db_path(folder: str | os.PathLike[str] | None = None) -> Path:
    """mem0's history database inside the data folder (see :func:`data_dir`).

    Use it for ``MemoryConfig.history_db_path`` so that mem0 never falls back to
    its global ``~/.mem0/history.db``.
    """
    return FolderLayout(data_dir(folder)).history_db


def prepare_history_db(path: str | os.PathLike[str]) -> None:
    """Switch a history database to WAL mode before mem0 opens it.

    WAL is a property of the database file, so setting it once here covers
    mem0's own connection (mem0 2.2 opens a plain ``sqlite3.connect`` and
    never chooses a journal mode). With WAL, readers do not block the writer,
    and several mem0 clients in one process can share the file.

    Args:
        path: The database file; created when missing. A damaged one is
            moved aside first (see :func:`agentscope_mem0._sqlite.salvage.check_history_db`).
    """
    check_history_db(path)
    connection = sqlite3.connect(path, timeout=HISTORY_BUSY_TIMEOUT)
    try:
        mode = enable_wal(connection, HISTORY_BUSY_TIMEOUT)
    finally:
        connection.close()
    if str(mode).lower() != "wal":
        # Some filesystems (network mounts) cannot do WAL; the rollback journal
        # still works, only with more lock waits.
        logger.warning("history database %s stays in %s mode: WAL is not available", path, mode)


def set_busy_timeout(connection: sqlite3.Connection, seconds: float = HISTORY_BUSY_TIMEOUT) -> None:
    """Make ``connection`` wait up to ``seconds`` for a lock instead of failing."""
    connection.execute(f"PRAGMA busy_timeout = {int(seconds * 1000)}")
