"""What one write's judgement changes, planned before anything is stored.

The time judgement (:mod:`.judge`) decides pair by pair; :class:`ChangePlan`
turns its verdicts into metadata changes (:mod:`.._memories.lifecycle`), keeps
the rules that span pairs (the later said of two conflicting memories wins;
at most ``max_superseded`` memories superseded per write; a repeat merged
into the memory kept) and stores them in an order that hides nothing if it
stops halfway.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from .._memories.lifecycle import (
    DUPLICATE_OF,
    DUPLICATES,
    EVENT_DATE,
    EXTENDS,
    SAID_AT,
    SUPERSEDED_BY,
    SUPERSEDES,
    VALID_FROM,
    VALID_UNTIL,
    event_date_of,
    ids_of,
    retired_since,
)
from .._text.dates import parse_time
from .consolidate import duplicate_marks
from .judge_pairs import FACT_ANSWER, FACT_QUESTION, Fact, question_of_metadata

if TYPE_CHECKING:
    from .._mem0.backend import Mem0Backend
    from .._memories.hit import MemoryHit
    from .._scope import Scope

__all__ = ["ChangePlan", "fact_of_hit", "fact_of_result"]

logger = logging.getLogger(__name__)

_HIDING = (SUPERSEDED_BY, DUPLICATE_OF)
"""Changes that take a memory out of reads: stored after every other change."""


class ChangePlan:
    """The metadata changes of one write's judgement, by memory id.

    Args:
        max_superseded: Older memories the write may supersede.
        counts: The judge's counters, updated in place (``superseded``,
            ``capped``, ``extended``, ``merged``, ``dated``).
    """

    def __init__(self, max_superseded: int, counts: dict[str, int]) -> None:
        self.changes: dict[str, dict[str, Any]] = {}
        self.replaced: set[str] = set()
        """Ids superseded by this write (no longer candidates)."""
        self._max_superseded = max_superseded
        self._counts = counts

    def date(self, fact: Fact) -> None:
        """Store ``fact``'s event date, when its text gave one."""
        if fact.event_date:
            self.changes.setdefault(fact.id, {})[EVENT_DATE] = fact.event_date
            self._counts["dated"] += 1

    def supersede(self, new: Fact, old: Fact) -> None:
        """Mark the earlier said of ``new`` and ``old`` superseded by the other, within the cap."""
        # The later said one wins, so a backfilled older fact does not hide a newer one.
        newer, older = (new, old) if _said_later(new, old) else (old, new)
        if older.id in self.replaced:
            return
        if len(self.replaced) >= self._max_superseded:
            self._counts["capped"] += 1
            return
        self.replaced.add(older.id)
        self._counts["superseded"] += 1
        newer_changes = self.changes.setdefault(newer.id, {})
        newer_changes[SUPERSEDES] = [*newer_changes.get(SUPERSEDES, newer.supersedes), older.id]
        self.changes.setdefault(older.id, {}).update(
            {
                SUPERSEDED_BY: newer.id,
                VALID_UNTIL: retired_since(newer.said, newer.event_date, older.said),
            }
        )

    def extend(self, new: Fact, old: Fact) -> None:
        """Mark ``new`` as adding detail to ``old``."""
        self._counts["extended"] += 1
        self.changes.setdefault(new.id, {})[EXTENDS] = old.id

    def merge(self, repeat: Fact, kept: Fact) -> Fact:
        """Mark ``repeat`` a duplicate of ``kept``, merged when ``repeat`` was said.

        Returns:
            ``kept`` as it now stands for ``repeat``'s fact: its id, the
            repeat's said time and event date (a change the repeat brings is
            made by the memory kept).
        """
        duplicates = self.changes.get(kept.id, {}).get(DUPLICATES, kept.duplicates)
        said_at = repeat.said or datetime.now(UTC)
        for memory_id, change in duplicate_marks(repeat.id, kept.id, duplicates, said_at):
            self.changes.setdefault(memory_id, {}).update(change)
        self._counts["merged"] += 1
        return dataclasses.replace(
            kept,
            said=repeat.said,
            event_date=repeat.event_date,
            supersedes=self.changes[kept.id].get(SUPERSEDES, kept.supersedes),
        )

    def keep_question(self, fact: Fact) -> None:
        """Store a question the model was asked for, so it is not asked again."""
        if fact.question_asked and fact.question is not None:
            self.changes.setdefault(fact.id, {}).update(
                {FACT_QUESTION: fact.question.question, FACT_ANSWER: fact.question.answer}
            )

    @property
    def shows_change(self) -> bool:
        """Whether reads will show something changed (not only kept questions)."""
        seen = {key for change in self.changes.values() for key in change}
        return bool(seen - {FACT_QUESTION, FACT_ANSWER})

    async def write(self, backend: Mem0Backend, scope: Scope, timeout: float | None) -> None:
        """Store the changes; those hiding a memory last, so a stop halfway hides nothing."""
        order = sorted(self.changes, key=lambda i: any(k in self.changes[i] for k in _HIDING))
        for memory_id in order:
            try:
                await asyncio.wait_for(
                    backend.update_metadata(memory_id, self.changes[memory_id]), timeout
                )
            except Exception as exc:
                logger.warning(
                    "could not store the time judgement on memory %s of user %s: %s",
                    memory_id,
                    scope.user_id,
                    exc,
                )


def _said_later(new: Fact, old: Fact) -> bool:
    """Whether ``new`` is the later said of the two (ties: the new one)."""
    if old.said is None or new.said is None:
        return True
    return new.said >= old.said


def fact_of_result(item: Mapping[str, Any], said_at: datetime) -> Fact:
    """A new memory of mem0's ``add`` results, said at ``said_at``."""
    when = item.get(EVENT_DATE)
    return Fact(
        id=str(item["id"]),
        text=str(item["memory"]),
        said=said_at,
        event_date=when if isinstance(when, str) else None,
    )


def fact_of_hit(hit: MemoryHit) -> Fact:
    """An older memory found by the candidate search."""
    metadata = hit.metadata or {}
    return Fact(
        id=str(hit.id),
        text=hit.memory,
        said=parse_time(metadata.get(VALID_FROM) or metadata.get(SAID_AT) or hit.created_at),
        event_date=event_date_of(hit),
        question=question_of_metadata(metadata),
        supersedes=ids_of(metadata.get(SUPERSEDES)),
        duplicates=ids_of(metadata.get(DUPLICATES)),
    )
