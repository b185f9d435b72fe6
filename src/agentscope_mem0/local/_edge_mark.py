"""The store's high-water mark: how many memories it must hold when it opens.

Qdrant Edge reopens whatever files it finds: measured on qdrant-edge-py 0.9,
a shard whose ``wal/`` was deleted after a crash opened empty (30 of 30
memories gone) and one whose ``segments/`` were deleted after a clean close
opened with 1 of 30, both without a word. So the package keeps its own
record beside the shard folder, ``.<shard folder name>.mark.json``:

* after every sync (a flush or a close), the number of points the shard
  holds, all of them on disk now;
* before a deletion, that number lowered by the most the deletion can remove,
  so that a deletion the write-ahead log replays never looks like a loss.

When the shard opens with fewer points than the mark, or its write-ahead
log is gone, :func:`check_opened` refuses it with :class:`StoreDamagedError`,
naming the folder and the ways out, instead of serving (and then writing
over) a store that lost data.
"""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path

from .._exceptions import StoreDamagedError

__all__ = ["HighWaterMark", "check_before_open", "mark_path"]

logger = logging.getLogger(__name__)


def mark_path(shard: Path) -> Path:
    """The mark file of the shard folder ``shard``."""
    return shard.parent / f".{shard.name}.mark.json"


def _ways_out(mark: Path) -> str:
    return (
        "Restore the folder from a copy, or its memories from an export "
        "(agentscope-mem0 import); or, to serve what is left and accept the loss, "
        f"delete {mark} and open it again. Writes still in the outbox are stored "
        "again once it opens"
    )


def check_before_open(shard: Path) -> None:
    """Refuse a shard whose write-ahead log is missing while its mark says it held data.

    The engine would create a new, empty log and serve the store without the
    writes the old one held.

    Raises:
        StoreDamagedError: The ``wal`` folder is gone.
    """
    mark = mark_path(shard)
    if mark.exists() and not (shard / "wal").is_dir():
        raise StoreDamagedError(
            f"the memory store {shard} lost its write-ahead log (wal/ is missing): the "
            f"writes it held are gone. {_ways_out(mark)}",
            path=shard,
        )


class HighWaterMark:
    """The mark of one shard folder.

    Args:
        shard: The shard folder.
    """

    def __init__(self, shard: Path) -> None:
        self.shard = shard
        self.path = mark_path(shard)
        self.points = self._read()
        """The points the shard held at its last sync (``None``: no mark yet)."""

    def _read(self) -> int | None:
        try:
            return int(json.loads(self.path.read_text(encoding="utf-8"))["points"])
        except FileNotFoundError:
            return None
        except (OSError, ValueError, KeyError, TypeError) as exc:
            # A mark that cannot be read protects nothing; it is rewritten at the next sync.
            logger.warning(
                "the store's mark %s is unreadable (%s); starting a new one", self.path, exc
            )
            return None

    def check_opened(self, points: int) -> None:
        """Refuse a shard that opened with fewer points than the mark.

        Raises:
            StoreDamagedError: Points are missing.
        """
        if self.points is not None and points < self.points:
            raise StoreDamagedError(
                f"the memory store {self.shard} holds {points} memories but held "
                f"{self.points} when it was last synced: some of its files are missing "
                f"or older than the rest. {_ways_out(self.path)}",
                path=self.shard,
            )

    def synced(self, points: int) -> None:
        """Record that the shard holds ``points`` points, all of them on disk."""
        if points != self.points:
            self._write(points)

    def lower(self, removable: int) -> None:
        """Lower the mark before a deletion that removes at most ``removable`` points."""
        if self.points is not None and removable > 0:
            self._write(max(0, self.points - removable))

    def _write(self, points: int) -> None:
        temporary = self.path.with_name(self.path.name + ".tmp")
        try:
            temporary.write_text(json.dumps({"points": points}) + "\n", encoding="utf-8")
            os.replace(temporary, self.path)
        except OSError as exc:  # a full disk: an older mark only misses a loss, never invents one
            logger.warning("could not update the store's mark %s: %s", self.path, exc)
            return
        self.points = points
