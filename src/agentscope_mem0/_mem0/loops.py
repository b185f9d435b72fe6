"""Where mem0 and the models it calls run: the door's threads and event loops.

mem0 runs every model, embedder and store call in a thread of the running
loop's default executor (``asyncio.to_thread``), several at once, and calls
the adapters synchronously there. AgentScope models are coroutines whose HTTP
clients belong to the event loop that first used them. So:

* mem0's own ``AsyncMemory`` runs apart from the agent's loop
  (:class:`Mem0Lanes`). On the agent's loop its worker threads would block
  waiting for model coroutines that may themselves need a thread of that same
  pool (a DNS lookup, a model using ``to_thread``), and a dozen concurrent
  turns then starve it. Writes run on a loop of their own whose pool is their
  own: threads held by slow extraction calls never delay a search. Reads run
  whole on reader threads, each on a private loop (:class:`_ReaderLoop`) where
  mem0's ``to_thread`` steps run at once instead of hopping to a pool and
  back, and without a turn of that loop either: a search makes five such
  steps (lemmatising, entities, the embedding, the vector search, the keyword
  search), and under load each hop, and each turn of a loop, waits for the
  interpreter behind every other thread, so the read waited for the hops
  rather than for the work.
* An adapter's model coroutine runs on the caller's loop (:func:`run_model`,
  the bridge): the one the agent itself runs on, which the backend marks in
  the call's context (:func:`~.call_context.caller_loop_scope`). One model
  instance then serves the agent and mem0 without crossing loops. Without a
  mark (a user's own mem0 call) it runs on one process-wide daemon loop
  shared by every adapter. A blocking call made on the very loop that would have to run it
  can only deadlock, so it raises :class:`InvalidStateError` instead.
"""

from __future__ import annotations

import asyncio
import atexit
import concurrent.futures
import contextlib
import contextvars
import logging
import os
import queue
import threading
import time
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar, TypeVarTuple

from .._exceptions import BridgeError, BridgeTimeoutError, InvalidStateError
from .call_context import Lane, caller_loop_scope, calling, current

__all__ = ["LoopThread", "Mem0Lanes", "get_lanes", "run_model"]

logger = logging.getLogger(__name__)

T = TypeVar("T")
_Args = TypeVarTuple("_Args")
Future = concurrent.futures.Future
_Read = tuple[contextvars.Context, Coroutine[Any, Any, Any], "Future[Any]"]

_SLICE = 0.5  # seconds between a bridge call's checks that the target loop still runs


class LoopThread:
    """An event loop run by one daemon thread, started on first use.

    Args:
        name: The thread's name.
        workers: Threads of the loop's own default executor (named
            ``<name>-pool``); ``None`` keeps asyncio's.
    """

    def __init__(self, name: str, *, workers: int | None = None) -> None:
        self.name = name
        self._workers = workers
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._pool: concurrent.futures.ThreadPoolExecutor | None = None
        self.thread: threading.Thread | None = None
        """The daemon thread, once a call has needed it."""

    def loop(self) -> asyncio.AbstractEventLoop:
        """The running loop, started on first use and after a :meth:`close`."""
        with self._lock:
            if self._loop is None:
                loop = asyncio.new_event_loop()
                if self._workers is not None:
                    self._pool = concurrent.futures.ThreadPoolExecutor(
                        self._workers, thread_name_prefix=f"{self.name}-pool"
                    )
                    loop.set_default_executor(self._pool)
                self.thread = threading.Thread(target=loop.run_forever, name=self.name, daemon=True)
                self.thread.start()
                self._loop = loop
            return self._loop

    def close(self, timeout: float = 5.0) -> bool:
        """Stop the loop and its pool. Idempotent.

        Returns:
            True when the thread ended within ``timeout`` (or never started).
        """
        with self._lock:
            loop, thread, pool = self._loop, self.thread, self._pool
            self._loop = self._pool = None
        if loop is None or thread is None:
            return True
        loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout)
        if thread.is_alive():
            logger.warning("thread %s did not stop within %.1f s", thread.name, timeout)
            return False
        loop.close()
        if pool is not None:
            pool.shutdown(wait=False, cancel_futures=True)
        return True


# -- mem0's coroutines ------------------------------------------------------------------


