"""Write-behind: a finished exchange is recorded, queued, and the reply goes on.

:class:`WriteQueue` records each write in the outbox (:mod:`.outbox`) before
``submit`` returns, then stores it in the background: a worker per scope
sends the scope's rows oldest first, joining those that piled up and were
said on one day into one call (``max_batch``), through
:class:`~.delivery.Delivery` (retries, exactly once); at most
``max_concurrency`` calls run at once. After each stored batch it tells its
:class:`AfterStore` (the time judgement or consolidation, the profile cache).

* The outbox is a SQLite file in ``outbox_dir``, else next to the store's own
  files (:func:`~.outbox.default_outbox_dir`): writes survive the process on
  every path, the next queue on the same store replays them, and a lease
  keeper renews this queue's claims and takes over rows whose writer died.
* The rows of replies ending while an insert runs go into the file together,
  in the next insert: one transaction and one sync to disk for many users.
* When the file cannot record a write (a full disk, a read-only file, a
  damaged one that cannot be replaced), the write is kept in an in-memory
  outbox on the same thread, so mem0 still gets it. The error is logged once
  per episode with its real cause; recording in the file resumes at the next
  write that succeeds, and the writes kept in memory move into the file as
  soon as it takes them again (each user's between two of that user's
  batches), or at close or exit.
* Threads: every outbox call runs on the outbox's one thread
  (:class:`~.._sqlite.thread.ConnectionThread`, which calls back when an
  insert is done); the workers and the lease keeper are tasks of the event
  loop that uses the queue (a later loop gets new ones, rebuilt from the
  outbox). A loop torn down with writes pending stores for up to
  ``exit_grace`` seconds; what is left stays in the outbox.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import contextvars
import logging
import os
import time
import uuid
import warnings
import weakref
from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from .._exceptions import ConfigurationError, DamagedFileError, LocalFileError
from .._mem0.durable import disk_sync_of
from .._observe.latency import LatencyRecorder
from .._observe.tracing import remember_origin, write_span
from .._postgres.connection import mask_url
from .._scope import Scope
from .._sqlite.thread import ConnectionThread
from .._text.dates import check_said_at
from .delivery import METADATA_KEY, Delivery, RetryPolicy, Sent, StoreSync, WriteStats
from .outbox import (
    EXCHANGE,
    FACTS,
    LIVE_OWNERS,
    OUTBOX_FILENAME,
    OUTBOX_THREAD,
    BaseOutbox,
    Outbox,
    OutboxRow,
    default_outbox_dir,
    new_owner_id,
)
from .outbox_postgres import (
    DEFAULT_TABLE,
    PostgresOutbox,
    is_postgres_url,
    pgvector_outbox,
)

if TYPE_CHECKING:
    from .._mem0.backend import Mem0Backend

__all__ = [
    "MEMORY_ONLY",
    "METADATA_KEY",
    "AfterStore",
    "RetryPolicy",
    "WriteQueue",
    "WriteResult",
]

logger = logging.getLogger(__name__)

MEMORY_ONLY = ":memory:"
"""``outbox_dir`` value that keeps queued writes in memory only (lost with the process)."""

ELSEWHERE_POLL = 0.5
"""Seconds between looks at writes of a scope another replica delivers."""

_OPEN_QUEUES: weakref.WeakSet[WriteQueue] = weakref.WeakSet()

Recorded = Callable[[bool], None]
"""Told, on the recording loop, whether a write was recorded (in the file or in memory)."""

Stored = list[dict[str, Any]] | None
"""How a write ended: mem0's result entries of its batch once stored, ``None`` when not."""


class AfterStore(Protocol):
    """What follows each batch a :class:`WriteQueue` stored (the time judgement,
    consolidation, the profile cache).

    It may also have ``async followed(scope)``, returning once what it started
    for ``scope`` is done: with an outbox shared by replicas the queue lets
    another writer take the scope only then.
    """

    def stored(self, scope: Scope, results: list[dict[str, Any]], said_at: datetime) -> None:
        """Take note of a batch of ``scope`` said at ``said_at`` that mem0 stored
        as ``results`` (its result entries; none when it found nothing to keep).

        Called in the scope's worker, inside the batch's write span, before
        the scope's next batch: it must return at once (queueing any work for
        the background). What it raises is logged and changes nothing.
        """


@dataclass(frozen=True)
class WriteResult:
    """Where a write stands after :meth:`WriteQueue.submit_facts`."""

    state: str
    """``"stored"``, ``"queued"`` (recorded, stored in the background),
    ``"failed"`` (kept as failed, retryable) or ``"lost"`` (not recorded)."""
    memories: list[str] = field(default_factory=list)
    """What mem0 stored, when ``state == "stored"``."""
    recorded: bool = True
    """False when the outbox could not record it (a full disk): until mem0
    stores it, it is kept in this process's memory only."""


