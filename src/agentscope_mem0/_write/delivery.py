"""Sending queued writes to mem0: one batch, its retries, and exactly-once.

:class:`Delivery` stores one batch of outbox rows (one scope, in order) with
one mem0 call, and decides what a failure means:

* transient (a timeout, a 5xx, an extraction answer mem0 could not parse, an
  embedding that failed inside mem0's ``add``): retried with the backoff of
  :class:`RetryPolicy`, then kept as failed with its last reason;
* permanent: the batch is split to find the exchange mem0 rejects, which is
  kept as failed; the others are stored;
* the store out of disk space: the write waits (:data:`SPACE_RETRY_DELAY`)
  without using up its attempts, as long as the disk is full.

Every call carries a key in mem0's metadata (:data:`METADATA_KEY`) committed
to the outbox before the call; a batch that may have reached mem0 without
confirmation first has whatever mem0 holds under its key deleted, so it ends
up stored once.

A stored batch's rows leave the outbox at once when the store's answers are
durable (a server store, hosted mem0). The embedded store's answer only
means the write is in its write-ahead log, safe from the process dying but
not from the power going: its rows stay until the store's next sync
(:class:`StoreSync`, one sync for every batch stored within
:data:`SYNC_WINDOW`), so a power loss before it leaves them to be stored
again (exactly once: the batch key finds what the log kept).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import random
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

from .._exceptions import (
    BackendError,
    ConfigurationError,
    DiskFullError,
    PermanentBackendError,
)
from .._mem0.add_check import watch_add
from .._observe.tracing import note_write
from .outbox import FACTS

if TYPE_CHECKING:
    from .._mem0.backend import Mem0Backend
    from .._scope import Scope
    from .outbox import BaseOutbox, OutboxRow

__all__ = [
    "METADATA_KEY",
    "RETRY_DELAY",
    "SPACE_RETRY_DELAY",
    "SYNC_WINDOW",
    "Delivery",
    "RetryPolicy",
    "Sent",
    "StoreSync",
    "WriteStats",
]

logger = logging.getLogger(__name__)

METADATA_KEY = "agentscope_mem0_write"
"""The mem0 metadata field holding a write's idempotency key."""

SPACE_RETRY_DELAY = 5.0
"""Seconds between tries of a write the store refused for want of disk space."""

SYNC_WINDOW = 5.0
"""Seconds between the first stored batch waiting for the store's sync and that sync."""

RETRY_DELAY = 5.0
"""Seconds before a failed sync of the store is tried again."""


@dataclass(frozen=True, kw_only=True)
class RetryPolicy:
    """How transient write failures are retried."""

    max_attempts: int = 6
    """Calls per write, the first included, before it is kept as failed."""
    initial_delay: float = 0.5
    """Seconds before the first retry."""
    multiplier: float = 2.0
    """Growth of the delay per retry."""
    max_delay: float = 30.0
    """Upper bound of one delay, in seconds."""
    jitter: float = 0.5
    """Fraction of each delay that is random (0: none, 1: anywhere in 0..delay)."""

    def __post_init__(self) -> None:
        if self.max_attempts < 1:
            raise ValueError(f"max_attempts must be at least 1, got {self.max_attempts!r}")
        if not 0 <= self.jitter <= 1:
            raise ValueError(f"jitter must be within 0..1, got {self.jitter!r}")

    def delay(self, attempt: int) -> float:
        """Seconds to wait after failed attempt number ``attempt`` (1-based)."""
        base = min(self.max_delay, self.initial_delay * self.multiplier ** max(attempt - 1, 0))
        return base * (1 - self.jitter * random.random())


@dataclass
class WriteStats:
    """A write queue's counters since it was built: the queue counts what it
    records and replays, its :class:`Delivery` what mem0 made of each batch."""

    queued: int = 0
    """Writes submitted."""
    replayed: int = 0
    """Rows taken over from a writer that ended (its process, or its lease)."""
    stored: int = 0
    """Writes mem0 stored."""
    redone: int = 0
    """Writes of an unconfirmed attempt that had reached mem0: removed, sent again."""
    retried: int = 0
    """Calls repeated after a transient failure."""
    deferred: int = 0
    """Sends put off because the store's disk was nearly full (no attempt used)."""
    failed: int = 0
    """Writes kept as failed (retryable)."""
    requeued: int = 0
    """Failed writes queued again."""
    lost: int = 0
    """Writes not recorded at all, or found missing from the outbox (a lost WAL)."""
    unrecorded: int = 0
    """Writes the outbox file refused, kept in memory instead."""
    handed_over: int = 0
    """Writes recorded for another process to store (``deliver=False``)."""
    batches: int = 0
    """mem0 calls that stored a batch."""
    outbox_errors: int = 0
    """Outbox operations that failed."""

    def as_stats(self) -> dict[str, int]:
        """The counters under the names ``WriteQueue.stats()`` gives them."""
        named = {"batches": "write_batches", "outbox_errors": "outbox_errors"}
        return {
            named.get(f.name, f"writes_{f.name}"): getattr(self, f.name)
            for f in dataclasses.fields(self)
        }