class Mem0Lanes:
    """Where mem0's ``AsyncMemory`` runs, apart from the agent's loop, by lane.

    ``"read"``: whole, on one of ``workers`` reader threads (:meth:`start`).
    ``"write"``: on the write loop, whose pool of ``workers`` threads runs
    mem0's ``to_thread`` steps.

    Args:
        workers: Reader threads, and threads of the write loop's pool.
    """

    def __init__(self, workers: int = 16) -> None:
        self._workers = workers
        self._write = LoopThread("agentscope-mem0-write", workers=workers)
        self._lock = threading.Lock()
        self._readers: _Readers | None = None

    async def run(self, coro: Coroutine[Any, Any, T], *, lane: Lane) -> T:
        """Await ``coro`` on ``lane`` from the calling loop.

        The caller's context (the loop :func:`~.call_context.caller_loop_scope`
        marked) goes with it; cancelling the caller cancels ``coro`` where it
        waits. Called from ``lane`` itself (a reader for ``"read"``, the write
        loop for ``"write"``), ``coro`` runs right there.
        """
        running = asyncio.get_running_loop()
        if lane == "read":
            if isinstance(running, _ReaderLoop):
                return await _in_lane(coro, lane)
            return await asyncio.wrap_future(self.start(coro))
        if lane != "write":
            coro.close()
            raise ValueError(f"unknown lane {lane!r}; use 'read' or 'write'")
        try:
            loop = self._write.loop()
        except BaseException:
            coro.close()
            raise
        if running is loop:
            return await _in_lane(coro, lane)
        # run_coroutine_threadsafe creates the task in a copy of this context.
        return await asyncio.wrap_future(
            asyncio.run_coroutine_threadsafe(_in_lane(coro, lane), loop)
        )

    def start(self, coro: Coroutine[Any, Any, T]) -> Future[T]:
        """Start ``coro`` on a reader thread; its future.

        ``coro`` may be more than a mem0 call (the reads around it too). It
        runs whole on the reader's private loop, mem0's ``to_thread`` steps
        included, so the caller resumes once, when all of it is done (see the
        module). Models called below still run on the calling loop, marked
        here as :func:`~.call_context.caller_loop_scope` would. Cancelling the
        future cancels ``coro`` where it waits.
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
        """Stop the readers (after the reads queued so far) and the write loop;
        later calls start new ones."""
        with self._lock:
            readers, self._readers = self._readers, None
        if readers is not None:
            readers.close()
        self._write.close(timeout)


async def _in_lane(coro: Coroutine[Any, Any, T], lane: Lane) -> T:
    with calling(lane=lane):
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


# The lanes are left running at exit: writes stored then may still need
# them, and their daemon threads end with the interpreter.
_lanes = Mem0Lanes()


def get_lanes() -> Mem0Lanes:
    """The process-wide :class:`Mem0Lanes`."""
    return _lanes


# -- the models mem0 calls ----------------------------------------------------------------

_models = LoopThread("agentscope-mem0-bridge")
"""The loop of the model calls made with no caller's loop marked (a user's own mem0 call)."""


@atexit.register
def _close_at_exit() -> None:
    _models.close(timeout=1.0)


def _after_fork() -> None:
    global _lanes, _models
    # The child has none of the parent's threads: new lanes and bridge loop on first use.
    _lanes, _models = Mem0Lanes(), LoopThread("agentscope-mem0-bridge")


os.register_at_fork(after_in_child=_after_fork)


def run_model(coro: Coroutine[Any, Any, T], *, timeout: float | None) -> T:
    """Run a model coroutine for a synchronous adapter call, blocking this thread.

    It runs on the caller's loop, else on the bridge's own (see the module).

    Args:
        coro: The coroutine to run.
        timeout: Seconds to wait before cancelling it; ``None`` waits forever.

    Returns:
        Whatever the coroutine returned; its exception is re-raised here.

    Raises:
        InvalidStateError: This thread runs the loop that would run ``coro``.
        BridgeError: The caller's loop closed before ``coro`` ran.
        BridgeTimeoutError: ``coro`` took longer than ``timeout``.
    """
    loop = current().loop
    if loop is None or not loop.is_running() or loop.is_closed():
        try:
            loop = _models.loop()
        except BaseException:
            coro.close()
            raise
    try:
        running: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
    except RuntimeError:
        running = None
    if running is loop:
        coro.close()
        raise InvalidStateError(
            "a blocking model call was made on the event loop that would run "
            "it; call mem0's synchronous API from a worker thread, or use "
            "mem0.AsyncMemory"
        )
    future = asyncio.run_coroutine_threadsafe(coro, loop)
    deadline = None if timeout is None else time.monotonic() + timeout
    while True:
        left = None if deadline is None else max(deadline - time.monotonic(), 0.0)
        try:
            # In slices: a loop that ends meanwhile (asyncio.run returning)
            # never runs the call, and waiting out the timeout would stall exit.
            return future.result(_SLICE if left is None else min(left, _SLICE))
        except concurrent.futures.TimeoutError as exc:
            if loop.is_closed():
                future.cancel()
                raise BridgeError("the model call's event loop closed before it ran") from exc
            if left is not None and left <= _SLICE:
                future.cancel()
                raise BridgeTimeoutError(f"model call did not finish within {timeout} s") from exc
