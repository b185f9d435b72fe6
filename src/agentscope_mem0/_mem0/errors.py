"""The one place where mem0's errors (and its stores') become the package's own.

:func:`backend_error` names the kind, :class:`TransientBackendError` (retrying
may help) or :class:`PermanentBackendError`; :func:`mapped_errors` raises it
from the original for a block of code. The backend's calls of a mem0 client,
its metadata updates and the command line's vector-store and history-database
calls all go through them; everything downstream (the write queue's retries,
the command line's exit codes) decides by the package's types alone.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from .._exceptions import (
    BackendError,
    ConfigurationError,
    PermanentBackendError,
    TransientBackendError,
)

__all__ = ["backend_error", "http_status", "is_not_found", "mapped_errors"]

_TRANSIENT_NAMES = (
    "timeout",
    "connect",
    "network",
    "unavailable",
    "ratelimit",
    "rate limit",
    "too many requests",
    "temporarily",
    "locked",
    "busy",
)


def http_status(exc: BaseException) -> int | None:
    """The HTTP status behind ``exc`` or the errors it was raised from, if any."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        # mem0's hosted client (mem0ai 2.2) raises mem0.exceptions.MemoryError
        # subclasses that keep the status only in `debug_info`.
        debug = getattr(current, "debug_info", None)
        for status in (
            getattr(current, "status_code", None),
            getattr(getattr(current, "response", None), "status_code", None),
            debug.get("status_code") if isinstance(debug, dict) else None,
        ):
            if isinstance(status, int) and not isinstance(status, bool):
                return status
        current = current.__cause__ or current.__context__
    return None


def is_not_found(exc: BackendError) -> bool:
    """Whether mem0 failed because the memory asked for is not there."""
    cause = exc.__cause__
    return (
        http_status(exc) == 404
        or "notfound" in type(cause).__name__.lower()
        or "not found" in str(cause).lower()
        or "404" in str(exc)
    )


def backend_error(exc: BaseException, what: str) -> BackendError:
    """mem0's failure ``exc`` while doing ``what`` as the package's error.

    Raise it ``from exc``, so that ``__cause__`` keeps mem0's original.

    Args:
        exc: What mem0, its vector store or its history database raised.
        what: The operation, for the message (``"search"``, ``"metadata update"``).
    """
    detail = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
    return _kind(exc)(f"mem0 {what} failed: {detail}")


@contextlib.contextmanager
def mapped_errors(what: str) -> Iterator[None]:
    """Raise a failure inside the block as :func:`backend_error` names it.

    The package's own :class:`BackendError` and :class:`ConfigurationError`
    (and cancellation) pass unchanged.
    """
    try:
        yield
    except (BackendError, ConfigurationError):
        raise
    except Exception as exc:
        raise backend_error(exc, what) from exc


def _kind(exc: BaseException) -> type[TransientBackendError | PermanentBackendError]:
    """Whether retrying ``exc`` may help."""
    if isinstance(exc, TimeoutError | ConnectionError):
        return TransientBackendError
    status = http_status(exc)
    if status is not None:
        if status == 429 or status >= 500 or status == 408:
            return TransientBackendError
        return PermanentBackendError
    text = f"{type(exc).__name__} {exc}".lower()
    if any(word in text for word in _TRANSIENT_NAMES):
        return TransientBackendError
    if isinstance(exc, ValueError | TypeError | KeyError):
        return PermanentBackendError
    # An unknown failure is retried (a bounded number of times) rather than
    # dropped: losing a write is worse than a wasted attempt.
    return TransientBackendError
