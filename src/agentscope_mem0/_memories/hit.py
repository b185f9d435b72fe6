"""One memory as the package passes it around, whatever store it came from, and
mem0's answers read into it: mem0's OSS and hosted clients answer ``search`` and
``get_all`` in slightly different shapes (a dict with ``results`` or a bare list;
``memory``, ``text`` or ``data`` for the text)."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from .._text.dates import parse_time

__all__ = ["MemoryHit", "entries_of", "normalise_hits", "results_of"]


@dataclass(frozen=True, slots=True)
class MemoryHit:
    """One memory as mem0 returned it."""

    id: str | None
    memory: str
    score: float | None = None
    created_at: str | None = None
    updated_at: str | None = None
    metadata: dict[str, Any] | None = field(default=None, compare=False)
    """mem0's metadata of the memory (``said_at``, ``superseded_by``, ... see :mod:`.lifecycle`)."""
    agent_id: str | None = field(default=None, compare=False)
    """The agent it is filed under; ``None`` for the user's memories of no agent."""

    @property
    def date(self) -> str | None:
        """When the memory was last true: updated, else created."""
        return self.updated_at or self.created_at

    @property
    def when(self) -> datetime | None:
        """:attr:`date` read as an aware UTC datetime; ``None`` when undated."""
        return parse_time(self.date)


def results_of(raw: Any) -> list[Any]:
    """The result entries of a mem0 answer (``{"results": [...]}`` or a bare list)."""
    if isinstance(raw, dict):
        raw = raw.get("results", [])
    return list(raw) if isinstance(raw, list) else []


def normalise_hits(raw: Any) -> list[MemoryHit]:
    """Turn mem0's search/get_all answer (OSS or hosted shape) into hits."""
    hits: list[MemoryHit] = []
    for item in results_of(raw):
        if isinstance(item, str):
            if item.strip():
                hits.append(MemoryHit(id=None, memory=item))
            continue
        if not isinstance(item, dict):
            continue
        text = item.get("memory") or item.get("text") or item.get("data")
        if not text:
            continue
        score = item.get("score")
        hits.append(
            MemoryHit(
                id=item.get("id"),
                memory=str(text),
                score=float(score) if isinstance(score, int | float) else None,
                created_at=_as_text(item.get("created_at")),
                updated_at=_as_text(item.get("updated_at")),
                metadata=item["metadata"] if isinstance(item.get("metadata"), dict) else None,
                agent_id=_as_text(item.get("agent_id")) or None,
            )
        )
    return hits


def _as_text(value: Any) -> str | None:
    return None if value is None else str(value)


def entries_of(raw: Any) -> list[dict[str, Any]]:
    """The dict entries of a mem0 answer."""
    return [entry for entry in results_of(raw) if isinstance(entry, dict)]
