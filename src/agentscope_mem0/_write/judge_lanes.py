"""Background work in order per key, which the caller never waits for.

The time judgement of a user's writes must run in the order they were
stored (a later change must see the earlier one), but a write must never
wait for it: :meth:`Lanes.submit` queues a job and returns, and one task per
key runs that key's jobs one after another. A key whose backlog is full gets
its jobs marked as overflow (the job decides what it still does).

No reply waits for these jobs, so they run under
:func:`~.._mem0.call_context.no_reply_waits`: their mem0 reads take the write lane
and their embeddings wait for every reply's query.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from collections.abc import Awaitable, Callable, Hashable
from dataclasses import dataclass, field

from .._mem0.call_context import no_reply_waits

__all__ = ["Job", "Lanes"]

logger = logging.getLogger(__name__)

Job = Callable[[bool], Awaitable[None]]
"""``job(overflow)``: one piece of work; ``overflow`` when the backlog was full."""


@dataclass
class _Lane:
    waiting: deque[tuple[Job, bool]] = field(default_factory=deque)
    task: asyncio.Future[None] | None = None


class Lanes:
    """Jobs run in order per key, in tasks of their own.

    Args:
        backlog: Jobs waiting per key beyond which new ones are overflow.
    """

    def __init__(self, backlog: int) -> None:
        self._backlog = backlog
        self._lanes: dict[Hashable, _Lane] = {}
        self.stopped = False
        """Whether :meth:`stop` ran; no job starts after it."""

    @property
    def waiting(self) -> int:
        """Jobs queued and not started, over all keys."""
        return sum(len(lane.waiting) for lane in self._lanes.values())

    def submit(self, key: Hashable, job: Job) -> bool:
        """Queue ``job`` under ``key``; returns whether it was within the backlog."""
        if self.stopped:
            return False
        lane = self._lanes.setdefault(key, _Lane())
        within = len(lane.waiting) < self._backlog
        lane.waiting.append((job, not within))
        if lane.task is None or lane.task.done():
            lane.task = asyncio.ensure_future(self._drain(key, lane))
        return within

    async def _drain(self, key: Hashable, lane: _Lane) -> None:
        with no_reply_waits():
            await self._run_waiting(lane)
        if self._lanes.get(key) is lane and not lane.waiting:
            del self._lanes[key]

    async def _run_waiting(self, lane: _Lane) -> None:
        while lane.waiting and not self.stopped:
            job, overflow = lane.waiting.popleft()
            try:
                await job(overflow)
            except Exception:
                logger.exception("a background job failed")

    async def flush(self, timeout: float | None = None) -> bool:
        """Wait until the jobs queued so far ran; True when that happened in time."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            running = [
                lane.task
                for lane in self._lanes.values()
                if lane.task is not None and not lane.task.done()
            ]
            if not running:
                return True
            left = None if deadline is None else max(deadline - time.monotonic(), 0.0)
            _, not_done = await asyncio.wait(running, timeout=left)
            if not_done:
                return False

    def stop(self) -> int:
        """Drop the waiting jobs and cancel the running ones; returns how many there were."""
        self.stopped = True
        left = 0
        for lane in self._lanes.values():
            left += len(lane.waiting) + int(lane.task is not None and not lane.task.done())
            lane.waiting.clear()
            if lane.task is not None:
                lane.task.cancel()
        return left
