"""SQL on mem0's history database (SQLite): the change log and the messages
mem0 keeps for extraction.

mem0 2.2 has no API to delete history entries or kept messages, nor to add an
entry with a given date, so ``forget`` and ``import`` use its ``SQLiteManager``
connection directly, under the manager's own lock. Every function here is
synchronous and runs in a worker thread; a client without a history
database is left alone.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from typing import Any
from urllib.parse import unquote

from ._records import MemoryRecord

__all__ = ["add_missing_history", "purge_history", "purge_messages"]

_CHUNK = 500


@contextlib.contextmanager
def _locked(memory: Any) -> Iterator[Any]:
    """mem0's history database, under its lock; ``None`` when there is none."""
    db = getattr(memory, "db", None)
    if getattr(db, "connection", None) is None:
        yield None
        return
    with getattr(db, "_lock", None) or contextlib.nullcontext():
        yield db


def add_missing_history(memory: Any, records: Sequence[MemoryRecord]) -> None:
    """Give each of ``records`` without history an ``ADD`` entry dated ``created_at``."""
    if not records:
        return
    with _locked(memory) as db:
        if db is None:
            return
        marks = ",".join("?" * len(records))
        have = {
            row[0]
            for row in db.connection.execute(
                f"SELECT DISTINCT memory_id FROM history WHERE memory_id IN ({marks})",
                [r.id for r in records],
            )
        }
    missing = [r for r in records if r.id not in have]
    if missing:
        db.batch_add_history(
            [
                {
                    "memory_id": r.id,
                    "old_memory": None,
                    "new_memory": r.text,
                    "event": "ADD",
                    "created_at": r.created_at,
                    "updated_at": r.updated_at,
                    "actor_id": r.actor_id,
                    "role": r.role,
                }
                for r in missing
            ]
        )


def purge_history(memory: Any, ids: list[str]) -> int:
    """Delete the history entries of ``ids``; returns how many."""
    removed = 0
    with _locked(memory) as db:
        if db is None:
            return 0
        for start in range(0, len(ids), _CHUNK):
            chunk = ids[start : start + _CHUNK]
            marks = ",".join("?" * len(chunk))
            cursor = db.connection.execute(
                f"DELETE FROM history WHERE memory_id IN ({marks})", chunk
            )
            removed += cursor.rowcount
        db.connection.commit()
    return removed


def purge_messages(memory: Any, wanted: dict[str, str]) -> int:
    """Delete the kept messages of every session scope matching ``wanted`` ids."""
    removed = 0
    with _locked(memory) as db:
        if db is None:
            return 0
        try:
            scopes = [
                r[0] for r in db.connection.execute("SELECT DISTINCT session_scope FROM messages")
            ]
        except Exception:  # no messages table: nothing kept
            return 0
        for session_scope in scopes:
            # mem0 2.2 keys kept messages by "user_id=alice&agent_id=bot" (values quoted).
            parts = {
                k: unquote(v) for k, _, v in (p.partition("=") for p in session_scope.split("&"))
            }
            if all(parts.get(key) == value for key, value in wanted.items()):
                cursor = db.connection.execute(
                    "DELETE FROM messages WHERE session_scope = ?", (session_scope,)
                )
                removed += cursor.rowcount
        db.connection.commit()
    return removed
