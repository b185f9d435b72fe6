"""The write queue's tasks on one event loop: replay, one worker per scope, leases.

:class:`Workers` keeps, for the event loop it serves (a :class:`Runtime`;
a later loop gets a new one, rebuilt from the outbox), a future per pending
write, a worker task per scope draining that scope's rows oldest first
through :class:`~.delivery.Delivery`, and a maintenance task that renews the
leases of held rows and takes over rows whose writer died. The maintenance
task runs only while writes are pending, so an idle queue holds no task.

When the loop is torn down with writes pending (``asyncio.run`` returning
without ``aclose``), the workers keep storing for up to ``exit_grace``
seconds; whatever is left stays in the outbox for the next queue.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .._observe.tracing import write_span
from .._scope import Scope
from .owners import LIVE_OWNERS

if TYPE_CHECKING:
    from .delivery import Delivery
    from .outbox import OutboxRow
    from .recording import Recorder

__all__ = ["Runtime", "Workers"]

logger = logging.getLogger(__name__)


@dataclass(eq=False)
class Runtime:
    """What a queue holds on one event loop."""

    loop: asyncio.AbstractEventLoop
    semaphore: asyncio.Semaphore
    workers: dict[Scope, asyncio.Task[None]] = field(default_factory=dict)
    wake: set[Scope] = field(default_factory=set)
    waiters: dict[str, asyncio.Future[bool]] = field(default_factory=dict)
    started: asyncio.Task[None] | None = None
    maintenance: asyncio.Task[None] | None = None
    teardown_deadline: float | None = None

    def tasks(self) -> list[asyncio.Task[None]]:
        """Every task of this runtime."""
        return [t for t in (self.started, self.maintenance, *self.workers.values()) if t]


class Workers:
    """Runs a write queue's background tasks (see the module docstring)."""

    def __init__(
        self,
        *,
        recorder: Recorder,
        delivery: Delivery,
        owner: str,
        lease: float,
        max_batch: int,
        max_concurrency: int,
        exit_grace: float,
        counts: dict[str, int],
        io: Callable[..., Awaitable[Any]],
        closed: Callable[[], bool],
    ) -> None:
        self._recorder = recorder
        self._delivery = delivery
        self._owner = owner
        self._lease = lease
        self._max_batch = max_batch
        self._max_concurrency = max_concurrency
        self._exit_grace = exit_grace
        self._counts = counts
        self._io = io
        self._closed = closed
        self.rt: Runtime | None = None

    def runtime(self) -> Runtime:
        """The runtime of the running loop, started (replaying the outbox) if new."""
        loop = asyncio.get_running_loop()
        rt = self.rt
        if rt is not None and rt.loop is loop:
            return rt
        if rt is not None and rt.loop.is_running():
            raise RuntimeError("a WriteQueue serves one event loop at a time; create one per loop")
        # First use, or the earlier loop has ended: rebuild from the outbox.
        rt = Runtime(loop=loop, semaphore=asyncio.Semaphore(self._max_concurrency))
        self.rt = rt
        rt.started = loop.create_task(self._start(rt), name="agentscope-mem0-outbox-replay")
        return rt

    async def _start(self, rt: Runtime) -> None:
        try:
            own = await self._recorder.held()
            orphans = await self.claim_orphans()
            if orphans:
                logger.info(
                    "replaying %d memory writes left in the outbox by an earlier process",
                    len(orphans),
                )
            self.adopt(rt, [*own, *orphans])
        except Exception as exc:
            logger.warning("could not read the outbox at start (%s); trying again later", exc)

    async def claim_orphans(self) -> list[OutboxRow]:
        """Take over the rows whose writer died; counted as replayed."""
        outbox = self._recorder.outbox
        if not outbox.durable:
            return []
        rows = await self._io(
            outbox.claim_orphans,
            owner=self._owner,
            lease=self._lease,
            live_here=frozenset(LIVE_OWNERS),
        )
        self._counts["replayed"] += len(rows)
        return rows

    async def _maintain(self, rt: Runtime) -> None:
        """Keep the leases of held writes, take over orphans, restart stalled scopes."""
        outbox = self._recorder.outbox
        while rt.waiters:
            await asyncio.sleep(self._lease / 3)
            try:
                # Not the rows stored and waiting for a sync: their writes are settled.
                self.adopt(rt, await self._recorder.held(skip=self._delivery.unsynced))
                if outbox.durable:
                    await self._io(outbox.renew, owner=self._owner, lease=self._lease)
                    self.adopt(rt, await self.claim_orphans())
            except Exception as exc:
                self._recorder.errors += 1
                logger.warning(
                    "outbox maintenance failed (%s); trying again in %.1f s", exc, self._lease / 3
                )

    def adopt(self, rt: Runtime, rows: list[OutboxRow]) -> None:
        """Track rows this queue holds and make sure their scopes are draining."""
        scopes: dict[Scope, None] = {}
        for row in rows:
            if row.key not in rt.waiters:
                rt.waiters[row.key] = rt.loop.create_future()
            scopes[Scope(row.user_id, row.agent_id)] = None
        for scope in scopes:
            self.kick(rt, scope)

    def kick(self, rt: Runtime, scope: Scope) -> None:
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

    async def _drain(self, rt: Runtime, scope: Scope) -> None:
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

    async def _drain_once(self, rt: Runtime, scope: Scope) -> None:
        assert rt.started is not None
        # Replayed rows go before new ones; wait() neither cancels the replay
        # nor raises when the loop's teardown cancelled it.
        await asyncio.wait({rt.started})
        while True:
            rt.wake.discard(scope)
            await self._recorder.move_spilled(
                scope, lease=self._lease, skip=self._delivery.unsynced
            )
            found = await self._recorder.next_rows(
                scope, self._max_batch, skip=self._delivery.unsynced
            )
            if found is None:
                if scope in rt.wake:
                    continue
                return
            box, rows = found
            attempts = max(r.attempts for r in rows)
            with write_span(scope, [row.key for row in rows], attempts_before=attempts):
                await self._delivery.send(box, scope, rows, rt.semaphore)

    def _keep_going_at_teardown(self, rt: Runtime, task: asyncio.Task[Any] | None) -> bool:
        """Whether a worker cancelled by the loop's teardown goes on storing.

        Only ``aclose`` cancels the workers on purpose (after marking the
        queue closed); any other cancellation is the loop ending.
        """
        if self._closed() or task is None or self._exit_grace <= 0:
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

    async def stop(self) -> int:
        """Cancel every task; returns how many writes were still pending."""
        rt = self.rt
        if rt is None:
            return 0
        tasks = rt.tasks()
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        left = len(rt.waiters)
        for done in rt.waiters.values():
            if not done.done():
                done.set_result(False)
        rt.waiters.clear()
        return left
