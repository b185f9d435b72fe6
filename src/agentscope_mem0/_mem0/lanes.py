"""Where mem0's ``AsyncMemory`` runs: lanes of this package, apart from the agent's loop.

mem0 runs every model, embedder and store call in a thread of the running
loop's default executor (``asyncio.to_thread``); on the agent's loop those
threads would block waiting for model coroutines that may themselves need a
thread of that same pool (a DNS lookup, a model using ``to_thread``), and a
dozen concurrent turns then starve it. So :class:`Mem0Lanes` runs mem0's
coroutines on loops of its own, one per lane (``"read"`` and ``"write"``),
each with its own pool: a search never waits for a thread held by an
extraction call, and the model coroutines still run on the agent's loop (the
caller's context travels with the call, see :mod:`.bridge`).

A reply's read can go further (:meth:`Mem0Lanes.start`): it runs whole on one
thread of the read lane's readers, on that thread's private loop, where
mem0's ``to_thread`` steps run at once instead of hopping to a pool and
back, and without a turn of that loop either. A search makes five such steps
(lemmatising, entities, the embedding, the vector search, the keyword
search); under load each hop, and each turn of a loop, waits for the
interpreter behind every other thread, so the read waited for the hops
rather than for the work.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import contextvars
import logging
import os
import queue
import threading
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar, TypeVarTuple

from .bridge import caller_loop_scope, lane_scope

__all__ = ["Mem0Lanes", "get_lanes"]

logger = logging.getLogger(__name__)

T = TypeVar("T")
_Args = TypeVarTuple("_Args")
Future = concurrent.futures.Future
_Read = tuple[contextvars.Context, Coroutine[Any, Any, Any], "Future[Any]"]


class Mem0Lanes:
    """Event loops of this package that mem0's coroutines run on, by lane.

    Each lane is a daemon thread running a loop whose default executor is a
    pool of its own (``workers`` threads), so the threads mem0 blocks in its
    ``asyncio.to_thread`` calls are never the agent loop's. Reads and writes
    have separate lanes: threads held by slow extraction calls never delay a
    search. The read lane also has ``workers`` reader threads for
    :meth:`start`.

    Args:
        workers: Threads per lane.
    """

    LANES = ("read", "write")

    def __init__(self, workers: int = 16) -> None:
        self._workers = workers
        self._lock = threading.Lock()
        self._loops: dict[str, asyncio.AbstractEventLoop] = {}
        self._threads: dict[str, threading.Thread] = {}
        self._readers: _Readers | None = None

    def loop(self, lane: str) -> asyncio.AbstractEventLoop:
        """The running loop of ``lane``, started on first use."""
        _check(lane)
        with self._lock:
            loop = self._loops.get(lane)
            if loop is not None:
                return loop
            loop = asyncio.new_event_loop()
            loop.set_default_executor(
                concurrent.futures.ThreadPoolExecutor(
                    max_workers=self._workers, thread_name_prefix=f"agentscope-mem0-{lane}"
                )
            )
            thread = threading.Thread(
                target=loop.run_forever, name=f"agentscope-mem0-{lane}-loop", daemon=True
            )
            thread.start()
            self._loops[lane], self._threads[lane] = loop, thread
            return loop

    async def run(self, coro: Coroutine[Any, Any, T], *, lane: str) -> T:
        """Await ``coro`` on ``lane``'s loop from the calling loop.

        The caller's context (the loop :func:`caller_loop_scope` marked) goes
        with it; cancelling the caller cancels ``coro`` on the lane. Called
        from ``lane`` itself (a reader's loop for ``"read"``), ``coro`` runs
        right there.
        """
        try:
            loop = self.loop(lane)
        except BaseException:
            coro.close()
            raise
        running = asyncio.get_running_loop()
        if running is loop or (lane == "read" and isinstance(running, _ReaderLoop)):
            return await _in_lane(coro, lane)
        # run_coroutine_threadsafe creates the task in a copy of this context.
        future = asyncio.run_coroutine_threadsafe(_in_lane(coro, lane), loop)
        return await asyncio.wrap_future(future)

    def start(self, coro: Coroutine[Any, Any, T]) -> Future[T]:
        """Start ``coro`` on a reader thread of the read lane; its future.

        ``coro`` may be more than a mem0 call (the reads around it too). It
        runs whole on the reader's private loop, mem0's ``to_thread`` steps
        included, so the caller resumes once, when all of it is done (see the
        module). Models called below still run on the calling loop, marked
        here as :func:`caller_loop_scope` would. Cancelling the future
        cancels ``coro`` where it waits.
        """
        with self._lock:
            if self._readers is None:
                self._readers = _Readers(self._workers)
            readers = self._readers
        future: Future[T] = Future()
        with caller_loop_scope():
            context = contextvars.copy_context()
        readers.submit(context, coro, future)
        return future

    def close(self, timeout: float = 5.0) -> None:
        """Stop the lanes' loops and pools; later calls start new ones."""
        with self._lock:
            loops, threads = dict(self._loops), dict(self._threads)
            readers, self._readers = self._readers, None
            self._loops.clear()
            self._threads.clear()
        if readers is not None:
            readers.close()
        for lane, loop in loops.items():
            loop.call_soon_threadsafe(loop.stop)
            threads[lane].join(timeout)
            if not threads[lane].is_alive():
                executor = getattr(loop, "_default_executor", None)
                loop.close()
                if executor is not None:
                    executor.shutdown(wait=False, cancel_futures=True)

    def _forget(self) -> None:
        # After fork() the child has none of the parent's threads.
        self._lock = threading.Lock()
        self._loops.clear()
        self._threads.clear()
        self._readers = None


def _check(lane: str) -> None:
    if lane not in Mem0Lanes.LANES:
        raise ValueError(f"unknown lane {lane!r}; use one of {Mem0Lanes.LANES}")


async def _in_lane(coro: Coroutine[Any, Any, T], lane: str) -> T:
    with lane_scope(lane):
        return await coro


class _ReaderLoop(asyncio.SelectorEventLoop):
    """A reader's private loop: what mem0 hands to a thread runs right here.

    The loop runs one read at a time, so a ``to_thread`` step may as well run
    on the reader itself; its future is done when the coroutine awaits it, so
    the read goes on without a turn of the loop. A turn would wake the loop
    through its self-pipe and its selector, and each of those lets go of the
    interpreter, which the reader then waits to get back behind every other
    busy thread (a search makes five such steps).
    """

    def run_in_executor(
        self,
        executor: concurrent.futures.Executor | None,
        func: Callable[[*_Args], T],
        *args: *_Args,
    ) -> asyncio.Future[T]:
        if executor is not None:
            return super().run_in_executor(executor, func, *args)
        done: asyncio.Future[T] = self.create_future()
        try:
            done.set_result(func(*args))
        except Exception as exc:  # handed to whoever awaits the step
            done.set_exception(exc)
        return done


class _Readers:
    """``count`` daemon threads, each running the reads it takes from one queue
    on a private loop of its own, which it closes when told to stop."""

    def __init__(self, count: int) -> None:
        self._jobs: queue.SimpleQueue[_Read | None] = queue.SimpleQueue()
        self._count = count
        for number in range(count):
            name = f"agentscope-mem0-reader_{number}"
            threading.Thread(target=self._serve, name=name, daemon=True).start()

    def submit(
        self, context: contextvars.Context, coro: Coroutine[Any, Any, T], future: Future[T]
    ) -> None:
        self._jobs.put((context, coro, future))

    def close(self) -> None:
        """Let the reads queued so far run, then end the threads."""
        for _ in range(self._count):
            self._jobs.put(None)

    def _serve(self) -> None:
        loop = _ReaderLoop()
        try:
            while (job := self._jobs.get()) is not None:
                context, coro, future = job
                try:
                    context.run(_read_whole, loop, coro, future)
                except Exception:  # the reader goes on serving the others
                    logger.exception("a memory read failed outside its own error handling")
                del job, context, coro, future
        finally:
            loop.close()


def _read_whole(
    loop: asyncio.AbstractEventLoop, coro: Coroutine[Any, Any, T], future: Future[T]
) -> None:
    """On a reader thread: run ``coro`` to the end on the thread's ``loop``, into ``future``."""
    if future.cancelled():
        coro.close()
        return
    task = loop.create_task(_in_lane(coro, "read"))

    def stop_if_cancelled(done: Future[T]) -> None:
        if done.cancelled():
            loop.call_soon_threadsafe(task.cancel)

    future.add_done_callback(stop_if_cancelled)
    # The caller may cancel the future at any moment: an answer then has nobody to go to.
    with contextlib.suppress(concurrent.futures.InvalidStateError):
        try:
            result = loop.run_until_complete(task)
        except BaseException as exc:  # CancelledError too: the caller gave up
            future.set_exception(exc)
        else:
            future.set_result(result)


_lanes = Mem0Lanes()


def get_lanes() -> Mem0Lanes:
    """The process-wide :class:`Mem0Lanes`."""
    return _lanes


# The lanes are left running at exit: writes stored then may still need
# them, and their daemon threads end with the interpreter.
os.register_at_fork(after_in_child=_lanes._forget)
