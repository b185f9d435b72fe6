"""Which of mem0's errors are worth retrying.

:meth:`Mem0Backend._call <agentscope_mem0._mem0.backend.Mem0Backend._call>` wraps
every failure of a mem0 call in the kind :func:`classify_error` names,
raised from mem0's own error; the writer and the command line ask it too.
"""

from __future__ import annotations

import asyncio

from .._exceptions import PermanentBackendError, TransientBackendError

__all__ = ["classify_error", "http_status"]

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


def classify_error(
    exc: BaseException,
) -> type[TransientBackendError | PermanentBackendError]:
    """Decide whether retrying ``exc`` may help."""
    if isinstance(
        exc,
        TransientBackendError | asyncio.TimeoutError | TimeoutError | ConnectionError,
    ):
        return TransientBackendError
    if isinstance(exc, PermanentBackendError):
        return PermanentBackendError
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
