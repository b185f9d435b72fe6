"""Forgetting a memory: its repeats go with it, and what it hid comes back
only when nothing newer says otherwise; and undoing a wrong supersede or merge.

A memory hides others (:mod:`.lifecycle`): the repeats merged into it
(``duplicates``) and the older memories it superseded (``supersedes``).
:func:`forget` deletes the memory and its repeats, since they state the fact
the user wants gone, and then decides, for each memory it had superseded,
what that one is now:

* when the forgotten memory was itself replaced (``superseded_by``) or merged
  into another (``duplicate_of``), that newer memory replaces it in turn: the
  user moved from Hangzhou to Beijing to Shanghai, and forgetting "moved to
  Beijing" leaves "lives in Hangzhou" replaced by "moved to Shanghai";
* when a current memory superseded it too, or states the same fact (by the
  words, :func:`~.._text.same_fact.first_repeat`) and is shown wherever it
  is, it stays hidden behind that one (superseded, or merged as its repeat);
* otherwise it is current again, and whoever forgets is told
  (:class:`Forgotten`).

Every path that forgets (``Mem0Backend.forget``/``delete``, the
``forget_memory`` tool, the CLI's ``forget``, the inspector) comes here.

:func:`restore` undoes one verdict of the judgement instead: a memory
superseded or merged wrongly ("not a change") is current again, the memory
that hid it no longer lists it, and the memory keeps what was undone
(``restored``), so its history shows it (``Mem0Backend.restore``, the CLI's
``restore``).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Protocol

from .._scope import Scope
from .._text.dates import iso
from .._text.lexicon import segmenter_ready
from .._text.same_fact import fact_shape, first_repeat, user_names
from .hit import MemoryHit, normalise_hits
from .lifecycle import (
    DUPLICATE_OF,
    DUPLICATE_REASON,
    DUPLICATES,
    RESTORED,
    SUPERSEDED_BY,
    SUPERSEDED_REASON,
    SUPERSEDES,
    VALID_UNTIL,
    ids_of,
)

__all__ = ["Forgotten", "Restored", "forget", "restore"]

logger = logging.getLogger(__name__)

_MAX_REPEATS = 100
"""Repeats forgotten with one memory at most (a fact said that often is a loop)."""

_LOOKED_AT = 5
"""Current memories most like a hidden one that are checked before it comes back."""


class Memories(Protocol):
    """What forgetting needs of :class:`~agentscope_mem0._mem0.backend.Mem0Backend`
    (which calls it)."""

    async def get(self, memory_id: str) -> dict[str, Any] | None: ...

    async def update_metadata(self, memory_id: str, changes: dict[str, Any]) -> bool: ...

    async def search(self, query: str, scope: Scope, *, top_k: int) -> list[MemoryHit]: ...

    async def delete_only(self, memory_id: str) -> bool: ...


@dataclass(frozen=True)
class Forgotten:
    """What forgetting one memory did."""

    deleted: bool
    """Whether the memory was there to delete."""
    current_again: tuple[str, ...] = ()
    """Ids of the memories it had superseded that are current again."""
    repeats: tuple[MemoryHit, ...] = ()
    """Its repeats (the same fact said again, merged into it), forgotten with it."""


async def forget(memories: Memories, memory_id: str) -> Forgotten:
    """Delete ``memory_id`` and its repeats; bring back what it superseded
    unless something newer says otherwise (see the module docstring).

    The memories coming back are marked before the memory is deleted, so a
    stop halfway hides nothing for good: forgetting it again finishes.

    Args:
        memories: The door to mem0.
        memory_id: The memory to forget.

    Returns:
        What was deleted and what is current again.
    """
    entry = await memories.get(memory_id)
    if entry is None:
        return Forgotten(await memories.delete_only(memory_id))
    metadata = _metadata(entry)
    repeats = await _repeats(memories, memory_id, metadata)
    gone = {memory_id, *(hit.id for hit in repeats if hit.id)}
    olds = await _superseded(
        memories, {memory_id: metadata, **{h.id: h.metadata or {} for h in repeats if h.id}}
    )
    heir = await _heir(memories, metadata, gone)
    for hit in repeats:
        if hit.id:
            await memories.delete_only(hit.id)
    back: list[str] = []
    if heir is not None:
        # The memory that replaced the forgotten one replaces what it had replaced.
        why = f"forgot memory {memory_id}, which had replaced it; memory {_id(heir)} replaced that"
        for old in olds:
            await memories.update_metadata(
                _id(old), {SUPERSEDED_BY: _id(heir), SUPERSEDED_REASON: why}
            )
        await _relink(memories, heir, gone, [_id(old) for old in olds])
    else:
        for old in olds:
            if await _still_hidden(memories, old, gone) is None:
                await memories.update_metadata(
                    _id(old), {SUPERSEDED_BY: None, SUPERSEDED_REASON: None, VALID_UNTIL: None}
                )
                back.append(_id(old))
    deleted = await memories.delete_only(memory_id)
    logger.info(
        "memory %s is forgotten with %d repeats; %d memories it replaced are current again",
        memory_id,
        len(repeats),
        len(back),
    )
    return Forgotten(deleted, tuple(back), tuple(repeats))


def _metadata(entry: dict[str, Any]) -> dict[str, Any]:
    metadata = entry.get("metadata")
    return metadata if isinstance(metadata, dict) else {}


def _id(entry: dict[str, Any]) -> str:
    return str(entry["id"])


async def _repeats(memories: Memories, memory_id: str, metadata: dict[str, Any]) -> list[MemoryHit]:
    """The repeats merged into ``memory_id``, and theirs, that still say so."""
    found: list[MemoryHit] = []
    seen = {memory_id}
    waiting = [(memory_id, other) for other in ids_of(metadata.get(DUPLICATES))]
    while waiting and len(found) < _MAX_REPEATS:
        kept, other_id = waiting.pop(0)
        if other_id in seen:
            continue
        seen.add(other_id)
        entry = await memories.get(other_id)
        if entry is None or _metadata(entry).get(DUPLICATE_OF) != kept:
            continue  # gone, or merged elsewhere since
        found += normalise_hits([{**entry, "id": other_id}])
        waiting += [(other_id, more) for more in ids_of(_metadata(entry).get(DUPLICATES))]
    return found


async def _superseded(
    memories: Memories, forgotten: dict[str, dict[str, Any]]
) -> list[dict[str, Any]]:
    """The memories that the ``forgotten`` (id -> metadata) superseded and that
    still name one of them."""
    olds: dict[str, dict[str, Any]] = {}
    for memory_id, metadata in forgotten.items():
        for old_id in ids_of(metadata.get(SUPERSEDES)):
            old = await memories.get(old_id)
            if old is not None and _metadata(old).get(SUPERSEDED_BY) == memory_id:
                olds.setdefault(old_id, {**old, "id": old_id})
    return list(olds.values())


async def _heir(
    memories: Memories, metadata: dict[str, Any], gone: set[str]
) -> dict[str, Any] | None:
    """The memory that replaced the forgotten one or that it was merged into, if any."""
    for field in (SUPERSEDED_BY, DUPLICATE_OF):
        other_id = metadata.get(field)
        if isinstance(other_id, str) and other_id and other_id not in gone:
            entry = await memories.get(other_id)
            if entry is not None:
                return {**entry, "id": other_id}
    return None


async def _relink(
    memories: Memories, heir: dict[str, Any], gone: set[str], replaced: list[str]
) -> None:
    """Store ``heir``'s links without the forgotten memories, and with the
    memories it ``replaced`` in their place."""
    metadata = _metadata(heir)
    supersedes = [i for i in ids_of(metadata.get(SUPERSEDES)) if i not in gone]
    supersedes += [i for i in replaced if i not in supersedes]
    duplicates = [i for i in ids_of(metadata.get(DUPLICATES)) if i not in gone]
    changes = {SUPERSEDES: supersedes or None, DUPLICATES: duplicates or None}
    if any(ids_of(metadata.get(field)) != (value or []) for field, value in changes.items()):
        await memories.update_metadata(_id(heir), changes)


async def _still_hidden(memories: Memories, old: dict[str, Any], gone: set[str]) -> str | None:
    """Keep ``old`` hidden when a current memory superseded it too, or states its
    fact and is shown wherever ``old`` is; returns that memory's id."""
    user_id, text = old.get("user_id"), old.get("memory")
    if not isinstance(user_id, str) or not user_id or not isinstance(text, str) or not text:
        return None
    hits = await memories.search(text, Scope(user_id), top_k=_LOOKED_AT)
    others = [h for h in hits if h.id and h.id != _id(old) and h.id not in gone]
    for hit in others:
        if _id(old) in ids_of((hit.metadata or {}).get(SUPERSEDES)):
            why = f"memory {hit.id} had superseded it too"
            await memories.update_metadata(
                _id(old), {SUPERSEDED_BY: hit.id, SUPERSEDED_REASON: why}
            )
            return hit.id
    agent = old.get("agent_id") or None
    shown = [h for h in others if h.agent_id in (None, agent)]
    await segmenter_ready([text, *(h.memory for h in shown)])
    names = user_names(user_id, [text, *(h.memory for h in shown)])
    at = await first_repeat(fact_shape(text, names), [fact_shape(h.memory, names) for h in shown])
    if at is None:
        return None
    kept = shown[at]
    assert kept.id is not None  # others have ids
    await memories.update_metadata(
        _id(old),
        {
            SUPERSEDED_BY: None,
            SUPERSEDED_REASON: None,
            DUPLICATE_OF: kept.id,
            DUPLICATE_REASON: "words: the same holder, relation, values and content words",
            VALID_UNTIL: iso(datetime.now(UTC)),
        },
    )
    duplicates = ids_of((kept.metadata or {}).get(DUPLICATES))
    await memories.update_metadata(kept.id, {DUPLICATES: [*duplicates, _id(old)]})
    return kept.id


