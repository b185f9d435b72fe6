"""Keep a failing mem0 from costing every reply its deadline.

:class:`CircuitBreaker` counts consecutive failed calls to mem0 (errors and
timeouts). After ``threshold`` of them it opens: :meth:`CircuitBreaker.allow`
answers ``False`` and replies go on without memories, at no cost, for
``cooldown`` seconds. Then it lets one probe through (half-open): a success
closes it, a failure opens it for another cool-down.

It is meant for a backend that fails or hangs, not for one that is busy: a
burst of users, or one user's pasted page, makes some searches late while
mem0 keeps answering. So a timeout does not count towards opening when mem0
answered another call while the late one ran, and a late call that answers
after all (:meth:`CircuitBreaker.record_late_answer`) closes the breaker
again, as any answer does.

It is I/O-free and clock-injectable. The timing and the reporting are
done by :func:`.bounded.bounded`, which the automatic search, the profile read
and the ``search_memory`` and ``forget_memory`` tools go through (writes go
through the write queue and its retries instead); one breaker serves every
middleware on the same client (service mode shares it through
``ClientState``).
"""

from __future__ import annotations

import enum
import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from .._observe.latency import LatencyRecorder

__all__ = ["BreakerState", "CircuitBreaker"]

logger = logging.getLogger(__name__)


class BreakerState(enum.StrEnum):
    """Where a :class:`CircuitBreaker` stands."""

    CLOSED = "closed"
    """Searches run."""
    OPEN = "open"
    """Searches are skipped until the cool-down ends."""
    HALF_OPEN = "half_open"
    """One probe search runs; the others are skipped until it reports."""


class CircuitBreaker:
    """Skips searches for a while after repeated failures, then probes again.

    Thread-safe; one instance may serve several agents.

    Args:
        threshold: Consecutive failures (errors or timeouts) that open it.
        cooldown: Seconds it stays open before letting one probe through.
        clock: Monotonic time source in seconds (tests pass a fake).
    """

    def __init__(
        self,
        *,
        threshold: int = 5,
        cooldown: float = 30.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if threshold < 1:
            raise ValueError(f"threshold must be a positive integer, got {threshold!r}")
        if cooldown < 0:
            raise ValueError(f"cooldown must not be negative, got {cooldown!r}")
        self.threshold = threshold
        self.cooldown = cooldown
        self._clock = clock
        self._lock = threading.Lock()
        self._state = BreakerState.CLOSED
        self._consecutive = 0
        self._opened_at = 0.0
        self._probe_started: float | None = None
        self._last_answer: float | None = None
        self.latency = LatencyRecorder()
        """Durations of the searches that succeeded."""
        self._counts = {
            "searches": 0,
            "search_hits": 0,
            "search_failures": 0,
            "search_timeouts": 0,
            "searches_skipped": 0,
            "breaker_opened": 0,
            "timeouts_under_load": 0,
            "late_answers": 0,
        }

    @property
    def state(self) -> BreakerState:
        """The current state (an open breaker past its cool-down reads half-open)."""
        with self._lock:
            if self._state is BreakerState.OPEN and self._cooled_down():
                return BreakerState.HALF_OPEN
            return self._state

    def now(self) -> float:
        """The breaker's clock; pass it back as ``since`` when a call times out."""
        return self._clock()

    def _cooled_down(self) -> bool:
        return self._clock() - self._opened_at >= self.cooldown

    def allow(self) -> bool:
        """Whether to run a search now; a ``False`` is counted as skipped.

        In the half-open state only one caller gets ``True`` until it reports
        back; a probe that never reports (its task was cancelled) is given up
        after another cool-down.
        """
        with self._lock:
            if self._state is BreakerState.CLOSED:
                return True
            now = self._clock()
            if self._state is BreakerState.OPEN and self._cooled_down():
                self._state = BreakerState.HALF_OPEN
                self._probe_started = None
            if self._state is BreakerState.HALF_OPEN and (
                self._probe_started is None or now - self._probe_started >= self.cooldown
            ):
                self._probe_started = now
                return True
            self._counts["searches_skipped"] += 1
            return False

    def record_success(
        self, latency: float | None = None, *, hits: int = 0, search: bool = True
    ) -> None:
        """Report a call that answered; closes the breaker.

        Args:
            latency: Seconds the call took.
            hits: How many memories it returned.
            search: It was a search (counted, its latency kept); a write only
                closes the breaker.
        """
        with self._lock:
            if search:
                self._counts["searches"] += 1
                self._counts["search_hits"] += hits
            self._answered()
        if latency is not None and search:
            self.latency.record(latency)

    def record_late_answer(self) -> None:
        """Report that a call which had timed out answered after all: mem0 is
        busy, not failing. Closes the breaker, as any answer does."""
        with self._lock:
            self._counts["late_answers"] += 1
            self._answered()

    def _answered(self) -> None:
        if self._state is not BreakerState.CLOSED:
            logger.info("memory search recovered; searching again")
        self._state = BreakerState.CLOSED
        self._consecutive = 0
        self._probe_started = None
        self._last_answer = self._clock()

    def record_failure(
        self, *, timeout: bool = False, search: bool = True, since: float | None = None
    ) -> None:
        """Report a call that failed or ran out of time.

        Args:
            timeout: It hit the deadline rather than raising.
            search: It was a search (counted); a failed write counts towards
                opening the breaker all the same.
            since: For a timeout, :meth:`now` when the call started: if mem0
                answered another call since, the timeout is load, not a
                failure, and does not count towards opening.
        """
        with self._lock:
            if search:
                self._counts["searches"] += 1
                self._counts["search_timeouts" if timeout else "search_failures"] += 1
            if (
                timeout
                and since is not None
                and self._last_answer is not None
                and self._last_answer >= since
            ):
                self._counts["timeouts_under_load"] += 1
                return
            self._consecutive += 1
            probe_failed = self._state is BreakerState.HALF_OPEN
            if probe_failed or (
                self._state is BreakerState.CLOSED and self._consecutive >= self.threshold
            ):
                self._state = BreakerState.OPEN
                self._opened_at = self._clock()
                self._probe_started = None
                self._counts["breaker_opened"] += 1
                logger.warning(
                    "memory search failed %d times in a row; skipping searches for %.1f s",
                    self._consecutive,
                    self.cooldown,
                )

    def stats(self) -> dict[str, Any]:
        """Counters, the state and the search latency percentiles (seconds)."""
        with self._lock:
            out: dict[str, Any] = dict(self._counts)
        out["breaker_state"] = self.state.value
        out.update(self.latency.summary("search_latency"))
        return out
