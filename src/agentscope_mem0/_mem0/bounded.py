"""One bounded call to mem0: a deadline, and the circuit breaker told the outcome.

The automatic search, the profile read, ``search_memory`` and
``forget_memory`` go through :func:`bounded`, so they share one deadline rule
and one breaker per client (``add_memory`` goes through the write queue).

The caller stops waiting at the deadline, but the call itself goes on for a
while (:func:`late_grace`): when it answers after all, mem0 was busy rather
than failing, and the breaker hears so (see :mod:`.breaker`).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import time
from collections.abc import Awaitable, Callable, Sized
from typing import TYPE_CHECKING, Any, TypeVar

from .._exceptions import MemoryUnavailableError

if TYPE_CHECKING:
    from .breaker import CircuitBreaker

__all__ = ["bounded", "late_grace"]

_T = TypeVar("_T")
_Call = asyncio.Future[_T] | concurrent.futures.Future[_T]
"""A mem0 call under way: a task of this loop, or one running on another thread's loop."""


async def bounded(
    call: Awaitable[_T] | concurrent.futures.Future[_T],
    *,
    timeout: float | None,
    breaker: CircuitBreaker | None,
    search: bool = True,
    check: bool = True,
) -> _T:
    """``await call`` within ``timeout`` seconds, reporting the outcome to ``breaker``.

    Args:
        call: The mem0 call (not yet awaited), or one already running on
            another thread's loop (``Mem0Backend.start_read``).
        timeout: Seconds it may take; ``None`` waits indefinitely.
        breaker: The client's breaker, or ``None`` for none.
        search: The call reads memories: it counts in the breaker's search
            statistics (a write only moves the breaker's state).
        check: Ask the breaker first; ``False`` when the caller already did
            (one check covers the reads of one turn).

    Returns:
        The call's result.

    Raises:
        MemoryUnavailableError: The breaker is open; ``call`` was not awaited
            (it is closed, so no "never awaited" warning follows).
        TimeoutError: The call took longer than ``timeout`` (it goes on in
            the background for :func:`late_grace` seconds, for the breaker).
        Exception: The call's own error.
    """
    if check and breaker is not None and not breaker.allow():
        _discard(call)
        raise MemoryUnavailableError("mem0 failed repeatedly; memory is skipped for a while")
    started = time.perf_counter()
    since = breaker.now() if breaker is not None else None
    future = call if isinstance(call, concurrent.futures.Future) else asyncio.ensure_future(call)
    try:
        answered = await _settled_within(future, timeout)
    except asyncio.CancelledError:
        future.cancel()
        raise
    if not answered:
        if breaker is None or timeout is None:
            future.cancel()
        else:
            breaker.record_failure(timeout=True, search=search, since=since)
            _follow(future, breaker, late_grace(timeout))
        raise TimeoutError(f"the mem0 call took over {timeout} s")
    try:
        result = future.result()
    except Exception:
        if breaker is not None:
            breaker.record_failure(search=search)
        raise
    return _answered(result, breaker, started, search)


async def _settled_within(future: _Call[Any], timeout: float | None) -> bool:
    """Wait until ``future`` is done or ``timeout`` passed; whether it is done.

    One waiter woken by whichever comes first: a reply resumes two turns of
    its event loop after the answer (``wait_for`` over ``shield`` takes
    four), and every turn of a busy loop is a wait behind every other reply.
    """
    if future.done():
        return True
    loop = asyncio.get_running_loop()
    waiter: asyncio.Future[None] = loop.create_future()

    def wake(*_: object) -> None:
        if not waiter.done():
            waiter.set_result(None)

    _when_done(future, loop, wake)
    timer = None if timeout is None else loop.call_later(timeout, wake)
    try:
        await waiter
    finally:
        if timer is not None:
            timer.cancel()
    return future.done()


def _when_done(
    future: _Call[Any], loop: asyncio.AbstractEventLoop, callback: Callable[[Any], None]
) -> None:
    """Run ``callback(future)`` on ``loop`` once ``future`` is done."""
    if isinstance(future, asyncio.Future):
        future.add_done_callback(callback)
        return

    def hand_over(done: concurrent.futures.Future[Any]) -> None:
        with contextlib.suppress(RuntimeError):  # the loop closed: nobody waits any more
            loop.call_soon_threadsafe(callback, done)

    future.add_done_callback(hand_over)


def late_grace(timeout: float) -> float:
    """Seconds a call goes on after its ``timeout``: long enough for a call
    that only queued behind others to answer, short enough that calls to a
    hung backend do not pile up."""
    return max(3.0 * timeout, 5.0)


def _answered(result: _T, breaker: CircuitBreaker | None, started: float, search: bool) -> _T:
    if breaker is not None:
        hits = len(result) if isinstance(result, Sized) else 0
        breaker.record_success(time.perf_counter() - started, hits=hits, search=search)
    return result


def _follow(future: _Call[Any], breaker: CircuitBreaker, grace: float) -> None:
    """Let a late ``future`` run for ``grace`` seconds more; tell ``breaker`` if it answers."""
    loop = asyncio.get_running_loop()
    stop = loop.call_later(grace, future.cancel)

    def done(finished: _Call[Any]) -> None:
        stop.cancel()
        if finished.cancelled():
            return
        if finished.exception() is None:  # retrieved either way: nothing is logged
            breaker.record_late_answer()

    _when_done(future, loop, done)


def _discard(call: Awaitable[object] | concurrent.futures.Future[Any]) -> None:
    if isinstance(call, concurrent.futures.Future):
        call.cancel()
        return
    close = getattr(call, "close", None)
    if callable(close):
        close()
