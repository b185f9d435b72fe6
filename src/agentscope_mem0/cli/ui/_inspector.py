"""What the inspector reads and changes, on the CLI's open store.

A thin layer over :class:`~.._store.MemoryStore` / :class:`~.._hosted.HostedStore`
(the same stores the commands use), :class:`~..._backend.Mem0Backend` for
search (so scores and order are the middleware's own), and the write outbox.
"""

from __future__ import annotations

import json
import sqlite3
import statistics
import time
from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..._mem0.backend import Mem0Backend
from ..._memories.hit import MemoryHit
from ..._memories.lifecycle import (
    DUPLICATE_OF,
    EVENT_DATE,
    EXTENDS,
    SUPERSEDED_BY,
    SUPERSEDES,
    VALID_UNTIL,
)
from ..._scope import Scope
from ..._text.dates import parse_time
from ..._write.outbox import OUTBOX_FILENAME, Outbox, new_owner_id

if TYPE_CHECKING:
    from .._config import Settings
    from .._hosted import HostedStore
    from .._records import MemoryRecord
    from .._store import MemoryStore

__all__ = ["Inspector", "MemoryView", "OutboxView", "UserSummary", "WriteView"]


@dataclass(frozen=True)
class UserSummary:
    """One user of the store."""

    user_id: str
    memories: int
    agents: tuple[str, ...] = ()
    last_write: str | None = None


@dataclass(frozen=True)
class Overview:
    """What the home page shows: totals and the users, most memories (or newest) first."""

    memories: int
    users: list[UserSummary]
    agents: int
    per_day: list[tuple[date, int]] | None
    """Memories created per day, when the store was scanned to count (not on Qdrant Edge)."""


@dataclass
class MemoryView:
    """A memory as the user page shows it, with what supersedes or extends what."""

    record: MemoryRecord
    valid_until: str | None = None
    event_date: str | None = None
    superseded_by: str | None = None
    supersedes: list[str] = field(default_factory=list)
    extends: str | None = None
    extended_by: list[str] = field(default_factory=list)
    duplicate_of: str | None = None
    duplicates: list[str] = field(default_factory=list)

    @property
    def current(self) -> bool:
        """Neither superseded by a newer memory nor a duplicate of a kept one."""
        return self.superseded_by is None and self.valid_until is None


@dataclass(frozen=True)
class WriteView:
    """One row of the write outbox."""

    id: int
    user_id: str
    agent_id: str | None
    status: str
    attempts: int
    error: str | None
    queued_at: str
    preview: str


@dataclass(frozen=True)
class OutboxView:
    """The outbox file and its rows."""

    path: Path
    exists: bool
    pending: list[WriteView]
    failed: list[WriteView]


def _ids(value: Any) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str):
        try:
            parsed = json.loads(value)
        except ValueError:
            return [value] if value else []
        return _ids(parsed) if not isinstance(parsed, str) else [parsed]
    if isinstance(value, list | tuple):
        return [str(v) for v in value if v]
    return [str(value)]


def relate(records: list[MemoryRecord]) -> list[MemoryView]:
    """Views of ``records``, newest first, with the relations in both directions."""
    views = {r.id: MemoryView(record=r) for r in records}
    for view in views.values():
        meta = view.record.metadata
        view.valid_until = _text(meta.get(VALID_UNTIL))
        view.event_date = _text(meta.get(EVENT_DATE))
        view.superseded_by = next(iter(_ids(meta.get(SUPERSEDED_BY))), None)
        view.supersedes = _ids(meta.get(SUPERSEDES))
        view.extends = next(iter(_ids(meta.get(EXTENDS))), None)
        view.duplicate_of = next(iter(_ids(meta.get(DUPLICATE_OF))), None)
    for view in views.values():
        newer = views.get(view.superseded_by or "")
        if newer is not None and view.record.id not in newer.supersedes:
            newer.supersedes.append(view.record.id)
        for older_id in view.supersedes:
            older = views.get(older_id)
            if older is not None and older.superseded_by is None:
                older.superseded_by = view.record.id
        base = views.get(view.extends or "")
        if base is not None:
            base.extended_by.append(view.record.id)
        kept = views.get(view.duplicate_of or "")
        if kept is not None:
            kept.duplicates.append(view.record.id)
    return sorted(views.values(), key=lambda v: (v.record.date or "", v.record.id), reverse=True)


def _text(value: Any) -> str | None:
    return None if value is None or value == "" else str(value)


