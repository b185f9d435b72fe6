"""The package's own lock on a store folder, taken before the engine touches it.

Qdrant Edge locks its write-ahead log, but ``EdgeShard.load`` opens the
segments before it reaches that lock: measured on qdrant-edge-py 0.9, a
second process's refused ``load`` of a live folder left the live process's
next flush failing ("Tracker journal ... is shorter than expected") and its
close logging an error. So a process takes this lock first and only then
lets the engine open the folder; a second process is refused here, with the
engine's files untouched.

The lock is an exclusive ``flock`` on ``.<shard folder name>.lock`` beside the
shard folder (not inside it: the folder is the engine's). The kernel drops it
when the process ends, however it ends; ``/proc/locks`` names its holder
(see :mod:`agentscope_mem0.cli._lock`).
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

__all__ = ["ShardLock", "lock_path"]

logger = logging.getLogger(__name__)

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows: the engine's own WAL lock only
    fcntl = None  # type: ignore[assignment]


def lock_path(shard: Path) -> Path:
    """The lock file of the shard folder ``shard``."""
    return shard.parent / f".{shard.name}.lock"


class ShardLock:
    """An exclusive, process-wide lock on one shard folder.

    Args:
        shard: The shard folder (it need not exist yet).
    """

    def __init__(self, shard: Path) -> None:
        self.path = lock_path(shard)
        self._fd: int | None = None

    def acquire(self) -> bool:
        """Take the lock without waiting.

        Returns:
            False when another process holds it (nothing was touched).
        """
        if fcntl is None:
            return True
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            return False
        except BaseException:
            os.close(fd)
            raise
        # Who holds it, for a person reading the file (the kernel knows anyway).
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n".encode())
        self._fd = fd
        return True

    def release(self) -> None:
        """Let go of the lock. Idempotent."""
        fd, self._fd = self._fd, None
        if fd is not None:
            os.close(fd)  # closing the last descriptor drops the flock

    def forget(self) -> None:
        """After ``fork()``: drop the child's copy without unlocking the parent's."""
        fd, self._fd = self._fd, None
        if fd is not None:
            try:
                os.close(fd)
            except OSError:
                logger.debug("the inherited lock descriptor of %s was closed already", self.path)
