"""SQL on mem0's history database (SQLite): the change log and the messages
mem0 keeps for extraction.

mem0 2.2 has no API to delete history entries or kept messages, nor to add an
entry with a given date, so ``forget`` and ``import`` use its ``SQLiteManager``
connection directly, under the manager's own lock. Every function here is
synchronous and runs in a worker thread; a client without a history
database (``connection`` missing) is left alone.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from typing import Any
from urllib.parse import unquote

from ._records import MemoryRecord

__all__ = ["add_missing_history", "purge_history", "purge_messages"]

_CHUNK = 500


def _history_db(memory: Any) -> tuple[Any, Any] | None:
    db = getattr(memory, "db", None)
    connection = getattr(db, "connection", None)
    if connection is None:
        return None
    return db, getattr(db, "_lock", None) or contextlib.nullcontext()


def add_missing_history(memory: Any, records: Sequence[MemoryRecord]) -> None:
    """Give each of ``records`` without history an ``ADD`` entry dated ``created_at``."""
    found = _history_db(memory)
    if found is None or not records:
        return
    db, lock = found
    marks = ",".join("?" * len(records))
    with lock:
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
    found = _history_db(memory)
    if found is None or not ids:
        return 0
    db, lock = found
    removed = 0
    with lock:
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
    found = _history_db(memory)
    if found is None:
        return 0
    db, lock = found
    with lock:
        try:
            scopes = [
                r[0] for r in db.connection.execute("SELECT DISTINCT session_scope FROM messages")
            ]
        except Exception:  # no messages table: nothing kept
            return 0
        removed = 0
        for session_scope in (s for s in scopes if _scope_matches(s, wanted)):
            cursor = db.connection.execute(
                "DELETE FROM messages WHERE session_scope = ?", (session_scope,)
            )
            removed += cursor.rowcount
        db.connection.commit()
    return removed


def _scope_matches(session_scope: str, wanted: dict[str, str]) -> bool:
    # mem0 2.2 keys kept messages by "user_id=alice&agent_id=bot" (values quoted).
    parts = dict(
        (key, unquote(value))
        for key, _, value in (p.partition("=") for p in session_scope.split("&"))
    )
    return all(parts.get(key) == value for key, value in wanted.items())
