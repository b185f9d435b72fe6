"""Recording a write: in the outbox file, or in memory while the file refuses.

:class:`Recorder` puts each new write in the outbox before the reply goes
on. A file found damaged is replaced (see :mod:`.outbox_db`) and the write
recorded in the new one. When the file cannot take it (a full disk, a
read-only file, a damaged one that cannot be replaced), the write is kept in
an in-memory outbox with the same tables, on the same thread, so mem0 still
gets it. The error is logged once per episode with its real cause;
recording in the file resumes by itself at the next write that succeeds.
Writes kept in memory move into the file as soon as it takes them again
(each user's between two of that user's batches, so none is being sent),
and those still in memory when the queue closes or the process exits are
moved then, if the file works by then.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import logging
import weakref
from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .._exceptions import DamagedFileError, LocalFileError
from .._scope import Scope
from .._sqlite.thread import ConnectionThread
from .outbox import Outbox, OutboxRow, count_held, outbox_on
from .outbox_db import OUTBOX_THREAD

__all__ = ["Recorder"]

logger = logging.getLogger(__name__)


Recorded = Callable[[bool], None]
"""Told, on the recording loop, whether a write was recorded (file or memory)."""


@dataclass(eq=False)
class _Batch:
    """Writes of one event loop waiting for the insert under way to end."""

    rows: list[tuple[Scope, dict[str, Any], Recorded]] = field(default_factory=list)
    inserting: bool = False


class Recorder:
    """The outbox file and its in-memory stand-in, for one write queue.

    Both connections live on one thread (:class:`~.._sqlite.thread.ConnectionThread`),
    which every outbox call of the queue goes through (:attr:`io`).

    Args:
        path: The outbox file; ``None`` keeps the writes in memory only.
        owner: The queue's claim id.
        counts: The queue's counters (``unrecorded``, ``lost``), updated in place.
    """

    def __init__(self, path: Path | None, *, owner: str, counts: dict[str, int]) -> None:
        self._thread = ConnectionThread(OUTBOX_THREAD, what=f"the outbox {path or ':memory:'}")
        try:
            self.outbox = outbox_on(self._thread, path)
        except BaseException:
            self._thread.close()
            raise
        self.spill = outbox_on(self._thread, None) if path is not None else self.outbox
        """Where writes wait, in memory, while the file cannot record."""
        self.io = self._thread.run
        """Awaits a blocking outbox call on the outbox's thread."""
        # Dropped unclosed with its queue: the thread ends (the rows stay in
        # the file). A weakref callback runs before the thread's own
        # finaliser, which would warn; not at exit, where at_exit reads here.
        weakref.finalize(self, self._thread.close, wait=False).atexit = False
        self._owner = owner
        self._counts = counts
        self._failing: str | None = None
        self.errors = 0
        """Outbox operations that failed."""
        self.unrecorded: set[str] = set()
        """Keys of writes kept in memory only (the file refused them)."""
        self._dropped = 0  # of them, lost at close or exit and logged as such
        # Rows waiting to be inserted together, per event loop recording them.
        self._batches: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _Batch] = (
            weakref.WeakKeyDictionary()
        )
        self._elsewhere: set[asyncio.Task[bool]] = set()  # rows the file refused, in hand

    def boxes(self) -> tuple[Outbox, ...]:
        """Memory first (it always progresses), then the file."""
        return (self.outbox,) if self.spill is self.outbox else (self.spill, self.outbox)

    def start_recording(self, scope: Scope, row: dict[str, Any], recorded: Recorded) -> None:
        """Record ``row`` and call ``recorded(ok)`` on this loop once it is, or
        (``ok`` False) once neither the file nor memory took it.

        The rows recorded while an insert runs go into the file together, in
        the next one: one transaction and one sync to disk for the writes of
        many users' replies ending at once. Nothing here waits on the loop:
        the outbox's thread calls back, so a write recorded in the file is
        told so one turn of the loop after the insert, whoever awaits what.
        """
        loop = asyncio.get_running_loop()
        batch = self._batches.setdefault(loop, _Batch())
        context = contextvars.copy_context()

        def told(ok: bool) -> None:  # in the caller's context (its trace span), as after an await
            try:
                context.run(recorded, ok)
            except Exception:  # one caller's failure must not keep the others waiting
                logger.exception("a recorded write's follow-up failed")

        batch.rows.append((scope, row, told))
        if not batch.inserting:
            self._insert_next(loop, batch)

    def _insert_next(self, loop: asyncio.AbstractEventLoop, batch: _Batch) -> None:
        """Insert ``batch``'s rows in one transaction, then the ones that came meanwhile."""
        taken, batch.rows = batch.rows, []
        batch.inserting = True

        def inserted(_: object, error: BaseException | None) -> None:
            batch.inserting = False
            if batch.rows:
                self._insert_next(loop, batch)
            if error is None and self._failing is not None:
                logger.warning("the outbox %s records writes again", self.outbox.path)
                self._failing = None
            failure = (
                error if error is None or isinstance(error, Exception) else RuntimeError(error)
            )
            for scope, row, recorded in taken:
                if failure is None:
                    recorded(True)
                else:  # each row finds its own way
                    elsewhere = self._record_elsewhere(scope, row, failure)
                    self._keep(loop.create_task(elsewhere), recorded)

        try:
            self._thread.send(self.outbox.insert_many, [row for _, row, _ in taken], then=inserted)
        except Exception as exc:  # the thread is closed
            inserted(None, exc)

    def _keep(self, task: asyncio.Task[bool], recorded: Recorded) -> None:
        self._elsewhere.add(task)

        def done(finished: asyncio.Task[bool]) -> None:
            self._elsewhere.discard(finished)
            ok = not finished.cancelled() and finished.exception() is None and finished.result()
            recorded(ok)

        task.add_done_callback(done)

    async def _record_elsewhere(self, scope: Scope, row: dict[str, Any], exc: Exception) -> bool:
        self.errors += 1
        if isinstance(exc, DamagedFileError):
            with contextlib.suppress(Exception):
                await self.io(self.outbox.db.repair)
                await self.io(self.outbox.insert, **row)
                return True
        cause = exc.__cause__ if isinstance(exc, LocalFileError) and exc.__cause__ else exc
        reason = f"{type(cause).__name__}: {cause}"
        if self.spill is not self.outbox:
            if self._failing is None:
                logger.error(
                    "could not record memory writes in the outbox %s (%s); they are kept "
                    "in memory until mem0 stores them or the file takes them again, and "
                    "recording resumes once it works again",
                    self.outbox.path,
                    reason,
                )
            self._failing = reason
            try:
                await self.io(self.spill.insert, **row)
            except Exception:
                logger.exception("could not keep a memory write in memory either")
            else:
                self._counts["unrecorded"] += 1
                self.unrecorded.add(str(row["key"]))
                return True
        logger.error(
            "could not record a memory write for user %s (%s); it is not stored",
            scope.user_id,
            reason,
        )
        return False

    async def next_rows(
        self, scope: Scope, limit: int, *, skip: Collection[tuple[int, int]] = ()
    ) -> tuple[Outbox, list[OutboxRow]] | None:
        """The next batch of ``scope`` and the outbox holding it, or ``None``.

        Args:
            scope: Whose rows.
            limit: Rows at most.
            skip: ``(id(outbox), row id)`` of rows not to send again.
        """
        for box in self.boxes():
            try:
                rows = await self.io(
                    box.next_batch,
                    owner=self._owner,
                    user_id=scope.user_id,
                    agent_id=scope.agent_id,
                    limit=limit,
                    skip={row for where, row in skip if where == id(box)},
                )
            except LocalFileError as exc:
                self.errors += 1
                logger.warning("could not read the outbox (%s); trying again shortly", exc)
                continue
            if rows:
                return box, rows
        return None

    async def held(self, *, skip: Collection[tuple[int, int]] = ()) -> list[OutboxRow]:
        """Every pending row this queue holds, in memory and in the file,
        but those in ``skip`` (``(id(outbox), row id)``: stored, waiting for a sync)."""
        return [
            row
            for box in self.boxes()
            for row in await self.io(box.held, self._owner)
            if (id(box), row.id) not in skip
        ]

    async def move_spilled(
        self, scope: Scope, *, lease: float, skip: Collection[tuple[int, int]] = ()
    ) -> int:
        """Move ``scope``'s writes kept in memory into the file, held by this
        queue, once the file takes them again; returns how many moved.

        For the scope's worker, between two of its batches: then none of
        these rows is being sent. Rows in ``skip`` (``(id(outbox), row id)``:
        stored, waiting for the store's sync) stay where they are. While the
        file still refuses, they stay in memory and nothing is logged again.
        """
        if self.spill is self.outbox or not self.unrecorded:
            return 0
        try:
            keys = await self.io(self._move_spilled, scope, lease, skip)
        except Exception as exc:
            logger.debug("memory writes kept in memory stay there for now: %s", exc)
            return 0
        if keys:
            self.unrecorded.difference_update(keys)
            logger.warning(
                "moved %d memory writes of user %s kept in memory into the outbox %s",
                len(keys),
                scope.user_id,
                self.outbox.path,
            )
        return len(keys)

    def _move_spilled(
        self, scope: Scope, lease: float, skip: Collection[tuple[int, int]]
    ) -> list[str]:
        rows = [
            row
            for row in self.spill.held(self._owner)
            if (row.user_id, row.agent_id) == (scope.user_id, scope.agent_id)
            and (id(self.spill), row.id) not in skip
        ]
        if rows:
            self.outbox.adopt_rows(rows, owner=self._owner, lease=lease)
            self.spill.complete([row.id for row in rows])
        return [row.key for row in rows]

    def save_spilled(self) -> int:
        """Move the writes kept in memory into the file; returns how many.

        Synchronous (it runs at exit too). Those the file still refuses are
        lost, and logged.
        """
        if self.spill is self.outbox:
            return 0
        rows = self.spill.held(self._owner)
        if not rows:
            return 0
        try:
            self.outbox.adopt_rows(rows)
        except Exception as exc:
            self._counts["lost"] += len(rows)
            self._dropped += len(rows)
            logger.error(
                "%d memory writes kept in memory (the outbox %s could not record them: %s) "
                "are lost",
                len(rows),
                self.outbox.path,
                exc,
            )
            return 0
        self.spill.complete([row.id for row in rows])
        return len(rows)

    async def aclose(self) -> None:
        """Close both outboxes and end their thread, once the calls queued ran. Idempotent."""
        await self._thread.aclose(self._close_boxes)

    def _close_boxes(self) -> None:
        for box in self.boxes():
            box.close()

    def report_left(self, count: int, when: str) -> None:
        """Log ``count`` writes left unstored (``when``: "at close", "at exit").

        Those :meth:`save_spilled` reported lost are not counted again.
        """
        count, self._dropped = count - self._dropped, 0
        if count <= 0:
            return
        if self.outbox.durable:
            logger.warning(
                "%d memory writes not stored %s; they stay in the outbox %s and the next "
                "writer on that folder stores them",
                count,
                when,
                self.outbox.path,
            )
        else:
            self._counts["lost"] += count
            logger.warning(
                "%d memory writes not stored %s are lost: no outbox folder is configured",
                count,
                when,
            )

    def at_exit(self, pending: int) -> None:
        """At interpreter exit: save what memory holds, report what is left."""
        with contextlib.suppress(Exception):
            self.save_spilled()
        count = pending
        if self.outbox.durable and self.outbox.path is not None:
            with contextlib.suppress(Exception):
                count = count_held(self.outbox.path, self._owner)
        if count:
            self.report_left(count, "at exit")
