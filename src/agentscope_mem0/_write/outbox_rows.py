"""The outbox's table: its schema (append-only migrations), its SQL and its row type.

Shared by :mod:`._outbox` (the queue's operations) and :mod:`._outbox_db`'s
repair, which copies rows by :data:`ALL_COLUMNS`.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

__all__ = [
    "ADOPT",
    "ALL_COLUMNS",
    "COLUMNS",
    "FAILED",
    "INSERT",
    "MIGRATIONS",
    "PENDING",
    "OutboxRow",
    "adopt_values",
    "new_row",
    "row_of",
]

PENDING = "pending"
FAILED = "failed"

# Append-only: the schema version is the number of entries applied.
MIGRATIONS: tuple[str, ...] = (
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
)

INSERT = (
    "INSERT INTO writes (key, user_id, agent_id, messages, claimed_by, lease_until,"
    " created_at, updated_at, kind) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)"
)

ADOPT = (
    "INSERT OR IGNORE INTO writes (key, user_id, agent_id, messages, status, attempts,"
    " batch_key, error, created_at, updated_at, kind) VALUES (?,?,?,?,?,?,?,?,?,?,?)"
)

ALL_COLUMNS = (
    "id, key, user_id, agent_id, messages, status, attempts, batch_key, claimed_by,"
    " lease_until, error, created_at, updated_at, kind"
)
"""Every column in table order: what a repair carries over from a damaged file."""

COLUMNS = (
    "id, key, user_id, agent_id, messages, status, attempts, batch_key, "
    "claimed_by, error, created_at, kind"
)


@dataclass(frozen=True, slots=True)
class OutboxRow:
    """One queued exchange as the outbox holds it."""

    id: int
    key: str
    """The exchange's idempotency key."""
    user_id: str
    agent_id: str | None
    messages: list[dict[str, str]]
    status: str
    attempts: int
    """How many times it was sent to mem0 (by any writer)."""
    batch_key: str | None
    """The key the last attempt stored in mem0's metadata."""
    claimed_by: str | None
    error: str | None
    created_at: float
    kind: str = "exchange"
    """``"exchange"`` (a finished reply) or ``"facts"`` (from ``add_memory``)."""


def new_row(
    key: str,
    user_id: str,
    agent_id: str | None,
    messages: list[dict[str, str]],
    owner: str,
    lease: float,
    kind: str,
) -> tuple[Any, ...]:
    now = time.time()
    text = json.dumps(messages, ensure_ascii=False)
    return (key, user_id, agent_id, text, owner, now + lease, now, now, kind)


def row_of(values: Sequence[Any]) -> OutboxRow:
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
    )


def adopt_values(row: OutboxRow) -> tuple[Any, ...]:
    """``row`` as :data:`ADOPT` inserts it (unclaimed, as it was)."""
    text = json.dumps(row.messages, ensure_ascii=False)
    head = (row.key, row.user_id, row.agent_id, text, row.status, row.attempts)
    return (*head, row.batch_key, row.error, row.created_at, time.time(), row.kind)
