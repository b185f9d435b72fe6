"""Memory that knows time: when a memory was said, when it happened, how long it held.

Every memory this package writes carries, in mem0's metadata:

* ``said_at`` / ``valid_from``: when the exchange it came from was said (the
  write's ``said_at``, by default the moment it was queued);
* ``event_date``: when the event it tells of happened, when the text gave one
  ("last month", "in 2019"), resolved against ``said_at`` by the extraction;

and, once the time judgement (:mod:`.._write.judge`) found that a newer memory
changes it:

* ``valid_until`` / ``superseded_by`` / ``superseded_reason``: on a memory no
  longer true, the time and id of the memory that replaced it, and the
  readings or the rule that decided so; ``supersedes`` on the newer one lists
  the ids it replaced (so forgetting it can undo that);
* ``extends``: on a memory that adds detail to an older one, that one's id;

and, once consolidation (:mod:`.._write.judge`) found that a new memory
states a fact a current one already states:

* ``duplicate_of`` / ``valid_until`` / ``duplicate_reason``: on the redundant
  memory, the id of the one kept, when it was merged and what decided it;
  ``duplicates`` on the kept one lists the ids merged into it (so forgetting
  it forgets them too, see :mod:`.release`);

and, once someone undid one of those (:func:`~.release.restore`):

* ``restored``: on the memory current again, one entry per undoing (when,
  which memory had hidden it, how, and the reason that had been given).

A superseded or duplicate memory is kept; reads leave it out unless asked for
it (duplicates always: they add nothing a reader does not already get), and
so does mem0's extraction, which would otherwise take a fact told again for
one it already has (:mod:`.._mem0.existing`). A new memory that states the
fact of a superseded one supersedes what replaced it (:mod:`.._write.judge`).

A queued write keeps its said time in its outbox row (the ``said_at``
column), so it survives a restart; the backend's ``add`` takes it as one
value and hands it to the extraction (:mod:`agentscope_mem0._mem0.extraction`),
so mem0's "Observation Date" is the said date and event dates can be asked for.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Awaitable, Callable, Mapping
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from .._text.dates import iso, parse_time

if TYPE_CHECKING:
    from .hit import MemoryHit

__all__ = [
    "DUPLICATES",
    "DUPLICATE_OF",
    "DUPLICATE_REASON",
    "EVENT_DATE",
    "EXTENDS",
    "RESTORED",
    "SAID_AT",
    "SUPERSEDED_BY",
    "SUPERSEDED_REASON",
    "SUPERSEDES",
    "VALID_FROM",
    "VALID_UNTIL",
    "event_date_of",
    "ids_of",
    "is_duplicate",
    "is_event_date",
    "is_superseded",
    "read_current",
    "retired_since",
    "said_at_of",
    "time_label",
    "write_metadata",
]

logger = logging.getLogger(__name__)

SAID_AT = "said_at"
VALID_FROM = "valid_from"
VALID_UNTIL = "valid_until"
SUPERSEDED_BY = "superseded_by"
SUPERSEDES = "supersedes"
SUPERSEDED_REASON = "superseded_reason"
EXTENDS = "extends"
EVENT_DATE = "event_date"
DUPLICATE_OF = "duplicate_of"
DUPLICATE_REASON = "duplicate_reason"
DUPLICATES = "duplicates"
RESTORED = "restored"

_EVENT_DATE = re.compile(r"\d{4}(?:-\d{2}(?:-\d{2})?)?")


def is_event_date(value: Any) -> bool:
    """Whether ``value`` is an event date: ``YYYY``, ``YYYY-MM`` or ``YYYY-MM-DD``."""
    return isinstance(value, str) and _EVENT_DATE.fullmatch(value) is not None


# -- the said time of a reply -------------------------------------------------------


def said_at_of(messages: Any) -> datetime | None:
    """When the newest of ``messages`` (AgentScope ``Msg``\\ s) was created, if known."""
    items = messages if isinstance(messages, list) else [messages]
    times = [parse_time(getattr(m, "created_at", None)) for m in items]
    known = [t for t in times if t is not None]
    return max(known) if known else None


def write_metadata(said_at: datetime, *, hosted: bool = False) -> dict[str, Any]:
    """mem0 metadata for memories said at ``said_at``.

    mem0 2.2 OSS takes ``created_at`` from the metadata when present, so a
    replayed conversation is dated when it was said; the hosted platform keeps
    its own dates.
    """
    when = iso(said_at)
    out: dict[str, Any] = {SAID_AT: when, VALID_FROM: when}
    if not hosted:
        out["created_at"] = when
    return out


# -- reading a memory's timeline ---------------------------------------------------------


def _metadata(hit: MemoryHit) -> Mapping[str, Any]:
    return hit.metadata or {}


def is_superseded(hit: MemoryHit) -> bool:
    """Whether a newer memory made ``hit`` no longer true."""
    return bool(_metadata(hit).get(SUPERSEDED_BY))


def is_duplicate(hit: MemoryHit) -> bool:
    """Whether ``hit`` repeats a fact another current memory states (it was merged)."""
    return bool(_metadata(hit).get(DUPLICATE_OF))


def ids_of(value: Any) -> list[str]:
    """The memory ids a metadata field holds (``supersedes``, ``duplicates``...:
    one id or a list of them)."""
    if isinstance(value, str) and value:
        return [value]
    if isinstance(value, list):
        return [v for v in value if isinstance(v, str) and v]
    return []


def event_date_of(hit: MemoryHit) -> str | None:
    """``hit``'s event date (``YYYY``, ``YYYY-MM`` or ``YYYY-MM-DD``), if it has one."""
    value = _metadata(hit).get(EVENT_DATE)
    return value if is_event_date(value) else None


