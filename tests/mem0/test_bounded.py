"""One bounded mem0 call: the deadline, and what the breaker learns from it."""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
import time

import pytest

from agentscope_mem0 import MemoryUnavailableError
from agentscope_mem0._mem0.bounded import bounded
from agentscope_mem0._mem0.breaker import BreakerState, CircuitBreaker
from fakes import loop_turns


async def _answer_after(seconds: float, done: list[str]) -> list[str]:
    await asyncio.sleep(seconds)
    done.append("answered")
    return ["hit"]


async def test_a_search_that_answers_after_its_deadline_reopens_memory() -> None:
    breaker = CircuitBreaker(threshold=1, cooldown=60)
    done: list[str] = []
    with pytest.raises(TimeoutError):
        await bounded(_answer_after(0.3, done), timeout=0.05, breaker=breaker)
    assert breaker.state is BreakerState.OPEN  # nothing had answered yet
    for _ in range(100):
        if done:
            break
        await asyncio.sleep(0.05)
    await asyncio.sleep(0)  # the done callback
    assert done == ["answered"]  # the call went on after the caller gave up
    assert breaker.state is BreakerState.CLOSED
    assert breaker.stats()["late_answers"] == 1


async def test_a_hung_call_is_cancelled_after_the_grace_and_keeps_the_breaker_open(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import agentscope_mem0._mem0.bounded as bounded_module

    monkeypatch.setattr(bounded_module, "late_grace", lambda timeout: 0.2)
    breaker = CircuitBreaker(threshold=1, cooldown=60)
    cancelled = asyncio.Event()

    async def hang() -> list[str]:
        try:
            await asyncio.sleep(60)
        except asyncio.CancelledError:
            cancelled.set()
            raise
        return []

    with pytest.raises(TimeoutError):
        await bounded(hang(), timeout=0.05, breaker=breaker)
    await asyncio.wait_for(cancelled.wait(), 10)
    assert breaker.state is BreakerState.OPEN
    assert breaker.stats()["late_answers"] == 0


async def _hang(cancelled: asyncio.Event) -> None:
    """A call that never answers; sets ``cancelled`` when it is cancelled."""
    try:
        await asyncio.sleep(60)
    except asyncio.CancelledError:
        cancelled.set()
        raise


async def test_without_a_breaker_a_late_call_is_cancelled_at_the_deadline() -> None:
    cancelled = asyncio.Event()
    with pytest.raises(TimeoutError):
        await bounded(_hang(cancelled), timeout=0.05, breaker=None)
    await asyncio.wait_for(cancelled.wait(), 5)


async def test_cancelling_the_caller_cancels_the_call() -> None:
    cancelled = asyncio.Event()
    caller = asyncio.create_task(bounded(_hang(cancelled), timeout=10, breaker=CircuitBreaker()))
    await asyncio.sleep(0.05)
    caller.cancel()
    with pytest.raises(asyncio.CancelledError):
        await caller
    await asyncio.wait_for(cancelled.wait(), 5)


# -- a call already running on another thread (Mem0Lanes.start) ---------------------


def _on_a_thread(seconds: float, answer: object) -> concurrent.futures.Future[object]:
    future: concurrent.futures.Future[object] = concurrent.futures.Future()

    def run() -> None:
        time.sleep(seconds)
        if isinstance(answer, Exception):
            future.set_exception(answer)
        elif not future.cancelled():
            future.set_result(answer)

    threading.Thread(target=run, daemon=True).start()
    return future


async def test_a_call_running_on_another_thread_answers_errs_and_times_out() -> None:
    breaker = CircuitBreaker(threshold=1, cooldown=60)
    assert await bounded(_on_a_thread(0.01, ["hit"]), timeout=5, breaker=breaker) == ["hit"]
    with pytest.raises(KeyError, match="its own"):
        await bounded(_on_a_thread(0.01, KeyError("its own")), timeout=5, breaker=None)
    with pytest.raises(TimeoutError):
        await bounded(_on_a_thread(0.3, ["late"]), timeout=0.05, breaker=breaker)
    assert breaker.state is BreakerState.OPEN
    for _ in range(100):  # the late answer reaches the breaker through the loop
        if breaker.stats()["late_answers"]:
            break
        await asyncio.sleep(0.05)
    assert breaker.state is BreakerState.CLOSED


async def test_an_open_breaker_cancels_a_started_call_and_the_caller_resumes_at_once() -> None:
    breaker = CircuitBreaker(threshold=1, cooldown=60)
    breaker.record_failure()
    started = _on_a_thread(5, ["never used"])
    with pytest.raises(MemoryUnavailableError):
        await bounded(started, timeout=5, breaker=breaker)
    assert started.cancelled()


async def test_the_caller_resumes_two_turns_of_its_loop_after_the_answer() -> None:
    # Each turn of a busy loop is a wait behind every other reply: the
    # deadline's waiting must not add turns of its own.
    gate = threading.Event()
    future: concurrent.futures.Future[list[str]] = concurrent.futures.Future()
    waiting = asyncio.ensure_future(bounded(future, timeout=30, breaker=CircuitBreaker()))
    await asyncio.sleep(0.05)  # the caller waits
    with loop_turns() as turns:
        threading.Thread(target=lambda: (gate.wait(), future.set_result(["hit"]))).start()
        gate.set()
        assert await waiting == ["hit"]
    assert turns[0] <= 3  # the answer's hand-over, the caller's step, this test's wake-up
