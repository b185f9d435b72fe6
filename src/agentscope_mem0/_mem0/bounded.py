"""One bounded call to mem0: a deadline, and the circuit breaker told the outcome.

The automatic search, the profile read and every memory tool go through
:func:`bounded`, so they share one deadline rule and one breaker per client.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Sized
from typing import TYPE_CHECKING, TypeVar

from .._exceptions import MemoryUnavailableError

if TYPE_CHECKING:
    from .breaker import CircuitBreaker

__all__ = ["bounded"]

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
        TimeoutError: The call took longer than ``timeout``.
        Exception: The call's own error.
    """
    if check and breaker is not None and not breaker.allow():
        _discard(call)
        raise MemoryUnavailableError("mem0 failed repeatedly; memory is skipped for a while")
    started = time.perf_counter()
    try:
        result = await asyncio.wait_for(call, timeout=timeout)
    except TimeoutError:
        if breaker is not None:
            breaker.record_failure(timeout=True, search=search)
        raise
    except Exception:
        if breaker is not None:
            breaker.record_failure(search=search)
        raise
    if breaker is not None:
        hits = len(result) if isinstance(result, Sized) else 0
        breaker.record_success(time.perf_counter() - started, hits=hits, search=search)
    return result


def _discard(call: Awaitable[object]) -> None:
    close = getattr(call, "close", None)
    if callable(close):
        close()