def valid_until_of(hit: MemoryHit) -> str | None:
    """Since when ``hit`` is no longer true, for a superseded memory: a day
    (``2024-03-10``), or the month or year of the event that ended it."""
    if not is_superseded(hit):
        return None
    value = _metadata(hit).get(VALID_UNTIL)
    if is_event_date(value):
        return value
    moment = parse_time(value)
    return f"{moment:%Y-%m-%d}" if moment is not None else None


def retired_since(
    said_at: datetime | None, event_date: str | None, older_said: datetime | None
) -> str:
    """The ``valid_until`` a newer memory gives the older one it supersedes.

    The newer memory's event date when it has one ("moved to Beijing last
    month": that month), unless it falls before the older memory was said
    (then it cannot be when the older stopped being true); its said time
    otherwise.
    """
    if (
        event_date
        and is_event_date(event_date)
        and (older_said is None or event_date >= older_said.date().isoformat()[: len(event_date)])
    ):
        return event_date
    return iso(said_at or datetime.now(UTC))


def overfetch(limit: int) -> int:
    """Entries to ask mem0 for so that ``limit`` current ones are likely among them."""
    return limit + max(limit, 5)


async def read_current(
    fetch: Callable[[int], Awaitable[list[MemoryHit]]],
    limit: int,
    *,
    include_superseded: bool = False,
) -> list[MemoryHit]:
    """Up to ``limit`` hits from ``fetch(n)``: duplicates left out, superseded ones
    too unless asked for.

    The first read asks for ``limit``, as a plain search would; only when it
    returned superseded memories is a larger read made to fill their places.
    """

    def shown(hit: MemoryHit) -> bool:
        return not is_duplicate(hit) and (include_superseded or not is_superseded(hit))

    hits = await fetch(limit)
    current = [hit for hit in hits if shown(hit)]
    if len(current) < len(hits) and len(hits) >= limit:
        current = [hit for hit in await fetch(overfetch(limit)) if shown(hit)]
    return current[:limit]


def time_label(hit: MemoryHit) -> str | None:
    """How a memory is dated in the note: ``2024-03-10``, ``2024-03-10, happened
    2024-02``, ``2024-01-05, no longer true since 2024-03-10``; ``None`` when undated."""
    said = hit.when or parse_time(_metadata(hit).get(SAID_AT))
    if said is None:
        return None
    parts = [f"{said:%Y-%m-%d}"]
    event = event_date_of(hit)
    if event and not parts[0].startswith(event):
        parts.append(f"happened {event}")
    until = valid_until_of(hit)
    if until is not None:
        parts.append(f"no longer true since {until}")
    elif is_superseded(hit):
        parts.append("no longer true")
    return ", ".join(parts)
