"""The durable outbox: every queued write is a row until mem0 has it.

A row is inserted before ``submit`` returns and deleted only after mem0
confirmed the write. Each row is *claimed* by one live writer (its ``owner``)
under a lease; a writer that died (its process is gone, or its lease ran out)
leaves rows that the next writer claims in one ``BEGIN IMMEDIATE``
transaction, so two writers never take the same row.

Before a row is sent to mem0 its ``batch_key`` (the idempotency key stored in
the memories' metadata) and ``attempts`` are committed; a row found with a
``batch_key`` may already be in mem0, and the writer removes what mem0 holds
under that key before sending it again.

This module is synchronous and holds no event loop: every call runs on the
thread that owns the outbox's connection (see :mod:`.outbox_db`), and the
write queue awaits them there. Without a folder the same tables live in
memory. The file itself (opening, checks, repair, errors) is
:mod:`.outbox_db`'s job.
"""

from __future__ import annotations

import os
import sqlite3
import time
from collections.abc import Collection, Iterable, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from types import TracebackType
from typing import Any

from .._sqlite.thread import ConnectionThread
from .outbox_db import Database
from .outbox_rows import (
    COLUMNS,
    EXCHANGE,
    FACTS,
    FAILED,
    INSERT,
    MIGRATIONS,
    PENDING,
    OutboxRow,
    adopt_values,
    insert_adopted,
    new_row,
    row_of,
)
from .owners import new_owner_id, owner_is_dead

__all__ = [
    "OUTBOX_FILENAME",
    "Outbox",
    "OutboxRow",
    "count_held",
    "new_owner_id",
    "outbox_on",
    "owner_is_dead",
]

OUTBOX_FILENAME = "outbox.sqlite3"
"""The outbox's file name inside the configured folder."""


