"""What :meth:`~.queue.WriteQueue.submit_facts` tells the caller about a write."""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["WriteResult"]


@dataclass(frozen=True)
class WriteResult:
    """Where a write stands after :meth:`WriteQueue.submit_facts`."""

    state: str
    """``"stored"``, ``"queued"`` (recorded, stored in the background),
    ``"failed"`` (kept as failed, retryable) or ``"lost"`` (not recorded)."""
    memories: list[str] = field(default_factory=list)
    """What mem0 stored, when ``state == "stored"``."""
    recorded: bool = True
    """False when the outbox could not record it (a full disk): until mem0
    stores it, it is kept in this process's memory only."""
