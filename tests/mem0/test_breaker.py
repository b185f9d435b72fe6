"""The search circuit breaker, on a fake clock."""

from __future__ import annotations

import threading

import pytest

from agentscope_mem0._mem0.breaker import BreakerState, CircuitBreaker


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


def test_opens_after_threshold_consecutive_failures(clock: FakeClock) -> None:
    breaker = CircuitBreaker(threshold=3, cooldown=10, clock=clock)
    for _ in range(2):
        assert breaker.allow()
        breaker.record_failure()
    breaker.record_success(0.01)  # a success resets the streak
    for _ in range(2):
        breaker.record_failure(timeout=True)
    assert breaker.state is BreakerState.CLOSED
    breaker.record_failure()
    assert breaker.state is BreakerState.OPEN
    assert not breaker.allow()
    assert not breaker.allow()
    stats = breaker.stats()
    assert stats["searches_skipped"] == 2
    assert stats["search_timeouts"] == 2
    assert stats["search_failures"] == 3
    assert stats["breaker_opened"] == 1
    assert stats["breaker_state"] == "open"


def test_half_open_lets_one_probe_through_then_closes(clock: FakeClock) -> None:
    breaker = CircuitBreaker(threshold=1, cooldown=10, clock=clock)
    breaker.record_failure()
    clock.now += 9.9
    assert not breaker.allow()
    clock.now += 0.1
    assert breaker.state is BreakerState.HALF_OPEN
    assert breaker.allow()  # the probe
    assert not breaker.allow()  # others wait for it
    breaker.record_success(0.02, hits=3)
    assert breaker.state is BreakerState.CLOSED
    assert breaker.allow()
    assert breaker.stats()["search_hits"] == 3


def test_failed_probe_reopens_for_another_cooldown(clock: FakeClock) -> None:
    breaker = CircuitBreaker(threshold=2, cooldown=5, clock=clock)
    breaker.record_failure()
    breaker.record_failure()
    clock.now += 5
    assert breaker.allow()
    breaker.record_failure(timeout=True)
    assert breaker.state is BreakerState.OPEN
    assert not breaker.allow()
    clock.now += 5
    assert breaker.allow()
    assert breaker.stats()["breaker_opened"] == 2


def test_a_probe_that_never_reports_is_given_up(clock: FakeClock) -> None:
    breaker = CircuitBreaker(threshold=1, cooldown=5, clock=clock)
    breaker.record_failure()
    clock.now += 5
    assert breaker.allow()  # the probe's task is cancelled and never reports
    assert not breaker.allow()
    clock.now += 5
    assert breaker.allow()


def test_latency_of_successes_only(clock: FakeClock) -> None:
    breaker = CircuitBreaker(clock=clock)
    breaker.record_success(0.010)
    breaker.record_success(0.030)
    breaker.record_failure(timeout=True)
    stats = breaker.stats()
    assert stats["searches"] == 3
    assert stats["search_latency_p50"] == pytest.approx(0.010)
    assert stats["search_latency_p95"] == pytest.approx(0.030)
    assert stats["search_latency_count"] == 2


def test_thread_safe_counts() -> None:
    breaker = CircuitBreaker(threshold=10**9)

    def hammer() -> None:
        for _ in range(1000):
            breaker.record_failure()
            breaker.record_success(0.001)

    threads = [threading.Thread(target=hammer) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert breaker.stats()["searches"] == 16000


@pytest.mark.parametrize("kwargs", [{"threshold": 0}, {"cooldown": -1}])
def test_rejects_bad_settings(kwargs: dict[str, float]) -> None:
    with pytest.raises(ValueError):
        CircuitBreaker(**kwargs)  # type: ignore[arg-type]


def test_timeouts_while_mem0_answers_other_calls_are_load_not_failures(
    clock: FakeClock,
) -> None:
    breaker = CircuitBreaker(threshold=2, cooldown=30, clock=clock)
    # Fifty searches start together; one answers, the others run past the deadline.
    started = breaker.now()
    clock.now += 1
    breaker.record_success(1.0)
    clock.now += 1
    for _ in range(49):
        breaker.record_failure(timeout=True, since=started)
    assert breaker.state is BreakerState.CLOSED
    stats = breaker.stats()
    assert stats["search_timeouts"] == 49  # the replies still went without memory
    assert stats["timeouts_under_load"] == 49
    assert stats["breaker_opened"] == 0
    # An error is a failure whatever else answers; so is a timeout with no answer since.
    breaker.record_failure()
    breaker.record_failure(timeout=True, since=breaker.now())
    assert breaker.state is BreakerState.OPEN


def test_a_late_answer_closes_a_breaker_that_timeouts_opened(clock: FakeClock) -> None:
    breaker = CircuitBreaker(threshold=3, cooldown=30, clock=clock)
    started = breaker.now()
    clock.now += 2
    for _ in range(3):  # a burst that no call answered in time
        breaker.record_failure(timeout=True, since=started)
    assert breaker.state is BreakerState.OPEN
    assert not breaker.allow()
    clock.now += 1
    breaker.record_late_answer()  # one of them answered after all: busy, not failing
    assert breaker.state is BreakerState.CLOSED
    assert breaker.allow()
    assert breaker.stats()["late_answers"] == 1