@dataclass(eq=False)
class _Runtime:
    """What a queue holds on one event loop."""

    loop: asyncio.AbstractEventLoop
    semaphore: asyncio.Semaphore
    workers: dict[Scope, asyncio.Task[None]] = field(default_factory=dict)
    wake: set[Scope] = field(default_factory=set)
    waiters: dict[str, asyncio.Future[Stored]] = field(default_factory=dict)
    recorded: dict[str, Scope] = field(default_factory=dict)
    """The scope of each write waited for that is in the outbox (not in memory
    only, not being recorded): in a shared outbox another writer may settle it."""
    started: asyncio.Task[None] | None = None
    maintenance: asyncio.Task[None] | None = None
    teardown_deadline: float | None = None
    recording: list[tuple[OutboxRow, Recorded]] = field(default_factory=list)
    """Rows waiting for the insert under way to end."""
    inserting: bool = False

    def tasks(self) -> list[asyncio.Task[None]]:
        """Every task of this runtime."""
        return [t for t in (self.started, self.maintenance, *self.workers.values()) if t]


class WriteQueue:
    """Per-scope ordered, durable background writes to mem0.

    Args:
        backend: Where the writes go.
        outbox_dir: Folder of the outbox file, or a ``postgresql://`` URL for
            an outbox table shared by replicas; writes left there by a
            process that ended are replayed. ``None``: next to the store's
            own files (a table in the database of a pgvector store; in
            memory only for a client whose store cannot be told);
            :data:`MEMORY_ONLY` (``":memory:"``): in memory only.
        max_concurrency: mem0 calls in flight at once, across scopes.
        max_batch: Exchanges of one scope joined into one mem0 call at most.
        retry: Backoff for transient failures.
        write_timeout: Seconds one mem0 call may take before it counts as a
            transient failure; ``None`` waits indefinitely.
        lease: Seconds a claim on a row lasts without renewal; another writer
            takes over rows whose writer stopped renewing (or died).
        after_store: Told after each stored batch (see :class:`AfterStore`).
        exit_grace: Seconds the workers keep storing when the event loop is
            torn down with writes pending (``asyncio.run`` returning).
        outbox_table: The table of an outbox in PostgreSQL.
        deliver: Store the writes (the default). ``False``: only record them
            in a shared outbox, for a process running :meth:`serve` to store;
            a write waited for (``wait``, :meth:`submit_facts`,
            :meth:`flush`) is waited for until that process stored it.

    Raises:
        ConfigurationError: ``deliver=False`` with an outbox only this
            process reaches.
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
        after_store: AfterStore | None = None,
        exit_grace: float = 5.0,
        outbox_table: str = DEFAULT_TABLE,
        deliver: bool = True,
    ) -> None:
        if max_concurrency < 1 or max_batch < 1:
            raise ValueError("max_concurrency and max_batch must be positive")
        if lease <= 0:
            raise ValueError(f"lease must be positive, got {lease!r}")
        self._backend = backend
        self._lease = lease
        self._max_batch = max_batch
        self._max_concurrency = max_concurrency
        self._exit_grace = exit_grace
        self._after_store = after_store
        self._deliver = deliver
        place = outbox_dir
        earlier_file = None  # where a release before the PostgreSQL outbox kept the rows
        if place is None:
            beside = pgvector_outbox(getattr(backend.client, "config", None))
            place, outbox_table = beside or (default_outbox_dir(backend.client), outbox_table)
            if beside is not None:
                earlier_file = default_outbox_dir(backend.client)
        url = os.fspath(place) if place is not None and is_postgres_url(os.fspath(place)) else None
        path = None
        if url is None and place is not None and str(place) != MEMORY_ONLY:
            path = Path(place).expanduser() / OUTBOX_FILENAME
        what = mask_url(url) if url is not None else path or MEMORY_ONLY
        # The outbox and its in-memory stand-in share one thread, which this queue closes.
        self._thread = ConnectionThread(OUTBOX_THREAD, what=f"the outbox {what}")
        try:
            self._outbox: BaseOutbox = (
                PostgresOutbox._on_thread(self._thread, url, table=outbox_table)
                if url is not None
                else Outbox._on_thread(self._thread, path)
            )
            # Where writes wait, in memory, while the outbox cannot record.
            self._spill: BaseOutbox = self._outbox
            if self._outbox.durable:
                self._spill = Outbox._on_thread(self._thread, None)
            if not deliver and not self._outbox.shared:
                raise ConfigurationError(
                    f"writes delivered by another process (deliver_writes=False) need an "
                    f"outbox every process reaches, not {what}: a postgresql:// outbox, "
                    "or the default beside a pgvector store"
                )
        except BaseException:
            self._thread.close()
            raise
        # Dropped unclosed: the thread ends (the rows stay in the file). A weakref
        # callback runs before the thread's own finaliser, which would warn; not
        # at exit, where _report_at_exit still uses the thread.
        weakref.finalize(self, self._thread.close, wait=False).atexit = False
        self._owner = new_owner_id()
        if earlier_file is not None:
            self._move_earlier_file(earlier_file / OUTBOX_FILENAME)
        self._stats = WriteStats(lost=self._outbox.lost_at_open)
        self._lost_unreported = self._outbox.lost_at_open > 0
        # The embedded store syncs its writes only when told: rows are retired after that.
        sync = disk_sync_of(backend.client) if self._outbox.durable else None
        self._store_sync = StoreSync(sync)
        self._delivery = Delivery(
            backend,
            owner=self._owner,
            retry=retry or RetryPolicy(),
            write_timeout=write_timeout,
            stats=self._stats,
            store_sync=self._store_sync,
        )
        self._unrecorded: set[str] = set()  # keys of writes kept in memory only
        self._watched: set[str] = set()  # keys of writes whose caller waits for them
        self._failing: str | None = None  # why the file refuses, while it does
        self._elsewhere: set[asyncio.Task[None]] = set()  # rows the file refused, in hand
        self._submitted_at: dict[str, float] = {}
        self._latency = LatencyRecorder()
        self._rt: _Runtime | None = None
        self._closed = False
        LIVE_OWNERS.add(self._owner)
        _OPEN_QUEUES.add(self)
        with contextlib.suppress(RuntimeError):
            asyncio.get_running_loop()
            self._runtime()  # replay what an earlier process left, right away

    # -- public surface ---------------------------------------------------

    @property
    def outbox(self) -> BaseOutbox:
        """The outbox (or, without one, the in-memory outbox), for inspection."""
        return self._outbox

    @property
    def backend(self) -> Mem0Backend:
        """Where the writes go."""
        return self._backend

    @property
    def closed(self) -> bool:
        """Whether :meth:`aclose` ran."""
        return self._closed

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

        Returns once the outbox holds the exchange (or memory does, while the
        outbox cannot record), or, with ``wait``, once mem0 stored it or it
        failed permanently. Never raises for a mem0 or outbox failure: those
        are logged and counted. Cancelling the caller does not take back a
        write being recorded: it is recorded and queued all the same.

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
        submitted = await self._submit(
            scope, messages, said_at=said_at, kind=EXCHANGE, watched=wait
        )
        if submitted is None:
            return None
        key, done = submitted
        if wait:
            await asyncio.shield(done)
        return key

    async def submit_facts(
        self, scope: Scope, facts: list[str], *, timeout: float | None
    ) -> WriteResult:
        """Queue facts the agent asked to keep and wait up to ``timeout`` for mem0.

        mem0 extracts from them; when it finds nothing, each is stored as written.

        Returns:
            Whether they are stored (and what mem0 stored), still queued, or failed.
        """
        messages = [{"role": "user", "content": fact} for fact in facts]
        submitted = await self._submit(scope, messages, said_at=None, kind=FACTS, watched=True)
        if submitted is None:
            return WriteResult("lost")
        key, done = submitted
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(asyncio.shield(done), timeout)
        if not done.done():
            return WriteResult("queued", recorded=key not in self._unrecorded)
        results = done.result()
        if results is None:
            return WriteResult("failed")
        return WriteResult("stored", [str(r.get("memory", "")) for r in results if r.get("memory")])

    async def flush(self, timeout: float | None = None) -> bool:
        """Wait until every write queued so far is stored or has failed.

        This includes the writes other processes left in the outbox (those
        whose process ended or whose lease ran out), which are taken over first.
        A queue that does not deliver waits until the writer process stored
        every write recorded in the outbox before the call, its own and the
        other replicas'.

        Returns:
            True when none is left pending within ``timeout`` seconds and no
            write was lost (not recorded) since the last call.
        """
        deadline = None if timeout is None else time.monotonic() + timeout
        flushed = await self._flush_here(timeout)
        if not flushed or self._deliver or self._closed:
            return flushed
        box = self._outbox
        assert isinstance(box, PostgresOutbox)  # the only shared outbox
        try:
            newest = await self._thread.run(box.newest_id)
            while await self._thread.run(box.pending_through, newest):
                if deadline is not None and time.monotonic() >= deadline:
                    return False
                await asyncio.sleep(ELSEWHERE_POLL)
        except LocalFileError as exc:
            logger.warning("could not ask the outbox whether the writer stored the writes: %s", exc)
            return False
        return True

    async def _flush_here(self, timeout: float | None) -> bool:
        """:meth:`flush` of this queue's own part: what it stores, or, without
        delivery, what it records."""
        if self._closed:
            return not self._take_lost()
        rt = self._runtime()
        deadline = None if timeout is None else time.monotonic() + timeout
        assert rt.started is not None
        try:
            await asyncio.wait_for(asyncio.shield(rt.started), timeout)
            # Writes another process left since the start are ours to store too.
            self._adopt_again(rt, *await self._take_rows())
        except TimeoutError:
            return False
        except Exception as exc:
            logger.warning("could not look for writes left in the outbox: %s", exc)
        waiting = list(rt.waiters.values())
        with self._store_sync.hurrying():
            if waiting:
                left = None if deadline is None else max(deadline - time.monotonic(), 0.0)
                _, not_done = await asyncio.wait(waiting, timeout=left)
                if not_done:
                    return False
            left = None if deadline is None else max(deadline - time.monotonic(), 0.0)
            if not await self._store_sync.synced(left):  # stored, and on disk
                return False
        return not self._take_lost()

    async def serve(self, poll: float = ELSEWHERE_POLL) -> None:
        """Store the writes any process records in the shared outbox, until cancelled.

        The writer beside replicas whose queues only record
        (``deliver=False``): every ``poll`` seconds it takes the rows no live
        writer holds and stores each user's in the order they were said, and
        what follows a stored batch (the time judgement, the profile) runs
        here. Several may run: each user's writes go through one at a time.

        Raises:
            ConfigurationError: This queue does not deliver, or its outbox
                is not shared.
        """
        if not (self._deliver and self._outbox.shared):
            raise ConfigurationError(
                "serving writes needs an outbox in PostgreSQL and a queue that delivers "
                "them (Parameters(deliver_writes=True), the default)"
            )
        if not poll > 0:
            raise ValueError(f"poll must be positive, got {poll!r}")
        rt = self._runtime()
        while True:
            try:
                rows = await self._thread.run(
                    self._outbox.claim_orphans, owner=self._owner, lease=self._lease
                )
            except Exception as exc:
                self._stats.outbox_errors += 1
                logger.warning(
                    "could not look for new memory writes (%s); trying again in %.1f s", exc, poll
                )
            else:
                self._adopt(rt, rows)
            await asyncio.sleep(poll)

    async def retry_failed(self, user_id: str | None = None) -> int:
        """Queue the writes kept as failed (of ``user_id``, or all) again.

        Returns:
            How many were requeued.
        """
        rt = self._runtime()
        rows: list[OutboxRow] = []
        for box in self._boxes():
            rows += await self._thread.run(
                box.requeue_failed, owner=self._owner, lease=self._lease, user_id=user_id
            )
        self._stats.requeued += len(rows)
        self._adopt(rt, rows)
        return len(rows)

    async def failed(self) -> list[OutboxRow]:
        """The writes kept as failed, oldest first, with their ``error``."""
        rows: list[OutboxRow] = []
        for box in self._boxes():
            rows += await self._thread.run(box.failed)
        return rows

    async def aclose(self, timeout: float | None = None) -> bool:
        """Flush (up to ``timeout``), stop the workers and close the outbox. Idempotent.

        Writes not stored by then stay in the outbox for the next queue on
        the folder (without a folder they are lost, and logged).

        Returns:
            True when everything was stored before closing.
        """
        if self._closed:
            return True
        flushed = await self._flush_here(timeout)  # recorded is enough to close without delivery
        self._closed = True
        # Rows whose mem0 call is running now keep their claim until the lease
        # runs out: cancelling the task does not stop mem0's worker threads.
        in_flight = set(self._delivery.in_flight)
        left = await self._stop_workers()
        try:
            left -= await self._thread.run(self._save_spilled)  # those are logged as lost
            await self._thread.run(self._outbox.release, owner=self._owner, keep=in_flight)
        except Exception:
            logger.exception("could not release the outbox cleanly")
        await self._store_sync.aclose()
        await self._thread.aclose(self._close_boxes)
        self._submitted_at.clear()
        if not (in_flight and self._outbox.durable):
            LIVE_OWNERS.discard(self._owner)
        _OPEN_QUEUES.discard(self)
        if left > 0:
            self._report_left(left, "at close")
        return flushed

    def stats(self) -> dict[str, Any]:
        """Counters of this queue since construction, plus write latency.

        ``writes_retried`` counts retries (calls repeated after a transient
        failure); ``writes_deferred`` sends put off because the store's disk
        was nearly full (they wait, without using up retries);
        ``writes_unrecorded`` writes the outbox could not record, and
        ``writes_in_memory_only`` those of them not stored yet (a crash now
        loses them); ``writes_unsynced`` stored ones whose outbox rows wait
        for the embedded store's sync; ``writes_handed_over`` writes recorded
        for a writer process to store (``deliver=False``); ``outbox_errors``
        failed outbox operations; ``write_latency_*`` is submit-to-stored,
        in seconds.
        """
        out: dict[str, Any] = self._stats.as_stats()
        out["writes_pending"] = self.pending
        out["writes_in_memory_only"] = len(self._unrecorded)
        out["writes_unsynced"] = len(self._store_sync.unsynced)
        out.update(self._latency.summary("write_latency"))
        return out

    # -- recording ------------------------------------------------------------

    async def _submit(
        self,
        scope: Scope,
        messages: list[dict[str, str]],
        *,
        said_at: datetime | str | None,
        kind: str,
        watched: bool = False,
    ) -> tuple[str, asyncio.Future[Stored]] | None:
        """Record a write and queue it; its key and the future of how it ends,
        or ``None`` when it could not be recorded. Without delivery here, a
        write recorded in the outbox is done, unless ``watched`` (its caller
        waits until another process stored it)."""
        when = datetime.now(UTC) if said_at is None else check_said_at(said_at)
        if self._closed:
            logger.error(
                "a memory write for user %s was submitted after the queue was closed; "
                "it is not stored",
                scope.user_id,
            )
            self._stats.lost += 1
            self._lost_unreported = True
            return None
        rt = self._runtime()
        key = uuid.uuid4().hex
        remember_origin(key)  # the write span of its batch links to this reply
        done: asyncio.Future[Stored] = rt.loop.create_future()
        rt.waiters[key] = done
        self._submitted_at[key] = time.perf_counter()
        self._stats.queued += 1
        row = OutboxRow(key, scope.user_id, scope.agent_id, list(messages), when, kind)
        # Recording and queueing go on when the reply is cancelled (a row
        # recorded but never queued would wait for an unrelated write to wake
        # the workers); the reply waits on a future of its own.
        outcome: asyncio.Future[bool] = rt.loop.create_future()

        if watched:
            self._watched.add(key)

        def recorded(ok: bool) -> None:
            if ok:
                if key in rt.waiters:
                    rt.recorded[key] = scope
                if not self._hand_over([key]):
                    self._kick(rt, scope)
            else:
                self._stats.lost += 1
                self._lost_unreported = True
                self._settle([key], None)
            if not outcome.done():
                outcome.set_result(ok)

        self._record(rt, row, recorded)
        return (key, done) if await outcome else None

    def _record(self, rt: _Runtime, row: OutboxRow, recorded: Recorded) -> None:
        """Record ``row``; ``recorded(ok)`` runs on this loop once it is, or (``ok``
        False) once neither the file nor memory took it.

        Nothing here waits on the loop: the outbox's thread calls back, so a
        write recorded in the file is told so one turn of the loop after the
        insert, whoever awaits what.
        """
        context = contextvars.copy_context()

        def told(ok: bool) -> None:  # in the caller's context (its trace span), as after an await
            try:
                context.run(recorded, ok)
            except Exception:  # one caller's failure must not keep the others waiting
                logger.exception("a recorded write's follow-up failed")

        rt.recording.append((row, told))
        if not rt.inserting:
            self._insert_next(rt)

    def _insert_next(self, rt: _Runtime) -> None:
        """Insert the rows waiting in one transaction, then the ones that came meanwhile."""
        taken, rt.recording = rt.recording, []
        rt.inserting = True

        def inserted(_: object, error: BaseException | None) -> None:
            rt.inserting = False
            if rt.recording:
                self._insert_next(rt)
            if error is None and self._failing is not None:
                logger.warning("the outbox %s records writes again", self._outbox.where)
                self._failing = None
            failure = (
                error if error is None or isinstance(error, Exception) else RuntimeError(error)
            )
            for row, told in taken:
                if failure is None:
                    told(True)
                    continue
                # Each row finds its own way.
                task = rt.loop.create_task(self._record_elsewhere(row, failure, told))
                self._elsewhere.add(task)
                task.add_done_callback(self._elsewhere.discard)

        rows = [row for row, _ in taken]
        try:
            self._thread.send(self._outbox.add, rows, self._claim, self._lease, then=inserted)
        except Exception as exc:  # the thread is closed
            inserted(None, exc)

    async def _record_elsewhere(self, row: OutboxRow, exc: Exception, told: Recorded) -> None:
        """Record a row the file refused (in the file repaired, else in memory);
        ``told`` learns whether it is, also when this is cancelled."""
        recorded = False
        try:
            self._stats.outbox_errors += 1
            if isinstance(exc, DamagedFileError):
                with contextlib.suppress(Exception):
                    await self._thread.run(self._outbox.repair)
                    await self._thread.run(self._outbox.add, [row], self._claim, self._lease)
                    recorded = True
                    return
            cause = exc.__cause__ if isinstance(exc, LocalFileError) and exc.__cause__ else exc
            reason = f"{type(cause).__name__}: {cause}"
            if self._spill is not self._outbox:
                if self._failing is None:
                    logger.error(
                        "could not record memory writes in the outbox %s (%s); they are kept "
                        "in memory until mem0 stores them or the file takes them again, and "
                        "recording resumes once it works again",
                        self._outbox.where,
                        reason,
                    )
                self._failing = reason
                try:
                    await self._thread.run(self._spill.add, [row], self._owner, self._lease)
                except Exception:
                    logger.exception("could not keep a memory write in memory either")
                else:
                    self._stats.unrecorded += 1
                    self._unrecorded.add(row.key)
                    recorded = True
                    return
            logger.error(
                "could not record a memory write for user %s (%s); it is not stored",
                row.user_id,
                reason,
            )
        finally:
            told(recorded)

    def _move_earlier_file(self, path: Path) -> None:
        """Move the writes an SQLite outbox beside a pgvector store holds (an
        earlier release kept them there) into the PostgreSQL one, which every
        writer on the store now uses. Rows a live writer holds stay."""
        if not path.exists():
            return
        try:
            moved = self._thread.call(self._move_file_rows, path)
        except Exception as exc:
            logger.warning("could not move the writes left in %s (%s); they stay there", path, exc)
            return
        if moved:
            logger.warning(
                "moved %d memory writes an earlier release left in %s into the outbox %s",
                moved,
                path,
                self._outbox.where,
            )

    def _move_file_rows(self, path: Path) -> int:
        earlier = Outbox._on_thread(self._thread, path)
        try:
            rows = earlier.claim_orphans(
                owner=self._owner, lease=self._lease, live_here=frozenset(LIVE_OWNERS)
            )
            rows += earlier.failed()
            if rows:
                # Their keys and batch keys come along: a row already here is skipped.
                self._outbox.add(rows)
                earlier.complete([row.id for row in rows])
            return len(rows)
        finally:
            earlier.close()

    @property
    def _claim(self) -> str | None:
        """Who holds the rows this queue records: itself, or no one when
        another process stores them (any writer may take them)."""
        return self._owner if self._deliver else None

    def _boxes(self) -> tuple[BaseOutbox, ...]:
        """Memory first (it always progresses), then the file."""
        return (self._outbox,) if self._spill is self._outbox else (self._spill, self._outbox)

    def _unspill(self, scope: Scope | None = None, skip: Collection[str] = ()) -> list[str]:
        """Move the writes kept in memory (``scope``'s, or all) into the file, but
        those whose key is in ``skip``; returns their keys. On the outbox's thread.

        A scope's rows stay held by this queue; all of them (at close or exit)
        are left for whoever opens the file next. Writes kept as failed in
        memory move too, still failed: there they can be requeued.
        """
        if self._spill is self._outbox:
            return []

        def of_scope(rows: list[OutboxRow]) -> list[OutboxRow]:
            return [
                row
                for row in rows
                if (scope is None or (row.user_id, row.agent_id) == (scope.user_id, scope.agent_id))
                and row.key not in skip
            ]

        pending = of_scope(self._spill.held(self._owner))
        failed = of_scope(self._spill.failed())
        if pending:
            self._outbox.add(pending, self._claim if scope else None, self._lease)
        if failed:
            self._outbox.add(failed)
        self._spill.complete([row.id for row in (*pending, *failed)])
        return [row.key for row in (*pending, *failed)]

    async def _move_spilled(self, scope: Scope) -> None:
        """Move ``scope``'s writes kept in memory into the file once it takes them again.

        For the scope's worker, between two of its batches: then none of
        these rows is being sent. Rows stored and waiting for the store's
        sync stay where they are. While the file still refuses, they stay in
        memory and nothing is logged again.
        """
        if not self._unrecorded:
            return
        try:
            unsynced = frozenset(self._store_sync.unsynced)
            keys = await self._thread.run(self._unspill, scope, unsynced)
        except Exception as exc:
            logger.debug("memory writes kept in memory stay there for now: %s", exc)
            return
        if keys:
            self._unrecorded.difference_update(keys)
            logger.warning(
                "moved %d memory writes of user %s kept in memory into the outbox %s",
                len(keys),
                scope.user_id,
                self._outbox.where,
            )

    def _save_spilled(self) -> int:
        """At close and exit: the writes kept in memory into the file, or lost
        (and logged); returns how many were lost."""
        try:
            self._unspill()
        except Exception as exc:
            left = len(self._spill.held(self._owner)) + len(self._spill.failed())
            self._stats.lost += left
            logger.error(
                "%d memory writes kept in memory (the outbox %s could not record them: %s) "
                "are lost",
                left,
                self._outbox.where,
                exc,
            )
            return left
        return 0

    def _close_boxes(self) -> None:
        for box in self._boxes():
            box.close()

    # -- the workers ---------------------------------------------------------------

    def _runtime(self) -> _Runtime:
        """The runtime of the running loop, started (replaying the outbox) if new."""
        loop = asyncio.get_running_loop()
        rt = self._rt
        if rt is not None and rt.loop is loop:
            return rt
        if rt is not None and rt.loop.is_running():
            raise RuntimeError("a WriteQueue serves one event loop at a time; create one per loop")
        # First use, or the earlier loop has ended: rebuild from the outbox.
        rt = _Runtime(loop, asyncio.Semaphore(self._max_concurrency))
        self._rt = rt
        rt.started = loop.create_task(self._replay(rt), name="agentscope-mem0-outbox-replay")
        return rt

    async def _replay(self, rt: _Runtime) -> None:
        try:
            held, orphans = await self._take_rows()
            self._adopt(rt, [*held, *orphans])
        except Exception as exc:
            logger.warning("could not read the outbox at start (%s); trying again later", exc)

    async def _take_rows(self) -> tuple[list[OutboxRow], list[OutboxRow]]:
        """The pending rows this queue holds, in memory and in the file (but those
        stored and waiting for the store's sync: their writes are settled), and
        the rows of writers that died, taken over (counted as replayed); taking
        them renews this queue's leases too."""
        unsynced = self._store_sync.unsynced
        held = [
            row
            for box in self._boxes()
            for row in await self._thread.run(box.held, self._owner)
            if row.key not in unsynced
        ]
        orphans: list[OutboxRow] = []
        if self._outbox.durable and self._deliver:
            orphans = await self._thread.run(
                self._outbox.claim_orphans,
                owner=self._owner,
                lease=self._lease,
                live_here=frozenset(LIVE_OWNERS),
            )
            if orphans:
                logger.info(
                    "taking over %d memory writes left in the outbox by a writer that ended",
                    len(orphans),
                )
            self._stats.replayed += len(orphans)
        return held, orphans

    async def _maintain(self, rt: _Runtime) -> None:
        """Keep the leases of held writes, take over orphans, restart stalled scopes."""
        while rt.waiters:
            await asyncio.sleep(self._lease / 3)
            try:
                self._adopt_again(rt, *await self._take_rows())
            except Exception as exc:
                self._stats.outbox_errors += 1
                logger.warning(
                    "outbox maintenance failed (%s); trying again in %.1f s", exc, self._lease / 3
                )

    def _adopt(self, rt: _Runtime, rows: list[OutboxRow]) -> None:
        """Track rows this queue holds and make sure their scopes are draining."""
        scopes: dict[Scope, None] = {}
        for row in rows:
            if row.key not in rt.waiters:
                rt.waiters[row.key] = rt.loop.create_future()
            scope = Scope(row.user_id, row.agent_id)
            rt.recorded[row.key] = scope
            scopes[scope] = None
        for scope in scopes:
            self._kick(rt, scope)

    def _adopt_again(self, rt: _Runtime, held: list[OutboxRow], orphans: list[OutboxRow]) -> None:
        """Track ``orphans`` and restart the scopes of the rows this queue still
        waits for. A held row whose write was settled while the rows were read
        (stored and being removed) is not tracked again: nothing would end it.
        In a shared outbox it is (the worker finds it gone and settles it), so
        that rows taken with a scope from another writer are never left held."""
        shared = self._outbox.shared
        again = [
            row
            for row in held
            if row.key in rt.waiters or (shared and row.key not in self._unrecorded)
        ]
        self._adopt(rt, [*again, *orphans])

    def _kick(self, rt: _Runtime, scope: Scope) -> None:
        """Make sure ``scope`` has a worker (and the leases a keeper)."""
        if rt.maintenance is None or rt.maintenance.done():
            rt.maintenance = rt.loop.create_task(
                self._maintain(rt), name="agentscope-mem0-outbox-lease"
            )
        worker = rt.workers.get(scope)
        if worker is not None and not worker.done():
            rt.wake.add(scope)
            return
        rt.workers[scope] = rt.loop.create_task(
            self._drain(rt, scope), name=f"agentscope-mem0-write-{scope.user_id}"
        )

    async def _drain(self, rt: _Runtime, scope: Scope) -> None:
        """Send ``scope``'s rows to mem0, oldest first, until none is left."""
        me = asyncio.current_task()
        try:
            while True:
                try:
                    await self._drain_once(rt, scope)
                    return
                except asyncio.CancelledError:
                    if not self._keep_going_at_teardown(rt, me):
                        raise
        except Exception:
            logger.exception(
                "memory writes for user %s stopped; they stay queued and resume shortly",
                scope.user_id,
            )
        finally:
            if rt.workers.get(scope) is me:
                del rt.workers[scope]
                if self._outbox.shared:  # however it ended, others may take the scope
                    with contextlib.suppress(Exception):
                        self._thread.send(
                            self._outbox.let_go,
                            scope.user_id,
                            scope.agent_id,
                            then=lambda _result, _error: None,
                        )

    async def _drain_once(self, rt: _Runtime, scope: Scope) -> None:
        assert rt.started is not None
        # Replayed rows go before new ones; wait() neither cancels the replay
        # nor raises when the loop's teardown cancelled it.
        await asyncio.wait({rt.started})
        while True:
            rt.wake.discard(scope)
            await self._move_spilled(scope)
            if not self._deliver:
                if not await self._watch(rt, scope):
                    return
                continue
            found = await self._next_rows(scope)
            if found is None:
                if scope in rt.wake or not await self._let_go(rt, scope):
                    continue
                elsewhere = await self._stored_elsewhere(rt, scope)
                if elsewhere is not None:
                    # Another writer holds the scope (or the outbox is out of
                    # reach, then look less often): look again shortly.
                    await asyncio.sleep(ELSEWHERE_POLL if elsewhere else ELSEWHERE_POLL * 10)
                    continue
                return
            box, rows = found
            attempts = max(r.attempts for r in rows)
            with write_span(scope, [row.key for row in rows], attempts_before=attempts):
                sent = await self._delivery.send(box, scope, rows, rt.semaphore)
                self._settle_sent(scope, sent)

    def _hand_over(self, keys: list[str]) -> bool:
        """Without delivery here: end the writes of ``keys`` that are in the
        outbox and that no caller waits for (another process stores them).

        Returns:
            True when none of ``keys`` is left to this queue.
        """
        if self._deliver:
            return False
        done = [key for key in keys if key not in self._unrecorded and key not in self._watched]
        for key in done:  # ended, but not stored here: no write latency to record
            self._submitted_at.pop(key, None)
        self._settle(done, [])
        self._stats.handed_over += len(done)
        return len(done) == len(keys)

    async def _watch(self, rt: _Runtime, scope: Scope) -> bool:
        """Without delivery here, the scope's worker: hand over the writes
        moved from memory into the outbox, settle the waited-for ones another
        process stored; False once nothing of ``scope`` is left to this queue."""
        self._hand_over([key for key, of in rt.recorded.items() if of == scope])
        if any(rt.recorded.get(key) == scope for key in self._unrecorded):
            await asyncio.sleep(ELSEWHERE_POLL * 10)  # the outbox refuses them still
            return True
        elsewhere = await self._stored_elsewhere(rt, scope)
        if elsewhere is None:
            return False
        await asyncio.sleep(ELSEWHERE_POLL if elsewhere else ELSEWHERE_POLL * 10)
        return True

    async def _next_rows(self, scope: Scope) -> tuple[BaseOutbox, list[OutboxRow]] | None:
        """The next batch of ``scope`` and the outbox holding it, or ``None``
        (every box asked in one call on the outbox's thread)."""
        unsynced = frozenset(self._store_sync.unsynced)  # stored, waiting for the sync
        found, errors = await self._thread.run(self._first_batch, scope, unsynced)
        for exc in errors:
            self._stats.outbox_errors += 1
            logger.warning("could not read the outbox (%s); trying again shortly", exc)
        return found

    def _first_batch(
        self, scope: Scope, skip: frozenset[str]
    ) -> tuple[tuple[BaseOutbox, list[OutboxRow]] | None, list[LocalFileError]]:
        """On the outbox's thread: the first box's next batch of ``scope``, and
        the errors of the boxes that could not be read."""
        errors: list[LocalFileError] = []
        for box in self._boxes():
            try:
                rows = box.next_batch(
                    owner=self._owner,
                    user_id=scope.user_id,
                    agent_id=scope.agent_id,
                    limit=self._max_batch,
                    skip=skip,
                )
            except LocalFileError as exc:
                errors.append(exc)
                continue
            if rows:
                return (box, rows), errors
        return None, errors

    async def _let_go(self, rt: _Runtime, scope: Scope) -> bool:
        """Let other writers of a shared outbox take ``scope`` once what this
        one stored of it is judged; False when a write came meanwhile (the
        scope is still this writer's: it goes on)."""
        if not self._outbox.shared:
            return True
        followed = getattr(self._after_store, "followed", None)
        if followed is not None:
            try:
                await followed(scope)
            except Exception:
                logger.exception("waiting for the judgement of user %s failed", scope.user_id)
        if scope in rt.wake:
            return False
        try:
            await self._thread.run(self._outbox.let_go, scope.user_id, scope.agent_id)
        except LocalFileError as exc:  # the connection is gone, and the lock with it
            logger.debug("could not let go of user %s's writes: %s", scope.user_id, exc)
        return True

    async def _stored_elsewhere(self, rt: _Runtime, scope: Scope) -> bool | None:
        """Settle ``scope``'s writes another writer stored or failed.

        Returns:
            ``None`` when none is left to wait for (always, but in a shared
            outbox); True when some are still pending elsewhere; False when
            the outbox could not say.
        """
        if not self._outbox.shared:
            return None
        keys = [
            key
            for key, of in rt.recorded.items()
            if of == scope and key in rt.waiters and key not in self._unrecorded
        ]
        if not keys:
            return None
        try:
            ended = await self._thread.run(self._outbox.settled, keys)
        except LocalFileError as exc:
            logger.debug("could not ask the outbox how writes ended: %s", exc)
            return False
        # The writer that stored them has mem0's results and told its AfterStore.
        self._settle([key for key, stored in ended.items() if stored], [])
        self._settle([key for key, stored in ended.items() if not stored], None)
        return True if len(ended) < len(keys) else None

    def _settle_sent(self, scope: Scope, sent: Sent) -> None:
        """Settle a sent batch's writes, then tell :attr:`_after_store` what was stored."""
        for rows, results in sent.stored:
            self._settle([row.key for row in rows], results)
        self._settle([row.key for row in sent.dropped], None)
        for rows, results in sent.stored:
            if self._after_store is None:
                continue
            try:
                self._after_store.stored(scope, results, max(row.said_at for row in rows))
            except Exception:
                logger.exception("what follows a stored write failed for user %s", scope.user_id)

    def _settle(self, keys: list[str], results: Stored) -> None:
        """End the writes of ``keys``: stored as ``results``, or not (``None``)."""
        rt = self._rt
        now = time.perf_counter()
        for key in keys:
            done = rt.waiters.pop(key, None) if rt is not None else None
            if rt is not None:
                rt.recorded.pop(key, None)
            if done is not None and not done.done():
                done.set_result(results)
            started = self._submitted_at.pop(key, None)
            if results is not None and started is not None:
                self._latency.record(now - started)
        self._unrecorded.difference_update(keys)
        self._watched.difference_update(keys)

    def _keep_going_at_teardown(self, rt: _Runtime, task: asyncio.Task[Any] | None) -> bool:
        """Whether a worker cancelled by the loop's teardown goes on storing.

        Only ``aclose`` cancels the workers on purpose (after marking the
        queue closed); any other cancellation is the loop ending.
        """
        if self._closed or task is None or self._exit_grace <= 0:
            return False
        now = time.monotonic()
        if rt.teardown_deadline is None:
            rt.teardown_deadline = now + self._exit_grace
            logger.info(
                "the event loop is ending with %d memory writes pending; storing them "
                "for up to %.1f s",
                len(rt.waiters),
                self._exit_grace,
            )
        if now >= rt.teardown_deadline:
            return False
        task.uncancel()
        rt.loop.call_at(
            rt.loop.time() + (rt.teardown_deadline - now),
            lambda: None if task.done() else task.cancel(),
        )
        return True

    async def _stop_workers(self) -> int:
        """Cancel every task; returns how many writes were still pending."""
        rt = self._rt
        if rt is None:
            return 0
        tasks = rt.tasks()
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        left = len(rt.waiters)
        for done in rt.waiters.values():
            if not done.done():
                done.set_result(None)
        rt.waiters.clear()
        rt.recorded.clear()
        return left

    def _take_lost(self) -> bool:
        lost, self._lost_unreported = self._lost_unreported, False
        return lost

    # -- what is left at close or exit ---------------------------------------------

    def _report_left(self, count: int, when: str) -> None:
        """Log ``count`` writes left unstored (``when``: "at close", "at exit")."""
        if self._outbox.durable:
            logger.warning(
                "%d memory writes not stored %s; they stay in the outbox %s and the next "
                "writer on that folder stores them",
                count,
                when,
                self._outbox.where,
            )
        else:
            self._stats.lost += count
            logger.warning(
                "%d memory writes not stored %s are lost: no outbox folder is configured",
                count,
                when,
            )

    def _report_at_exit(self) -> None:
        """At interpreter exit: save what memory holds, report what is left."""
        if self._closed:
            return
        count = self.pending
        with contextlib.suppress(Exception):
            count -= self._save_spilled()  # those are logged as lost
        if self._outbox.durable:
            with contextlib.suppress(Exception):
                count = len(self._outbox.held(self._owner))
        if count > 0:
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


@atexit.register
def _report_pending_at_exit() -> None:
    for queue in list(_OPEN_QUEUES):
        queue._report_at_exit()
