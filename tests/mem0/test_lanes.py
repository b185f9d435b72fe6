"""The lanes mem0's AsyncMemory runs on: writes on a loop and pool of their own,
reads whole on a reader thread."""

from __future__ import annotations

import asyncio
import contextlib
import threading
from typing import Any

import pytest

from agentscope_mem0._mem0.call_context import caller_loop_scope, current
from agentscope_mem0._mem0.loops import Mem0Lanes


async def test_each_lane_runs_off_the_callers_loop_with_the_callers_context() -> None:
    lanes = Mem0Lanes(workers=2)
    caller = asyncio.get_running_loop()

    async def probe() -> tuple[Any, Any, str, str | None]:
        worker = await asyncio.to_thread(lambda: threading.current_thread().name)
        return asyncio.get_running_loop(), current().loop, worker, current().lane

    with caller_loop_scope():
        loop, marked, worker, lane = await lanes.run(probe(), lane="write")
        read_loop, read_marked, reader, read_lane = await lanes.run(probe(), lane="read")
    assert loop is not caller and read_loop not in (caller, loop)
    assert marked is caller and read_marked is caller  # models still go to the agent's loop
    assert worker.startswith("agentscope-mem0-write-pool")  # the write loop's own pool
    assert reader.startswith("agentscope-mem0-reader")  # a read's steps run on its reader
    assert (lane, read_lane) == ("write", "read")
    lanes.close()


async def _slow(cancelled: threading.Event) -> None:
    """Waits half a minute; sets ``cancelled`` when it is cancelled instead."""
    try:
        await asyncio.sleep(30)
    except asyncio.CancelledError:
        cancelled.set()
        raise


@pytest.mark.parametrize("lane", ["read", "write"])
async def test_cancelling_the_caller_cancels_the_call_on_the_lane(lane: Any) -> None:
    lanes = Mem0Lanes(workers=1)
    cancelled = threading.Event()
    with pytest.raises(TimeoutError):
        await asyncio.wait_for(lanes.run(_slow(cancelled), lane=lane), 0.2)
    assert cancelled.wait(5)
    lanes.close()


async def test_a_lane_returns_results_and_raises_errors() -> None:
    lanes = Mem0Lanes(workers=1)

    async def fail() -> None:
        raise KeyError("the original error")

    async def answer() -> int:
        return 42

    for lane in ("read", "write"):
        with pytest.raises(KeyError, match="the original error"):
            await lanes.run(fail(), lane=lane)
        assert await lanes.run(answer(), lane=lane) == 42
    with pytest.raises(ValueError, match="lane"):
        await lanes.run(answer(), lane="other")  # type: ignore[arg-type]
    lanes.close()


async def test_a_read_started_whole_runs_its_thread_steps_on_its_reader() -> None:
    lanes = Mem0Lanes(workers=2)
    caller = asyncio.get_running_loop()

    async def read() -> tuple[str, list[str], Any, str | None, Any]:
        here = threading.current_thread().name
        turned: list[bool] = []
        asyncio.get_running_loop().call_soon(turned.append, True)
        steps = [await asyncio.to_thread(lambda: threading.current_thread().name) for _ in range(3)]
        assert not turned  # nor a turn of the reader's loop between them
        with pytest.raises(ZeroDivisionError):  # a step's error reaches the read
            await asyncio.to_thread(lambda: 1 / 0)
        # A mem0 call made below takes the lane: here, on this very loop.
        inner = await lanes.run(_loop_and_thread(), lane="read")
        return here, steps, current().loop, current().lane, inner

    future = lanes.start(read())
    here, steps, marked, lane, inner = await asyncio.wrap_future(future)
    assert here.startswith("agentscope-mem0-reader")
    assert steps == [here] * 3  # no hop to a pool and back
    assert marked is caller  # models called below still run on the agent's loop
    assert lane == "read"
    assert inner[1] == here and inner[0] is not caller
    lanes.close()


async def _loop_and_thread() -> tuple[Any, str]:
    return asyncio.get_running_loop(), threading.current_thread().name


async def test_a_read_started_whole_answers_errs_and_is_cancelled() -> None:
    lanes = Mem0Lanes(workers=1)

    async def fail() -> None:
        raise KeyError("the original error")

    with pytest.raises(KeyError, match="the original error"):
        await asyncio.wrap_future(lanes.start(fail()))
    cancelled = threading.Event()
    future = lanes.start(_slow(cancelled))
    await asyncio.sleep(0.1)  # it waits on its reader
    assert future.cancel()
    assert cancelled.wait(5)
    # The reader is free again: the next read runs on it.
    assert (await asyncio.wrap_future(lanes.start(_loop_and_thread())))[1].startswith(
        "agentscope-mem0-reader"
    )
    lanes.close()


async def test_an_answer_nobody_waits_for_is_dropped_and_the_reader_goes_on() -> None:
    lanes = Mem0Lanes(workers=1)
    finishing = threading.Event()

    async def answers_anyway() -> str:
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.sleep(30)
        finishing.set()
        return "too late"

    future = lanes.start(answers_anyway())
    await asyncio.sleep(0.1)
    assert future.cancel()
    assert finishing.wait(5)
    # The one reader still serves reads.
    _, thread = await asyncio.wrap_future(lanes.start(_loop_and_thread()))
    assert thread == "agentscope-mem0-reader_0"
    lanes.close()
