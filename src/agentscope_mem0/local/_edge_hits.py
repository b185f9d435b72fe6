"""Engine points as mem0 reads them, read by id, and only the payloads a search keeps.

A search's candidates come from the engine with their ids and scores; their
payloads are read by :func:`hits_with_payloads`: all of them, or, when the
search keeps only the first ``kept`` unexpired hits
(:mod:`agentscope_mem0._vectors.search_terms`), those first ones, reading on
past expired memories until ``kept`` live ones are found or the candidates
end.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, date, datetime
from typing import Any

from ._edge import SharedShard

__all__ = ["EdgeHit", "hit_of", "hits_with_payloads", "is_expired", "point_id", "retrieve"]


@dataclass(slots=True)
class EdgeHit:
    """One point as mem0 reads it: ``id``, ``score`` and ``payload``."""

    id: str
    score: float | None
    payload: dict[str, Any] = field(default_factory=dict)


def point_id(value: Any) -> int | str:
    """An id the engine accepts: an unsigned integer, or a UUID string (mem0 uses uuid4)."""
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return value
    text = str(value)
    try:
        return str(uuid.UUID(text))
    except ValueError:
        raise ValueError(
            f"point id {text!r} is neither an unsigned integer nor a UUID (all Qdrant accepts)"
        ) from None


def retrieve(
    shard: SharedShard, ids: Iterable[Any], *, payload: bool = False, vector: str | None = None
) -> list[Any]:
    """The engine records of those of ``ids`` the shard holds, with what was asked for."""
    wanted = [point_id(i) for i in ids]
    vectors: Any = [vector] if vector is not None else False
    return shard.call(
        "retrieve", lambda s: s.retrieve(wanted, with_payload=payload, with_vector=vectors)
    )


def hit_of(point: Any, score: float | None = None) -> EdgeHit:
    """``point`` (an engine record or scored point) with ``score``."""
    return EdgeHit(id=str(point.id), score=score, payload=dict(point.payload or {}))


def is_expired(payload: dict[str, Any]) -> bool:
    """Whether the memory's ``expiration_date`` (an ISO date) is before today (UTC).

    mem0 2.2's rule: no date, or one that does not parse, never expires.
    """
    value = payload.get("expiration_date")
    if not value:
        return False
    try:
        return date.fromisoformat(str(value)) < datetime.now(UTC).date()
    except ValueError:
        return False


def hits_with_payloads(
    shard: SharedShard, scored: Sequence[tuple[Any, float]], kept: int | None
) -> list[EdgeHit]:
    """``scored`` (engine point, score) in order, as hits with their payloads.

    Args:
        shard: The shard the points are in.
        scored: The candidates, best first; a point may carry its payload already.
        kept: Read payloads only until this many unexpired hits are found and
            return only those read; ``None`` reads and returns every candidate.
    """
    if kept is None:
        return [hit_of(point, score) for point, score in scored]
    hits: list[EdgeHit] = []
    live = 0
    start = 0
    while live < kept and start < len(scored):
        batch = scored[start : start + kept - live]
        start += len(batch)
        records = retrieve(shard, [point.id for point, _score in batch], payload=True)
        payloads = {str(r.id): dict(r.payload or {}) for r in records}
        for point, score in batch:
            hit = EdgeHit(id=str(point.id), score=score, payload=payloads.get(str(point.id), {}))
            if hit.payload:  # deleted since the search: gone from mem0's answer too
                hits.append(hit)
                live += not is_expired(hit.payload)
    return hits
