"""Who holds a lock file: the process named in the kernel's lock table.

The embedded store takes an exclusive ``flock`` on a file in its folder
before the engine opens it (and the engine, or release 0.1's qdrant-client,
takes locks of its own). On Linux the kernel lists every held lock, with the
holder's process id, in ``/proc/locks``; elsewhere the holder cannot be named.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

__all__ = ["LockHolder", "describe_holder", "holder_of"]


@dataclass(frozen=True)
class LockHolder:
    """The process holding a lock."""

    pid: int
    command: str
    """Its command line, or ``""`` when it cannot be read."""

    @property
    def is_self(self) -> bool:
        """Whether it is this process."""
        return self.pid == os.getpid()

    def describe(self) -> str:
        """``pid 123 (python app.py)``."""
        command = self.command if len(self.command) <= 100 else self.command[:99] + "…"
        return f"pid {self.pid}" + (f" ({command})" if command else "")


def _command_of(pid: int) -> str:
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return ""
    text = " ".join(part.decode(errors="replace") for part in raw.split(b"\0") if part)
    return " ".join(text.split())


def holder_of(lock: Path, *, locks_table: Path = Path("/proc/locks")) -> LockHolder | None:
    """The process holding a lock on the file (or folder) ``lock``, if it can be found.

    Args:
        lock: The locked file or folder.
        locks_table: The kernel's lock table (a parameter for tests).

    Returns:
        The holder; ``None`` when the file is not locked, or the holder is
        unknown (no ``/proc/locks``).
    """
    try:
        stat = lock.stat()
        table = locks_table.read_text()
    except OSError:
        return None
    device = f"{os.major(stat.st_dev):02x}:{os.minor(stat.st_dev):02x}"
    same_inode: list[int] = []
    for line in table.splitlines():
        # "1: FLOCK  ADVISORY  WRITE 4242 fe:00:2146479 0 EOF"; "1: -> ..." lines wait.
        parts = line.split()
        if len(parts) < 6 or parts[1] == "->" or not parts[4].isdigit():
            continue
        where, _, inode = parts[5].rpartition(":")
        if inode != str(stat.st_ino):
            continue
        if where == device:
            return LockHolder(pid=int(parts[4]), command=_command_of(int(parts[4])))
        # Overlay filesystems (containers) report the underlying device there.
        same_inode.append(int(parts[4]))
    if len(same_inode) == 1:
        return LockHolder(pid=same_inode[0], command=_command_of(same_inode[0]))
    return None


def describe_holder(lock: Path) -> str:
    """Who holds ``lock``, for an error message: ``another process, pid 123
    (python app.py)``, or ``another process`` when it cannot be named."""
    holder = holder_of(lock)
    if holder is None:
        return "another process"
    if holder.is_self:
        return f"this process ({holder.describe()}), through another client"
    return f"another process, {holder.describe()}"
