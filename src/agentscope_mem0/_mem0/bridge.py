"""Run AgentScope's async models from mem0's synchronous adapter calls.

mem0 calls ``LLMBase.generate_response`` and ``EmbeddingBase.embed`` from
worker threads (``asyncio.to_thread``), several at once. AgentScope models
are coroutines, and their HTTP clients belong to the event loop that first
used them. Two rules follow:

* When the call comes from a worker thread that an event loop started on our
  behalf (the backend marks it with :func:`caller_loop_scope`), the coroutine
  runs on *that* loop: the one the agent itself runs on. One model instance
  then serves the agent and mem0 without crossing loops.
* Otherwise it runs on one process-wide daemon-thread loop, shared by every
  adapter.

A blocking call made on the very loop that would have to run it can only
deadlock, so it raises :class:`InvalidStateError` instead.

Which lane of :mod:`.lanes` a call serves, and whether a reply waits for it,
travel with the call as context variables (:func:`current_lane`,
:func:`reply_waits`, :func:`no_reply_waits`): mem0's ``add`` embeds the
whole exchange as a *query*, and the embedder must still treat it as
background work.
"""

from __future__ import annotations

import asyncio
import atexit
import concurrent.futures
import contextlib
import contextvars
import logging
import threading
import time
from collections.abc import Coroutine, Iterator
from typing import Any, TypeVar

from .._exceptions import BridgeError, BridgeTimeoutError, InvalidStateError

__all__ = [
    "Bridge",
    "a_reply_waits",
    "caller_loop_scope",
    "current_lane",
    "get_bridge",
    "lane_scope",
    "no_reply_waits",
    "reply_waits",
    "serves_no_reply",
]

logger = logging.getLogger(__name__)

T = TypeVar("T")

_SLICE = 0.5  # seconds between checks that the target loop still runs

_caller_loop: contextvars.ContextVar[asyncio.AbstractEventLoop | None] = contextvars.ContextVar(
    "agentscope_mem0_caller_loop", default=None
)


_lane: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "agentscope_mem0_lane", default=None
)


def current_lane() -> str | None:
    """The :class:`~.lanes.Mem0Lanes` lane (``"read"``/``"write"``) the calling code serves.

    ``asyncio.to_thread`` copies the context into mem0's worker threads, so an
    adapter call made there sees the lane of the mem0 call that made it;
    ``None`` outside any lane (a CLI command, a user's own mem0 call).
    """
    return _lane.get()


def lane_scope(lane: str) -> contextlib.AbstractContextManager[None]:
    """Mark the code below as serving ``lane`` (:func:`current_lane`)."""
    return _marked(_lane, lane)


_who_waits: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "agentscope_mem0_who_waits", default=None
)  # "nobody" (no_reply_waits) or "reply" (reply_waits); None: the lane tells


@contextlib.contextmanager
def _marked(mark: contextvars.ContextVar[str | None], value: str) -> Iterator[None]:
    token = mark.set(value)
    try:
        yield
    finally:
        # A coroutine never finished is closed by the garbage collector in
        # another context, where its token cannot be reset (nor needs to be).
        with contextlib.suppress(ValueError):
            mark.reset(token)


def no_reply_waits() -> contextlib.AbstractContextManager[None]:
    """Mark the reads and embeddings made below as work no reply waits for.

    The time judgement and consolidation search and embed after a write is
    stored. Marked, their mem0 reads run on the write lane and their texts
    are embedded as background work, after every reply's waiting query
    (:func:`serves_no_reply`).
    """
    return _marked(_who_waits, "nobody")


def reply_waits() -> contextlib.AbstractContextManager[None]:
    """Mark the embeddings made below as what a reply waits for (:func:`a_reply_waits`),
    unless an enclosing :func:`no_reply_waits` said no reply does."""
    return (
        contextlib.nullcontext() if _who_waits.get() == "nobody" else _marked(_who_waits, "reply")
    )


def serves_no_reply() -> bool:
    """Whether the calling code serves mem0's writes or other work no reply
    waits for (:func:`no_reply_waits`)."""
    return _who_waits.get() == "nobody" or _lane.get() == "write"


def a_reply_waits() -> bool:
    """Whether a reply waits for the calling code: its search on mem0's read
    lane, or what :func:`reply_waits` marks."""
    who = _who_waits.get()
    return who == "reply" or (who is None and _lane.get() == "read")


@contextlib.contextmanager
def caller_loop_scope() -> Iterator[None]:
    """Mark the running loop as the one adapter calls made below should use.

    ``asyncio.to_thread`` copies the context into its worker thread, so mem0's
    adapter calls inside this scope find the loop and run the model there.
    """
    if _lane.get() is not None and _caller_loop.get() is not None:
        yield  # a read started whole (``Mem0Lanes.start``): its caller's loop is marked
        return
    token = _caller_loop.set(asyncio.get_running_loop())
    try:
        yield
    finally:
        _caller_loop.reset(token)


class Bridge:
    """One daemon thread running an event loop, for coroutines without a home."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._closed = False

    def _own_loop(self) -> asyncio.AbstractEventLoop:
        with self._lock:
            if self._closed:
                raise BridgeError("the bridge was closed; call get_bridge() again")
            if self._loop is None:
                loop = asyncio.new_event_loop()
                thread = threading.Thread(
                    target=loop.run_forever,
                    name="agentscope-mem0-bridge",
                    daemon=True,
                )
                thread.start()
                self._loop, self._thread = loop, thread
            return self._loop

    def _target_loop(self) -> asyncio.AbstractEventLoop:
        caller = _caller_loop.get()
        if caller is not None and caller.is_running() and not caller.is_closed():
            return caller
        return self._own_loop()

    def run(self, coro: Coroutine[Any, Any, T], *, timeout: float | None) -> T:
        """Run ``coro`` to completion and return its result, blocking this thread.

        Args:
            coro: The coroutine to run.
            timeout: Seconds to wait before cancelling it; ``None`` waits forever.

        Returns:
            Whatever the coroutine returned; its exception is re-raised here.
        """
        try:
            loop = self._target_loop()
        except BaseException:
            coro.close()
            raise
        try:
            running = asyncio.get_running_loop()
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
                    raise BridgeTimeoutError(
                        f"model call did not finish within {timeout} s"
                    ) from exc

    @property
    def thread(self) -> threading.Thread | None:
        """The daemon thread, once a call has needed it."""
        return self._thread

    def close(self, timeout: float = 5.0) -> bool:
        """Stop the daemon loop. Idempotent.

        Returns:
            True when the thread ended within ``timeout`` (or never started).
        """
        with self._lock:
            if self._closed:
                return True
            self._closed = True
            loop, thread = self._loop, self._thread
        if loop is None or thread is None:
            return True
        loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout)
        stopped = not thread.is_alive()
        if stopped:
            loop.close()
        else:
            logger.warning("bridge thread did not stop within %.1f s", timeout)
        return stopped


_bridge: Bridge | None = None
_bridge_lock = threading.Lock()


def get_bridge() -> Bridge:
    """The process-wide bridge, created on first use and after a close."""
    global _bridge
    with _bridge_lock:
        if _bridge is None or _bridge._closed:
            _bridge = Bridge()
        return _bridge


@atexit.register
def _close_at_exit() -> None:
    if _bridge is not None:
        _bridge.close(timeout=1.0)
