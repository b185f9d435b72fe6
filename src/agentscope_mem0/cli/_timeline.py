"""What the CLI shows of the memories' timeline (see ``agentscope_mem0._memories.lifecycle``).

``list`` and ``search`` leave superseded and duplicate memories out unless
``--all``, which marks them; ``history ID`` adds the memories the given one
replaced, extends or repeats, and those that replaced, extend or repeat it.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from .._memories.lifecycle import (
    DUPLICATE_OF,
    DUPLICATES,
    EXTENDS,
    SUPERSEDED_BY,
    SUPERSEDES,
    VALID_UNTIL,
)

if TYPE_CHECKING:
    from ._records import MemoryRecord

__all__ = ["chain", "current", "is_superseded", "mark"]

_T = TypeVar("_T")

ALL_HELP = "Include memories a newer one superseded or that repeat another (marked)."


def is_superseded(record: MemoryRecord) -> bool:
    """Whether a newer memory replaced ``record``, or it repeats a memory kept instead."""
    return bool(record.metadata.get(SUPERSEDED_BY) or record.metadata.get(DUPLICATE_OF))


def current(items: Iterable[_T], *, show_all: bool) -> list[_T]:
    """``items`` (records, or tuples whose first element is one) without superseded ones."""
    out = []
    for item in items:
        rec: MemoryRecord = item[0] if isinstance(item, tuple) else item  # type: ignore[assignment]
        if show_all or not is_superseded(rec):
            out.append(item)
    return out


def mark(record: MemoryRecord, text: str) -> str:
    """``text`` with ``(superseded <date> by <id>)`` or ``(duplicate of <id>)`` after it."""
    if not is_superseded(record):
        return text
    if record.metadata.get(DUPLICATE_OF):
        return f"{text} (duplicate of {record.metadata[DUPLICATE_OF]})"
    until = str(record.metadata.get(VALID_UNTIL) or "")[:10]
    since = f" {until}" if until else ""
    return f"{text} (superseded{since} by {record.metadata[SUPERSEDED_BY]})"


def _ids(value: Any) -> list[str]:
    if isinstance(value, str) and value:
        return [value]
    return [v for v in value if isinstance(v, str)] if isinstance(value, list) else []


def chain(record: MemoryRecord, scope_records: Sequence[MemoryRecord]) -> list[dict[str, Any]]:
    """The timeline links of ``record``, both ways, as history-like entries.

    Each entry has ``event`` (``SUPERSEDES``, ``SUPERSEDED_BY``, ``EXTENDS``,
    ``EXTENDED_BY``, ``DUPLICATE_OF``, ``DUPLICATES``), the other memory's
    ``memory_id`` and ``memory``, and the older/newer text as ``old_memory``/``new_memory``.
    """
    by_id = {r.id: r for r in scope_records}
    meta = record.metadata
    links: list[tuple[str, str]] = [(SUPERSEDES.upper(), i) for i in _ids(meta.get(SUPERSEDES))]
    links += [(SUPERSEDED_BY.upper(), i) for i in _ids(meta.get(SUPERSEDED_BY))]
    links += [(EXTENDS.upper(), i) for i in _ids(meta.get(EXTENDS))]
    links += [(DUPLICATE_OF.upper(), i) for i in _ids(meta.get(DUPLICATE_OF))]
    links += [
        (DUPLICATES.upper(), r.id)
        for r in scope_records
        if record.id in _ids(r.metadata.get(DUPLICATE_OF))
    ]
    links += [
        ("EXTENDED_BY", r.id) for r in scope_records if record.id in _ids(r.metadata.get(EXTENDS))
    ]
    links += [
        (SUPERSEDED_BY.upper(), r.id)
        for r in scope_records
        if record.id in _ids(r.metadata.get(SUPERSEDES))
        and r.id not in _ids(meta.get(SUPERSEDED_BY))
    ]
    out = []
    for event, other_id in dict.fromkeys(links):
        other = by_id.get(other_id)
        text = other.text if other else None
        newer = event in ("SUPERSEDED_BY", "EXTENDED_BY", "DUPLICATES")
        out.append(
            {
                "event": event,
                "memory_id": other_id,
                "memory": text,
                "created_at": other.created_at if other else None,
                "old_memory": record.text if newer else text,
                "new_memory": text if newer else record.text,
            }
        )
    return out
