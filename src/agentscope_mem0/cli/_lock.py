"""Who holds the embedded store's folder lock.

The embedded store takes an exclusive ``flock`` on a file in the data folder
(see :func:`lock_file`).
On Linux the kernel lists every held lock, with the holder's process id, in
``/proc/locks``; elsewhere the holder cannot be named.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

__all__ = ["LockHolder", "lock_file", "lock_holder"]


@dataclass(frozen=True)
class LockHolder:
    """The process holding a folder lock."""

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


def lock_file(folder: Path) -> Path:
    """The store's lock inside the data folder.

    The embedded store takes the package's own lock beside its memory
    collection, ``<folder>/edge/.agentscope_mem0.lock``, before the engine
    opens it (and the engine then locks the collection's ``wal`` folder). A
    release-0.1 folder not migrated yet has qdrant-client's ``qdrant/.lock``,
    held by a process of a release that still ran that engine.
    """
    from ..local._edge import lock_path
    from ..local._folder import COLLECTION, FolderLayout

    layout = FolderLayout(folder)
    ours = lock_path(layout.edge / COLLECTION)
    if ours.is_file():
        return ours
    edge_wal = layout.edge / COLLECTION / "wal"  # a folder written before that lock
    if edge_wal.is_dir():
        return edge_wal
    return layout.qdrant / ".lock"


def _command_of(pid: int) -> str:
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return ""
    text = " ".join(part.decode(errors="replace") for part in raw.split(b"\0") if part)
    return " ".join(text.split())


def lock_holder(folder: Path, *, locks_table: Path = Path("/proc/locks")) -> LockHolder | None:
    """The process holding the data folder's store lock, if it can be found.

    Args:
        folder: The data folder.
        locks_table: The kernel's lock table (a parameter for tests).

    Returns:
        The holder; ``None`` when the folder is free or the holder is unknown
        (no ``/proc/locks``).
    """
    try:
        stat = lock_file(folder).stat()
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
