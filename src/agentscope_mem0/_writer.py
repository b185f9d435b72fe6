"""Write-behind: a finished exchange is recorded, queued, and the reply goes on.

:class:`WriteQueue` is the async front end of the :mod:`._outbox` tables.

* ``submit`` records the exchange in the outbox (a SQLite file in
  ``outbox_dir``, or memory without one) and returns; a background worker
  per scope sends the scope's rows to mem0 oldest first, one call at a time,
  joining the rows that piled up meanwhile into one call (``max_batch``).
  At most ``max_concurrency`` calls run at once across scopes.
* A transient failure is retried with exponential backoff and jitter; a
  permanent one (or a transient one that outlived ``retry.max_attempts``)
  stays in the outbox as failed, with its reason, until :meth:`retry_failed`.
* Exactly once: every call carries a key in mem0's metadata
  (:data:`METADATA_KEY`), committed to the outbox *before* the call. A row
  that was sent but not confirmed (a crash, a kill, a timeout) may be in mem0
  wholly, partly (the embedded Qdrant persists one point at a time) or not
  at all; before it is sent again, whatever mem0 holds under its key is
  deleted, so the exchange ends up stored once, by the last attempt.
  Rows belong to one writer at a time (a claim with a lease, taken in one
  transaction), so writers sharing a folder never send the same row twice.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import dataclasses
import functools
import logging
import random
import time
import uuid
import warnings
import weakref
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, TypeVar

from ._backend import classify_error
from ._breaker import LatencyRecorder
from ._bridge import caller_loop_scope
from ._exceptions import BackendError, PermanentBackendError
from ._outbox import Outbox, OutboxRow, count_held, new_owner_id
from ._scope import Scope
from ._time import check_said_at, rows_said_together, stamp_messages

if TYPE_CHECKING:
    import os

    from ._backend import Mem0Backend

__all__ = ["METADATA_KEY", "RetryPolicy", "WriteQueue"]

logger = logging.getLogger(__name__)

T = TypeVar("T")

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


# Owner ids of the queues open in this process: rows they hold are not orphans.
_LIVE_OWNERS: set[str] = set()
_OPEN_QUEUES: weakref.WeakSet[WriteQueue] = weakref.WeakSet()


@dataclass(eq=False)
class _Runtime:
    """What a queue holds on one event loop."""

    loop: asyncio.AbstractEventLoop
    semaphore: asyncio.Semaphore
    workers: dict[Scope, asyncio.Task[None]] = field(default_factory=dict)
    wake: set[Scope] = field(default_factory=set)
    waiters: dict[str, asyncio.Future[bool]] = field(default_factory=dict)
    started: asyncio.Task[None] | None = None
    maintenance: asyncio.Task[None] | None = None


class WriteQueue:
    """Per-scope ordered, durable background writes to mem0.

    Args:
        backend: Where the writes go.
        outbox_dir: Folder of the outbox file; writes left there by a process
            that ended are replayed. ``None`` keeps the queue in memory.
        max_concurrency: mem0 calls in flight at once, across scopes.
        max_batch: Exchanges of one scope joined into one mem0 call at most.
        retry: Backoff for transient failures.
        write_timeout: Seconds one mem0 call may take before it counts as a
            transient failure; ``None`` waits indefinitely.
        lease: Seconds a claim on a row lasts without renewal; another writer
            takes over rows whose writer stopped renewing (or died).
    """

    def __init__(
        self,
        backend: Mem0Backend,
        *,
        outbox_dir: str | os.PathLike[str] | None = None,
        max_concurrency: int = 8,
        max_batch: int = 8,
        retry: RetryPolicy | None = None,
        write_timeout: float | None = 300.0,
        lease: float = 30.0,
        on_stored: Callable[[Scope], None] | None = None,
        after_store: Callable[[Scope, list[dict[str, Any]]], Awaitable[None]] | None = None,
    ) -> None:
        if max_concurrency < 1 or max_batch < 1:
            raise ValueError("max_concurrency and max_batch must be positive")
        if lease <= 0:
            raise ValueError(f"lease must be positive, got {lease!r}")
        self._backend = backend
        self._on_stored = on_stored
        self._after_store = after_store
        self._max_concurrency = max_concurrency
        self._max_batch = max_batch
        self._retry = retry or RetryPolicy()
        self._write_timeout = write_timeout
        self._lease = lease
        self._outbox = Outbox.in_folder(outbox_dir) if outbox_dir is not None else Outbox(None)
        self._owner = new_owner_id()
        self._executor = ThreadPoolExecutor(1, thread_name_prefix="agentscope-mem0-outbox")
        self._rt: _Runtime | None = None
        self._in_flight: set[int] = set()
        self._submitted_at: dict[str, float] = {}
        self._latency = LatencyRecorder()
        self._undo_unsupported_logged = False
        self._closed = False
        self._counts = dict.fromkeys(
            (
                "queued",
                "replayed",
                "stored",
                "redone",
                "retried",
                "failed",
                "requeued",
                "lost",
                "batches",
            ),
            0,
        )
        _LIVE_OWNERS.add(self._owner)
        _OPEN_QUEUES.add(self)
        with contextlib.suppress(RuntimeError):
            asyncio.get_running_loop()
            self._runtime()  # replay what an earlier process left, right away

    # -- public surface ---------------------------------------------------

    @property
    def outbox(self) -> Outbox:
        """The outbox tables (for inspection)."""
        return self._outbox

    @property
    def owner(self) -> str:
        """This queue's claim id in the outbox."""
        return self._owner

    @property
    def backend(self) -> Mem0Backend:
        """Where the writes go."""
        return self._backend

    @property
    def pending(self) -> int:
        """Writes queued or in flight on this queue (failed ones excluded)."""
        return len(self._rt.waiters) if self._rt is not None else 0

    async def submit(
        self,
        scope: Scope,
        messages: list[dict[str, str]],
        *,
        wait: bool = False,
        said_at: datetime | str | None = None,
    ) -> str | None:
        """Record ``messages`` for ``scope`` and queue them for mem0.

        Returns once the outbox holds the exchange, or, with ``wait``, once
        mem0 stored it or it failed permanently. Never raises for a mem0 or
        outbox failure: those are logged and counted.

        Args:
            scope: Whose memories.
            messages: The exchange, as mem0 message dicts.
            wait: Return only once mem0 stored it (or it failed for good).
            said_at: When the exchange was said (an aware or local datetime, a
                date, or ISO 8601 text), for imports and replayed conversations;
                default now. The memories are dated by it.

        Returns:
            The exchange's idempotency key; ``None`` when it could not be recorded.

        Raises:
            ConfigurationError: ``said_at`` is not a time.
        """
        messages = stamp_messages(
            messages, datetime.now(UTC) if said_at is None else check_said_at(said_at)
        )
        if self._closed:
            logger.error(
                "a memory write for user %s was submitted after the queue was closed; "
                "it is not stored",
                scope.user_id,
            )
            self._counts["lost"] += 1
            return None
        rt = self._runtime()
        key = uuid.uuid4().hex
        done = rt.loop.create_future()
        rt.waiters[key] = done
        self._submitted_at[key] = time.perf_counter()
        self._counts["queued"] += 1
        # Shielded: a reply cancelled here must not leave a recorded row unqueued.
        recorded = await asyncio.shield(self._record(rt, key, scope, list(messages)))
        if not recorded:
            return None
        if wait:
            await asyncio.shield(done)
        return key

    async def flush(self, timeout: float | None = None) -> bool:
        """Wait until every write queued so far is stored or has failed.

        This includes the writes other processes left in the outbox (those
        whose process ended or whose lease ran out), which are taken over first.

        Returns:
            True when none is left pending within ``timeout`` seconds.
        """
        if self._closed:
            return True
        rt = self._runtime()
        deadline = None if timeout is None else time.monotonic() + timeout
        assert rt.started is not None
        try:
            await asyncio.wait_for(asyncio.shield(rt.started), timeout)
            if self._outbox.durable:
                # Writes another process left since the start are ours to store too.
                self._adopt(rt, await self._claim_orphans())
        except TimeoutError:
            return False
        except Exception:
            logger.exception("could not look for writes left in the outbox")
        waiting = list(rt.waiters.values())
        if not waiting:
            return True
        left = None if deadline is None else max(deadline - time.monotonic(), 0.0)
        _, not_done = await asyncio.wait(waiting, timeout=left)
        return not not_done

    async def retry_failed(self, user_id: str | None = None) -> int:
        """Queue the writes kept as failed (of ``user_id``, or all) again.

        Returns:
            How many were requeued.
        """
        rt = self._runtime()
        rows = await self._io(
            self._outbox.requeue_failed, owner=self._owner, lease=self._lease, user_id=user_id
        )
        self._counts["requeued"] += len(rows)
        self._adopt(rt, rows)
        return len(rows)

    async def failed(self) -> list[OutboxRow]:
        """The writes kept as failed, oldest first, with their ``error``."""
        return await self._io(self._outbox.failed)

    async def aclose(self, timeout: float | None = None) -> bool:
        """Flush (up to ``timeout``), stop the workers and close the outbox. Idempotent.

        Writes not stored by then stay in the outbox for the next queue on
        the folder (without a folder they are lost, and logged).

        Returns:
            True when everything was stored before closing.
        """
        if self._closed:
            return True
        flushed = await self.flush(timeout)
        self._closed = True
        # Rows whose mem0 call is running now keep their claim until the lease
        # runs out: cancelling the task does not stop mem0's worker threads.
        in_flight = sorted(self._in_flight)
        rt = self._rt
        left = 0
        if rt is not None:
            tasks = [t for t in (rt.started, rt.maintenance, *rt.workers.values()) if t]
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            left = len(rt.waiters)
            for done in rt.waiters.values():
                if not done.done():
                    done.set_result(False)
            rt.waiters.clear()
        try:
            await self._io(self._outbox.release, owner=self._owner, keep=in_flight)
            await self._io(self._outbox.close)
        except Exception:
            logger.exception("could not release the outbox cleanly")
        self._executor.shutdown(wait=False)
        self._submitted_at.clear()
        if not (in_flight and self._outbox.durable):
            _LIVE_OWNERS.discard(self._owner)
        _OPEN_QUEUES.discard(self)
        if left:
            self._report_left(left, "at close")
        return flushed

    def stats(self) -> dict[str, Any]:
        """Counters of this queue since construction, plus write latency.

        ``writes_retried`` counts retries (calls repeated after a transient
        failure); ``write_latency_*`` is submit-to-stored, in seconds.
        """
        out: dict[str, Any] = {
            f"writes_{name}": value for name, value in self._counts.items() if name != "batches"
        }
        out["write_batches"] = self._counts["batches"]
        out["writes_pending"] = self.pending
        out.update(self._latency.summary("write_latency"))
        return out

    # -- runtime ----------------------------------------------------------

    def _runtime(self) -> _Runtime:
        loop = asyncio.get_running_loop()
        rt = self._rt
        if rt is not None and rt.loop is loop:
            return rt
        if rt is not None and rt.loop.is_running():
            raise RuntimeError("a WriteQueue serves one event loop at a time; create one per loop")
        # First use, or the earlier loop has ended: rebuild from the outbox.
        rt = _Runtime(loop=loop, semaphore=asyncio.Semaphore(self._max_concurrency))
        self._rt = rt
        rt.started = loop.create_task(self._start(rt), name="agentscope-mem0-outbox-replay")
        return rt

    async def _io(self, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> T:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._executor, functools.partial(fn, *args, **kwargs))

    async def _start(self, rt: _Runtime) -> None:
        try:
            own = await self._io(self._outbox.held, self._owner)
            orphans = await self._claim_orphans()
            if orphans:
                logger.info(
                    "replaying %d memory writes left in the outbox by an earlier process",
                    len(orphans),
                )
            self._adopt(rt, [*own, *orphans])
        except Exception:
            logger.exception("could not read the outbox at start; trying again on the next write")

    async def _claim_orphans(self) -> list[OutboxRow]:
        rows = await self._io(
            self._outbox.claim_orphans,
            owner=self._owner,
            lease=self._lease,
            live_here=frozenset(_LIVE_OWNERS),
        )
        self._counts["replayed"] += len(rows)
        return rows

    def _ensure_maintenance(self, rt: _Runtime) -> None:
        if rt.maintenance is None or rt.maintenance.done():
            rt.maintenance = rt.loop.create_task(
                self._maintain(rt), name="agentscope-mem0-outbox-lease"
            )

    async def _maintain(self, rt: _Runtime) -> None:
        """Keep the leases of held writes, take over orphans, restart stalled scopes.

        Runs only while writes are pending, so an idle queue holds no task and
        can be garbage-collected.
        """
        while rt.waiters:
            await asyncio.sleep(self._lease / 3)
            try:
                if self._outbox.durable:
                    await self._io(self._outbox.renew, owner=self._owner, lease=self._lease)
                    self._adopt(rt, await self._claim_orphans())
                self._adopt(rt, await self._io(self._outbox.held, self._owner))
            except Exception:
                logger.exception(
                    "outbox maintenance failed; trying again in %.1f s", self._lease / 3
                )

    def _adopt(self, rt: _Runtime, rows: list[OutboxRow]) -> None:
        """Track rows this queue holds and make sure their scopes are draining."""
        scopes: dict[Scope, None] = {}
        for row in rows:
            if row.key not in rt.waiters:
                rt.waiters[row.key] = rt.loop.create_future()
            scopes[Scope(row.user_id, row.agent_id)] = None
        for scope in scopes:
            self._kick(rt, scope)

    async def _record(
        self, rt: _Runtime, key: str, scope: Scope, messages: list[dict[str, str]]
    ) -> bool:
        row: dict[str, Any] = {
            "key": key,
            "user_id": scope.user_id,
            "agent_id": scope.agent_id,
            "messages": messages,
            "owner": self._owner,
            "lease": self._lease,
        }
        try:
            # Inline when the database is free (tens of microseconds on the
            # loop), else on the outbox thread, which may wait for the lock.
            if self._outbox.try_insert(**row) is None:
                await self._io(self._outbox.insert, **row)
        except Exception:
            logger.exception(
                "could not record a memory write for user %s in the outbox; it is not stored",
                scope.user_id,
            )
            self._counts["lost"] += 1
            self._settle(rt, [key], stored=False)
            return False
        self._kick(rt, scope)
        return True

    def _kick(self, rt: _Runtime, scope: Scope) -> None:
        self._ensure_maintenance(rt)
        worker = rt.workers.get(scope)
        if worker is not None and not worker.done():
            rt.wake.add(scope)
            return
        rt.workers[scope] = rt.loop.create_task(
            self._drain(rt, scope), name=f"agentscope-mem0-write-{scope.user_id}"
        )

    def _settle(self, rt: _Runtime, keys: list[str], *, stored: bool) -> None:
        now = time.perf_counter()
        for key in keys:
            done = rt.waiters.pop(key, None)
            if done is not None and not done.done():
                done.set_result(stored)
            started = self._submitted_at.pop(key, None)
            if stored and started is not None:
                self._latency.record(now - started)

    # -- the worker -------------------------------------------------------

    async def _drain(self, rt: _Runtime, scope: Scope) -> None:
        """Send ``scope``'s rows to mem0, oldest first, until none is left."""
        me = asyncio.current_task()
        try:
            assert rt.started is not None
            await asyncio.shield(rt.started)  # replayed rows go before new ones
            while True:
                rt.wake.discard(scope)
                rows = await self._io(
                    self._outbox.next_batch,
                    owner=self._owner,
                    user_id=scope.user_id,
                    agent_id=scope.agent_id,
                    limit=self._max_batch,
                )
                if not rows:
                    if scope in rt.wake:
                        continue
                    return
                rows = rows_said_together(rows)
                await self._apply(rt, scope, rows)
        except asyncio.CancelledError:
            raise
        except Exception:
            logger.exception(
                "memory writes for user %s stopped; they stay queued and resume shortly",
                scope.user_id,
            )
        finally:
            if rt.workers.get(scope) is me:
                del rt.workers[scope]

    async def _apply(self, rt: _Runtime, scope: Scope, rows: list[OutboxRow]) -> None:
        """Store ``rows`` (one scope, in order) in one mem0 call, retrying as needed."""
        ids = [row.id for row in rows]
        keys = [row.key for row in rows]
        # A batch key on the rows means an earlier call may have reached mem0.
        sent_before = rows[0].batch_key is not None
        batch_key = rows[0].batch_key or (rows[0].key if len(rows) == 1 else uuid.uuid4().hex)
        messages = [message for row in rows for message in row.messages]
        # Attempts already made count, so a write that kills its process is
        # not retried forever across restarts.
        attempt = max(row.attempts for row in rows)
        last_error = "interrupted before mem0 confirmed"
        while True:
            if sent_before:
                removed = await self._undo(scope, batch_key)
                if removed is None:
                    # mem0 cannot be asked now; sending again could store twice.
                    attempt += 1
                    last_error = "could not remove what an unconfirmed attempt stored"
                    if attempt >= self._retry.max_attempts:
                        await self._give_up(rt, scope, ids, keys, last_error)
                        return
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
                await self._give_up(rt, scope, ids, keys, last_error)
                return
            held = await self._io(
                self._outbox.start_attempt, ids, owner=self._owner, batch_key=batch_key
            )
            if not held:
                logger.warning(
                    "another writer took over %d memory writes for user %s; leaving them to it",
                    len(rows),
                    scope.user_id,
                )
                self._settle(rt, keys, stored=False)
                return
            attempt += 1
            sent_before = True
            self._in_flight.update(ids)
            try:
                async with rt.semaphore:
                    results = await asyncio.wait_for(
                        self._backend.add(messages, scope, metadata={METADATA_KEY: batch_key}),
                        self._write_timeout,
                    )
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                if classify_error(exc) is PermanentBackendError:
                    if len(rows) > 1:
                        # Find the exchange mem0 rejects; store the others.
                        for row in rows:
                            await self._apply(
                                rt, scope, [dataclasses.replace(row, batch_key=None, attempts=0)]
                            )
                        return
                    await self._fail(rt, scope, ids, keys, _reason(exc))
                    return
                last_error = _reason(exc)
                if attempt < self._retry.max_attempts:
                    delay = self._retry.delay(attempt)
                    self._counts["retried"] += 1
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
                self._in_flight.difference_update(ids)
            await self._io(self._outbox.complete, ids)
            self._counts["stored"] += len(rows)
            self._counts["batches"] += 1
            self._settle(rt, keys, stored=True)
            if self._on_stored is not None:
                self._on_stored(scope)
            if self._after_store is not None and results:
                # In the scope's worker: the next batch waits for the time judgement.
                try:
                    await self._after_store(scope, results)
                except Exception:
                    logger.exception("after_store failed for user %s", scope.user_id)
            return

    async def _give_up(
        self, rt: _Runtime, scope: Scope, ids: list[int], keys: list[str], error: str
    ) -> None:
        await self._fail(
            rt,
            scope,
            ids,
            keys,
            f"gave up after {self._retry.max_attempts} attempts; last error: {error}",
        )

    async def _fail(
        self, rt: _Runtime, scope: Scope, ids: list[int], keys: list[str], reason: str
    ) -> None:
        await self._io(self._outbox.fail, ids, reason)
        self._counts["failed"] += len(ids)
        logger.error(
            "memory write for user %s failed and is kept in the outbox as failed: %s; "
            "fix the cause and call retry_failed()",
            scope.user_id,
            reason,
        )
        self._settle(rt, keys, stored=False)

    async def _undo(self, scope: Scope, key: str) -> int | None:
        """Delete the memories an unconfirmed attempt stored under ``key``.

        Returns:
            How many were deleted (0 as well when this client cannot be asked,
            which is logged once: the write is then sent again as it is), or
            ``None`` when mem0 failed to answer now.
        """
        client = self._backend.client
        get_all = getattr(client, "get_all", None)
        delete = getattr(client, "delete", None)
        if get_all is None or delete is None:
            self._log_undo_unsupported("it has no get_all/delete")
            return 0
        removed = 0
        try:
            with caller_loop_scope():
                for _ in range(_UNDO_ROUNDS):
                    raw = await asyncio.wait_for(
                        get_all(filters={**scope.filters(), METADATA_KEY: key}, top_k=100),
                        self._write_timeout,
                    )
                    items = raw.get("results", []) if isinstance(raw, dict) else raw
                    # Only memories that carry the key: a store that ignored the
                    # filter must not lose unrelated memories.
                    mine = [item["id"] for item in items or [] if _carries(item, key)]
                    if not mine:
                        return removed
                    for memory_id in mine:
                        await self._delete_one(delete, memory_id)
                        removed += 1
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            if classify_error(exc) is PermanentBackendError:
                self._log_undo_unsupported(str(exc))
                return removed
            logger.warning("could not ask mem0 about unconfirmed write %s: %s", key, exc)
            return None
        logger.warning("memories under write key %s keep coming back; trying again later", key)
        return None

    async def _delete_one(self, delete: Callable[..., Any], memory_id: str) -> None:
        try:
            await asyncio.wait_for(delete(memory_id), self._write_timeout)
        except ValueError as exc:
            if "not found" not in str(exc).lower():  # gone already is what we want
                raise

    def _log_undo_unsupported(self, reason: str) -> None:
        if not self._undo_unsupported_logged:
            self._undo_unsupported_logged = True
            logger.warning(
                "this mem0 client cannot list and delete memories by write key (%s); a "
                "write interrupted mid-call is sent again and may be stored twice",
                reason,
            )

    # -- exit ---------------------------------------------------------------

    def _report_left(self, count: int, when: str) -> None:
        if self._outbox.durable:
            logger.warning(
                "%d memory writes not stored %s; they stay in the outbox %s and the next "
                "writer on that folder stores them",
                count,
                when,
                self._outbox.path,
            )
        else:
            self._counts["lost"] += count
            logger.warning(
                "%d memory writes not stored %s are lost: no outbox folder is configured",
                count,
                when,
            )

    def _report_at_exit(self) -> None:
        if self._closed:
            return
        count = self.pending
        if self._outbox.durable and self._outbox.path is not None:
            with contextlib.suppress(Exception):
                count = count_held(self._outbox.path, self._owner)
        if count:
            self._report_left(count, "at exit")

    def __del__(self) -> None:
        if getattr(self, "_closed", True) or not self.pending:
            return
        warnings.warn(
            f"WriteQueue {self._owner} was dropped with {self.pending} memory writes pending;"
            " call `await queue.aclose()` (or `await middleware.aclose()`)",
            ResourceWarning,
            source=self,
            stacklevel=1,
        )


_UNDO_ROUNDS = 10


def _carries(item: Any, key: str) -> bool:
    if not isinstance(item, dict) or not item.get("id"):
        return False
    metadata = item.get("metadata") or {}
    return item.get(METADATA_KEY) == key or (
        isinstance(metadata, dict) and metadata.get(METADATA_KEY) == key
    )


def _reason(exc: BaseException) -> str:
    if isinstance(exc, TimeoutError) and not isinstance(exc, BackendError):
        return "no answer within write_timeout"
    # Our backend errors wrap mem0's; name the original.
    cause = exc.__cause__ if isinstance(exc, BackendError) and exc.__cause__ else exc
    return f"{type(cause).__name__}: {exc}" if str(exc) else type(cause).__name__


@atexit.register
def _report_pending_at_exit() -> None:
    for queue in list(_OPEN_QUEUES):
        queue._report_at_exit()
