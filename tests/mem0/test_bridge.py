"""The sync-to-async bridge: model coroutines of mem0's adapter calls."""

from __future__ import annotations

import asyncio
import contextvars
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from agentscope_mem0 import AgentScopeLLM, BridgeTimeoutError, InvalidStateError
from agentscope_mem0._mem0.call_context import caller_loop_scope, current, no_reply_waits
from agentscope_mem0._mem0.loops import LoopThread, run_model
from agentscope_mem0.testing import ScriptedChatModel


async def _where() -> tuple[str, int, bool]:
    await asyncio.sleep(0.01)
    here = threading.current_thread()
    return here.name, id(asyncio.get_running_loop()), here.daemon


def test_one_shared_daemon_loop_under_32_threads() -> None:
    with ThreadPoolExecutor(32) as pool:
        results = list(pool.map(lambda _: run_model(_where(), timeout=10), range(200)))
    assert {name for name, _, _ in results} == {"agentscope-mem0-bridge"}
    assert len({loop for _, loop, _ in results}) == 1
    assert all(daemon for _, _, daemon in results)


def test_adapters_share_one_thread_across_32_concurrent_callers() -> None:
    before = threading.active_count()
    llms = [AgentScopeLLM({"model": ScriptedChatModel(f"r{i}", extractor=None)}) for i in range(4)]
    with ThreadPoolExecutor(32) as pool:
        outs = list(
            pool.map(
                lambda i: llms[i % 4].generate_response([{"role": "user", "content": "q"}]),
                range(128),
            )
        )
    assert outs == [f"r{i % 4}" for i in range(128)]
    assert threading.active_count() <= before + 1


def test_errors_surface_at_the_call() -> None:
    async def boom() -> None:
        raise KeyError("original")

    with pytest.raises(KeyError, match="original"):
        run_model(boom(), timeout=5)


def test_timeout_cancels_the_call() -> None:
    cancelled = threading.Event()

    async def slow() -> None:
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            cancelled.set()
            raise

    started = time.perf_counter()
    with pytest.raises(BridgeTimeoutError):
        run_model(slow(), timeout=0.2)
    assert time.perf_counter() - started < 5
    assert cancelled.wait(5)


def test_call_on_the_bridge_thread_is_refused_not_deadlocked() -> None:
    async def nested() -> Any:
        return run_model(_where(), timeout=1)

    with pytest.raises(InvalidStateError):
        run_model(nested(), timeout=5)


async def test_call_from_the_caller_loop_thread_is_refused() -> None:
    with caller_loop_scope(), pytest.raises(InvalidStateError):
        run_model(_where(), timeout=1)


async def test_worker_threads_run_on_the_callers_loop() -> None:
    """One model instance serves the agent's loop and mem0 without crossing loops."""
    model = ScriptedChatModel("x", extractor=None)
    await model([])  # the agent uses it on this loop
    llm = AgentScopeLLM({"model": model})
    with caller_loop_scope():
        outs = await asyncio.gather(
            *(
                asyncio.to_thread(llm.generate_response, [{"role": "user", "content": "q"}])
                for _ in range(16)
            )
        )
    assert outs == ["x"] * 16
    assert model.loops == {id(asyncio.get_running_loop())}


def test_a_loop_thread_closes_once_and_a_new_one_follows() -> None:
    home = LoopThread("agentscope-mem0-test", workers=1)
    first = home.loop()
    assert asyncio.run_coroutine_threadsafe(_where(), first).result(5)[0] == "agentscope-mem0-test"
    thread = home.thread
    assert home.close() is True
    assert home.close() is True
    assert thread is not None and not thread.is_alive() and first.is_closed()
    again = home.loop()
    assert again is not first and again.is_running()
    assert home.close() is True


class _Pause:
    def __await__(self) -> Any:
        yield


def test_a_marked_coroutine_closed_in_another_context_ends_quietly() -> None:
    # The garbage collector closes a coroutine that never finished wherever it
    # runs; leaving its mark must not raise there.
    async def marked() -> None:
        with no_reply_waits():
            assert current().serves_no_reply
            await _Pause()

    coro = marked()
    contextvars.copy_context().run(coro.send, None)
    contextvars.copy_context().run(coro.close)
    assert not current().serves_no_reply