@dataclass
class Sent:
    """How a batch ended."""

    stored: list[tuple[list[OutboxRow], list[dict[str, Any]]]] = field(default_factory=list)
    """The rows of each mem0 call that stored some, with mem0's result entries."""
    dropped: list[OutboxRow] = field(default_factory=list)
    """Rows not stored here: kept as failed, or taken over by another writer."""


@dataclass
class _Batch:
    """One batch on its way to mem0 and where its attempts stand."""

    outbox: BaseOutbox
    scope: Scope
    rows: list[OutboxRow]
    key: str
    """The batch key in mem0's metadata."""
    attempt: int
    """Attempts made so far, by any writer: a write that kills its process is
    not retried forever across restarts."""
    sent_before: bool
    """Whether an earlier attempt may have reached mem0 unconfirmed."""
    last_error: str = "interrupted before mem0 confirmed"

    @classmethod
    def of(cls, outbox: BaseOutbox, scope: Scope, rows: list[OutboxRow]) -> _Batch:
        first = rows[0]
        key = first.batch_key or (first.key if len(rows) == 1 else uuid.uuid4().hex)
        attempts = max(row.attempts for row in rows)
        return cls(outbox, scope, rows, key, attempts, first.batch_key is not None)

    @property
    def ids(self) -> list[int]:
        return [row.id for row in self.rows]

    @property
    def said_at(self) -> datetime:
        """The newest exchange's said time: one mem0 call has one date."""
        return max(row.said_at for row in self.rows)

    async def run(self, method: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """``method`` of the outbox, on the outbox's thread."""
        return await self.outbox.thread.run(method, *args, **kwargs)


class Delivery:
    """Stores batches of outbox rows in mem0, with retries and exactly-once.

    Args:
        backend: Where the writes go.
        owner: The queue's claim id in the outbox.
        retry: Backoff for transient failures.
        write_timeout: Seconds one mem0 call may take.
        stats: The queue's counters.
        store_sync: Removes stored rows from the outbox (once the store
            synced them, where it must be told to).
    """

    def __init__(
        self,
        backend: Mem0Backend,
        *,
        owner: str,
        retry: RetryPolicy,
        write_timeout: float | None,
        stats: WriteStats,
        store_sync: StoreSync,
    ) -> None:
        self._backend = backend
        self._store_sync = store_sync
        self._owner = owner
        self._retry = retry
        self._write_timeout = write_timeout
        self._stats = stats
        self.in_flight: set[str] = set()
        """Keys of the rows whose mem0 call is running."""
        self._undo_unsupported_logged = False
        self._waiting_for_space = False

    async def send(
        self,
        outbox: BaseOutbox,
        scope: Scope,
        rows: list[OutboxRow],
        semaphore: asyncio.Semaphore,
    ) -> Sent:
        """Store ``rows`` (one scope, in order) in one mem0 call, retrying as needed.

        Returns:
            What was stored (with mem0's answer) and what was not.
        """
        sent = Sent()
        await self._send(_Batch.of(outbox, scope, rows), semaphore, sent)
        return sent

    async def _send(self, batch: _Batch, semaphore: asyncio.Semaphore, sent: Sent) -> None:
        """Attempt after attempt: undo what an unconfirmed one may have stored,
        commit the next one, call mem0; what a failure means decides what follows."""
        while True:
            undone = not batch.sent_before or await self._undo(batch)
            if not undone and batch.attempt < self._retry.max_attempts:
                continue  # it waited; the undo is tried again
            tries = self._retry.max_attempts
            if batch.attempt >= tries:
                reason = f"gave up after {tries} attempts; last error: {batch.last_error}"
                await self._fail(batch, reason, sent)
                return
            if not await self._start_attempt(batch, sent):
                return
            try:
                results = await self._call(batch, semaphore)
            except Exception as exc:
                if _disk_full(exc):
                    await self._defer(batch, exc)
                elif isinstance(exc, PermanentBackendError | ConfigurationError):
                    # The backend named mem0's failure (_mem0.errors) as for good.
                    await self._refused(batch, exc, semaphore, sent)
                    return
                else:  # anything else, a write_timeout included, may pass
                    await self._pause_before_retry(batch, exc)
                continue
            await self._stored(batch, results, sent)
            return

    async def _start_attempt(self, batch: _Batch, sent: Sent) -> bool:
        """Commit the batch key and the attempt; False when another writer took the rows."""
        held = await batch.run(
            batch.outbox.start_attempt, batch.ids, owner=self._owner, batch_key=batch.key
        )
        if not held:
            logger.warning(
                "another writer took over %d memory writes for user %s; leaving them to it",
                len(batch.rows),
                batch.scope.user_id,
            )
            sent.dropped += batch.rows
            return False
        batch.attempt += 1
        batch.sent_before = True
        return True

    async def _call(self, batch: _Batch, semaphore: asyncio.Semaphore) -> list[dict[str, Any]]:
        """One mem0 call for the batch, within ``write_timeout``; raises when mem0
        swallowed a failure."""
        keys = {row.key for row in batch.rows}
        self.in_flight |= keys
        try:
            async with semaphore:
                return await asyncio.wait_for(self._store(batch), self._write_timeout)
        finally:
            self.in_flight -= keys

    async def _store(self, batch: _Batch) -> list[dict[str, Any]]:
        metadata = {METADATA_KEY: batch.key}
        said_at, scope = batch.said_at, batch.scope
        messages = [message for row in batch.rows for message in row.messages]
        facts = batch.rows[0].kind == FACTS
        if facts:
            joined = "\n".join(str(m["content"]) for m in messages)
            messages = [{**messages[0], "content": joined}]
        with watch_add(self._backend.client) as watch:
            try:
                stored = await self._backend.add(
                    messages, scope, metadata=metadata, said_at=said_at
                )
                watch.raise_if_failed()
                if facts and not stored:
                    # Extraction judged nothing worth keeping, but the agent asked
                    # explicitly: keep each fact as written, one memory each.
                    verbatim = [message for row in batch.rows for message in row.messages]
                    stored = await self._backend.add(
                        verbatim, scope, infer=False, metadata=metadata, said_at=said_at
                    )
                    watch.raise_if_failed()
            except Exception as exc:
                if not isinstance(exc, DiskFullError):
                    watch.raise_if_out_of_space()  # what mem0 reported as another error
                raise
        # The key goes with the results: hosted mem0 answers with a pending event,
        # and consolidation finds the memories it became by this key.
        return [{**item, METADATA_KEY: batch.key} for item in stored if isinstance(item, dict)]

    async def _stored(self, batch: _Batch, results: list[dict[str, Any]], sent: Sent) -> None:
        await self._store_sync.retire(batch.outbox, batch.rows)
        if self._waiting_for_space:
            self._waiting_for_space = False
            logger.warning("the memory store has disk space again; writes go on")
        self._stats.stored += len(batch.rows)
        self._stats.batches += 1
        note_write(stored=len(batch.rows))
        sent.stored.append((batch.rows, results))

    # -- what a failure means ---------------------------------------------------

    async def _undo(self, batch: _Batch) -> bool:
        """Delete what an unconfirmed attempt stored under the batch key.

        Returns:
            True when the batch may be sent now (nothing was there, it is
            gone, or this client cannot be asked, which is logged once: the
            write is then sent again as it is); False when mem0 could not
            answer now: that counts as an attempt, waited out unless it was
            the last.
        """
        while True:
            try:
                removed = await self._backend.delete_batch(
                    batch.scope, METADATA_KEY, batch.key, timeout=self._write_timeout
                )
                break
            except DiskFullError as exc:
                await self._wait_for_space(batch.scope, exc)
            except PermanentBackendError as exc:
                if not self._undo_unsupported_logged:
                    self._undo_unsupported_logged = True
                    logger.warning(
                        "this mem0 client cannot list and delete memories by write key (%s); "
                        "a write interrupted mid-call is sent again and may be stored twice",
                        exc,
                    )
                return True
            except Exception as exc:
                logger.warning("could not ask mem0 about unconfirmed write %s: %s", batch.key, exc)
                # Sending again could store twice: wait, as after a failed attempt.
                batch.attempt += 1
                batch.last_error = "could not remove what an unconfirmed attempt stored"
                if batch.attempt < self._retry.max_attempts:
                    await asyncio.sleep(self._retry.delay(batch.attempt))
                return False
        if removed:
            self._stats.redone += len(batch.rows)
            logger.info(
                "an unconfirmed write for user %s had reached mem0 (%d memories); "
                "removed them to store the exchange once",
                batch.scope.user_id,
                removed,
            )
        return True

    async def _defer(self, batch: _Batch, exc: BaseException) -> None:
        """The store refused for want of disk space: nothing is wrong with the
        write, so the attempt is taken back (in the outbox too, for a restart)
        and the write waits for space."""
        batch.attempt -= 1
        with contextlib.suppress(Exception):  # its disk may be full too
            await batch.run(batch.outbox.uncount_attempt, batch.ids)
        await self._wait_for_space(batch.scope, exc)

    async def _refused(
        self, batch: _Batch, exc: BaseException, semaphore: asyncio.Semaphore, sent: Sent
    ) -> None:
        """mem0 refused the batch for good: find the exchange it rejects, store the others."""
        if len(batch.rows) == 1:
            await self._fail(batch, _reason(exc), sent)
            return
        for row in batch.rows:
            fresh = dataclasses.replace(row, batch_key=None, attempts=0)
            await self._send(_Batch.of(batch.outbox, batch.scope, [fresh]), semaphore, sent)

    async def _pause_before_retry(self, batch: _Batch, exc: BaseException) -> None:
        batch.last_error = _reason(exc)
        if batch.attempt >= self._retry.max_attempts:
            return
        delay = self._retry.delay(batch.attempt)
        self._stats.retried += 1
        note_write(retries=1)
        logger.warning(
            "memory write for user %s failed (%s); retry %d of %d in %.2f s",
            batch.scope.user_id,
            batch.last_error,
            batch.attempt,
            self._retry.max_attempts - 1,
            delay,
        )
        await asyncio.sleep(delay)

    async def _fail(self, batch: _Batch, reason: str, sent: Sent) -> None:
        await batch.run(batch.outbox.fail, batch.ids, reason)
        self._stats.failed += len(batch.rows)
        note_write(failed=len(batch.rows))
        logger.error(
            "memory write for user %s failed and is kept in the outbox as failed: %s; "
            "fix the cause and call retry_failed()",
            batch.scope.user_id,
            reason,
        )
        sent.dropped += batch.rows

    async def _wait_for_space(self, scope: Scope, exc: BaseException) -> None:
        """Wait before sending a write the store refused for want of disk space.

        Not an attempt: the write is fine, and it waits as long as the disk
        is full, then goes on by itself.
        """
        self._stats.deferred += 1
        if not self._waiting_for_space:
            self._waiting_for_space = True
            logger.error(
                "memory writes wait for disk space (user %s): %s; they stay queued and "
                "are sent again every %.0f s",
                scope.user_id,
                exc,
                SPACE_RETRY_DELAY,
            )
        await asyncio.sleep(SPACE_RETRY_DELAY)


class StoreSync:
    """Removes stored rows from the outbox: at once when the store's answers are
    durable (no ``sync``), else once the store has synced them.

    The first batch that waits schedules a sync :data:`SYNC_WINDOW` seconds
    later (the store's own flush interval), and every batch stored meanwhile
    waits for that same sync: the engine holds the GIL while it flushes, so
    one sync for many writes also keeps the event loop responsive. Someone
    waiting for the queue to drain (``flush()``, ``aclose()``) cuts the
    window short (:meth:`hurrying`). A sync that fails (a full disk) is tried
    again every :data:`RETRY_DELAY` seconds; its rows wait in the outbox. A
    power loss before the sync leaves them for the next process.

    Args:
        sync: Puts everything stored so far on disk (blocking; run in a
            thread); ``None`` when the store's answers are durable.
        window: Seconds the first waiter's sync waits for more writes
            (default :data:`SYNC_WINDOW`).
        retry_delay: Seconds between attempts when a sync fails (default
            :data:`RETRY_DELAY`).
    """

    def __init__(
        self,
        sync: Callable[[], None] | None,
        *,
        window: float | None = None,
        retry_delay: float | None = None,
    ) -> None:
        self._sync = sync
        self._window = SYNC_WINDOW if window is None else window
        self._retry_delay = RETRY_DELAY if retry_delay is None else retry_delay
        self._waiting: list[tuple[BaseOutbox, list[OutboxRow]]] = []
        self._task: asyncio.Task[None] | None = None
        self._hurry: asyncio.Event | None = None
        self._hurrying = 0
        self.unsynced: set[str] = set()
        """Keys of the rows stored that wait for the sync (not to be sent again)."""
        self.syncs = 0
        """Syncs that completed."""
        self.failures = 0
        """Sync attempts that failed (each is tried again)."""

    async def retire(self, outbox: BaseOutbox, rows: list[OutboxRow]) -> None:
        """Remove ``rows``, stored, from ``outbox``: now, or after the next sync
        that starts from now (in the background: the scope's next batch goes on)."""
        if self._sync is None:
            await outbox.thread.run(outbox.complete, [row.id for row in rows])
            return
        self._waiting.append((outbox, rows))
        self.unsynced.update(row.key for row in rows)
        loop = asyncio.get_running_loop()
        if self._task is None or self._task.done() or self._task.get_loop() is not loop:
            self._hurry = asyncio.Event()
            self._task = loop.create_task(self._run(self._sync, self._hurry))

    @contextlib.contextmanager
    def hurrying(self) -> Iterator[None]:
        """While inside, syncs run at once: someone waits for the queue to drain."""
        self._hurrying += 1
        if self._hurry is not None:
            self._hurry.set()
        try:
            yield
        finally:
            self._hurrying -= 1

    async def synced(self, timeout: float | None) -> bool:
        """Wait until every stored row is synced and removed from the outbox.

        Returns:
            False when some are still waiting after ``timeout`` seconds.
        """
        task = self._task
        if task is None or task.done():
            return True
        done, _ = await asyncio.wait({task}, timeout=timeout)
        return bool(done)

    async def aclose(self) -> None:
        """Stop waiting: rows not synced yet stay in the outbox for the next writer."""
        task = self._task
        if task is not None and not task.done() and task.get_loop() is asyncio.get_running_loop():
            task.cancel()
            await asyncio.wait({task})
        self._let_go(self._waiting)

    async def _run(self, sync: Callable[[], None], hurry: asyncio.Event) -> None:
        taken: list[tuple[BaseOutbox, list[OutboxRow]]] = []
        try:
            while self._waiting:
                if not self._hurrying:
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(hurry.wait(), self._window)
                hurry.clear()
                # Rows stored from now on wait for the next sync: this one may
                # start before they reached the store.
                taken, self._waiting = self._waiting, []
                while True:
                    try:
                        await asyncio.to_thread(sync)
                        break
                    except Exception as exc:
                        self.failures += 1
                        logger.warning(
                            "the memory store could not sync (%s); its writes stay in the "
                            "outbox and the sync is tried again in %.0f s",
                            exc,
                            self._retry_delay,
                        )
                        await asyncio.sleep(self._retry_delay)
                self.syncs += 1
                while taken:
                    outbox, rows = taken.pop()
                    try:
                        await outbox.thread.run(outbox.complete, [row.id for row in rows])
                    except Exception as exc:
                        logger.warning("stored rows stay in the outbox: %s", exc)
                    self.unsynced.difference_update(row.key for row in rows)
        finally:
            self._let_go([*taken, *self._waiting])
            if self._hurry is hurry:
                self._hurry = None

    def _let_go(self, batches: list[tuple[BaseOutbox, list[OutboxRow]]]) -> None:
        """Stop waiting for a sync (the queue closed, the loop ended): the rows
        stay in the outbox, to be sent again (or by the next writer)."""
        for _, rows in batches:
            self.unsynced.difference_update(row.key for row in rows)
        self._waiting.clear()


def _disk_full(exc: BaseException) -> bool:
    """Whether the store refused for want of disk space (mem0 may wrap the error)."""
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, DiskFullError):
            return True
        seen = seen.__cause__ or seen.__context__
    return False


def _reason(exc: BaseException) -> str:
    if isinstance(exc, TimeoutError) and not isinstance(exc, BackendError):
        return "no answer within write_timeout"
    # A mapped error's message already names mem0's original (_mem0.errors).
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
