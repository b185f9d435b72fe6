"""Write-behind: a finished exchange is recorded, queued, and the reply goes on.

:class:`WriteQueue` is the async front end of the :mod:`.outbox` tables,
whose calls all run on one thread that owns the outbox's connections;
sending a batch to mem0, its retries and exactly-once are :mod:`.delivery`'s.

* ``submit`` records the exchange (:mod:`.recording`) and returns; a
  worker per scope (:mod:`.workers`) sends the scope's rows oldest first,
  joining those that piled up and were said on one day into one call
  (``max_batch``); at most ``max_concurrency`` calls run at once.
* The outbox is a SQLite file in ``outbox_dir``, else next to the store's own
  files (:mod:`.outbox_place`): writes survive the process on every path and
  the next queue on the same store replays them.
* What the outbox cannot record is kept in memory until mem0 has it; a loop
  torn down with writes pending stores for up to ``exit_grace`` seconds.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import logging
import time
import uuid
import warnings
import weakref
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .._observe.latency import LatencyRecorder
from .._observe.tracing import remember_origin
from .._scope import Scope
from .._text.dates import check_said_at
from .delivery import METADATA_KEY, AfterStore, Delivery, RetryPolicy
from .outbox import OUTBOX_FILENAME, Outbox, OutboxRow
from .outbox_place import default_outbox_dir
from .outbox_rows import EXCHANGE, FACTS
from .owners import LIVE_OWNERS, new_owner_id
from .recording import Recorder
from .workers import Workers
from .write_result import WriteResult

if TYPE_CHECKING:
    import os

    from .._mem0.backend import Mem0Backend

__all__ = ["MEMORY_ONLY", "METADATA_KEY", "RetryPolicy", "WriteQueue", "WriteResult"]

logger = logging.getLogger(__name__)

MEMORY_ONLY = ":memory:"
"""``outbox_dir`` value that keeps queued writes in memory only (lost with the process)."""

_OPEN_QUEUES: weakref.WeakSet[WriteQueue] = weakref.WeakSet()
# What stats() reports as writes_<name> (and write_batches).
_COUNTERS = "queued replayed stored redone retried deferred failed requeued lost unrecorded"


class WriteQueue:
    """Per-scope ordered, durable background writes to mem0.

    Args:
        backend: Where the writes go.
        outbox_dir: Folder of the outbox file; writes left there by a process
            that ended are replayed. ``None``: next to the store's own files
            (in memory only for a client whose store cannot be told);
            :data:`MEMORY_ONLY` (``":memory:"``): in memory only.
        max_concurrency: mem0 calls in flight at once, across scopes.
        max_batch: Exchanges of one scope joined into one mem0 call at most.
        retry: Backoff for transient failures.
        write_timeout: Seconds one mem0 call may take before it counts as a
            transient failure; ``None`` waits indefinitely.
        lease: Seconds a claim on a row lasts without renewal; another writer
            takes over rows whose writer stopped renewing (or died).
        on_stored: Called with the scope after each stored batch.
        after_store: Awaited with the scope, mem0's results and the batch's
            said time after each stored batch, before the scope's next one.
        exit_grace: Seconds the workers keep storing when the event loop is
            torn down with writes pending (``asyncio.run`` returning).
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
        after_store: AfterStore | None = None,
        exit_grace: float = 5.0,
    ) -> None:
        if max_concurrency < 1 or max_batch < 1:
            raise ValueError("max_concurrency and max_batch must be positive")
        if lease <= 0:
            raise ValueError(f"lease must be positive, got {lease!r}")
        self._backend = backend
        self._lease = lease
        folder = outbox_dir if outbox_dir is not None else default_outbox_dir(backend.client)
        path = None
        if folder is not None and str(folder) != MEMORY_ONLY:
            path = Path(folder).expanduser() / OUTBOX_FILENAME
        self._owner = new_owner_id()
        self._counts = dict.fromkeys([*_COUNTERS.split(), "batches"], 0)
        self._recorder = Recorder(path, owner=self._owner, counts=self._counts)
        self._outbox = self._recorder.outbox
        self._io = self._recorder.io
        self._submitted_at: dict[str, float] = {}
        self._results: dict[str, list[dict[str, Any]]] = {}
        self._latency = LatencyRecorder()
        self._closed = False
        self._counts["lost"] = self._outbox.db.lost_at_open
        self._lost_unreported = self._outbox.db.lost_at_open > 0
        self._delivery = Delivery(
            backend,
            owner=self._owner,
            retry=retry or RetryPolicy(),
            write_timeout=write_timeout,
            io=self._io,
            counts=self._counts,
            settle=self._settle,
            on_stored=on_stored,
            after_store=after_store,
            durable=self._outbox.durable,
        )
        self._workers = Workers(
            recorder=self._recorder,
            delivery=self._delivery,
            owner=self._owner,
            lease=lease,
            max_batch=max_batch,
            max_concurrency=max_concurrency,
            exit_grace=exit_grace,
            counts=self._counts,
            io=self._io,
            closed=lambda: self._closed,
        )
        LIVE_OWNERS.add(self._owner)
        _OPEN_QUEUES.add(self)
        with contextlib.suppress(RuntimeError):
            asyncio.get_running_loop()
            self._workers.runtime()  # replay what an earlier process left, right away

    # -- public surface ---------------------------------------------------

    @property
    def outbox(self) -> Outbox:
        """The outbox tables (for inspection)."""
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
        return len(self._workers.rt.waiters) if self._workers.rt is not None else 0

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
        key = await self._submit(scope, messages, said_at=said_at, kind=EXCHANGE)
        done = self._waiter(key)
        if wait and done is not None:
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
        key = await self._submit(scope, messages, said_at=None, kind=FACTS)
        if key is None:
            return WriteResult("lost")
        done = self._waiter(key)
        if done is not None:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(asyncio.shield(done), timeout)
            if not done.done():
                return WriteResult("queued", recorded=key not in self._recorder.unrecorded)
        results = self._results.pop(key, None)
        if results is None:
            return WriteResult("failed")
        return WriteResult("stored", [str(r.get("memory", "")) for r in results if r.get("memory")])

    async def flush(self, timeout: float | None = None) -> bool:
        """Wait until every write queued so far is stored or has failed.

        This includes the writes other processes left in the outbox (those
        whose process ended or whose lease ran out), which are taken over first.

        Returns:
            True when none is left pending within ``timeout`` seconds and no
            write was lost (not recorded) since the last call.
        """
        if self._closed:
            return not self._take_lost()
        rt = self._workers.runtime()
        deadline = None if timeout is None else time.monotonic() + timeout
        assert rt.started is not None
        try:
            await asyncio.wait_for(asyncio.shield(rt.started), timeout)
            if self._outbox.durable:
                # Writes another process left since the start are ours to store too.
                self._workers.adopt(rt, await self._workers.claim_orphans())
        except TimeoutError:
            return False
        except Exception as exc:
            logger.warning("could not look for writes left in the outbox: %s", exc)
        waiting = list(rt.waiters.values())
        with self._delivery.hurrying():
            if waiting:
                left = None if deadline is None else max(deadline - time.monotonic(), 0.0)
                _, not_done = await asyncio.wait(waiting, timeout=left)
                if not_done:
                    return False
            left = None if deadline is None else max(deadline - time.monotonic(), 0.0)
            if not await self._delivery.synced(left):  # stored, and on disk
                return False
        return not self._take_lost()

    async def retry_failed(self, user_id: str | None = None) -> int:
        """Queue the writes kept as failed (of ``user_id``, or all) again.

        Returns:
            How many were requeued.
        """
        rt = self._workers.runtime()
        rows: list[OutboxRow] = []
        for box in self._recorder.boxes():
            rows += await self._io(
                box.requeue_failed, owner=self._owner, lease=self._lease, user_id=user_id
            )
        self._counts["requeued"] += len(rows)
        self._workers.adopt(rt, rows)
        return len(rows)

    async def failed(self) -> list[OutboxRow]:
        """The writes kept as failed, oldest first, with their ``error``."""
        rows: list[OutboxRow] = []
        for box in self._recorder.boxes():
            rows += await self._io(box.failed)
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
        flushed = await self.flush(timeout)
        self._closed = True
        # Rows whose mem0 call is running now keep their claim until the lease
        # runs out: cancelling the task does not stop mem0's worker threads.
        in_flight = sorted(i for box, i in self._delivery.in_flight if box == id(self._outbox))
        left = await self._workers.stop()
        try:
            await self._io(self._recorder.save_spilled)
            await self._io(self._outbox.release, owner=self._owner, keep=in_flight)
        except Exception:
            logger.exception("could not release the outbox cleanly")
        await self._delivery.stop_retiring()
        await self._recorder.aclose()
        self._submitted_at.clear()
        if not (in_flight and self._outbox.durable):
            LIVE_OWNERS.discard(self._owner)
        _OPEN_QUEUES.discard(self)
        if left:
            self._recorder.report_left(left, "at close")
        return flushed

    def stats(self) -> dict[str, Any]:
        """Counters of this queue since construction, plus write latency.

        ``writes_retried`` counts retries (calls repeated after a transient
        failure); ``writes_deferred`` sends put off because the store's disk
        was nearly full (they wait, without using up retries);
        ``writes_unrecorded`` writes the outbox could not record, and
        ``writes_in_memory_only`` those of them not stored yet (a crash now
        loses them); ``writes_unsynced`` stored ones whose outbox rows wait
        for the embedded store's sync; ``outbox_errors`` failed outbox
        operations; ``write_latency_*`` is submit-to-stored, in seconds.
        """
        out: dict[str, Any] = {
            f"writes_{name}": value for name, value in self._counts.items() if name != "batches"
        }
        out["write_batches"] = self._counts["batches"]
        out["writes_pending"] = self.pending
        out["writes_in_memory_only"] = len(self._recorder.unrecorded)
        out["writes_unsynced"] = len(self._delivery.unsynced)
        out["outbox_errors"] = self._recorder.errors
        out.update(self._latency.summary("write_latency"))
        return out

    # -- runtime ----------------------------------------------------------

    def _waiter(self, key: str | None) -> asyncio.Future[bool] | None:
        rt = self._workers.rt
        return rt.waiters.get(key) if key is not None and rt is not None else None

    def _take_lost(self) -> bool:
        lost, self._lost_unreported = self._lost_unreported, False
        return lost

    async def _submit(
        self,
        scope: Scope,
        messages: list[dict[str, str]],
        *,
        said_at: datetime | str | None,
        kind: str,
    ) -> str | None:
        when = datetime.now(UTC) if said_at is None else check_said_at(said_at)
        if self._closed:
            logger.error(
                "a memory write for user %s was submitted after the queue was closed; "
                "it is not stored",
                scope.user_id,
            )
            self._counts["lost"] += 1
            self._lost_unreported = True
            return None
        rt = self._workers.runtime()
        key = uuid.uuid4().hex
        remember_origin(key)  # the write span of its batch links to this reply
        rt.waiters[key] = rt.loop.create_future()
        self._submitted_at[key] = time.perf_counter()
        self._counts["queued"] += 1
        row: dict[str, Any] = {
            "key": key,
            "user_id": scope.user_id,
            "agent_id": scope.agent_id,
            "messages": list(messages),
            "owner": self._owner,
            "lease": self._lease,
            "kind": kind,
            "said_at": when,
        }
        # Recording and queueing go on when the reply is cancelled (a row
        # recorded but never queued would wait for an unrelated write to wake
        # the workers); the reply waits on a future of its own.
        outcome: asyncio.Future[str | None] = rt.loop.create_future()

        def recorded(ok: bool) -> None:
            if ok:
                self._workers.kick(rt, scope)
            else:
                self._counts["lost"] += 1
                self._lost_unreported = True
                self._settle([key], stored=False)
            if not outcome.done():
                outcome.set_result(key if ok else None)

        self._recorder.start_recording(scope, row, recorded)
        return await outcome

    def _settle(
        self, keys: list[str], *, stored: bool, results: list[dict[str, Any]] | None = None
    ) -> None:
        rt = self._workers.rt
        now = time.perf_counter()
        for key in keys:
            done = rt.waiters.pop(key, None) if rt is not None else None
            if stored and done is not None and results is not None and len(keys) == 1:
                self._results[key] = results
            if done is not None and not done.done():
                done.set_result(stored)
            started = self._submitted_at.pop(key, None)
            if stored and started is not None:
                self._latency.record(now - started)
        while len(self._results) > 1000:  # answers nobody collected
            self._results.pop(next(iter(self._results)))
        self._recorder.unrecorded.difference_update(keys)

    # -- exit ---------------------------------------------------------------

    def _report_at_exit(self) -> None:
        if not self._closed:
            self._recorder.at_exit(self.pending)

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
