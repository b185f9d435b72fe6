"""The one thread that owns a SQLite connection, and how calls reach it.

A :class:`ConnectionThread` is a named daemon thread that runs calls one at a
time, in the order they were made; whoever opens a connection on it uses it
only through it, so the connection never changes threads (SQLite's own
``check_same_thread`` holds) and needs no lock.

* From an event loop, ``await thread.run(fn, *args)``: the call and an
  asyncio future go into the thread's queue as one pair, and the result (or
  the exception, ``BaseException`` included) comes back to the loop through
  ``call_soon_threadsafe``. A caller cancelled meanwhile does not stop the
  call (SQLite work is not taken back halfway); its result is dropped.
* From an event loop that must not wait in between, ``thread.send(fn,
  *args, then=callback)``: ``callback(result, error)`` runs on that loop once
  the call returned, straight from the thread (one turn of the loop, where
  a future's waiter takes two).
* From any other thread, ``thread.call(fn, *args)`` waits for the result;
  on the thread itself it runs at once, so a call may make further calls.
* ``close()`` / ``aclose()`` let the calls already queued run (and an
  optional last one, such as closing the connection), then end the thread;
  both are idempotent, and a call made afterwards raises
  :class:`~agentscope_mem0.InvalidStateError`.
* A thread object collected without being closed warns with
  ``ResourceWarning`` and ends its thread.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import dataclasses
import functools
import queue
import threading
import warnings
from collections.abc import Callable
from typing import Any, TypeVar

from .._exceptions import InvalidStateError

__all__ = ["ConnectionThread"]

T = TypeVar("T")

Then = Callable[[Any, BaseException | None], None]
"""What :meth:`ConnectionThread.send` calls back with: the result, or the error."""


@dataclasses.dataclass(frozen=True)
class _Callback:
    loop: asyncio.AbstractEventLoop
    then: Then


_Waiter = asyncio.Future[Any] | concurrent.futures.Future[Any] | _Callback
_Job = tuple[_Waiter, Callable[[], Any]]


class ConnectionThread:
    """A named thread that runs the calls on the connections it owns (see the module).

    Args:
        name: The thread's name (it shows in tracebacks and thread dumps).
        what: What it serves, for the messages (a file name, say).
    """

    def __init__(self, name: str, *, what: str | None = None) -> None:
        self.name = name
        self.what = what or name
        self._jobs: queue.SimpleQueue[_Job | None] = queue.SimpleQueue()
        self._closing = threading.Lock()
        self._closed = False
        # The thread gets the queue only, not this object: an object nobody
        # closed can still be collected (and say so).
        self._thread = threading.Thread(target=_serve, args=(self._jobs,), name=name, daemon=True)
        self._thread.start()

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` or :meth:`aclose` was called."""
        return self._closed

    def on_thread(self) -> bool:
        """Whether the caller runs on this thread."""
        return threading.get_ident() == self._thread.ident

    async def run(self, function: Callable[..., T], /, *args: Any, **kwargs: Any) -> T:
        """``function(*args, **kwargs)`` on this thread, awaited from an event loop.

        Raises:
            InvalidStateError: The thread is closed.
        """
        waiter: asyncio.Future[T] = asyncio.get_running_loop().create_future()
        self._put((waiter, functools.partial(function, *args, **kwargs)))
        return await waiter

    def send(self, function: Callable[..., Any], /, *args: Any, then: Then) -> None:
        """``function(*args)`` on this thread; ``then(result, error)`` runs on the
        calling loop afterwards (not when that loop has closed meanwhile).

        Raises:
            InvalidStateError: The thread is closed (``then`` is not called).
        """
        callback = _Callback(asyncio.get_running_loop(), then)
        self._put((callback, functools.partial(function, *args)))

    def call(self, function: Callable[..., T], /, *args: Any, **kwargs: Any) -> T:
        """``function(*args, **kwargs)`` on this thread; blocks until it returned.

        Raises:
            InvalidStateError: The thread is closed.
        """
        if self.on_thread():
            return function(*args, **kwargs)
        waiter: concurrent.futures.Future[T] = concurrent.futures.Future()
        self._put((waiter, functools.partial(function, *args, **kwargs)))
        return waiter.result()

    def close(self, last: Callable[[], Any] | None = None, *, wait: bool = True) -> None:
        """Run the calls queued so far and ``last``, then end the thread. Idempotent.

        Args:
            last: Run on the thread after every queued call (closing the
                connection); its exception, if any, is raised here.
            wait: Wait for the thread to end (never on the thread itself).
        """
        waiter: concurrent.futures.Future[Any] = concurrent.futures.Future()
        if not self._stop(waiter, last):
            return
        if wait and not self.on_thread():
            try:
                waiter.result()
            finally:
                self._thread.join()

    async def aclose(self, last: Callable[[], Any] | None = None) -> None:
        """:meth:`close`, awaited from an event loop."""
        waiter: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        if self._stop(waiter, last):
            await waiter

    def _stop(self, waiter: _Waiter, last: Callable[[], Any] | None) -> bool:
        with self._closing:
            if self._closed:
                return False
            self._closed = True
            self._jobs.put((waiter, last or _nothing))
            self._jobs.put(None)
            return True

    def _put(self, job: _Job) -> None:
        with self._closing:
            if self._closed:
                raise InvalidStateError(f"{self.what} is closed")
            self._jobs.put(job)

    def __del__(self) -> None:
        if getattr(self, "_closed", True):
            return
        warnings.warn(
            f"{self.what} was not closed; call its close() (or aclose()) when done",
            ResourceWarning,
            source=self,
            stacklevel=1,
        )
        self._closed = True
        self._jobs.put(None)


def _nothing() -> None:
    return None


def _serve(jobs: queue.SimpleQueue[_Job | None]) -> None:
    """The thread's loop: run each call, hand back its outcome, until told to stop."""
    while True:
        job = jobs.get()
        if job is None:
            return
        waiter, function = job
        try:
            result = function()
        except BaseException as exc:  # forwarded: it surfaces where the call was made
            _hand_back(waiter, None, exc)
        else:
            _hand_back(waiter, result, None)
        del job, waiter, function


def _hand_back(waiter: _Waiter, result: Any, error: BaseException | None) -> None:
    if isinstance(waiter, concurrent.futures.Future):
        _settle(waiter, result, error)
        return
    with contextlib.suppress(RuntimeError):  # the loop is closed: nobody waits any more
        if isinstance(waiter, _Callback):
            waiter.loop.call_soon_threadsafe(waiter.then, result, error)
        else:
            waiter.get_loop().call_soon_threadsafe(_settle, waiter, result, error)


def _settle(
    waiter: asyncio.Future[Any] | concurrent.futures.Future[Any],
    result: Any,
    error: BaseException | None,
) -> None:
    if waiter.done():  # cancelled while the call ran
        return
    if error is None:
        waiter.set_result(result)
    else:
        waiter.set_exception(error)