@dataclass(frozen=True)
class Restored:
    """What undoing a supersede or a merge did."""

    memory_id: str
    """The memory current again."""
    was: str
    """``"superseded"`` or ``"duplicate"``: what it had been."""
    by: str
    """The memory that had hidden it (superseded it, or kept its fact)."""
    reason: str | None
    """The reason that had been given (the readings or the rule), if one was kept."""


async def restore(memories: Memories, memory_id: str) -> Restored | None:
    """Make a superseded or merged memory current again: a change or a repeat read
    wrongly ("not a change"), undone.

    The memory loses its ``superseded_by`` (or ``duplicate_of``), its
    ``valid_until`` and its reason; the memory that had hidden it no longer
    lists it; and the memory keeps a ``restored`` entry saying when, which
    memory had hidden it, how and why, so its history shows the undoing.

    Args:
        memories: The door to mem0.
        memory_id: The memory to make current again.

    Returns:
        What was undone, or ``None`` when the memory is gone or was current.
    """
    entry = await memories.get(memory_id)
    if entry is None:
        return None
    metadata = _metadata(entry)
    for field, why, link, was in (
        (SUPERSEDED_BY, SUPERSEDED_REASON, SUPERSEDES, "superseded"),
        (DUPLICATE_OF, DUPLICATE_REASON, DUPLICATES, "duplicate"),
    ):
        other_id = metadata.get(field)
        if not isinstance(other_id, str) or not other_id:
            continue
        reason = metadata.get(why) if isinstance(metadata.get(why), str) else None
        undone = {"at": iso(datetime.now(UTC)), "was": was, "by": other_id, "reason": reason}
        history = [item for item in metadata.get(RESTORED) or [] if isinstance(item, dict)]
        await memories.update_metadata(
            memory_id,
            {field: None, why: None, VALID_UNTIL: None, RESTORED: [*history, undone]},
        )
        other = await memories.get(other_id)
        if other is not None:
            listed = ids_of(_metadata(other).get(link))
            if memory_id in listed:
                rest = [i for i in listed if i != memory_id]
                await memories.update_metadata(other_id, {link: rest or None})
        logger.info("memory %s is current again (it was %s by %s)", memory_id, was, other_id)
        return Restored(memory_id, was, other_id, reason)
    return None
