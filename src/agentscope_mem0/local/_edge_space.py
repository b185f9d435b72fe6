"""Free space, checked before the engine writes.

Qdrant Edge keeps its segments in memory-mapped files that grow as points
arrive. On a full filesystem a write into a new page of such a file is not an
error the engine can return: the kernel sends SIGBUS and the process dies
(measured on qdrant-edge-py 0.9 with the data folder on a full tmpfs, at the
first write). So every engine write first checks the filesystem's free space
and refuses with :class:`~agentscope_mem0.DiskFullError` (a transient error:
the write stays queued and is sent again) while less than a reserve is left.

The reserve, :data:`DEFAULT_RESERVE` unless ``$AGENTSCOPE_MEM0_MIN_FREE_MB``
says otherwise, covers what one write can claim at once: measured, an ``add``
took at most 0.4 MB, but the engine also starts a new write-ahead-log
segment (32 MB) and rewrites segments when it flushes or optimizes.

An engine closed on a nearly full disk is not released either: dropping it
writes into those files too (measured: SIGBUS while the interpreter's exit
garbage-collected a shard left on a full tmpfs), so :func:`never_drop` keeps
it alive until the process ends; its write-ahead log holds every write.
"""

from __future__ import annotations

import ctypes
import logging
import os
import shutil
from pathlib import Path

from .._exceptions import ConfigurationError, DiskFullError

__all__ = ["DEFAULT_RESERVE", "RESERVE_ENV", "check_free_space", "never_drop", "reserve"]

logger = logging.getLogger(__name__)

RESERVE_ENV = "AGENTSCOPE_MEM0_MIN_FREE_MB"
"""Environment variable: megabytes the embedded store leaves free on its filesystem."""

DEFAULT_RESERVE = 64 * 1024 * 1024
"""Bytes left free by default: two write-ahead-log segments."""


def reserve() -> int:
    """The bytes to leave free (``$AGENTSCOPE_MEM0_MIN_FREE_MB`` or the default).

    Raises:
        ConfigurationError: The variable is not a non-negative number.
    """
    raw = os.environ.get(RESERVE_ENV)
    if raw is None or not raw.strip():
        return DEFAULT_RESERVE
    try:
        megabytes = float(raw)
    except ValueError:
        megabytes = -1.0
    if megabytes < 0:
        raise ConfigurationError(f"${RESERVE_ENV} must be a number of megabytes >= 0, got {raw!r}")
    return int(megabytes * 1024 * 1024)


def check_free_space(folder: Path, what: str) -> None:
    """Refuse an engine write while ``folder``'s filesystem is nearly full.

    Args:
        folder: The shard folder (or any folder on its filesystem).
        what: The write, for the message.

    Raises:
        DiskFullError: Less than :func:`reserve` bytes are free.
    """
    needed = reserve()
    if needed == 0:
        return
    try:
        free = shutil.disk_usage(folder).free
    except OSError as exc:  # the folder is gone or unreadable: the engine will say so
        logger.debug("free space of %s unknown: %s", folder, exc)
        return
    if free < needed:
        raise DiskFullError(
            f"not writing to the memory store {folder} ({what}): its disk has "
            f"{free / 1e6:.1f} MB free and the store keeps {needed / 1e6:.0f} MB free "
            f"(${RESERVE_ENV}), because writing on a full disk crashes its engine. The "
            "write stays queued and is sent again once space is freed"
        )


def never_drop(engine: object) -> None:
    """Keep ``engine`` alive until the process ends, even through the
    interpreter's final garbage collection (a reference nothing releases)."""
    ctypes.pythonapi.Py_IncRef(ctypes.py_object(engine))
