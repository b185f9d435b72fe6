"""Who holds a queued write: writer ids and whether their process still lives.

A writer's id is ``host:pid:random``. Rows of the outbox are claimed by one
writer at a time; a writer on this host whose process is gone (or, in this
process, whose queue is closed) no longer holds anything.
"""

from __future__ import annotations

import os
import socket
import uuid
from collections.abc import Iterable
from pathlib import Path

__all__ = ["LIVE_OWNERS", "new_owner_id", "owner_is_dead"]

_HOST = socket.gethostname()

LIVE_OWNERS: set[str] = set()
"""Owner ids of the write queues open in this process: their rows are not orphans."""


def new_owner_id() -> str:
    """A writer's identity: ``host:pid:random``."""
    return f"{_HOST}:{os.getpid()}:{uuid.uuid4().hex[:12]}"


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # A killed child not yet reaped by its parent still answers signal 0.
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    return stat.rpartition(")")[2].split()[:1] != ["Z"]


def owner_is_dead(owner: str, live_here: Iterable[str] = ()) -> bool:
    """Whether the writer ``owner`` is known to be gone.

    Only owners on this host can be checked (by process id); for the others
    the lease decides.

    Args:
        owner: An id from :func:`new_owner_id`.
        live_here: The owner ids of the writers open in this process.
    """
    host, _, rest = owner.partition(":")
    pid_text, _, _ = rest.partition(":")
    if host != _HOST or not pid_text.isdigit():
        return False
    pid = int(pid_text)
    if pid == os.getpid():
        return owner not in set(live_here)
    return not _pid_alive(pid)
