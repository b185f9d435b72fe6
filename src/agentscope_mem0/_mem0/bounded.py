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
import time
from collections.abc import Awaitable, Sized
from typing import TYPE_CHECKING, Any, TypeVar

from .._exceptions import MemoryUnavailableError

if TYPE_CHECKING:
    from .breaker import CircuitBreaker

__all__ = ["bounded", "late_grace"]

_T = TypeVar("_T")


async def bounded(
    call: Awaitable[_T],
    *,
    timeout: float | None,
    breaker: CircuitBreaker | None,
    search: bool = True,
    check: bool = True,
) -> _T:
    """``await call`` within ``timeout`` seconds, reporting the outcome to ``breaker``.

    Args:
        call: The mem0 call (not yet awaited).
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
    task = asyncio.ensure_future(call)
    try:
        result = await asyncio.wait_for(asyncio.shield(task), timeout=timeout)
    except TimeoutError:
        if breaker is None or timeout is None:
            task.cancel()
        else:
            breaker.record_failure(timeout=True, search=search, since=since)
            _follow(task, breaker, late_grace(timeout))
        raise
    except asyncio.CancelledError:
        task.cancel()
        raise
    except Exception:
        if breaker is not None:
            breaker.record_failure(search=search)
        raise
    return _answered(result, breaker, started, search)


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


def _follow(task: asyncio.Future[Any], breaker: CircuitBreaker, grace: float) -> None:
    """Let a late ``task`` run for ``grace`` seconds more; tell ``breaker`` if it answers."""
    stop = asyncio.get_running_loop().call_later(grace, task.cancel)

    def done(finished: asyncio.Future[Any]) -> None:
        stop.cancel()
        if finished.cancelled():
            return
        if finished.exception() is None:  # retrieved either way: nothing is logged
            breaker.record_late_answer()

    task.add_done_callback(done)


def _discard(call: Awaitable[object]) -> None:
    close = getattr(call, "close", None)
    if callable(close):
        close()
