"""SQL on mem0's history database: the change log and the messages mem0
keeps for extraction.

mem0 2.2 has no API to delete history entries or kept messages, nor to add an
entry with a given date, so ``forget`` and ``import`` use its ``SQLiteManager``
connection directly, under the manager's own lock, or the methods of the
PostgreSQL history this package gives a client on a pgvector store
(:class:`~agentscope_mem0._postgres.history.PostgresHistory`). Every function
here is synchronous and runs in a worker thread; a client without a history
database is left alone.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from typing import Any
from urllib.parse import unquote

from .._postgres.history import PostgresHistory
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
    db = getattr(memory, "db", None)
    if isinstance(db, PostgresHistory):
        have = db.memory_ids_with_history(r.id for r in records)
    else:
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
    if isinstance(getattr(memory, "db", None), PostgresHistory):
        return int(memory.db.delete_history(ids))
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
    db = getattr(memory, "db", None)
    if isinstance(db, PostgresHistory):
        return sum(db.delete_messages(s) for s in db.session_scopes() if _matches(s, wanted))
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
            if _matches(session_scope, wanted):
                cursor = db.connection.execute(
                    "DELETE FROM messages WHERE session_scope = ?", (session_scope,)
                )
                removed += cursor.rowcount
        db.connection.commit()
    return removed


def _matches(session_scope: str, wanted: dict[str, str]) -> bool:
    # mem0 2.2 keys kept messages by "user_id=alice&agent_id=bot" (values quoted).
    parts = {k: unquote(v) for k, _, v in (p.partition("=") for p in session_scope.split("&"))}
    return all(parts.get(key) == value for key, value in wanted.items())
