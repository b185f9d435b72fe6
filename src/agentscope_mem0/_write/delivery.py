"""Sending queued writes to mem0: one batch, its retries, and exactly-once.

:class:`Delivery` stores one batch of outbox rows (one scope, in order) with
one mem0 call, and decides what a failure means:

* transient (a timeout, a 5xx, an extraction answer mem0 could not parse, an
  embedding that failed inside mem0's ``add``): retried with the backoff of
  :class:`RetryPolicy`, then kept as failed with its last reason;
* permanent: the batch is split to find the exchange mem0 rejects, which is
  kept as failed; the others are stored.

Every call carries a key in mem0's metadata (:data:`METADATA_KEY`) committed
to the outbox before the call; a batch that may have reached mem0 without
confirmation first has whatever mem0 holds under its key deleted, so it ends
up stored once. A write the store refuses for want of disk space waits
(:data:`SPACE_RETRY_DELAY`) without using up its attempts; a stored batch's
rows are retired once the store has synced them (:mod:`.store_sync`).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import random
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any, Protocol

from .._exceptions import (
    BackendError,
    ConfigurationError,
    DiskFullError,
    PermanentBackendError,
)
from .._mem0.add_check import watch_add
from .._mem0.durable import disk_sync_of
from .._observe.tracing import note_write
from .._scope import Scope
from .outbox_rows import FACTS
from .store_sync import StoreSync

if TYPE_CHECKING:
    from .._mem0.backend import Mem0Backend
    from .outbox import Outbox, OutboxRow

__all__ = ["METADATA_KEY", "AfterStore", "Delivery", "RetryPolicy"]

logger = logging.getLogger(__name__)


SPACE_RETRY_DELAY = 5.0
"""Seconds between tries of a write the store refused for want of disk space."""

METADATA_KEY = "agentscope_mem0_write"
"""The mem0 metadata field holding a write's idempotency key."""


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


AfterStore = Callable[[Scope, list[dict[str, Any]], datetime], Awaitable[None]]
"""Awaited after a stored batch with its scope, mem0's result entries and its said time."""


class Settle(Protocol):
    """How a delivery reports the end of its rows to the queue."""

    def __call__(
        self, keys: list[str], *, stored: bool, results: list[dict[str, Any]] | None = None
    ) -> None: ...


