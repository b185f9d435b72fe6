"""When a memory held, and the reads by time built on it."""

from __future__ import annotations

from datetime import UTC, date, datetime
from typing import Any

import pytest

from agentscope_mem0 import ConfigurationError, MemoryHit
from agentscope_mem0._memories.validity import (
    check_as_of,
    current_as_of,
    read_around_event,
    read_as_of,
    read_in_period,
    valid_span,
)
from agentscope_mem0._text.periods import event_period_in, period_in

NOW = datetime(2026, 6, 15, 10, 0, tzinfo=UTC)


def hit(id: str, said: str, **metadata: Any) -> MemoryHit:
    return MemoryHit(id=id, memory=f"memory {id}", created_at=said, metadata=metadata)


LYON = hit("lyon", "2023-02-10T00:00:00+00:00", superseded_by="marseille", valid_until="2025-09")
MARSEILLE = hit("marseille", "2025-09-01T00:00:00+00:00", event_date="2025-09")
CRETE = hit("crete", "2024-03-01T00:00:00+00:00", event_date="2022")
SICILY = hit("sicily", "2022-01-05T00:00:00+00:00", event_date="2023")
REPEAT = hit("repeat", "2023-03-01T00:00:00+00:00", duplicate_of="lyon")


def fetcher(hits: list[MemoryHit]) -> Any:
    asked: list[int] = []

    async def fetch(n: int) -> list[MemoryHit]:
        asked.append(n)
        return hits[:n]

    fetch.asked = asked  # type: ignore[attr-defined]
    return fetch


def test_a_memory_holds_from_its_own_moment_until_it_was_superseded() -> None:
    assert valid_span(LYON) == (
        datetime(2023, 2, 10, tzinfo=UTC),
        datetime(2025, 9, 1, tzinfo=UTC),  # valid_until "2025-09": since that month
    )
    assert valid_span(CRETE)[0] == datetime(2022, 1, 1, tzinfo=UTC)  # happened, not said
    assert valid_span(MARSEILLE)[1].year == 9999  # still true
    assert valid_span(MemoryHit(id="x", memory="undated")) is None


async def test_a_period_puts_its_memories_first_and_brings_back_what_held_then() -> None:
    fetch = fetcher([MARSEILLE, REPEAT, LYON])
    found = await read_in_period(fetch, 2, period_in("in 2023", NOW))
    assert [h.id for h in found] == ["lyon", "marseille"]  # superseded since, but held then
    assert fetch.asked == [8]  # one wider search

    # A superseded memory that did not hold in the period stays hidden...
    found = await read_in_period(fetcher([MARSEILLE, LYON]), 5, period_in("in 2022", NOW))
    assert [h.id for h in found] == ["marseille"]
    # ...and so does one that held in a period up to now: it asks of the present.
    found = await read_in_period(fetcher([MARSEILLE, LYON]), 5, period_in("since 2023", NOW))
    assert [h.id for h in found] == ["marseille"]


async def test_an_event_date_places_a_memory_before_its_said_date() -> None:
    found = await read_in_period(fetcher([SICILY, CRETE]), 1, period_in("in 2022", NOW))
    assert [h.id for h in found] == ["crete"]  # said 2024 of 2022; Sicily said 2022 of 2023


@pytest.mark.parametrize(
    ("when", "current"),
    [
        ("2023-01-01", set()),
        ("2023-02-10", {"lyon"}),  # a day means its end
        ("2025-08-31T23:00:00Z", {"lyon"}),
        ("2025-09-01T12:00:00Z", {"marseille"}),
        (date(2026, 1, 1), {"marseille"}),
    ],
)
async def test_as_of_reads_what_was_current_then(when: Any, current: set[str]) -> None:
    found = await read_as_of(fetcher([MARSEILLE, REPEAT, LYON]), 5, check_as_of(when))
    assert {h.id for h in found} == current


def test_as_of_is_a_time() -> None:
    assert check_as_of("2024-03-10") == datetime(2024, 3, 11, tzinfo=UTC)
    assert check_as_of(date(2024, 3, 10)) == datetime(2024, 3, 11, tzinfo=UTC)
    moment = datetime(2024, 3, 10, 8, tzinfo=UTC)
    assert check_as_of(moment) == moment
    with pytest.raises(ConfigurationError, match="as_of must be"):
        check_as_of("last Tuesday")
    assert not current_as_of(REPEAT, NOW)  # a merged repeat: its kept memory is read instead


async def test_an_event_period_is_placed_by_the_memory_of_the_event() -> None:
    graduated = MemoryHit(
        id="graduated", memory="User graduated from U of T", created_at="2019-06-10T00:00:00Z"
    )
    shopify = hit(
        "shopify", "2019-09-01T00:00:00+00:00", superseded_by="stripe", valid_until="2023-02-01"
    )
    stripe = hit("stripe", "2023-02-01T00:00:00+00:00")
    searched: list[str] = []

    async def find(event: str) -> list[MemoryHit]:
        searched.append(event)
        return [stripe, graduated]  # the first that shares a word of the event counts

    event = event_period_in("Where did I work after I graduated?")
    assert event is not None
    found = await read_around_event(fetcher([stripe, graduated, shopify]), find, 2, event)
    # Said within the year after; the event's own memory is not put first.
    assert [h.id for h in found] == ["shopify", "stripe"]
    assert searched == ["I graduated"]
