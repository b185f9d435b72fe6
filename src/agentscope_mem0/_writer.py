"""Write-behind: a finished exchange is queued and the reply returns at once.

Writes of one scope are applied in order, one at a time; scopes proceed
concurrently. ``flush`` waits until everything queued so far is stored.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ._backend import Mem0Backend, Scope

__all__ = ["WriteQueue"]

logger = logging.getLogger(__name__)


@dataclass
class _Pending:
    scope: Scope
    messages: list[dict[str, str]]
    done: asyncio.Future[None] = field(
        default_factory=lambda: asyncio.get_running_loop().create_future()
    )


class WriteQueue:
    """Per-scope ordered background writes to mem0."""

    def __init__(self, backend: Mem0Backend) -> None:
        self._backend = backend
        self._queues: dict[Scope, deque[_Pending]] = {}
        self._workers: dict[Scope, asyncio.Task[None]] = {}
        self._unfinished: set[asyncio.Future[None]] = set()

    async def submit(
        self, scope: Scope, messages: list[dict[str, str]], *, wait: bool = False
    ) -> None:
        """Queue ``messages`` for ``scope``; with ``wait`` return once stored."""
        item = _Pending(scope, messages)
        self._unfinished.add(item.done)
        item.done.add_done_callback(self._unfinished.discard)
        self._queues.setdefault(scope, deque()).append(item)
        worker = self._workers.get(scope)
        if worker is None or worker.done():
            self._workers[scope] = asyncio.create_task(
                self._drain(scope), name=f"mem0-write-{scope.user_id}"
            )
        if wait:
            await asyncio.shield(item.done)

    async def _drain(self, scope: Scope) -> None:
        queue = self._queues[scope]
        while queue:
            item = queue.popleft()
            try:
                await self._backend.add(item.messages, scope)
            except Exception as exc:
                logger.warning("mem0 write failed for user %s: %s", scope.user_id, exc)
                if not item.done.done():
                    item.done.set_result(None)
                continue
            if not item.done.done():
                item.done.set_result(None)

    @property
    def pending(self) -> int:
        """Writes queued or in flight."""
        return len(self._unfinished)

    async def flush(self, timeout: float | None = None) -> bool:
        """Wait until everything queued so far is stored.

        Returns:
            True when the queue drained within ``timeout``.
        """
        waiting = list(self._unfinished)
        if not waiting:
            return True
        done, _ = await asyncio.wait(waiting, timeout=timeout)
        return len(done) == len(waiting)

    async def aclose(self, timeout: float | None = None) -> None:
        """Flush, then stop the workers."""
        await self.flush(timeout)
        for task in self._workers.values():
            task.cancel()
        self._workers.clear()

    def stats(self) -> dict[str, Any]:
        """Counters for :meth:`Mem0Middleware.stats`."""
        return {"writes_pending": self.pending}
