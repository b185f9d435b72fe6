"""When a memory was true, and reads by time: the memories of a period a question
names, and the memories current as of a date.

A memory's own moment is its event date when it has one ("User spent a
holiday in Crete", happened ``2022``), else when it was said. It holds from
then until the ``valid_until`` of the memory that superseded it, or until now.
Both reads take one over-fetched search and sort or filter it in Python, so
every store (Qdrant Edge, the Qdrant server provider, pgvector, hosted)
answers alike.
"""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable, Callable
from datetime import UTC, date, datetime, timedelta
from typing import TYPE_CHECKING, Any

from .._exceptions import ConfigurationError
from .._text.dates import parse_time
from .lifecycle import (
    SAID_AT,
    VALID_UNTIL,
    event_date_of,
    is_duplicate,
    is_superseded,
    read_current,
)

if TYPE_CHECKING:
    from .._text.periods import EventPeriod, Period
    from .hit import MemoryHit

__all__ = [
    "check_as_of",
    "current_as_of",
    "read_around_event",
    "read_as_of",
    "read_in_period",
    "time_window",
    "valid_span",
]

_LATEST = datetime(9999, 12, 31, tzinfo=UTC)

_WINDOW = 4
"""Times ``limit`` a read by time fetches (see :func:`time_window`)."""


def time_window(limit: int) -> int:
    """Entries a read by time asks the search for, to return ``limit``: the
    memories of a period or a date are among a wider set than today's best few."""
    return limit * _WINDOW