def _day(value: str | None) -> date | None:
    parsed = parse_time(value)
    return None if parsed is None else parsed.date()


def per_day(
    records: list[MemoryRecord], *, days: int = 30, today: date | None = None
) -> list[tuple[date, int]]:
    """Memories created on each of the last ``days`` days, oldest first."""
    end = today or datetime.now(UTC).date()
    counts = Counter(d for d in (_day(r.created_at) for r in records) if d is not None)
    return [
        (day, counts.get(day, 0)) for day in (end - timedelta(n) for n in range(days - 1, -1, -1))
    ]


class Inspector:
    """Reads and changes for the web page, on one open store.

    Args:
        store: From the CLI's ``open_store``; the caller closes it.
        settings: Where it came from.
    """

    def __init__(self, store: MemoryStore | HostedStore, settings: Settings) -> None:
        self.store = store
        self.settings = settings
        self.backend = Mem0Backend(store.memory)
        self.outbox_path = settings.outbox / OUTBOX_FILENAME
        self.started = time.time()
        self._latencies: list[float] = []
        self.counters: Counter[str] = Counter()

    @property
    def lists_users(self) -> bool:
        """Whether the store can list every user (the hosted platform cannot)."""
        return not self.store.hosted

    # -- reading ------------------------------------------------------------

    async def everything(self) -> list[MemoryRecord]:
        """Every memory of every user."""
        return await self.store.records(None)

    async def overview(self) -> Overview:
        """Totals and users. On Qdrant Edge they come from the engine's payload
        index (a count and two facets), so the home page does not read every
        memory; elsewhere the store is scanned once."""
        facet: Any = getattr(self.store, "facet", None)  # the hosted store has none
        users = await facet("user_id") if facet is not None else None
        if users is None:
            records = await self.everything()
            summaries = self.users(records)
            agents = len({r.agent_id for r in records if r.agent_id})
            return Overview(len(records), summaries, agents, per_day(records))
        agents_count = await facet("agent_id") or {}
        # The facets still name a value whose memories were all deleted, with 0.
        summaries = [UserSummary(user_id=u, memories=n) for u, n in users.items() if u and n > 0]
        summaries.sort(key=lambda u: (-u.memories, u.user_id))
        total = await self.store.count(None)
        agents = sum(1 for agent, n in agents_count.items() if agent and n > 0)
        return Overview(total, summaries, agents, None)

    async def agents_of(self, user_id: str) -> list[str]:
        """The agents that stored memories of ``user_id``."""
        records = await self.store.records(Scope(user_id))
        return sorted({r.agent_id for r in records if r.agent_id})

    async def timeline(self, memory_id: str) -> tuple[MemoryRecord | None, list[dict[str, Any]]]:
        """One memory and what ``agentscope-mem0 history`` shows of it: mem0's
        change history, then what it supersedes or extends and what supersedes
        or extends it."""
        from .._timeline import chain

        record = await self.store.get(memory_id)
        entries = await self.store.history(memory_id)
        if record is not None and record.user_id:
            entries = entries + chain(record, await self.store.records(Scope(record.user_id)))
        return record, entries

    def working(self, user_id: str, conversation: str | None) -> tuple[Any, list[str], str]:
        """The working memory of a user (or one conversation), the user's
        conversations that have one, and where the store is."""
        from .._working import open_working_store

        store = open_working_store(self.settings)
        try:
            record = store.load(user_id, conversation or "")
            return record, store.conversations(user_id), store.location
        finally:
            store.close()

    @staticmethod
    def users(records: list[MemoryRecord]) -> list[UserSummary]:
        """The users among ``records``, the most recently written first."""
        by_user: dict[str, list[MemoryRecord]] = {}
        for record in records:
            by_user.setdefault(record.user_id or "", []).append(record)
        out = [
            UserSummary(
                user_id=user,
                memories=len(rows),
                agents=tuple(sorted({r.agent_id for r in rows if r.agent_id})),
                last_write=max((r.date or "" for r in rows), default="") or None,
            )
            for user, rows in by_user.items()
            if user
        ]
        return sorted(out, key=lambda u: (u.last_write or "", u.user_id), reverse=True)

    async def memories(self, user_id: str, agent_id: str | None = None) -> list[MemoryView]:
        """One user's memories (of one agent, if given), newest first."""
        return relate(await self.store.records(Scope(user_id, agent_id)))

    async def search(
        self, query: str, user_id: str, agent_id: str | None = None, *, top_k: int = 10
    ) -> list[tuple[MemoryHit, str | None]]:
        """The middleware's own search (:meth:`Mem0Backend.search`), best first,
        each hit with the agent that stored it."""
        started = time.perf_counter()
        try:
            hits = await self.backend.search(query, Scope(user_id, agent_id), top_k=top_k)
        except Exception:
            self.counters["search_failures"] += 1
            raise
        self._latencies.append(time.perf_counter() - started)
        self.counters["searches"] += 1
        self.counters["search_hits"] += len(hits)
        found = []
        for hit in hits:
            record = await self.store.get(hit.id) if hit.id else None
            found.append((hit, record.agent_id if record is not None else None))
        return found

    def search_latency_ms(self) -> tuple[float, float] | None:
        """Median and 95th percentile of this page's searches, in ms."""
        if not self._latencies:
            return None
        ordered = sorted(self._latencies)
        p95 = ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]
        return statistics.median(ordered) * 1000, p95 * 1000

    # -- forgetting ---------------------------------------------------------

    async def get(self, memory_id: str) -> MemoryRecord | None:
        """One memory by id."""
        return await self.store.get(memory_id)

    async def forget(self, memory_id: str) -> tuple[MemoryRecord, list[MemoryRecord]] | None:
        """Forget one memory and its change history; ``None`` if there was none.

        Returns:
            The memory forgotten, and those it hid that are current again
            (what it superseded, the oldest repeat merged into it).

        Raises:
            RuntimeError: The memory is still there afterwards.
        """
        record = await self.store.get(memory_id)
        if record is None:
            return None
        back_ids = await self.store.delete(memory_id)
        await self.store.purge_history([memory_id])
        if await self.store.get(memory_id) is not None:
            raise RuntimeError(f"memory {memory_id} is still there after deleting it")
        self.counters["forgotten"] += 1
        back = [other for i in back_ids if (other := await self.store.get(i)) is not None]
        return record, back

    async def forget_user(self, user_id: str) -> int:
        """Forget every memory of ``user_id``, their history and kept messages.

        Raises:
            RuntimeError: Some memories remain afterwards.
        """
        scope = Scope(user_id)
        records = await self.store.records(scope)
        if not records:
            return 0
        await self.store.delete_scope(scope, records)
        await self.store.purge_history([r.id for r in records])
        await self.store.purge_messages(scope)
        left = await self.store.count(scope)
        if left:
            raise RuntimeError(f"{left} memories of user {user_id!r} remain; try again")
        self.counters["forgotten"] += len(records)
        return len(records)

    # -- the outbox ---------------------------------------------------------

    def outbox(self) -> OutboxView:
        """The outbox's pending and failed writes (a read-only look)."""
        path = self.outbox_path
        if not path.exists():
            return OutboxView(path=path, exists=False, pending=[], failed=[])
        connection = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=10)
        try:
            rows = connection.execute(
                "SELECT id, user_id, agent_id, status, attempts, error, created_at, messages "
                "FROM writes ORDER BY id"
            ).fetchall()
        finally:
            connection.close()
        views = [_write_view(row) for row in rows]
        return OutboxView(
            path=path,
            exists=True,
            pending=[v for v in views if v.status != "failed"],
            failed=[v for v in views if v.status == "failed"],
        )

    def retry_failed(self, user_id: str | None = None) -> int:
        """Make failed writes pending again for the next writer on this outbox."""
        if not self.outbox_path.exists():
            return 0
        outbox = Outbox(self.outbox_path)
        try:
            owner = new_owner_id()
            rows = outbox.requeue_failed(owner=owner, lease=0.0, user_id=user_id)
            outbox.release(owner=owner)  # unclaimed: any writer may take them
        finally:
            outbox.close()
        self.counters["requeued"] += len(rows)
        return len(rows)


def _write_view(row: tuple[Any, ...]) -> WriteView:
    row_id, user_id, agent_id, status, attempts, error, created_at, messages = row
    try:
        parsed = json.loads(messages)
        preview = " / ".join(
            f"{m.get('role', '?')}: {m.get('content', '')}" for m in parsed if isinstance(m, dict)
        )
    except (TypeError, ValueError):
        preview = ""
    return WriteView(
        id=int(row_id),
        user_id=str(user_id),
        agent_id=agent_id,
        status=str(status),
        attempts=int(attempts),
        error=error,
        queued_at=datetime.fromtimestamp(float(created_at), UTC).isoformat(timespec="seconds"),
        preview=preview if len(preview) <= 300 else preview[:299] + "…",
    )
