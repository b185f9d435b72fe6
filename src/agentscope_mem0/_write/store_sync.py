"""Retire an outbox row only once the store has synced the write, in batches.

mem0 answering ``add`` means the embedded store has the write in its
write-ahead log: safe from the process dying, not from the power going. So
after mem0 stored a batch, its rows stay in the outbox until the store's
next sync (:func:`~agentscope_mem0._mem0.durable.disk_sync_of`) has run; a
power loss before it leaves them there, and the next process stores them
again (exactly once: the batch key finds what the log kept).

Syncs are batched: the first batch that waits schedules one
:data:`SYNC_WINDOW` seconds later (the store's own flush interval), and every
batch stored meanwhile waits for that same sync. The engine holds the GIL
while it flushes, so one sync for many writes also keeps the event loop
responsive. An idle process thus syncs its last writes within that window;
someone waiting for the queue to drain (``flush()``, ``aclose()``) cuts the
window short (:meth:`StoreSync.hurrying`). A sync that fails (a full disk) is
tried again every :data:`RETRY_DELAY` seconds; its rows wait in the outbox.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Iterator

__all__ = ["RETRY_DELAY", "SYNC_WINDOW", "StoreSync"]

logger = logging.getLogger(__name__)

SYNC_WINDOW = 5.0
"""Seconds between the first write waiting for a sync and that sync."""

RETRY_DELAY = 5.0
"""Seconds before a failed sync is tried again."""


class StoreSync:
    """One sync for the writes that wait together.

    Args:
        sync: Puts everything stored so far on disk (blocking; run in a thread).
        window: Seconds the first waiter's sync waits for more writes
            (default :data:`SYNC_WINDOW`).
        retry_delay: Seconds between attempts when a sync fails (default
            :data:`RETRY_DELAY`).
    """

    def __init__(
        self,
        sync: Callable[[], None],
        *,
        window: float | None = None,
        retry_delay: float | None = None,
    ) -> None:
        self._sync = sync
        self._window = SYNC_WINDOW if window is None else window
        self._retry_delay = RETRY_DELAY if retry_delay is None else retry_delay
        self._next: asyncio.Future[None] | None = None
        self._hurry: asyncio.Event | None = None
        self._hurrying = 0
        self._tasks: set[asyncio.Task[None]] = set()
        self.syncs = 0
        """Syncs that completed."""
        self.failures = 0
        """Sync attempts that failed (each is tried again)."""

    async def wait(self) -> None:
        """Return once a sync that started after this call has completed.

        Raises:
            asyncio.CancelledError: The queue closed first; the rows stay.
        """
        loop = asyncio.get_running_loop()
        if self._next is None or self._next.done() or self._next.get_loop() is not loop:
            self._next = loop.create_future()
            self._hurry = asyncio.Event()
            task = loop.create_task(self._run(self._next, self._hurry))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
        await asyncio.shield(self._next)

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

    async def _run(self, done: asyncio.Future[None], hurry: asyncio.Event) -> None:
        try:
            await self._synced(done, hurry)
        finally:
            if not done.done():  # cancelled: the waiters' rows stay in the outbox
                done.cancel()
            if self._next is done:
                self._next = self._hurry = None

    async def _synced(self, done: asyncio.Future[None], hurry: asyncio.Event) -> None:
        if not self._hurrying:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(hurry.wait(), self._window)
        # Writes stored from now on wait for the next sync: this one may
        # start before they reached the store.
        if self._next is done:
            self._next = self._hurry = None
        while True:
            try:
                await asyncio.to_thread(self._sync)
            except Exception as exc:
                self.failures += 1
                logger.warning(
                    "the memory store could not sync (%s); its writes stay in the outbox "
                    "and the sync is tried again in %.0f s",
                    exc,
                    self._retry_delay,
                )
                await asyncio.sleep(self._retry_delay)
                continue
            self.syncs += 1
            done.set_result(None)
            return

    async def aclose(self) -> None:
        """Stop waiting: a sync not done yet leaves its rows in the outbox."""
        for task in list(self._tasks):
            task.cancel()
        if self._next is not None and not self._next.done():
            self._next.cancel()
        self._next = None
