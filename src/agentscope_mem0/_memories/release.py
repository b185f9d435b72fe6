"""What forgetting a memory brings back.

A superseded memory or a repeat (:mod:`.lifecycle`) is hidden because of
another memory. When that one is deleted, what it hid is true again as far
as the store knows: the memories it superseded become current, and so does
the oldest repeat merged into it, which keeps the other repeats. Forgetting
a fact said twice therefore takes forgetting it twice, as the user said it
twice; whoever deletes is told what came back (:class:`Forgotten`).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any, Protocol

from .lifecycle import (
    DUPLICATE_OF,
    DUPLICATES,
    SUPERSEDED_BY,
    SUPERSEDES,
    VALID_UNTIL,
    ids_of,
)

__all__ = ["Forgotten", "release"]

logger = logging.getLogger(__name__)


class Memories(Protocol):
    """What releasing needs of :class:`~agentscope_mem0._mem0.backend.Mem0Backend`
    (which calls it)."""

    async def get(self, memory_id: str) -> dict[str, Any] | None: ...

    async def update_metadata(self, memory_id: str, changes: dict[str, Any]) -> bool: ...


@dataclass(frozen=True)
class Forgotten:
    """What deleting one memory did."""

    deleted: bool
    """Whether the memory was there to delete."""
    current_again: tuple[str, ...] = ()
    """Ids of the memories it hid that are current again (those it superseded,
    and the oldest of its repeats)."""


async def release(backend: Memories, memory_id: str, metadata: Any) -> tuple[str, ...]:
    """Make current again what ``memory_id``, about to be deleted, hides.

    Args:
        backend: The door to mem0.
        memory_id: The memory being deleted.
        metadata: Its metadata.

    Returns:
        The ids of the memories that became current again.
    """
    if not isinstance(metadata, dict):
        return ()
    back = await _release_superseded(backend, memory_id, metadata)
    heir = await _release_duplicates(backend, memory_id, metadata)
    return (*back, heir) if heir is not None else back


async def _metadata_of(backend: Memories, memory_id: str) -> dict[str, Any] | None:
    entry = await backend.get(memory_id)
    metadata = entry.get("metadata") if entry else None
    return metadata if isinstance(metadata, dict) else None


async def _release_superseded(
    backend: Memories, memory_id: str, metadata: dict[str, Any]
) -> tuple[str, ...]:
    """The memories ``memory_id`` superseded and still names, made current again."""
    released = []
    for old_id in ids_of(metadata.get(SUPERSEDES)):
        old = await _metadata_of(backend, old_id)
        if old is not None and old.get(SUPERSEDED_BY) == memory_id:
            await backend.update_metadata(old_id, {SUPERSEDED_BY: None, VALID_UNTIL: None})
            released.append(old_id)
    if released:
        logger.info(
            "memory %s is forgotten: %d memories it replaced are current again",
            memory_id,
            len(released),
        )
    return tuple(released)


async def _release_duplicates(
    backend: Memories, memory_id: str, metadata: dict[str, Any]
) -> str | None:
    """The oldest repeat merged into ``memory_id``, made current again; the
    other repeats become its own, so the fact is stated once again rather than
    by every copy at once."""
    merged = []
    for other_id in ids_of(metadata.get(DUPLICATES)):
        other = await _metadata_of(backend, other_id)
        if other is not None and other.get(DUPLICATE_OF) == memory_id:
            merged.append(other_id)
    if not merged:
        return None
    heir, rest = merged[0], merged[1:]
    await backend.update_metadata(
        heir, {DUPLICATE_OF: None, VALID_UNTIL: None, DUPLICATES: rest or None}
    )
    for other_id in rest:
        await backend.update_metadata(other_id, {DUPLICATE_OF: heir})
    logger.info("memory %s is forgotten: its repeat %s is current again", memory_id, heir)
    return heir
