"""The outbox's table: its schema (append-only migrations), its SQL and its row type.

:mod:`.outbox` runs the queue's operations on it; :mod:`.outbox_db` applies
the migrations, to a file written by an older release and to the rows a
repair carries over from a damaged one.
"""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from .._text.dates import iso, parse_time
from .outbox_db import Migration

__all__ = [
    "ADOPT",
    "COLUMNS",
    "EXCHANGE",
    "FACTS",
    "FAILED",
    "INSERT",
    "MIGRATIONS",
    "PENDING",
    "OutboxRow",
    "adopt_values",
    "insert_adopted",
    "new_row",
    "row_of",
]

PENDING = "pending"
FAILED = "failed"

EXCHANGE = "exchange"
"""The kind of a row holding a finished reply's exchange."""
FACTS = "facts"
"""The kind of an ``add_memory`` row: facts the agent asked to keep.

When mem0's extraction finds nothing in them, each fact is stored as written."""

_OLD_SAID_AT = "said_at"
"""Where release 0.2 kept a write's said time: a key of each of its message dicts."""


def said_at_column(conn: sqlite3.Connection) -> None:
    """Migration 3: the said time of each write becomes the ``said_at`` column.

    Release 0.2 stamped it into every message dict; the newest stamp of a
    row is what it sent to mem0, so that is the column's value, and the
    stamps leave the messages. A row without one (release 0.1's) is dated
    when it was queued.
    """
    conn.execute("ALTER TABLE writes ADD COLUMN said_at TEXT")
    found = conn.execute("SELECT id, messages, created_at FROM writes").fetchall()
    for row_id, text, created_at in found:
        try:
            messages = json.loads(text)
        except ValueError:
            messages = None
        stamps: list[datetime] = []
        if isinstance(messages, list):
            for message in messages:
                if isinstance(message, dict):
                    stamp = parse_time(message.pop(_OLD_SAID_AT, None))
                    if stamp is not None:
                        stamps.append(stamp)
            text = json.dumps(messages, ensure_ascii=False)
        said = max(stamps, default=datetime.fromtimestamp(created_at, UTC))
        conn.execute(
            "UPDATE writes SET said_at = ?, messages = ? WHERE id = ?", (iso(said), text, row_id)
        )


# Append-only: the schema version is the number of entries applied.
MIGRATIONS: tuple[Migration, ...] = (
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
    said_at_column,
)

INSERT = (
    "INSERT INTO writes (key, user_id, agent_id, messages, claimed_by, lease_until,"
    " created_at, updated_at, kind, said_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
)

ADOPT = (
    "INSERT OR IGNORE INTO writes (key, user_id, agent_id, messages, status, attempts,"
    " batch_key, error, created_at, updated_at, kind, said_at, claimed_by, lease_until)"
    " VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?)"
)

COLUMNS = (
    "id, key, user_id, agent_id, messages, status, attempts, batch_key, "
    "claimed_by, error, created_at, kind, said_at"
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
    """When it was queued (seconds since the epoch)."""
    said_at: datetime
    """When the exchange was said (aware, UTC): the memories' date."""
    kind: str = EXCHANGE
    """:data:`EXCHANGE` (a finished reply) or :data:`FACTS` (from ``add_memory``)."""


def new_row(
    key: str,
    user_id: str,
    agent_id: str | None,
    messages: list[dict[str, str]],
    owner: str,
    lease: float,
    kind: str,
    said_at: datetime,
) -> tuple[Any, ...]:
    """``INSERT``'s values for a new row claimed by ``owner``."""
    now = time.time()
    text = json.dumps(messages, ensure_ascii=False)
    return (key, user_id, agent_id, text, owner, now + lease, now, now, kind, iso(said_at))


def row_of(values: Sequence[Any]) -> OutboxRow:
    """A row as :data:`COLUMNS` selects it."""
    # A row an older release added after the migration has no said time: it
    # was said when it was queued.
    said_at = values[12]
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
        said_at=(
            datetime.fromisoformat(said_at) if said_at else datetime.fromtimestamp(values[10], UTC)
        ),
    )


def adopt_values(
    row: OutboxRow, owner: str | None = None, lease_until: float | None = None
) -> tuple[Any, ...]:
    """``row`` as :data:`ADOPT` inserts it: as it was, held by ``owner`` (or no one)."""
    text = json.dumps(row.messages, ensure_ascii=False)
    head = (row.key, row.user_id, row.agent_id, text, row.status, row.attempts)
    return (
        *head,
        row.batch_key,
        row.error,
        row.created_at,
        time.time(),
        row.kind,
        iso(row.said_at),
        owner,
        lease_until,
    )


def insert_adopted(conn: sqlite3.Connection, values: Sequence[tuple[Any, ...]]) -> int:
    """Insert :func:`adopt_values` rows; returns the highest row id now in the file."""
    conn.executemany(ADOPT, values)
    return int(conn.execute("SELECT coalesce(max(id), 0) FROM writes").fetchone()[0])
