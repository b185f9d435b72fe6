"""The thread that owns a SQLite connection: order, errors, cancellation, closing, leaks."""

from __future__ import annotations

import asyncio
import gc
import sqlite3
import threading
from typing import Any

import pytest

from agentscope_mem0 import InvalidStateError
from agentscope_mem0._sqlite.thread import ConnectionThread


class Panic(BaseException):
    """Not an Exception, as pyo3's PanicException is not."""


@pytest.fixture
def owner() -> Any:
    thread = ConnectionThread("test-sqlite-owner")
    yield thread
    thread.close()


async def test_calls_run_in_order_on_the_one_named_thread(owner: ConnectionThread) -> None:
    seen: list[tuple[int, str]] = []

    def note(i: int) -> int:
        seen.append((i, threading.current_thread().name))
        return i * 10

    results = await asyncio.gather(*(owner.run(note, i) for i in range(20)))
    assert results == [i * 10 for i in range(20)]
    assert owner.call(note, 20) == 200  # from another thread: this one
    assert seen == [(i, "test-sqlite-owner") for i in range(21)]


async def test_a_connection_opened_on_it_is_used_only_there(owner: ConnectionThread) -> None:
    conn = await owner.run(sqlite3.connect, ":memory:")  # check_same_thread stays on
    assert await owner.run(lambda: conn.execute("SELECT 41 + 1").fetchone()) == (42,)
    with pytest.raises(sqlite3.ProgrammingError, match="same thread"):
        conn.execute("SELECT 1")
    await owner.run(conn.close)


async def test_a_base_exception_surfaces_at_the_await_and_the_thread_goes_on(
    owner: ConnectionThread,
) -> None:
    panic = Panic("engine panicked")

    def explode() -> None:
        raise panic

    with pytest.raises(Panic) as caught:
        await asyncio.wait_for(owner.run(explode), 5)  # a thread that died would hang here
    assert caught.value is panic
    with pytest.raises(Panic):
        owner.call(explode)
    assert await owner.run(lambda: "still serving") == "still serving"


async def test_a_cancelled_caller_skips_the_result_but_the_call_runs(
    owner: ConnectionThread,
) -> None:
    loop = asyncio.get_running_loop()
    problems: list[dict[str, Any]] = []
    loop.set_exception_handler(lambda _, context: problems.append(context))
    gate, ran = threading.Event(), threading.Event()
    owner.call(lambda: None)
    blocker = asyncio.ensure_future(owner.run(gate.wait, 10))
    cancelled = asyncio.ensure_future(owner.run(ran.set))
    await asyncio.sleep(0.05)
    cancelled.cancel()
    gate.set()
    assert await blocker
    assert await owner.run(ran.is_set)  # it ran, after the blocker, in order
    with pytest.raises(asyncio.CancelledError):
        await cancelled
    await asyncio.sleep(0.05)  # a result handed to the cancelled future would show here
    assert problems == []


async def test_close_runs_what_was_queued_then_refuses_more(owner: ConnectionThread) -> None:
    gate = threading.Event()
    order: list[str] = []
    first = asyncio.ensure_future(owner.run(gate.wait, 10))
    queued = [asyncio.ensure_future(owner.run(order.append, f"call{i}")) for i in range(3)]
    await asyncio.sleep(0.05)
    closing = asyncio.ensure_future(owner.aclose(lambda: order.append("last")))
    await asyncio.sleep(0.05)
    assert not closing.done()  # it waits for the queue
    gate.set()
    await closing
    await asyncio.gather(first, *queued)
    assert order == ["call0", "call1", "call2", "last"]
    assert owner.closed
    with pytest.raises(InvalidStateError, match="test-sqlite-owner is closed"):
        await owner.run(order.append, "late")
    with pytest.raises(InvalidStateError):
        owner.call(order.append, "late")
    await owner.aclose()  # idempotent
    owner.close(lambda: order.append("again"))
    assert order == ["call0", "call1", "call2", "last"]


def test_close_from_another_thread_waits_for_the_thread_to_end() -> None:
    owner = ConnectionThread("test-sqlite-closing", what="the test file")
    thread = next(t for t in threading.enumerate() if t.name == "test-sqlite-closing")
    owner.call(lambda: None)
    owner.close()
    assert not thread.is_alive()
    with pytest.raises(InvalidStateError, match="the test file is closed"):
        owner.call(lambda: None)


def test_a_call_on_the_thread_itself_runs_at_once(owner: ConnectionThread) -> None:
    assert owner.call(lambda: owner.call(lambda: "inner") + " and outer") == "inner and outer"


def test_an_object_nobody_closed_warns_and_ends_its_thread() -> None:
    owner = ConnectionThread("test-sqlite-leak", what="the leaked store")
    thread = next(t for t in threading.enumerate() if t.name == "test-sqlite-leak")
    owner.call(lambda: None)
    with pytest.warns(ResourceWarning, match="the leaked store was not closed"):
        del owner
        gc.collect()
    thread.join(5)
    assert not thread.is_alive()


def test_a_result_for_a_loop_that_has_ended_is_dropped(owner: ConnectionThread) -> None:
    gate = threading.Event()

    async def start() -> None:
        caller = asyncio.ensure_future(owner.run(gate.wait, 10))
        await asyncio.sleep(0.05)
        caller.cancel()
        await asyncio.sleep(0)  # the caller is gone; the call is not

    loop = asyncio.new_event_loop()
    loop.run_until_complete(start())
    loop.close()  # with the call still running
    gate.set()
    assert owner.call(lambda: "the thread goes on") == "the thread goes on"


async def test_send_calls_back_on_the_loop_with_the_result_or_the_error(
    owner: ConnectionThread,
) -> None:
    loop = asyncio.get_running_loop()
    told: asyncio.Queue[tuple[Any, Any, bool]] = asyncio.Queue()

    def then(result: Any, error: BaseException | None) -> None:
        told.put_nowait((result, error, asyncio.get_running_loop() is loop))

    owner.send(lambda a, b: a + b, 2, 3, then=then)
    owner.send(lambda: sqlite3.connect(":memory:").execute("not sql"), then=then)
    assert await asyncio.wait_for(told.get(), 5) == (5, None, True)
    result, error, on_loop = await asyncio.wait_for(told.get(), 5)
    assert result is None and isinstance(error, sqlite3.OperationalError) and on_loop
    owner.close()
    with pytest.raises(InvalidStateError, match="closed"):
        owner.send(lambda: None, then=then)
