"""One memory as the package passes it around, whatever store it came from."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from .._text.dates import parse_time

__all__ = ["MemoryHit"]


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

    @property
    def date(self) -> str | None:
        """When the memory was last true: updated, else created."""
        return self.updated_at or self.created_at

    @property
    def when(self) -> datetime | None:
        """:attr:`date` read as an aware UTC datetime; ``None`` when undated."""
        return parse_time(self.date)