class Delivery:
    """Stores batches of outbox rows in mem0, with retries and exactly-once.

    Args:
        backend: Where the writes go.
        owner: The queue's claim id in the outbox.
        retry: Backoff for transient failures.
        write_timeout: Seconds one mem0 call may take.
        io: Runs a blocking outbox call on the queue's outbox thread.
        counts: The queue's counters, updated in place.
        settle: Reports rows stored or given up.
        on_stored: Called with the scope after each stored batch.
        after_store: Awaited with the scope, mem0's result entries and the
            batch's said time after each stored batch, in the scope's worker
            (the time judgement).
        durable: Whether the outbox survives the process: then a stored
            batch's rows leave it only once the store has synced them
            (:mod:`.store_sync`; at once for a store whose answers are durable).
    """

    def __init__(
        self,
        backend: Mem0Backend,
        *,
        owner: str,
        retry: RetryPolicy,
        write_timeout: float | None,
        io: Callable[..., Awaitable[Any]],
        counts: dict[str, int],
        settle: Settle,
        on_stored: Callable[[Scope], None] | None = None,
        after_store: AfterStore | None = None,
        durable: bool = False,
    ) -> None:
        self._backend = backend
        sync = disk_sync_of(backend.client) if durable else None
        # The embedded store syncs its writes only when told: rows are retired after that.
        self._store_sync = StoreSync(sync) if sync is not None else None
        self._owner = owner
        self._retry = retry
        self._write_timeout = write_timeout
        self._io = io
        self._counts = counts
        self._settle = settle
        self._on_stored = on_stored
        self._after_store = after_store
        self.in_flight: set[tuple[int, int]] = set()
        """``(id(outbox), row id)`` of rows whose mem0 call is running."""
        self._undo_unsupported_logged = False
        self._waiting_for_space = False
        self.unsynced: set[tuple[int, int]] = set()
        """``(id(outbox), row id)`` of rows mem0 stored that wait for the store's sync."""
        self._retiring: set[asyncio.Task[None]] = set()

    async def send(
        self, outbox: Outbox, scope: Scope, rows: list[OutboxRow], semaphore: asyncio.Semaphore
    ) -> bool:
        """Store ``rows`` (one scope, in order) in one mem0 call, retrying as needed.

        Returns:
            Whether anything was stored.
        """
        ids = [row.id for row in rows]
        keys = [row.key for row in rows]
        # A batch key on the rows means an earlier call may have reached mem0.
        sent_before = rows[0].batch_key is not None
        batch_key = rows[0].batch_key or (rows[0].key if len(rows) == 1 else uuid.uuid4().hex)
        # Attempts already made count, so a write that kills its process is
        # not retried forever across restarts.
        attempt = max(row.attempts for row in rows)
        last_error = "interrupted before mem0 confirmed"
        while True:
            if sent_before:
                try:
                    removed = await self._undo(scope, batch_key)
                except DiskFullError as exc:
                    await self._wait_for_space(scope, exc)
                    continue
                if removed is None:
                    # mem0 cannot be asked now; sending again could store twice.
                    attempt += 1
                    last_error = "could not remove what an unconfirmed attempt stored"
                    if attempt >= self._retry.max_attempts:
                        await self._fail(outbox, scope, ids, keys, self._gave_up(last_error))
                        return False
                    await asyncio.sleep(self._retry.delay(attempt))
                    continue
                if removed:
                    self._counts["redone"] += len(rows)
                    logger.info(
                        "an unconfirmed write for user %s had reached mem0 (%d memories); "
                        "removed them to store the exchange once",
                        scope.user_id,
                        removed,
                    )
            if attempt >= self._retry.max_attempts:
                await self._fail(outbox, scope, ids, keys, self._gave_up(last_error))
                return False
            held = await self._io(outbox.start_attempt, ids, owner=self._owner, batch_key=batch_key)
            if not held:
                logger.warning(
                    "another writer took over %d memory writes for user %s; leaving them to it",
                    len(rows),
                    scope.user_id,
                )
                self._settle(keys, stored=False)
                return False
            attempt += 1
            sent_before = True
            flights = {(id(outbox), i) for i in ids}
            self.in_flight.update(flights)
            try:
                async with semaphore:
                    results = await asyncio.wait_for(
                        self._store(rows, scope, batch_key), self._write_timeout
                    )
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                if _disk_full(exc):
                    # Nothing is wrong with the write: it waits for space, and
                    # the attempt is not counted (in the outbox too, for a restart).
                    attempt -= 1
                    with contextlib.suppress(Exception):  # its disk may be full too
                        await self._io(outbox.uncount_attempt, ids)
                    await self._wait_for_space(scope, exc)
                    continue
                # The backend named mem0's failure (_mem0.errors); anything else
                # here, a write_timeout included, may pass.
                if isinstance(exc, PermanentBackendError | ConfigurationError):
                    if len(rows) > 1:
                        # Find the exchange mem0 rejects; store the others.
                        stored_any = False
                        for row in rows:
                            fresh = dataclasses.replace(row, batch_key=None, attempts=0)
                            stored_any |= await self.send(outbox, scope, [fresh], semaphore)
                        return stored_any
                    await self._fail(outbox, scope, ids, keys, _reason(exc))
                    return False
                last_error = _reason(exc)
                if attempt < self._retry.max_attempts:
                    delay = self._retry.delay(attempt)
                    self._counts["retried"] += 1
                    note_write(retries=1)
                    logger.warning(
                        "memory write for user %s failed (%s); retry %d of %d in %.2f s",
                        scope.user_id,
                        last_error,
                        attempt,
                        self._retry.max_attempts - 1,
                        delay,
                    )
                    await asyncio.sleep(delay)
                continue
            finally:
                self.in_flight.difference_update(flights)
            await self._retire(outbox, ids)
            if self._waiting_for_space:
                self._waiting_for_space = False
                logger.warning("the memory store has disk space again; writes go on")
            self._counts["stored"] += len(rows)
            self._counts["batches"] += 1
            note_write(stored=len(rows))
            self._settle(keys, stored=True, results=results)
            if self._on_stored is not None:
                self._on_stored(scope)
            if self._after_store is not None and results:
                # Queues the time judgement (or consolidation) and returns.
                try:
                    await self._after_store(scope, results, _said_at(rows))
                except Exception:
                    logger.exception("after_store failed for user %s", scope.user_id)
            return True

    async def _store(
        self, rows: list[OutboxRow], scope: Scope, batch_key: str
    ) -> list[dict[str, Any]]:
        """One mem0 call for ``rows``; raises when mem0 swallowed a failure."""
        metadata = {METADATA_KEY: batch_key}
        said_at = _said_at(rows)
        messages = [message for row in rows for message in row.messages]
        facts = rows[0].kind == FACTS
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
                    verbatim = [message for row in rows for message in row.messages]
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
        return [{**item, METADATA_KEY: batch_key} for item in stored if isinstance(item, dict)]

    def _gave_up(self, error: str) -> str:
        return f"gave up after {self._retry.max_attempts} attempts; last error: {error}"

    async def _fail(
        self, outbox: Outbox, scope: Scope, ids: list[int], keys: list[str], reason: str
    ) -> None:
        await self._io(outbox.fail, ids, reason)
        self._counts["failed"] += len(ids)
        note_write(failed=len(ids))
        logger.error(
            "memory write for user %s failed and is kept in the outbox as failed: %s; "
            "fix the cause and call retry_failed()",
            scope.user_id,
            reason,
        )
        self._settle(keys, stored=False)

    async def _undo(self, scope: Scope, key: str) -> int | None:
        """Delete the memories an unconfirmed attempt stored under ``key``.

        Returns:
            How many were deleted (0 as well when this client cannot be asked,
            which is logged once: the write is then sent again as it is), or
            ``None`` when mem0 failed to answer now.
        """
        try:
            return await self._backend.delete_batch(
                scope, METADATA_KEY, key, timeout=self._write_timeout
            )
        except (asyncio.CancelledError, DiskFullError):
            raise
        except PermanentBackendError as exc:
            self._log_undo_unsupported(str(exc))
            return 0
        except Exception as exc:
            logger.warning("could not ask mem0 about unconfirmed write %s: %s", key, exc)
            return None

    async def _retire(self, outbox: Outbox, ids: list[int]) -> None:
        """Remove stored rows from the outbox, once the store has synced them.

        Without a store to sync (a server store, hosted mem0) at once. Else in
        the background: the scope's next batch goes on, these rows are not
        sent again (:attr:`unsynced`), and a power loss before the sync
        leaves them for the next process to store again.
        """
        store_sync = self._store_sync
        if store_sync is None:
            await self._io(outbox.complete, ids)
            return
        pairs = {(id(outbox), i) for i in ids}
        self.unsynced.update(pairs)

        async def retire() -> None:
            try:
                await store_sync.wait()
                await self._io(outbox.complete, ids)
            finally:
                self.unsynced.difference_update(pairs)

        task = asyncio.get_running_loop().create_task(retire())
        self._retiring.add(task)
        task.add_done_callback(self._retired)

    def _retired(self, task: asyncio.Task[None]) -> None:
        self._retiring.discard(task)
        if not task.cancelled() and task.exception() is not None:
            logger.warning("stored rows stay in the outbox: %s", task.exception())

    async def synced(self, timeout: float | None) -> bool:
        """Wait until every stored row is synced and removed from the outbox.

        Returns:
            False when some are still waiting after ``timeout`` seconds.
        """
        if not self._retiring:
            return True
        _, left = await asyncio.wait(set(self._retiring), timeout=timeout)
        return not left

    def hurrying(self) -> contextlib.AbstractContextManager[None]:
        """While inside, syncs do not wait for more writes: someone waits for the queue."""
        if self._store_sync is None:
            return contextlib.nullcontext()
        return self._store_sync.hurrying()

    async def stop_retiring(self) -> None:
        """At close: rows not synced yet stay in the outbox for the next writer."""
        for task in list(self._retiring):
            task.cancel()
        if self._store_sync is not None:
            await self._store_sync.aclose()

    async def _wait_for_space(self, scope: Scope, exc: BaseException) -> None:
        """Wait before sending a write the store refused for want of disk space.

        Not an attempt: the write is fine, and it waits as long as the disk
        is full, then goes on by itself.
        """
        self._counts["deferred"] += 1
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

    def _log_undo_unsupported(self, reason: str) -> None:
        if not self._undo_unsupported_logged:
            self._undo_unsupported_logged = True
            logger.warning(
                "this mem0 client cannot list and delete memories by write key (%s); a "
                "write interrupted mid-call is sent again and may be stored twice",
                reason,
            )


def _said_at(rows: list[OutboxRow]) -> datetime:
    """A batch's said time: its newest exchange's (one mem0 call has one date)."""
    return max(row.said_at for row in rows)


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
