"""The embedded folder read without mem0: memories straight from its Qdrant Edge
shard, their change history from mem0's history file.

Building mem0 means importing mem0, qdrant-client and AgentScope's models (3 to
6 s on a small machine, before any memory is read); listing, exporting,
showing a history or the inspector's pages need none of it. A command reads
through :class:`FolderRows` and builds mem0 only when it searches or writes
(see :class:`~._mem0_store.MemoryStore`). Both share the process's one shard
of the folder (:func:`~agentscope_mem0.local._edge.shared_shard`), so what
mem0 writes is what the next read sees.
"""

from __future__ import annotations

import builtins
import contextlib
import sqlite3
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..local._edge import SharedShard, shard_dims, shared_shard
from ..local._edge_filters import build_filter
from ..local._folder import COLLECTION, FolderLayout

__all__ = ["FolderRows", "Row"]

# Columns of mem0 2.2's history table, in the order its get_history answers them.
_HISTORY_COLUMNS = (
    "id",
    "memory_id",
    "old_memory",
    "new_memory",
    "event",
    "created_at",
    "updated_at",
    "is_deleted",
    "actor_id",
    "role",
)


@dataclass(slots=True)
class Row:
    """One stored memory as a vector store lists it: ``id`` and ``payload``."""

    id: str
    payload: dict[str, Any] = field(default_factory=dict)


class FolderRows:
    """Reads of one embedded data folder, in the shape of mem0's vector store
    (``list``, ``get``, ``count``, ``existing_ids``, ``shard``) plus ``history``.

    Open it with :meth:`open`; it holds the folder (the shard's lock) until
    the folder's shards are closed.

    Args:
        shard: The folder's memory shard.
        history_db: mem0's history database in the folder.
    """

    collection_name = COLLECTION

    def __init__(self, shard: SharedShard, history_db: Path) -> None:
        self.shard = shard
        self.history_db = history_db

    @classmethod
    def open(cls, folder: Path, dims: int) -> FolderRows | None:
        """The reader of ``folder``, or ``None`` when only mem0 can open it (no
        store yet, or a release-0.1 store to migrate first).

        Args:
            folder: The data folder.
            dims: The configured embedder's vector size; a store of another
                size is refused as mem0 would refuse it.

        Raises:
            StoreLockedError: Another process holds the folder.
            DimensionMismatchError: The store holds vectors of another size.
        """
        layout = FolderLayout(folder)
        path = layout.edge / COLLECTION
        if shard_dims(path) is None:
            return None
        return cls(shared_shard(path, dims), layout.history_db)

    def list(
        self, filters: dict[str, Any] | None = None, top_k: int | None = None
    ) -> builtins.list[Row]:
        """Up to ``top_k`` memories under ``filters`` (mem0's filter shape)."""
        from qdrant_edge import ScrollRequest

        request = ScrollRequest(
            limit=int(top_k or 100), filter=build_filter(filters), with_payload=True
        )
        records, _next = self.shard.call("scroll", lambda s: s.scroll(request))
        return [Row(str(r.id), dict(r.payload or {})) for r in records]

    def get(self, vector_id: str) -> Row | None:
        """One memory by id, or ``None``."""
        records = self._retrieve([vector_id], payload=True)
        return Row(str(records[0].id), dict(records[0].payload or {})) if records else None

    def existing_ids(self, ids: builtins.list[str]) -> set[str]:
        """Which of ``ids`` the folder holds."""
        return {str(r.id) for r in self._retrieve(ids, payload=False)}

    def _retrieve(self, ids: builtins.list[str], *, payload: bool) -> builtins.list[Any]:
        wanted = []
        for given in ids:
            with contextlib.suppress(ValueError):  # not a UUID: mem0 made no such memory
                wanted.append(str(uuid.UUID(str(given))))
        if not wanted:
            return []
        return self.shard.call(
            "retrieve", lambda s: s.retrieve(wanted, with_payload=payload, with_vector=False)
        )

    def count(self, filters: dict[str, Any] | None = None) -> int:
        """How many memories match ``filters`` (all of them without)."""
        from qdrant_edge import CountRequest

        request = CountRequest(exact=True, filter=build_filter(filters))
        return int(self.shard.call("count", lambda s: s.count(request)))

    def history(self, memory_id: str) -> builtins.list[dict[str, Any]]:
        """mem0's change history of one memory, oldest first, as mem0's ``history`` answers."""
        if not self.history_db.is_file():
            return []
        with contextlib.closing(sqlite3.connect(self.history_db, timeout=30)) as db:
            try:
                rows = db.execute(
                    f"SELECT {', '.join(_HISTORY_COLUMNS)} FROM history WHERE memory_id = ? "
                    "ORDER BY created_at ASC, DATETIME(updated_at) ASC",
                    (memory_id,),
                ).fetchall()
            except sqlite3.OperationalError:  # no history table: mem0 never wrote one
                return []
        entries = [dict(zip(_HISTORY_COLUMNS, row, strict=True)) for row in rows]
        for entry in entries:
            entry["is_deleted"] = bool(entry["is_deleted"])
        return entries