def _event_span(value: str) -> tuple[datetime, datetime]:
    """An event date (``YYYY``, ``YYYY-MM`` or ``YYYY-MM-DD``) as the span it names."""
    parts = [int(part) for part in value.split("-")]
    year, month, day = (*parts, 1, 1)[:3]
    start = datetime(year, month, day, tzinfo=UTC)
    if len(parts) == 1:
        return start, start.replace(year=start.year + 1)
    if len(parts) == 2:
        after = start.replace(year=start.year + start.month // 12, month=start.month % 12 + 1)
        return start, after
    return start, start + timedelta(days=1)


def said_of(hit: MemoryHit) -> datetime | None:
    """When ``hit`` was said: its ``said_at``, else mem0's creation time."""
    return parse_time((hit.metadata or {}).get(SAID_AT)) or parse_time(hit.created_at)


def _ended(hit: MemoryHit) -> datetime | None:
    """Since when a superseded ``hit`` is no longer true; ``None`` while it is.

    Without a ``valid_until`` (a platform's own marking) it is taken to have
    ended when it was said: such a memory is never read as once current.
    """
    if not is_superseded(hit):
        return None
    value = (hit.metadata or {}).get(VALID_UNTIL)
    if isinstance(value, str) and value[:4].isdigit() and len(value) in (4, 7, 10):
        return _event_span(value)[0]
    return parse_time(value) or said_of(hit)


def valid_span(hit: MemoryHit) -> tuple[datetime, datetime] | None:
    """When ``hit`` held: from its own moment (event date, else said) until it
    was superseded (open while current); ``None`` when it is undated."""
    event = event_date_of(hit)
    start = _event_span(event)[0] if event else said_of(hit)
    if start is None:
        return None
    ended = _ended(hit)
    # Superseded before its own moment (dates that disagree): it held at no time.
    return start, _LATEST if ended is None else max(ended, start)


def _rank_in(hit: MemoryHit, period: Period) -> int:
    """How squarely ``hit`` belongs to ``period``: 3 it happened (or, undated by
    event, was said) then; 2 it held then; 1 it was said then about another
    time; 0 none of these."""
    event = event_date_of(hit)
    said = said_of(hit)
    own = _event_span(event) if event else ((said, said) if said else None)
    if own is not None and (period.holds(own[0]) or period.overlaps(*own)):
        return 3
    span = valid_span(hit)
    if span is not None and period.overlaps(*span):
        return 2
    if said is not None and period.holds(said):
        return 1
    return 0


async def read_in_period(
    fetch: Callable[[int], Awaitable[list[MemoryHit]]],
    limit: int,
    period: Period,
    *,
    include_superseded: bool = False,
    anchor: str | None = None,
) -> list[MemoryHit]:
    """Up to ``limit`` hits of a wider ``fetch(n)``, those of ``period`` first.

    A superseded memory is kept when it held during the period and the
    period is over (the question is about the past); otherwise the read is
    as :func:`~.lifecycle.read_current`'s.
    Within each rank the search's order is kept. ``anchor``, the id of the
    memory of the event that told the period, is not put first: the question
    asks about something else at that time.
    """
    ranked = []
    for place, hit in enumerate(await fetch(time_window(limit))):
        if is_duplicate(hit):
            continue
        rank = 0 if anchor is not None and hit.id == anchor else _rank_in(hit, period)
        past = rank >= 2 and not period.reaches_now  # held in a period that is over
        if is_superseded(hit) and not past and not include_superseded:
            continue
        ranked.append((-rank, place, hit))
    ranked.sort(key=lambda item: item[:2])
    return [hit for _, _, hit in ranked[:limit]]


def check_as_of(value: Any) -> datetime:
    """An ``as_of`` value as an aware UTC datetime; a day alone (a ``date`` or
    ``2024-03-10``) means the end of that day.

    Raises:
        ConfigurationError: ``value`` is neither a datetime, a date nor ISO 8601 text.
    """
    if isinstance(value, str) and len(value.strip()) == 10:
        with contextlib.suppress(ValueError):  # not a day: reported below
            value = date.fromisoformat(value.strip())
    moment = parse_time(value)
    if moment is None:
        raise ConfigurationError(
            f"as_of must be a datetime, a date or ISO 8601 text such as '2024-03-10' "
            f"or '2024-03-10T12:00:00+00:00', got {value!r}"
        )
    if isinstance(value, date) and not isinstance(value, datetime):
        return moment + timedelta(days=1)  # what was current when that day ended
    return moment


def current_as_of(hit: MemoryHit, moment: datetime) -> bool:
    """Whether ``hit`` was current at ``moment``: said (or, by its event date,
    true) by then and not yet superseded.

    An undated memory counts as always said; a repeat merged into another
    memory never counts (the memory it repeats is read instead).
    """
    if is_duplicate(hit):
        return False
    said = said_of(hit)
    event = event_date_of(hit)
    if event and said is not None:  # "moved last month": true since then, though said now
        said = min(said, _event_span(event)[0])
    if said is not None and said >= moment:
        return False
    ended = _ended(hit)
    return ended is None or ended > moment


async def read_as_of(
    fetch: Callable[[int], Awaitable[list[MemoryHit]]], limit: int, moment: datetime
) -> list[MemoryHit]:
    """Up to ``limit`` hits of a wider ``fetch(n)`` that were current at ``moment``,
    in the search's order; superseded ones included where they still held then."""
    return [hit for hit in await fetch(time_window(limit)) if current_as_of(hit, moment)][:limit]


def _own_moment(hit: MemoryHit) -> datetime | None:
    event = event_date_of(hit)
    return _event_span(event)[0] if event else said_of(hit)


async def read_around_event(
    fetch: Callable[[int], Awaitable[list[MemoryHit]]],
    find: Callable[[str], Awaitable[list[MemoryHit]]],
    limit: int,
    event: EventPeriod,
    *,
    include_superseded: bool = False,
) -> list[MemoryHit]:
    """Like :func:`read_in_period` for a time told by an event ("before I moved"):
    ``find(event.event)`` searches the memory that tells of the event, whose
    own moment (event date, else said) places the period.

    When no memory found shares a word with the event, the read is today's
    (:func:`~.lifecycle.read_current`).
    """
    for hit in await find(event.event):
        moment = _own_moment(hit)
        if moment is not None and event.told_by(hit.memory):
            return await read_in_period(
                fetch,
                limit,
                event.around(moment),
                include_superseded=include_superseded,
                anchor=hit.id,
            )
    return await read_current(fetch, limit, include_superseded=include_superseded)