class Outbox:
    """The SQLite tables behind a write queue; callable from any thread.

    Its connection lives on a thread of its own; close it when done
    (``with Outbox(path) as box:`` does).

    Args:
        path: The database file; ``None`` keeps it in memory (no durability).
        busy_timeout: Seconds to wait for another process's write lock.
    """

    def __init__(self, path: str | os.PathLike[str] | None, *, busy_timeout: float = 10.0) -> None:
        self._setup(path, busy_timeout, None)

    def _setup(
        self,
        path: str | os.PathLike[str] | None,
        busy_timeout: float,
        thread: ConnectionThread | None,
    ) -> None:
        self.path = Path(path) if path is not None else None
        self.db = Database(
            self.path,
            migrations=MIGRATIONS,
            table="writes",
            busy_timeout=busy_timeout,
            thread=thread,
        )
        """The file: its checks at open (``lost_at_open``, ``recovered_at_open``), repair."""
        self._write = self.db.write
        self._read = self.db.read

    @classmethod
    def in_folder(cls, folder: str | os.PathLike[str], **kwargs: Any) -> Outbox:
        """The outbox file :data:`OUTBOX_FILENAME` in ``folder`` (created if needed)."""
        return cls(Path(folder).expanduser() / OUTBOX_FILENAME, **kwargs)

    @property
    def durable(self) -> bool:
        """Whether rows survive the process."""
        return self.path is not None

    # -- queueing ---------------------------------------------------------

    def insert(
        self,
        *,
        key: str,
        user_id: str,
        agent_id: str | None,
        messages: list[dict[str, str]],
        owner: str,
        lease: float,
        kind: str = EXCHANGE,
        said_at: datetime | None = None,
    ) -> int:
        """Record a new exchange, claimed by ``owner``; returns its row id.

        ``said_at`` (aware) is when it was said, default now.
        """
        row: dict[str, Any] = {"key": key, "user_id": user_id, "agent_id": agent_id}
        row.update(messages=messages, owner=owner, lease=lease, kind=kind, said_at=said_at)
        return self.insert_many([row])[0]

    def insert_many(self, rows: Sequence[Mapping[str, Any]]) -> list[int]:
        """Record several new exchanges in one transaction (one sync to disk);
        each mapping holds :meth:`insert`'s arguments. Returns their row ids."""
        now = datetime.now(UTC)
        values = [
            new_row(
                row["key"],
                row["user_id"],
                row["agent_id"],
                row["messages"],
                row["owner"],
                row["lease"],
                row.get("kind", EXCHANGE),
                row.get("said_at") or now,
            )
            for row in rows
        ]
        ids = self._write(lambda c: [c.execute(INSERT, v).lastrowid or 0 for v in values])
        if ids:
            self.db.mark(max(ids))
        return list(ids)

    def next_batch(
        self,
        *,
        owner: str,
        user_id: str,
        agent_id: str | None,
        limit: int,
        skip: Collection[int] = (),
    ) -> list[OutboxRow]:
        """The oldest pending rows of one scope that ``owner`` holds, to send together.

        Rows an earlier attempt sent under one ``batch_key`` come back as that
        same group; otherwise up to ``limit`` consecutive rows never sent,
        said on the same day (UTC) as the first: mem0 gives one call one
        observation date. Rows in ``skip`` (stored, waiting for the store's
        sync) are not sent again.
        """
        rows = [
            row
            for row in map(
                row_of,
                self._read(
                    f"SELECT {COLUMNS} FROM writes WHERE claimed_by = ? AND status = ?"
                    " AND user_id = ? AND agent_id IS ? ORDER BY id LIMIT ?",
                    (owner, PENDING, user_id, agent_id, max(limit, 1) + len(skip)),
                ),
            )
            if row.id not in skip
        ][: max(limit, 1)]
        if not rows:
            return []
        first = rows[0]
        if first.batch_key is not None:
            return [
                row
                for row in map(
                    row_of,
                    self._read(
                        f"SELECT {COLUMNS} FROM writes WHERE claimed_by = ? AND status = ?"
                        " AND batch_key = ? ORDER BY id",
                        (owner, PENDING, first.batch_key),
                    ),
                )
                if row.id not in skip
            ]
        batch: list[OutboxRow] = [first]
        for row in rows[1:]:
            # Facts from add_memory go alone: their fallback is theirs only.
            if row.batch_key is not None or FACTS in (row.kind, first.kind):
                break
            if row.said_at.date() != first.said_at.date():
                break
            batch.append(row)
        return batch

    def start_attempt(self, ids: Sequence[int], *, owner: str, batch_key: str) -> bool:
        """Commit the key and the attempt count before the rows go to mem0.

        Returns:
            False when ``owner`` no longer holds all the rows (another writer
            took them after this one's lease ran out); then nothing changed.
        """

        def work(conn: sqlite3.Connection) -> bool:
            marks = ",".join("?" * len(ids))
            (held,) = conn.execute(
                f"SELECT count(*) FROM writes WHERE id IN ({marks}) AND claimed_by = ?"
                " AND status = ?",
                (*ids, owner, PENDING),
            ).fetchone()
            if held != len(ids):
                return False
            conn.execute(
                f"UPDATE writes SET batch_key = ?, attempts = attempts + 1, updated_at = ?"
                f" WHERE id IN ({marks})",
                (batch_key, time.time(), *ids),
            )
            return True

        return bool(self._write(work))

    def complete(self, ids: Sequence[int]) -> None:
        """Remove rows mem0 has stored."""
        if ids:
            marks = ",".join("?" * len(ids))
            self._write(lambda c: c.execute(f"DELETE FROM writes WHERE id IN ({marks})", ids))

    def uncount_attempt(self, ids: Sequence[int]) -> None:
        """Take back one attempt of ``ids``: the store refused for want of space."""
        marks = ",".join("?" * len(ids))
        self._write(
            lambda c: c.execute(
                f"UPDATE writes SET attempts = max(attempts - 1, 0) WHERE id IN ({marks})", ids
            )
        )

    def fail(self, ids: Sequence[int], reason: str) -> None:
        """Keep rows as failed, with ``reason``, unclaimed and not retried."""
        if ids:
            marks = ",".join("?" * len(ids))
            self._write(
                lambda c: c.execute(
                    f"UPDATE writes SET status = ?, error = ?, claimed_by = NULL,"
                    f" lease_until = NULL, updated_at = ? WHERE id IN ({marks})",
                    (FAILED, reason, time.time(), *ids),
                )
            )

    # -- ownership ----------------------------------------------------------

    def renew(self, *, owner: str, lease: float) -> int:
        """Extend the lease on every pending row ``owner`` holds; returns how many."""
        return int(
            self._write(
                lambda c: (
                    c.execute(
                        "UPDATE writes SET lease_until = ? WHERE claimed_by = ? AND status = ?",
                        (time.time() + lease, owner, PENDING),
                    ).rowcount
                )
            )
        )

    def claim_orphans(
        self, *, owner: str, lease: float, live_here: Iterable[str] = ()
    ) -> list[OutboxRow]:
        """Take over the pending rows no live writer holds, atomically.

        A row is an orphan when it is unclaimed, its lease ran out, or its
        owner is known to be dead (see :func:`owner_is_dead`). The other
        pending rows sent in one batch with an orphan (same ``batch_key``)
        are taken with it.

        Returns:
            The rows now held by ``owner``, oldest first.
        """
        live = set(live_here)

        def work(conn: sqlite3.Connection) -> list[OutboxRow]:
            now = time.time()
            owners = [
                o
                for (o,) in conn.execute(
                    "SELECT DISTINCT claimed_by FROM writes WHERE status = ?"
                    " AND claimed_by IS NOT NULL AND claimed_by != ?",
                    (PENDING, owner),
                )
            ]
            dead = [o for o in owners if owner_is_dead(o, live)]
            marks = ",".join("?" * len(dead))
            dead_clause = f" OR claimed_by IN ({marks})" if dead else ""
            where = (
                "status = ? AND (claimed_by IS NULL OR"
                f" (claimed_by != ? AND (lease_until < ?{dead_clause})))"
            )
            params = (PENDING, owner, now, *dead)
            # The rows of a batch sent under one key go together, even when
            # their leases lapse one by one: redoing only some of them under
            # that key would let redoing the others delete what they stored.
            orphaned = f"SELECT id FROM writes WHERE {where}"
            batches = f"SELECT batch_key FROM writes WHERE id IN ({orphaned})"
            ids = [
                i
                for (i,) in conn.execute(
                    "SELECT id FROM writes WHERE status = ? AND claimed_by IS NOT ? AND"
                    f" (id IN ({orphaned}) OR batch_key IN ({batches}))",
                    (PENDING, owner, *params, *params),
                )
            ]
            if not ids:
                return []
            id_marks = ",".join("?" * len(ids))
            conn.execute(
                f"UPDATE writes SET claimed_by = ?, lease_until = ? WHERE id IN ({id_marks})",
                (owner, now + lease, *ids),
            )
            return [
                row_of(v)
                for v in conn.execute(
                    f"SELECT {COLUMNS} FROM writes WHERE id IN ({id_marks}) ORDER BY id", ids
                )
            ]

        return list(self._write(work))

    def held(self, owner: str) -> list[OutboxRow]:
        """The pending rows ``owner`` holds, oldest first."""
        return [
            row_of(v)
            for v in self._read(
                f"SELECT {COLUMNS} FROM writes WHERE claimed_by = ? AND status = ? ORDER BY id",
                (owner, PENDING),
            )
        ]

    def release(self, *, owner: str, keep: Sequence[int] = ()) -> int:
        """Give up ``owner``'s pending rows (except ``keep``) for others to claim."""
        marks = ",".join("?" * len(keep))
        keep_clause = f" AND id NOT IN ({marks})" if keep else ""
        return int(
            self._write(
                lambda c: (
                    c.execute(
                        "UPDATE writes SET claimed_by = NULL, lease_until = NULL"
                        f" WHERE claimed_by = ? AND status = ?{keep_clause}",
                        (owner, PENDING, *keep),
                    ).rowcount
                )
            )
        )

    # -- failed rows ----------------------------------------------------------

    def failed(self) -> list[OutboxRow]:
        """Every row kept as failed, oldest first."""
        return [
            row_of(v)
            for v in self._read(
                f"SELECT {COLUMNS} FROM writes WHERE status = ? ORDER BY id", (FAILED,)
            )
        ]

    def requeue_failed(
        self, *, owner: str, lease: float, user_id: str | None = None
    ) -> list[OutboxRow]:
        """Make failed rows (of ``user_id``, or all) pending again, held by ``owner``.

        Their ``attempts`` start again from zero; their ``batch_key`` stays, so
        a write that did reach mem0 before failing is recognised rather than
        stored twice.
        """

        def work(conn: sqlite3.Connection) -> list[OutboxRow]:
            where = "status = ?" + (" AND user_id = ?" if user_id is not None else "")
            params: tuple[Any, ...] = (FAILED,) + ((user_id,) if user_id is not None else ())
            ids = [i for (i,) in conn.execute(f"SELECT id FROM writes WHERE {where}", params)]
            if not ids:
                return []
            marks = ",".join("?" * len(ids))
            conn.execute(
                f"UPDATE writes SET status = ?, error = NULL, attempts = 0, claimed_by = ?,"
                f" lease_until = ?, updated_at = ? WHERE id IN ({marks})",
                (PENDING, owner, time.time() + lease, time.time(), *ids),
            )
            return [
                row_of(v)
                for v in conn.execute(
                    f"SELECT {COLUMNS} FROM writes WHERE id IN ({marks}) ORDER BY id", ids
                )
            ]

        return list(self._write(work))

    def adopt_rows(
        self, rows: Sequence[OutboxRow], *, owner: str | None = None, lease: float = 0.0
    ) -> int:
        """Insert rows kept elsewhere (in memory) as they were: unclaimed, or
        held by ``owner`` for ``lease`` seconds. A key already here is skipped."""
        until = time.time() + lease if owner is not None else None
        values = [adopt_values(row, owner, until) for row in rows]
        if values:
            self.db.mark(self._write(lambda c: insert_adopted(c, values)))
        return len(values)

    def counts(self) -> dict[str, int]:
        """``{"pending": n, "failed": m}`` over the whole outbox."""
        found = dict(self._read("SELECT status, count(*) FROM writes GROUP BY status"))
        return {"pending": found.get(PENDING, 0), "failed": found.get(FAILED, 0)}

    def close(self) -> None:
        """Close the file. Idempotent."""
        self.db.close()

    def __enter__(self) -> Outbox:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()


def outbox_on(thread: ConnectionThread, path: str | os.PathLike[str] | None) -> Outbox:
    """An :class:`Outbox` whose connection lives on ``thread``, which the caller
    owns and closes (a write queue's file and its in-memory stand-in share one)."""
    outbox = Outbox.__new__(Outbox)
    outbox._setup(path, 10.0, thread)
    return outbox


def count_held(path: str | os.PathLike[str], owner: str) -> int:
    """Pending rows ``owner`` holds, read through a fresh connection (for exit hooks)."""
    conn = sqlite3.connect(str(path), timeout=1.0)
    try:
        (n,) = conn.execute(
            "SELECT count(*) FROM writes WHERE claimed_by = ? AND status = ?", (owner, PENDING)
        ).fetchone()
        return int(n)
    finally:
        conn.close()
