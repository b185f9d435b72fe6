"""Which lock file of a data folder tells who holds the embedded store.

The embedded store takes an exclusive ``flock`` on a file in the data folder
(see :func:`lock_file`); :func:`~agentscope_mem0.local._lock_holder.holder_of`
names the process holding it.
"""

from __future__ import annotations

from pathlib import Path

from ..local._lock_holder import LockHolder, holder_of

__all__ = ["LockHolder", "lock_file", "lock_holder"]


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


def lock_holder(folder: Path, *, locks_table: Path = Path("/proc/locks")) -> LockHolder | None:
    """The process holding the data folder's store lock, if it can be found.

    Args:
        folder: The data folder.
        locks_table: The kernel's lock table (a parameter for tests).

    Returns:
        The holder; ``None`` when the folder is free or the holder is unknown
        (no ``/proc/locks``).
    """
    return holder_of(lock_file(folder), locks_table=locks_table)
